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

impl Store {
    /// `GET` of a collection, in one namespace or all, one page at a time.
    pub fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<Value, ApiError> {
        let after = match &opts.continue_token {
            Some(token) => Some(decode_continue(token)?),
            None => None,
        };
        let selected: Vec<(&(String, String), &Value)> = self
            .objects_of(rt)
            .into_iter()
            .flatten()
            .filter(|(key, _)| after.as_ref().is_none_or(|a| *key > a))
            .filter(|(_, o)| opts.selects(namespace, o))
            .collect();
        let page = opts.limit.unwrap_or(selected.len()).min(selected.len());
        let items: Vec<Value> =
            selected[..page].iter().map(|(_, o)| Store::present(rt, (*o).clone())).collect();
        let remaining = selected.len() - page;
        let mut metadata = json!({"resourceVersion": self.rv.to_string()});
        if remaining > 0 && page > 0 {
            let (ns, name) = selected[page - 1].0;
            metadata["continue"] = Value::String(URL_SAFE_NO_PAD.encode(json!([ns, name]).to_string()));
            metadata["remainingItemCount"] = json!(remaining);
        }
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": metadata,
            "items": items,
        }))
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
    pub fn snapshot(&self, rt: &ResourceType, namespace: Option<&str>, opts: &ListOptions) -> Vec<Value> {
        self.objects_of(rt)
            .into_iter()
            .flatten()
            .filter(|(_, o)| opts.selects(namespace, o))
            .map(|(_, o)| Store::present(rt, o.clone()))
            .collect()
    }
}

fn decode_continue(token: &str) -> Result<(String, String), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let pair: (String, String) = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok(pair)
}
