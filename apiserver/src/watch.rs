//! Watches: replay from a resourceVersion, initial events (including the streaming-list form
//! that kube-runtime's watcher can use), bookmarks, selectors that turn a change into ADDED or
//! DELETED when an object enters or leaves the selection, 410 Expired when the log no longer
//! holds the asked-for resourceVersion or a watcher falls too far behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::errors::ApiError;
use super::registry::ResourceType;
use super::store::{Change, Event, ListOptions, Store};

/// A watch request.
pub struct WatchRequest {
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub list: ListOptions,
    pub resource_version: Option<String>,
    pub send_initial_events: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    /// Turns false when the server interrupts its watches: this one ends.
    pub open: tokio::sync::watch::Receiver<bool>,
    /// How late each change is delivered (zero: at once).
    pub delay: Duration,
}

/// How often a watch with bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(1);

fn line(kind: &str, object: &Value) -> String {
    format!("{}\n", json!({"type": kind, "object": object}))
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> String {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    line("BOOKMARK", &json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": meta}))
}

/// What a change means to this watch, if anything.
fn translate(request: &WatchRequest, event: &Event) -> Option<String> {
    if event.key != request.rt.storage_key() {
        return None;
    }
    let ns = request.namespace.as_deref();
    let now = request.list.selects(ns, &event.object);
    let before = event.old.as_ref().is_some_and(|o| request.list.selects(ns, o));
    let kind = match (event.change, before, now) {
        (Change::Added, _, true) => "ADDED",
        (Change::Deleted, _, true) => "DELETED",
        (Change::Modified, true, true) => "MODIFIED",
        (Change::Modified, false, true) => "ADDED",
        (Change::Modified, true, false) => "DELETED",
        _ => return None,
    };
    Some(line(kind, &Store::present(&request.rt, event.object.clone())))
}

/// Starts a watch: the lines to send first, then a channel that carries the rest.
pub fn start(store: &Arc<Mutex<Store>>, request: WatchRequest) -> Result<mpsc::Receiver<String>, ApiError> {
    let guard = store.lock().expect("the store lock is never poisoned");
    let since = match request.resource_version.as_deref() {
        None | Some("") | Some("0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let current = guard.resource_version();
    let mut first = Vec::new();
    let (backlog, receiver) = match since {
        Some(rv) if !request.send_initial_events => guard.subscribe(rv),
        _ => {
            for object in guard.snapshot(&request.rt, request.namespace.as_deref(), &request.list) {
                first.push(line("ADDED", &object));
            }
            if request.send_initial_events && request.bookmarks {
                first.push(bookmark(&request.rt, current, true));
            }
            guard.subscribe(current)
        }
    };
    drop(guard);
    let (tx, rx) = mpsc::channel(256);
    let Some(backlog) = backlog else {
        // As the API server does: the watch opens, then ends with a 410 event, and the client
        // lists again.
        let error = ApiError::expired(format!(
            "too old resource version: {} ({current})",
            request.resource_version.unwrap_or_default()
        ));
        let _ = tx.try_send(line("ERROR", &error.to_status()));
        return Ok(rx);
    };
    first.extend(backlog.iter().filter_map(|e| translate(&request, e)));
    let tx = if request.delay.is_zero() { tx } else { delayed(tx, request.delay) };
    tokio::spawn(follow(store.clone(), request, first, receiver, tx));
    Ok(rx)
}

/// A sender whose lines reach `tx` each `delay` after it was given them, in order.
fn delayed(tx: mpsc::Sender<String>, delay: Duration) -> mpsc::Sender<String> {
    let (late_tx, mut late_rx) = mpsc::channel::<String>(1024);
    let (timed_tx, mut timed_rx) = mpsc::unbounded_channel::<(tokio::time::Instant, String)>();
    tokio::spawn(async move {
        while let Some(text) = late_rx.recv().await {
            if timed_tx.send((tokio::time::Instant::now() + delay, text)).is_err() {
                return;
            }
        }
    });
    tokio::spawn(async move {
        while let Some((due, text)) = timed_rx.recv().await {
            tokio::time::sleep_until(due).await;
            if tx.send(text).await.is_err() {
                return;
            }
        }
    });
    late_tx
}

async fn follow(
    store: Arc<Mutex<Store>>,
    request: WatchRequest,
    first: Vec<String>,
    mut receiver: broadcast::Receiver<Arc<Event>>,
    tx: mpsc::Sender<String>,
) {
    for text in first {
        if tx.send(text).await.is_err() {
            return;
        }
    }
    let mut open = request.open.clone();
    if !*open.borrow_and_update() {
        return; // Interrupted before it began.
    }
    let deadline = tokio::time::sleep(request.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
    ticker.tick().await;
    loop {
        let text = tokio::select! {
            _ = &mut deadline => return,
            changed = open.changed() => {
                let still_open = changed.is_ok() && *open.borrow_and_update();
                if !still_open {
                    return;
                }
                None
            }
            _ = ticker.tick(), if request.bookmarks => {
                let rv = store.lock().expect("the store lock is never poisoned").resource_version();
                Some(bookmark(&request.rt, rv, false))
            }
            received = receiver.recv() => match received {
                Ok(event) => translate(&request, &event),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let error = ApiError::expired("the watch fell too far behind; list again");
                    let _ = tx.send(line("ERROR", &error.to_status())).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        if let Some(text) = text
            && tx.send(text).await.is_err()
        {
            return;
        }
    }
}
