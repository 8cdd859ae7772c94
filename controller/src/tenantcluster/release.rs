//! A deleted cluster's load-balancer addresses go back to the pool only once its tenant's
//! MetalLB no longer lists them (spec/002 layer 1, issue 27.13): an address given back while
//! the tenant still announces it could be another tenant's next, and two clusters would answer
//! for it. The tenant is asked to drop them first; one that refuses holds them until it gives
//! way; one that does not answer is taken as gone once the cluster has been deleting for
//! [`GRACE`]. Only the API servers that were given the addresses are asked (see [`witness`]):
//! the kubeconfig Secret is the team's, and a Secret deleted or pointed at a server that says
//! "nothing here" is no word of the tenant's (issue 39.8).

use std::time::Duration;

use butler_core::api::IPAllocation;
use kube::Client;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::tenant::{METALLB_POOL, Pool};

/// How long a tenant that does not answer may hold a deleted cluster's addresses: by then its
/// machines are gone with the cluster, or nobody will bring them back.
pub const GRACE: Duration = Duration::from_secs(600);

/// What the tenant said when asked to drop the cluster's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tenant {
    /// Its pool lists none of them (dropped now or before, or never had them), or no tenant
    /// was ever given them.
    Clear,
    /// It answered and refused: the reason it gave.
    Refused(String),
    /// It did not answer (or cannot be reached through its kubeconfig): why.
    Silent(String),
}

/// Whose word on a deleted cluster's addresses is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Witness {
    /// No tenant was ever given them: nothing to ask.
    Nobody,
    /// The tenant the Secret names now is every server that was given them: ask it.
    Ask,
    /// Nobody who can speak for them: why (they wait for [`GRACE`]).
    Unknown(String),
}

/// Decides whose word counts: `recorded`, the servers the status says were given the
/// addresses; `synced_before`, whether MetalLB was ever written for the cluster (an earlier
/// version recorded no servers); `now`, the server the Secret `secret` names, if it exists.
pub fn witness(recorded: &[String], synced_before: bool, now: Option<&str>, secret: &str) -> Witness {
    match now {
        None if recorded.is_empty() && !synced_before => Witness::Nobody,
        None => Witness::Unknown(format!(
            "the Secret {secret} is gone, so the tenant that was given them cannot be asked"
        )),
        // An earlier version asked whoever the Secret named: so does this one, once.
        Some(_) if recorded.is_empty() => Witness::Ask,
        Some(server) if recorded.iter().all(|r| r == server) => Witness::Ask,
        Some(_) => Witness::Unknown(format!(
            "the Secret {secret} names another API server than the one given them, whose word is not theirs"
        )),
    }
}

/// What the deletion does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Give the blocks back; `note` says why without the tenant's word, when that is so.
    Release { note: Option<String> },
    /// Keep them: the condition reason and message, and when to ask again.
    Hold { reason: &'static str, message: String, again: Duration },
}

/// Decides from the tenant's answer and how long the cluster has been deleting. The tenant is
/// asked again soon after the deletion began (someone is likely fixing what stops it), then
/// less often: a quarter of the time it has been deleting, from 5 s to a minute.
pub fn decide(tenant: Tenant, deleting_for: Duration, addresses: &[String]) -> Step {
    let listed = addresses.join(", ");
    let again = (deleting_for / 4).clamp(Duration::from_secs(5), Duration::from_secs(60));
    match tenant {
        Tenant::Clear => Step::Release { note: None },
        Tenant::Refused(why) => Step::Hold {
            reason: "TenantRefusedRelease",
            message: format!(
                "the tenant refused to drop {listed} from its MetalLB pool ({why}); they stay this cluster's until it does, so that no other cluster is given an address this one still announces. Let the controller's tenant account change metallb-system/{METALLB_POOL}, or delete the cluster's kubeconfig Secret once the tenant is gone (they then go back {} minutes after the deletion began)",
                GRACE.as_secs() / 60
            ),
            again,
        },
        Tenant::Silent(_) if deleting_for >= GRACE => Step::Release {
            note: Some(format!(
                "the tenant did not answer for {} minutes of the cluster's deletion; {listed} given back without its word",
                GRACE.as_secs() / 60
            )),
        },
        Tenant::Silent(why) => Step::Hold {
            reason: "WaitingForTenant",
            message: format!(
                "waiting for the tenant to drop {listed} from its MetalLB pool: {why}; given back without its word after {} minutes",
                GRACE.as_secs() / 60
            ),
            again: (GRACE - deleting_for).min(again).max(Duration::from_secs(1)),
        },
    }
}

/// What the pool should list once the cluster's `ranges` are out of it: `None` when it lists
/// none of them (nothing to change), `Some(rest)` otherwise (empty: the pool goes).
pub fn without(listed: &[String], ranges: &[String]) -> Option<Vec<String>> {
    if !listed.iter().any(|a| ranges.contains(a)) {
        return None;
    }
    Some(listed.iter().filter(|a| !ranges.contains(a)).cloned().collect())
}

/// The `start-end` ranges of the cluster's load-balancer blocks (as the tenant's pool lists
/// them), whatever their state.
pub fn ranges(allocations: &[&IPAllocation]) -> Vec<String> {
    let mut out: Vec<String> = allocations
        .iter()
        .filter(|a| a.spec.type_ == butler_core::api::AllocationType::Loadbalancer)
        .filter_map(|a| {
            let s = a.status.as_ref()?;
            Some(format!("{}-{}", s.start_address.as_ref()?, s.end_address.as_ref()?))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Asks the tenant to drop `ranges` from its pool: the pool is written without them, or
/// deleted when they were all it listed.
pub async fn ask(tenant: &Client, ranges: &[String]) -> Tenant {
    let api = Pool(tenant);
    let pool = match api.get().await {
        // No pool, or no IPAddressPool kind (no MetalLB): nothing announced.
        Ok(None) => return Tenant::Clear,
        Ok(Some(pool)) => pool,
        Err(e) => return answer(&e),
    };
    let listed = pool.spec.addresses.0;
    let written = match without(&listed, ranges) {
        None => return Tenant::Clear,
        Some(rest) if rest.is_empty() => api.delete().await,
        Some(rest) => {
            // A merge patch of the list alone: the pool's other fields stay whoever's they are.
            let patch = json!({"spec": {"addresses": rest}});
            api.patch(&PatchParams::default(), &Patch::Merge(patch)).await
        }
    };
    match written {
        Ok(()) => Tenant::Clear,
        Err(e) if butler_runtime::error::is_not_found(&e) => Tenant::Clear,
        Err(e) => answer(&e),
    }
}

/// The condition message when the tenant refuses to write its pool: the cluster's addresses
/// there are not what its blocks give it, and the idle blocks of `held` (IPAllocations in
/// `namespace`) stay the cluster's until the tenant stops announcing them.
pub fn refused_sync(why: &str, namespace: &str, held: &[String]) -> String {
    let mut message = format!(
        "the tenant refused to write {}/{METALLB_POOL} ({why}); let the controller's tenant account change it",
        super::tenant::METALLB_NAMESPACE
    );
    if !held.is_empty() {
        let names: Vec<String> = held.iter().map(|name| format!("IPAllocation {namespace}/{name}")).collect();
        let verb = if held.len() == 1 { "stays" } else { "stay" };
        message.push_str(&format!(
            "; {} {verb} this cluster's until it drops them, so that no other cluster is given an address this one still announces",
            names.join(", ")
        ));
    }
    message
}

/// A refusal (the tenant answered 4xx) or silence (no answer, or a server error).
pub fn answer(error: &kube::Error) -> Tenant {
    let said = said(error);
    match error {
        kube::Error::Api(status) if (400..500).contains(&status.code) => Tenant::Refused(said),
        _ => Tenant::Silent(said),
    }
}

/// What a tenant's failure says in a status: its HTTP code and reason, never the text of its
/// answer. A team names the tenant's server, which may be anything on the network; what it
/// answers is not copied where the team can read it (a status), so the controller reads
/// nothing for the team. A failure to reach it at all is the controller's own words.
pub fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let reason: String = status.reason.chars().filter(char::is_ascii_alphabetic).take(40).collect();
            match reason.is_empty() {
                true => format!("it answered HTTP {}", status.code),
                false => format!("it answered {reason} (HTTP {})", status.code),
            }
        }
        other => butler_runtime::error::describe(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_answer_is_said_by_its_code_and_reason_only() {
        let status =
            kube::core::Status::failure("the admin page of 10.0.0.5: SECRET", "Forbidden").with_code(403);
        let error = kube::Error::Api(Box::new(status));
        assert_eq!(said(&error), "it answered Forbidden (HTTP 403)");
        assert!(matches!(answer(&error), Tenant::Refused(why) if !why.contains("SECRET")));
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn the_addresses_go_back_once_the_tenant_dropped_them_or_is_gone() {
        let ranges = ["10.0.0.0-10.0.0.7".to_string()];
        assert_eq!(decide(Tenant::Clear, Duration::ZERO, &ranges), Step::Release { note: None });
        let Step::Hold { reason, message, again } =
            decide(Tenant::Refused("forbidden (Forbidden, HTTP 403)".into()), 20 * GRACE, &ranges)
        else {
            panic!("a refusal holds, however long")
        };
        assert_eq!((reason, again), ("TenantRefusedRelease", Duration::from_secs(60)));
        assert!(message.starts_with("the tenant refused to drop 10.0.0.0-10.0.0.7 from its MetalLB pool (forbidden (Forbidden, HTTP 403))"), "{message}");
        let silent = || Tenant::Silent("connection refused".into());
        let Step::Hold { again, .. } = decide(silent(), Duration::from_secs(2), &ranges) else {
            panic!("silence holds within the grace")
        };
        assert_eq!(again, Duration::from_secs(5), "soon at first");
        let Step::Hold { reason, again, .. } = decide(silent(), 2 * MINUTE, &ranges) else {
            panic!("silence holds within the grace")
        };
        assert_eq!((reason, again), ("WaitingForTenant", Duration::from_secs(30)));
        let Step::Hold { again, .. } = decide(silent(), GRACE - Duration::from_secs(5), &ranges) else {
            panic!("still within the grace")
        };
        assert_eq!(again, Duration::from_secs(5));
        let Step::Release { note } = decide(silent(), GRACE, &ranges) else {
            panic!("given back after the grace")
        };
        assert!(note.unwrap().contains("without its word"));
    }

    #[test]
    fn only_the_servers_given_the_addresses_speak_for_them() {
        let secret = "team-a/web-kubeconfig";
        let given = ["sha256:aa".to_string()];
        assert_eq!(witness(&[], false, None, secret), Witness::Nobody, "never given to a tenant");
        assert_eq!(witness(&given, true, Some("sha256:aa"), secret), Witness::Ask);
        let Witness::Unknown(gone) = witness(&given, true, None, secret) else {
            panic!("a deleted Secret is no word")
        };
        assert_eq!(
            gone,
            "the Secret team-a/web-kubeconfig is gone, so the tenant that was given them cannot be asked"
        );
        assert!(
            matches!(witness(&given, true, Some("sha256:bb"), secret), Witness::Unknown(_)),
            "another server"
        );
        let both = ["sha256:aa".to_string(), "sha256:bb".to_string()];
        assert!(matches!(witness(&both, true, Some("sha256:bb"), secret), Witness::Unknown(_)), "one of two");
        // Written by an earlier version, which recorded no servers.
        assert_eq!(witness(&[], true, Some("sha256:cc"), secret), Witness::Ask);
        assert!(matches!(witness(&[], true, None, secret), Witness::Unknown(_)));
    }

    #[test]
    fn a_refused_write_names_what_it_holds() {
        let why = "forbidden (Forbidden, HTTP 403)";
        let alone = refused_sync(why, "sys", &[]);
        assert_eq!(
            alone,
            "the tenant refused to write metallb-system/default-pool (forbidden (Forbidden, HTTP 403)); let the controller's tenant account change it"
        );
        let held = refused_sync(why, "sys", &["t.app-lb-1".into(), "t.app-lb-2".into()]);
        assert!(
            held.contains(
                "; IPAllocation sys/t.app-lb-1, IPAllocation sys/t.app-lb-2 stay this cluster's until"
            ),
            "{held}"
        );
    }

    #[test]
    fn the_pool_keeps_what_is_not_the_clusters() {
        let listed = ["10.0.0.0-10.0.0.7".to_string(), "10.0.1.0-10.0.1.0".to_string()];
        assert_eq!(without(&listed, &["10.9.9.9-10.9.9.9".into()]), None, "nothing of ours: no write");
        assert_eq!(
            without(&listed, &["10.0.0.0-10.0.0.7".into()]),
            Some(vec!["10.0.1.0-10.0.1.0".to_string()])
        );
        assert_eq!(without(&listed, &listed), Some(vec![]));
    }
}
