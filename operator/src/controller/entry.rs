//! Where every reconcile of a provider object starts and how it is retried: a provider where
//! this operator does not look is left alone, a deleted one goes to [`super::removal`], the
//! finalizer goes on before anything is applied, and [`super::install`] does the rest; a
//! failure is retried with a backoff that stays short for what passes by itself.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;

use super::ProviderObject;
use crate::api::*;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::install::reconcile as install;
use crate::controller::removal::delete;
use crate::controller::vocabulary::{ProviderKey, uid_of};

/// Reconciles one provider object.
pub async fn reconcile<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let started = ctx.metrics.reconcile_started(K::KIND.kind());
    let key = ProviderKey::of(object.as_ref());
    let uid = uid_of(object.as_ref());
    let result = async {
        // A provider object where this operator does not look for one is another's (an
        // operator of that namespace) or no one's: nothing is read, written or deleted for it,
        // not its status, not its finalizer (`butlerctl describe` names it as not honoured).
        if ctx.honours(&key.namespace).is_err() {
            return Ok(Action::await_change());
        }
        if object.meta().deletion_timestamp.is_some() {
            return match delete::cleanup(object.clone(), ctx.clone()).await {
                Err(e) if !matches!(e, Error::DeletionBlocked(_)) => {
                    delete::failed(&ctx, object.as_ref(), e).await
                }
                done => done,
            };
        }
        // The finalizer goes on before anything is applied, so nothing can be orphaned.
        let object = match butler_runtime::finalizer::has(object.as_ref(), PROVIDER_FINALIZER) {
            true => object,
            false => {
                let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.namespace);
                let added = butler_runtime::finalizer::add(&api, object.as_ref(), PROVIDER_FINALIZER)
                    .await
                    .map_err(|e| Error::kube(format!("adding the finalizer to {key}"), e))?;
                Arc::new(added)
            }
        };
        install::install(object, ctx.clone()).await
    }
    .await;
    ctx.metrics.reconcile_finished(K::KIND.kind(), started, result.as_ref().err().map(Error::reason));
    if result.is_ok() {
        ctx.failures.lock().expect("not poisoned").remove(&uid);
    }
    result
}

/// Retries a failed reconcile: a blocked deletion every minute (deletions of what blocks it
/// wake it sooner), anything else after [`retry_delay`].
pub fn error_policy<K>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action
where
    K: ProviderObject,
{
    if let Error::DeletionBlocked(message) = error {
        tracing::info!("{message}");
        return Action::requeue(Duration::from_secs(60));
    }
    let key = ProviderKey::of(object.as_ref());
    let failures = {
        let mut failures = ctx.failures.lock().expect("not poisoned");
        let count = failures.entry(uid_of(object.as_ref())).or_default();
        *count = count.saturating_add(1);
        *count
    };
    let young = ctx.started.elapsed() < Duration::from_secs(60);
    let delay = retry_delay(failures, passing(error), young);
    tracing::warn!(provider = %key, retry_in = ?delay, "{error}");
    Action::requeue(delay)
}

/// The backoff after `failures` failures in a row: doubling from 2 seconds to 5 minutes, but at
/// most [`SHORT_BACKOFF`] for a failure that passes by itself or by someone's hand (`passing`:
/// an API server restarting, a rule someone adds) and in the process's first minute (`young`:
/// right after a start the API server's authorizer may refuse for a moment).
pub fn retry_delay(failures: u32, passing: bool, young: bool) -> Duration {
    let delay = Duration::from_secs(2u64.saturating_pow(failures.min(9)).min(300));
    match passing || young {
        true => delay.min(SHORT_BACKOFF),
        false => delay,
    }
}

/// Whether a failure is one that passes soon: a refusal of the authorizer (someone adds the
/// rule it names; its caches fill after a restart), or an API server that is not answering
/// (connections refused or dropped, 429, 500, 503, 504 while it restarts).
fn passing(error: &Error) -> bool {
    if let Error::Kube { source, .. } = error {
        return match source {
            kube::Error::Api(status) => matches!(status.code, 403 | 429 | 500 | 503 | 504),
            _ => true,
        };
    }
    let text = error.to_string();
    crate::controller::install::forbidden::missing(&text).is_some()
        || ["HTTP 429)", "HTTP 503)", "HTTP 504)", "error trying to connect", "connection closed"]
            .iter()
            .any(|t| text.contains(t))
}

/// The longest backoff of a refusal, and of any failure in the process's first minute.
pub const SHORT_BACKOFF: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_minutes_but_stays_short_for_what_passes_and_after_a_start() {
        let secs = |failures, passing, young| retry_delay(failures, passing, young).as_secs();
        assert_eq!([1, 2, 3, 7, 9, 20].map(|f| secs(f, false, false)), [2, 4, 8, 128, 300, 300]);
        assert_eq!([1, 3, 7, 20].map(|f| secs(f, true, false)), [2, 8, 10, 10]);
        assert_eq!([1, 7, 20].map(|f| secs(f, false, true)), [2, 10, 10]);
    }

    #[test]
    fn refusals_and_an_api_server_that_does_not_answer_pass_and_the_rest_does_not() {
        let api = |code: u16| {
            Error::kube(
                "reading",
                kube::Error::Api(Box::new(kube::core::Status::failure("m", "r").with_code(code))),
            )
        };
        assert!(passing(&api(403)) && passing(&api(503)) && passing(&api(429)));
        assert!(!passing(&api(404)) && !passing(&api(422)));
        let forbidden = r#"applying Secret a/b: secrets "b" is forbidden: User "u" cannot patch resource "secrets" in API group "" in the namespace "a" (Forbidden, HTTP 403)"#;
        assert!(passing(&Error::Apply(forbidden.into())));
        assert!(passing(&Error::Apply("applying Deployment a/b: the server is currently unable to handle the request (ServiceUnavailable, HTTP 503)".into())));
        assert!(!passing(&Error::Apply(
            "applying Deployment a/b: spec.selector: field is immutable (Invalid, HTTP 422)".into()
        )));
        assert!(!passing(&Error::Fetch("no release v9".into())));
    }
}
