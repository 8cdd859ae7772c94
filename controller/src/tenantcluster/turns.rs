//! Turns at the tenants: at most a number of reconciles call tenant clusters at once (the rest
//! of the workers always serve clusters whose work is on the management cluster), at most one
//! per namespace (one team's tenants never hold every turn), given in the order they were asked
//! for. A reconcile that finds no turn is queued and returns; when a turn frees, the first
//! waiter that may take it is woken (its cluster reconciled at once) and the turn is kept for it
//! for a moment, so a waiter is never passed over by whoever asks at the right time.

use std::collections::{HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use butler_core::api::TenantCluster;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::UnboundedSender;

/// How long a woken waiter's turn is kept for it: its reconcile comes within a moment, unless
/// it no longer needs one (then the next waiter is woken).
const KEPT_FOR: Duration = Duration::from_secs(2);

/// A cluster waiting for a turn.
#[derive(Debug, Clone)]
struct Waiter {
    cluster: (String, String),
    woken: Option<Instant>,
}

/// Who holds and who waits for the turns.
#[derive(Debug)]
struct State {
    free: usize,
    /// Namespaces with a turn under way.
    busy: HashSet<String>,
    queue: VecDeque<Waiter>,
}

impl State {
    /// Forgets woken waiters whose reconcile did not come for their turn.
    fn expire(&mut self, now: Instant) {
        self.queue.retain(|w| w.woken.is_none_or(|at| now.duration_since(at) < KEPT_FOR));
    }

    /// The waiters a free turn is kept for, in order: the first of each namespace not busy, as
    /// many as there are free turns.
    fn first_eligible(&self) -> Vec<usize> {
        let mut namespaces = HashSet::new();
        let mut out = Vec::new();
        for (i, w) in self.queue.iter().enumerate() {
            if out.len() == self.free {
                break;
            }
            if !self.busy.contains(&w.cluster.0) && namespaces.insert(w.cluster.0.clone()) {
                out.push(i);
            }
        }
        out
    }

    /// Whether `cluster` takes a turn now; else it is queued (once).
    fn take(&mut self, cluster: &(String, String), now: Instant) -> bool {
        self.expire(now);
        let kept = self.first_eligible();
        let mine = self.queue.iter().position(|w| &w.cluster == cluster);
        let may = self.free > 0
            && !self.busy.contains(&cluster.0)
            && match mine {
                // Queued: when a kept turn is its own.
                Some(i) => kept.contains(&i),
                // Not queued: when no waiter is kept a turn that would be left for it.
                None => kept.len() < self.free,
            };
        if may {
            self.free -= 1;
            self.busy.insert(cluster.0.clone());
            if let Some(i) = mine {
                self.queue.remove(i);
            }
            return true;
        }
        if mine.is_none() {
            self.queue.push_back(Waiter { cluster: cluster.clone(), woken: None });
        }
        false
    }

    /// Gives a turn of `namespace` back: the waiters to wake (those newly kept a turn).
    fn give_back(&mut self, namespace: &str, now: Instant) -> Vec<(String, String)> {
        self.free += 1;
        self.busy.remove(namespace);
        self.expire(now);
        let mut woken = Vec::new();
        for i in self.first_eligible() {
            let w = &mut self.queue[i];
            if w.woken.is_none() {
                w.woken = Some(now);
                woken.push(w.cluster.clone());
            }
        }
        woken
    }

    /// Forgets a cluster that is gone.
    fn forget(&mut self, cluster: &(String, String)) {
        self.queue.retain(|w| &w.cluster != cluster);
    }
}

/// The turns of a controller process.
pub struct Turns {
    state: Mutex<State>,
    wake: UnboundedSender<ObjectRef<TenantCluster>>,
}

/// A turn at a tenant, given back when dropped.
pub struct Turn<'a> {
    turns: &'a Turns,
    namespace: String,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let woken = self.turns.state.lock().expect("not poisoned").give_back(&self.namespace, Instant::now());
        for (namespace, name) in woken {
            let _ = self.turns.wake.send(ObjectRef::new(&name).within(&namespace));
        }
    }
}

fn key(cluster: &TenantCluster) -> (String, String) {
    (cluster.namespace().unwrap_or_default(), cluster.name_any())
}

impl Turns {
    /// `turns` at once (at least one); `wake` reconciles a waiter whose turn came.
    pub fn new(turns: usize, wake: UnboundedSender<ObjectRef<TenantCluster>>) -> Turns {
        let state = State { free: turns.max(1), busy: HashSet::new(), queue: VecDeque::new() };
        Turns { state: Mutex::new(state), wake }
    }

    /// A turn for `cluster`, or `None`: it is queued, and reconciled when its turn comes.
    pub fn take(&self, cluster: &TenantCluster) -> Option<Turn<'_>> {
        let key = key(cluster);
        let taken = self.state.lock().expect("not poisoned").take(&key, Instant::now());
        taken.then(|| Turn { turns: self, namespace: key.0 })
    }

    /// Forgets a cluster that is gone.
    pub fn forget(&self, namespace: &str, name: &str) {
        self.state.lock().expect("not poisoned").forget(&(namespace.to_string(), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(namespace: &str, name: &str) -> (String, String) {
        (namespace.to_string(), name.to_string())
    }

    #[test]
    fn turns_go_in_the_order_asked_one_per_namespace() {
        let now = Instant::now();
        let mut s = State { free: 2, busy: HashSet::new(), queue: VecDeque::new() };
        assert!(s.take(&c("team-a", "one"), now));
        assert!(!s.take(&c("team-a", "two"), now), "one turn per namespace");
        assert!(s.take(&c("team-b", "one"), now));
        assert!(!s.take(&c("team-c", "one"), now), "no turn free");
        // team-a's turn comes back: team-a's waiter is first, and is woken; a newcomer of
        // another namespace does not take the turn kept for it.
        assert_eq!(s.give_back("team-a", now), [c("team-a", "two")]);
        assert!(!s.take(&c("team-d", "one"), now), "the free turn is kept for the first waiter");
        assert!(s.take(&c("team-a", "two"), now));
        // team-b's turn comes back: team-c waited before team-d.
        assert_eq!(s.give_back("team-b", now), [c("team-c", "one")]);
        assert!(!s.take(&c("team-d", "one"), now));
        assert!(s.take(&c("team-c", "one"), now));
        assert_eq!(s.queue.len(), 1, "team-d waits, once");
    }

    #[test]
    fn a_turn_kept_for_a_waiter_that_does_not_come_goes_to_the_next() {
        let now = Instant::now();
        let mut s = State { free: 1, busy: HashSet::new(), queue: VecDeque::new() };
        assert!(s.take(&c("a", "x"), now));
        assert!(!s.take(&c("b", "y"), now));
        assert!(!s.take(&c("c", "z"), now));
        assert_eq!(s.give_back("a", now), [c("b", "y")]);
        let later = now + KEPT_FOR;
        assert!(s.take(&c("c", "z"), later), "b/y did not come for its turn");
        s.forget(&c("c", "z"));
        assert!(s.queue.is_empty());
    }
}
