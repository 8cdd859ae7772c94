//! Lists with selectors and paging, and the snapshot a watch starts from.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::{Event, Store};
use crate::errors::ApiError;
use crate::registry::ResourceType;
use crate::selectors::{FieldSelector, LabelSelector};

/// What a list or a watch selects.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

impl ListOptions {
    /// Whether an object is selected (namespace, labels, fields).
    pub fn selects(&self, namespace: Option<&str>, object: &Value) -> bool {
        namespace.is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
            && self.labels.matches(object)
            && self.fields.matches(object)
    }
}

/// How many paged lists keep their rest; a continue token of an older one is 410 Expired, as
/// an etcd compaction makes it (the client lists again).
const KEPT_LISTS: usize = 32;

/// The rest of paged lists, by the number their continue token carries: the resourceVersion of
/// their first page and the items not served yet. Kubernetes serves every page of a list from
/// the snapshot of its first (and says that resourceVersion on each): a watch started from it
/// then misses nothing that changed while the pages were read.
#[derive(Default)]
pub(crate) struct Pages {
    next: u64,
    kept: std::collections::VecDeque<(u64, u64, Vec<Value>)>,
}

impl Store {
    /// `GET` of a collection, in one namespace or all, one page at a time, every page from the
    /// snapshot of the first.
    pub fn list_page(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let (rv, selected) = match &opts.continue_token {
            Some(token) => {
                let id = decode_continue(token)?;
                let at = self.pages.kept.iter().position(|(kept, _, _)| *kept == id).ok_or_else(|| {
                    ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    )
                })?;
                let (_, rv, rest) = self.pages.kept.remove(at).expect("found above");
                (rv, rest)
            }
            None => (self.rv, self.selected(rt, namespace, opts)?),
        };
        let page = opts.limit.unwrap_or(selected.len()).min(selected.len());
        let mut items = selected;
        let rest = items.split_off(page);
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if !rest.is_empty() && page > 0 {
            metadata["remainingItemCount"] = json!(rest.len());
            self.pages.next += 1;
            let id = self.pages.next;
            metadata["continue"] = Value::String(URL_SAFE_NO_PAD.encode(json!({"list": id}).to_string()));
            self.pages.kept.push_back((id, rv, rest));
            while self.pages.kept.len() > KEPT_LISTS {
                self.pages.kept.pop_front();
            }
        }
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": metadata,
            "items": items,
        }))
    }

    /// Every object of `rt` a list selects, whole (for the server's own reads).
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": self.selected(rt, namespace, opts)?,
        }))
    }

    fn selected(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Vec<Value>, ApiError> {
        self.objects_of(rt)
            .into_iter()
            .flatten()
            .filter(|(_, o)| opts.selects(namespace, o))
            .map(|(_, o)| super::decodable(rt, o).map(|()| Store::present(rt, o.clone())))
            .collect()
    }

    /// The changes after `since` still in the log (None when `since` is too old), and a receiver
    /// of every later change; taken together so that nothing falls between them.
    pub fn subscribe(&self, since: u64) -> (Option<Vec<Arc<Event>>>, broadcast::Receiver<Arc<Event>>) {
        let oldest_kept = self.log.front().map_or(self.rv + 1, |e| e.rv);
        let backlog = (since + 1 >= oldest_kept || since >= self.rv)
            .then(|| self.log.iter().filter(|e| e.rv > since).cloned().collect());
        (backlog, self.tx.subscribe())
    }

    /// Every current object of `rt` that `opts` selects, as a watch's initial events.
    /// (Objects that no longer read are left out.)
    pub fn snapshot(&self, rt: &ResourceType, namespace: Option<&str>, opts: &ListOptions) -> Vec<Value> {
        self.objects_of(rt)
            .into_iter()
            .flatten()
            .filter(|(_, o)| opts.selects(namespace, o) && super::decodable(rt, o).is_ok())
            .map(|(_, o)| Store::present(rt, o.clone()))
            .collect()
    }
}

fn decode_continue(token: &str) -> Result<u64, ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let key: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    key["list"].as_u64().ok_or_else(bad)
}
