//! What a release may put in the API server's path: webhook configurations that intercept only
//! the kinds of its own CRDs (or groups the operator allows) and call a Service of the
//! provider's namespace (or a URL the operator allows); CRDs outside Kubernetes' and the
//! operator's own groups, whose conversion webhooks call the same; admission policies that
//! constrain only requests of the release's own ServiceAccounts, with no parameters; and
//! Services without `externalIPs` and Secrets that carry no other account's token.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{Set, describe, text};
use crate::controller::wanted::policy::Policy;

/// The groups of Kubernetes' own APIs: a CRD there would shadow or pose as a built-in.
fn kubernetes_group(group: &str) -> bool {
    ["k8s.io", "kubernetes.io"].iter().any(|root| group == *root || group.ends_with(&format!(".{root}")))
}

/// Whether a webhook client calls something the release may call: a Service of the provider's
/// namespace, or a URL the operator allows.
fn client(config: &Value, namespace: &str, policy: &Policy) -> Result<(), String> {
    if let Some(url) = config["url"].as_str() {
        let allowed =
            policy.webhook_urls.iter().any(|a| a == url || (a.ends_with('/') && url.starts_with(a.as_str())));
        return match allowed {
            true => Ok(()),
            false => Err(format!(
                "calls the URL {url:?} instead of a Service of the provider; allow it with --allow-webhook-url {url} if the provider needs it"
            )),
        };
    }
    let service = &config["service"];
    match text(&service["namespace"]) {
        ns if ns == namespace => Ok(()),
        ns => Err(format!(
            "calls the Service {ns}/{}, outside the provider's namespace {namespace}",
            text(&service["name"])
        )),
    }
}

/// Checks the webhook configurations, CRDs, admission policies, Services and Secrets of `set`.
pub fn check(set: &Set<'_>, policy: &Policy) -> Result<(), String> {
    let allowed_group = |g: &str| policy.webhook_groups.iter().any(|a| a == g);
    for object in set.objects {
        let refuse = |rule: String| Err(format!("{} is refused: {rule}", describe(object)));
        let r = butler_runtime::objects::ObjectRef::of(object);
        match (r.group(), r.kind.as_str()) {
            (
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
            ) => {
                for webhook in object["webhooks"].as_array().into_iter().flatten() {
                    let name = text(&webhook["name"]);
                    if let Err(why) = client(&webhook["clientConfig"], set.namespace, policy) {
                        return refuse(format!("its webhook {name:?} {why}"));
                    }
                    for rule in webhook["rules"].as_array().into_iter().flatten() {
                        for group in rule["apiGroups"].as_array().into_iter().flatten().map(text) {
                            if allowed_group(group) {
                                continue;
                            }
                            if !set.crd_groups.contains(group) {
                                let shown = match group {
                                    "" => "\"\" (the core group)".to_string(),
                                    g => format!("{g:?}"),
                                };
                                return refuse(format!(
                                    "its webhook {name:?} intercepts the API group {shown}, outside the groups of the provider's own CRDs; allow it with --allow-webhook-group if the provider needs it"
                                ));
                            }
                            for resource in rule["resources"].as_array().into_iter().flatten().map(text) {
                                let plural = resource.split('/').next().unwrap_or_default();
                                if !set.crd_plurals.contains(&(group, plural)) {
                                    return refuse(format!(
                                        "its webhook {name:?} intercepts {resource:?} in the API group {group:?}, which is no kind of the provider's own CRDs (a group may hold other projects' kinds); name the provider's own resources, or allow the group with --allow-webhook-group"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                let group = text(&object["spec"]["group"]);
                if kubernetes_group(group) {
                    return refuse(format!(
                        "its group {group} is Kubernetes' own (k8s.io and kubernetes.io, and the groups under them); a provider's CRDs live in its own groups"
                    ));
                }
                if group == crate::api::GROUP || group.ends_with(&format!(".{}", crate::api::GROUP)) {
                    return refuse(format!("its group {group} is this operator's own API"));
                }
                let conversion = &object["spec"]["conversion"]["webhook"]["clientConfig"];
                if !conversion.is_null()
                    && let Err(why) = client(conversion, set.namespace, policy)
                {
                    return refuse(format!("its conversion webhook {why}"));
                }
            }
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
                if !object["spec"]["paramKind"].is_null() {
                    return refuse(
                        "it takes parameters (spec.paramKind), which could read any object into its messages; a provider's policies take none".into(),
                    );
                }
                if !own_requests_only(object, &set.accounts) {
                    return refuse(
                        "it would constrain requests of anyone; a provider's policies constrain only requests of its own ServiceAccounts (a matchCondition request.userInfo.username == 'system:serviceaccount:NAMESPACE:NAME' naming one)".into(),
                    );
                }
            }
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
                let name = text(&object["spec"]["policyName"]);
                if !set.policies.contains(name) {
                    return refuse(format!(
                        "it binds the ValidatingAdmissionPolicy {name:?}, which the provider's components do not define"
                    ));
                }
                if !object["spec"]["paramRef"].is_null() {
                    return refuse(
                        "it passes parameters (spec.paramRef); a provider's policies take none".into(),
                    );
                }
            }
            ("", "Service")
                if object["spec"]["externalIPs"].as_array().is_some_and(|ips| !ips.is_empty()) =>
            {
                return refuse(
                    "it claims external IPs (spec.externalIPs), which would take over traffic to those addresses for the whole cluster".into(),
                );
            }
            ("", "Secret") if object["type"] == "kubernetes.io/service-account-token" => {
                let namespace = text(&object["metadata"]["namespace"]);
                let account = text(&object["metadata"]["annotations"]["kubernetes.io/service-account.name"]);
                if !set.accounts.contains(&(namespace, account)) {
                    return refuse(format!(
                        "it asks for a token of the ServiceAccount {namespace}/{account}, which the provider's components do not define"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether a ValidatingAdmissionPolicy matches only requests of the release's own
/// ServiceAccounts: one of its matchConditions is `request.userInfo.username == '…'` naming
/// one of them.
fn own_requests_only(policy: &Value, accounts: &BTreeSet<(&str, &str)>) -> bool {
    policy["spec"]["matchConditions"].as_array().into_iter().flatten().any(|condition| {
        let expression: String = text(&condition["expression"]).split_whitespace().collect();
        let Some(user) = expression
            .strip_prefix("request.userInfo.username==")
            .and_then(|rest| rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        else {
            return false;
        };
        let Some((namespace, name)) =
            user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'))
        else {
            return false;
        };
        accounts.contains(&(namespace, name))
    })
}
