//! ValidatingAdmissionPolicies, evaluated as kube-apiserver evaluates them (GA since 1.30):
//! each ValidatingAdmissionPolicyBinding whose `validationActions` hold `Deny` names a policy;
//! that policy applies to a write its `matchConstraints` select (and the binding's
//! `matchResources`, when it has them), once every `matchConditions` expression holds; then
//! every validation must hold, else the write is refused with the validation's
//! `messageExpression`, `message` or expression, at the code of its `reason` (`Invalid`, 422,
//! when it gives none). The expressions see `object`, `oldObject` (null where Kubernetes has
//! null), `request` (with the authenticated user and groups) and `namespaceObject`. An
//! expression that cannot be evaluated fails the write under `failurePolicy: Fail` (the
//! default) and skips the policy under `Ignore`.
//!
//! Unlike webhooks, policies see the webhook configurations too: only the reviews are exempt.
//! Not modelled: params (a policy with a `paramKind` is skipped), `variables`, audit
//! annotations, and the `Warn` and `Audit` actions.

use serde_json::Value;

use crate::admission::{rule_matches, selector_matches};
use crate::cel::{Evaluator, Expression, Outcome};
use crate::errors::ApiError;
use crate::request::Attributes;

/// What the expressions of one write see.
struct Scope<'a> {
    attributes: &'a Attributes,
    object: &'a Value,
    old: &'a Value,
    namespace: Option<&'a Value>,
    /// Made once, for the first policy that applies.
    evaluator: std::cell::OnceCell<Evaluator>,
}

impl Scope<'_> {
    fn evaluator(&self) -> &Evaluator {
        self.evaluator.get_or_init(|| Evaluator::new(self.attributes, self.object, self.old, self.namespace))
    }
}

/// Whether a `MatchResources` selects the write: a resource rule (with its `resourceNames`)
/// and no exclude rule, the namespace selector (on the namespace's labels; a Namespace on its
/// own; other cluster-wide objects always pass) and the object selector.
fn selects(resources: &Value, scope: &Scope<'_>, rules_required: bool) -> bool {
    let a = scope.attributes;
    let named = |rule: &Value| {
        rule["resourceNames"]
            .as_array()
            .filter(|names| !names.is_empty())
            .is_none_or(|names| names.iter().any(|n| n == a.name.as_str()))
    };
    let matches = |rule: &Value| rule_matches(rule, a) && named(rule);
    let rules = resources["resourceRules"].as_array();
    let included = match rules {
        Some(rules) => rules.iter().any(matches),
        None => !rules_required,
    };
    let excluded = resources["excludeResourceRules"].as_array().into_iter().flatten().any(matches);
    let labelled = if a.kind == "Namespace" && a.group.is_empty() {
        Some(if scope.object.is_null() { scope.old } else { scope.object })
    } else {
        scope.namespace
    };
    let namespace_ok = match labelled {
        Some(namespace) => selector_matches(&resources["namespaceSelector"], namespace),
        None => true,
    };
    let object_selector = &resources["objectSelector"];
    let object_ok =
        selector_matches(object_selector, scope.object) || selector_matches(object_selector, scope.old);
    included && !excluded && namespace_ok && object_ok
}

/// The code of a validation's reason.
fn code_of(reason: &str) -> (u16, &'static str) {
    match reason {
        "Unauthorized" => (401, "Unauthorized"),
        "Forbidden" => (403, "Forbidden"),
        "RequestEntityTooLarge" => (413, "RequestEntityTooLarge"),
        _ => (422, "Invalid"),
    }
}

/// Checks a write against every bound policy: `Ok` when each one that applies admits it.
pub fn check(
    policies: &[Value],
    bindings: &[Value],
    attributes: &Attributes,
    object: &Value,
    old: &Value,
    namespace: Option<&Value>,
) -> Result<(), ApiError> {
    if attributes.group == "authentication.k8s.io" || attributes.group == "authorization.k8s.io" {
        return Ok(());
    }
    let scope = Scope { attributes, object, old, namespace, evaluator: std::cell::OnceCell::new() };
    let mut bindings: Vec<&Value> = bindings.iter().collect();
    bindings.sort_by_key(|b| b["metadata"]["name"].as_str().unwrap_or_default().to_string());
    for binding in bindings {
        let spec = &binding["spec"];
        let denies = spec["validationActions"].as_array().into_iter().flatten().any(|a| a == "Deny");
        let Some(policy) = policies.iter().find(|p| p["metadata"]["name"] == spec["policyName"]) else {
            continue;
        };
        let policy_spec = &policy["spec"];
        if !denies || !policy_spec["paramKind"].is_null() {
            continue;
        }
        if !selects(&policy_spec["matchConstraints"], &scope, true)
            || (!spec["matchResources"].is_null() && !selects(&spec["matchResources"], &scope, false))
        {
            continue;
        }
        let policy_name = policy["metadata"]["name"].as_str().unwrap_or_default();
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or_default();
        let fail = policy_spec["failurePolicy"].as_str() != Some("Ignore");
        let refusal = |code: (u16, &'static str), message: String| {
            let message = format!(
                "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {message}"
            );
            ApiError::policy(code.0, code.1, attributes, message)
        };
        let conditions: Vec<Expression> = policy_spec["matchConditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| Expression::of(c, false))
            .collect();
        let mut applies = true;
        for outcome in scope.evaluator().evaluate(&conditions) {
            match outcome {
                Outcome::Held => {}
                Outcome::Failed(_) => applies = false,
                Outcome::Error(why) if fail => return Err(refusal((403, "Forbidden"), why)),
                Outcome::Error(_) => applies = false,
            }
        }
        if !applies {
            continue;
        }
        let validations: Vec<&Value> = policy_spec["validations"].as_array().into_iter().flatten().collect();
        let expressions: Vec<Expression> = validations.iter().map(|v| Expression::of(v, true)).collect();
        let outcomes = scope.evaluator().evaluate(&expressions);
        for ((validation, outcome), asked) in validations.iter().zip(outcomes).zip(&expressions) {
            let expression = asked.expression.as_str();
            match outcome {
                Outcome::Held => {}
                Outcome::Failed(message) => {
                    let message =
                        match validation["message"].is_null() && validation["messageExpression"].is_null() {
                            true => format!("failed expression: {expression}"),
                            false => message,
                        };
                    return Err(refusal(code_of(validation["reason"].as_str().unwrap_or_default()), message));
                }
                Outcome::Error(why) if fail => {
                    return Err(refusal(
                        (422, "Invalid"),
                        format!("expression '{expression}' resulted in error: {why}"),
                    ));
                }
                Outcome::Error(_) => break,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn attributes(operation: &'static str, resource: &str, name: &str, user: &str) -> Attributes {
        Attributes {
            operation,
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            resource: resource.into(),
            subresource: None,
            kind: "ClusterRoleBinding".into(),
            namespaced: false,
            namespace: None,
            name: name.into(),
            user: user.into(),
            groups: vec!["system:authenticated".into()],
            dry_run: false,
        }
    }

    fn policy() -> Value {
        json!({"metadata": {"name": "confine"}, "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": ["rbac.authorization.k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["clusterrolebindings"]}]},
            "matchConditions": [{"name": "robot", "expression": "request.userInfo.username == 'robot'"}],
            "validations": [{"expression": "request.operation == 'DELETE' || object.metadata.name.startsWith('team-')",
                "message": "only team bindings", "reason": "Forbidden"}]}})
    }

    fn binding(actions: &[&str]) -> Value {
        json!({"metadata": {"name": "confine"}, "spec": {"policyName": "confine", "validationActions": actions}})
    }

    #[test]
    fn a_bound_policy_refuses_what_it_matches_and_fails_and_nothing_else() {
        let object = json!({"metadata": {"name": "cluster-admin-for-me"}});
        let refused = check(
            &[policy()],
            &[binding(&["Deny"])],
            &attributes("CREATE", "clusterrolebindings", "x", "robot"),
            &object,
            &Value::Null,
            None,
        )
        .unwrap_err();
        assert_eq!(refused.code, 403);
        assert_eq!(
            refused.message,
            "clusterrolebindings.rbac.authorization.k8s.io \"x\" is forbidden: ValidatingAdmissionPolicy 'confine' with binding 'confine' denied request: only team bindings"
        );
        let team = json!({"metadata": {"name": "team-a"}});
        let robot = attributes("CREATE", "clusterrolebindings", "team-a", "robot");
        assert!(check(&[policy()], &[binding(&["Deny"])], &robot, &team, &Value::Null, None).is_ok());
        let someone = attributes("CREATE", "clusterrolebindings", "x", "admin");
        assert!(
            check(&[policy()], &[binding(&["Deny"])], &someone, &object, &Value::Null, None).is_ok(),
            "not matched"
        );
        let other = attributes("CREATE", "clusterroles", "x", "robot");
        assert!(
            check(&[policy()], &[binding(&["Deny"])], &other, &object, &Value::Null, None).is_ok(),
            "not a rule's"
        );
        let robot = attributes("CREATE", "clusterrolebindings", "x", "robot");
        assert!(
            check(&[policy()], &[binding(&["Audit"])], &robot, &object, &Value::Null, None).is_ok(),
            "no Deny"
        );
        assert!(check(&[policy()], &[], &robot, &object, &Value::Null, None).is_ok(), "unbound");
        let deleting = attributes("DELETE", "clusterrolebindings", "x", "robot");
        assert!(check(&[policy()], &[binding(&["Deny"])], &deleting, &Value::Null, &object, None).is_ok());
    }

    #[test]
    fn an_expression_in_error_fails_closed_unless_the_policy_ignores_it() {
        let mut broken = policy();
        broken["spec"]["validations"][0]["expression"] = json!("object.spec.missing.deeper == 1");
        let robot = attributes("CREATE", "clusterrolebindings", "x", "robot");
        let object = json!({"metadata": {"name": "x"}});
        let refused =
            check(&[broken.clone()], &[binding(&["Deny"])], &robot, &object, &Value::Null, None).unwrap_err();
        assert_eq!(refused.code, 422, "{}", refused.message);
        broken["spec"]["failurePolicy"] = json!("Ignore");
        assert!(check(&[broken], &[binding(&["Deny"])], &robot, &object, &Value::Null, None).is_ok());
    }
}
