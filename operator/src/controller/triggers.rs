//! Waking provider reconciles from outside their own watch: when another provider's status
//! changes, when a config Secret changes, when an applied object drifts.

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::api::ProviderKind;
use crate::controller::vocabulary::ProviderKey;

/// One channel per provider kind, into that kind's controller.
#[derive(Clone)]
pub struct Triggers {
    senders: Vec<UnboundedSender<(String, String)>>,
}

/// The receiving ends, handed to the controllers.
pub struct Receivers {
    receivers: Vec<Option<UnboundedReceiver<(String, String)>>>,
}

/// A trigger channel for every provider kind.
pub fn channels() -> (Triggers, Receivers) {
    let (senders, receivers) =
        ProviderKind::ALL.iter().map(|_| unbounded_channel()).map(|(s, r)| (s, Some(r))).unzip();
    (Triggers { senders }, Receivers { receivers })
}

fn index(kind: ProviderKind) -> usize {
    ProviderKind::ALL.iter().position(|k| *k == kind).expect("every kind is listed")
}

impl Triggers {
    /// Asks for a reconcile of one provider object.
    pub fn trigger(&self, key: &ProviderKey) {
        // A closed channel means the controllers are shutting down; nothing is left to wake.
        let _ = self.senders[index(key.kind)].send((key.namespace.clone(), key.name.clone()));
    }
}

impl Receivers {
    /// The trigger stream of one kind's controller; taken once.
    pub fn take<K>(
        &mut self,
        kind: ProviderKind,
    ) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static
    where
        K: kube::Resource<DynamicType = ()> + 'static,
    {
        let receiver = self.receivers[index(kind)].take().expect("each kind's triggers are taken once");
        futures::StreamExt::map(UnboundedReceiverStream::new(receiver), |(namespace, name)| {
            ObjectRef::new(&name).within(&namespace)
        })
    }
}
