//! What a release claims of the cluster as it is, judged before its first write: CRDs of a
//! provider that is there (another operator's included), kinds the cluster serves already,
//! what Kubernetes itself would refuse, and objects an inventory lists that are no longer the
//! provider's.

use std::time::Duration;

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

use crate::fixtures::{Part, components, gadget_crd, publish, versioned_gadget_crd};
use crate::policy::{attack, refused, spec};
use crate::support::{Scenario, reason};

/// A group of this scenario's own, for CRDs that go with it.
fn own_group(s: &Scenario, base: &str) -> String {
    format!("{}.{base}.test.io", s.cluster.unique("g").replace('-', ""))
}

/// A CRD labelled as another operator's provider made it (that operator honours a namespace
/// this one does not): its provider object is there, so no release of this operator takes the
/// CRD over, even in a group the operator lets providers adopt.
#[tokio::test]
async fn a_crd_of_another_operators_provider_is_never_taken_over() {
    let (mut s, _) = attack("attack-crd-elsewhere").await;
    let elsewhere = s.cluster.namespace("elsewhere").await;
    let owner: InfrastructureProvider = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "InfrastructureProvider",
        "metadata": {"name": "owner", "namespace": elsewhere},
        "spec": serde_json::from_str::<serde_json::Value>(&spec("infrastructure-owner")).unwrap(),
    }))
    .unwrap();
    Api::<InfrastructureProvider>::namespaced(s.client.clone(), &elsewhere)
        .create(&PostParams::default(), &owner)
        .await
        .unwrap();
    let group = own_group(&s, "owned");
    let mut theirs: CustomResourceDefinition =
        serde_saphyr::from_str(&gadget_crd(&group, "Namespaced")).unwrap();
    theirs.metadata.labels = Some(
        [
            ("operator.butlerlabs.dev/provider-kind", "InfrastructureProvider"),
            ("operator.butlerlabs.dev/provider-namespace", elsewhere.as_str()),
            ("operator.butlerlabs.dev/provider-name", "owner"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    s.cluster.install_own_crd(&theirs).await;
    let mut thief = components("thief", "v1.0.0", &[]);
    thief.push_str(&format!("---\n{}", versioned_gadget_crd(&group, &["v1", "v2"])));
    publish(&s, "infrastructure-thief", "infrastructure-components.yaml", "v1.0.0", &thief).await;
    let adoptable = group.clone();
    s.start_operator_with_options(move |o| o.policy.adopt_crd_groups = vec![adoptable]);
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("thief", &spec("infrastructure-thief")).await;
    let (_, message) = refused(&s, "thief", "ApplyFailed").await;
    assert!(
        message.contains(&format!(
            "CustomResourceDefinition gadgets.{group} belongs to InfrastructureProvider {elsewhere}/owner, and a provider never takes over another's CRDs"
        )),
        "{message}"
    );
    let crd = Api::<CustomResourceDefinition>::all(s.client.clone())
        .get(&format!("gadgets.{group}"))
        .await
        .unwrap();
    assert_eq!(crd.spec.versions.len(), 1, "as the other operator's provider made it");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(deployments.get_opt("thief-controller-manager").await.unwrap().is_none(), "nothing was applied");
    s.stop_operator().await;
}

/// A release CRD that defines a kind the cluster serves already (a decoy `Gadget`, cluster-wide,
/// beside the real namespaced one, as a decoy `Certificate` beside cert-manager's) once made
/// the operator believe the kind cluster-wide, so a `Gadget` of the release landed in
/// kube-system. Discovery decides, and the decoy is refused.
#[tokio::test]
async fn a_decoy_crd_of_a_served_kind_is_refused_and_nothing_lands_elsewhere() {
    let (mut s, _) = attack("attack-decoy-crd").await;
    let group = own_group(&s, "served");
    let real: CustomResourceDefinition = serde_saphyr::from_str(&gadget_crd(&group, "Namespaced")).unwrap();
    s.cluster.install_own_crd(&real).await;
    let name = s.cluster.unique("in-kube-system");
    let release = format!(
        "{}---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: decoys.{group}}}
spec:
  group: {group}
  scope: Cluster
  names: {{kind: Gadget, listKind: GadgetList, plural: decoys, singular: decoy}}
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
---
apiVersion: {group}/v1
kind: Gadget
metadata: {{name: {name}, namespace: kube-system}}
",
        components("decoy", "v1.0.0", &[])
    );
    publish(&s, "infrastructure-decoy", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("decoy", &spec("infrastructure-decoy")).await;
    let (_, message) = refused(&s, "decoy", "ApplyFailed").await;
    assert!(message.starts_with("nothing is applied: "), "{message}");
    assert!(
        message.contains(&format!(
            "Gadget kube-system/{name} is namespaced and outside the provider's namespace"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "CustomResourceDefinition decoys.{group} would define Gadget (decoys) in {group}/v1, which the cluster serves already: the CustomResourceDefinition gadgets.{group} defines it"
        )),
        "{message}"
    );
    let resource = kube::discovery::ApiResource {
        group: group.clone(),
        version: "v1".into(),
        api_version: format!("{group}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    };
    let gadgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), "kube-system", &resource);
    assert!(gadgets.get_opt(&name).await.unwrap().is_none(), "nothing in kube-system");
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    assert!(crds.get_opt(&format!("decoys.{group}")).await.unwrap().is_none(), "the decoy was not made");
    s.stop_operator().await;
}

/// A release whose last object the cluster refuses (here a platform's admission policy; a
/// quota or a validation would do the same): a server-side dry run of the whole set before
/// the first write, so nothing of it is written rather than all but the last.
#[tokio::test]
async fn a_release_kubernetes_refuses_in_part_writes_nothing() {
    let (mut s, run_label) = attack("attack-dry-run").await;
    let blocked = s.cluster.unique("blocked");
    let policy = s.cluster.unique("platform-policy");
    let labels = json!({"scenario.butlerlabs.dev/run": run_label});
    let admission = |kind: &str, spec: serde_json::Value| {
        serde_json::from_value::<DynamicObject>(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": policy, "labels": labels}, "spec": spec,
        }))
        .unwrap()
    };
    let vap = admission(
        "ValidatingAdmissionPolicy",
        json!({
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]},
            "matchConditions": [{"name": "blocked", "expression": format!("object.metadata.name == '{blocked}'")}],
            "validations": [{"expression": "false", "message": "the platform forbids this name"}],
        }),
    );
    let binding = admission(
        "ValidatingAdmissionPolicyBinding",
        json!({"policyName": policy, "validationActions": ["Deny"]}),
    );
    for (object, plural) in
        [(vap, "validatingadmissionpolicies"), (binding, "validatingadmissionpolicybindings")]
    {
        let resource = kube::discovery::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: object.types.as_ref().unwrap().kind.clone(),
            plural: plural.into(),
        };
        Api::<DynamicObject>::all_with(s.client.clone(), &resource)
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
    }
    // The API server loads a new policy within about a second: wait until it refuses.
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let probe: ConfigMap = serde_json::from_value(json!({"metadata": {"name": blocked}})).unwrap();
    for attempt in 0.. {
        match configmaps.create(&PostParams::default(), &probe).await {
            Err(_) => break,
            Ok(_) => {
                configmaps.delete(&blocked, &DeleteParams::default()).await.unwrap();
                assert!(attempt < 100, "the policy never took effect");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let mut release = components("partial", "v1.0.0", &[Part::Settings]);
    release.push_str(&format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {blocked}}}\ndata: {{k: v}}\n"
    ));
    publish(&s, "infrastructure-partial", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("partial", &spec("infrastructure-partial")).await;
    let (_, message) = refused(&s, "partial", "ApplyFailed").await;
    assert!(
        message.starts_with(&format!(
            "nothing is applied: ConfigMap {}/{blocked} would be refused",
            s.namespace
        )),
        "{message}"
    );
    assert!(message.contains("the platform forbids this name"), "{message}");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(
        deployments.get_opt("partial-controller-manager").await.unwrap().is_none(),
        "nothing was written"
    );
    assert!(configmaps.get_opt("partial-settings").await.unwrap().is_none(), "nothing was written");
    s.stop_operator().await;
}

/// An object the inventory lists, replaced by someone else's of the same name while the
/// operator was away: after a restart every object is applied again, and it is not applied
/// over (the inventory is a ConfigMap anyone who may write in the namespace could forge).
#[tokio::test]
async fn an_object_replaced_while_the_operator_was_away_is_not_applied_over_after_a_restart() {
    let (mut s, _) = attack("attack-replaced").await;
    publish(
        &s,
        "infrastructure-victim",
        "infrastructure-components.yaml",
        "v1.0.0",
        &components("victim", "v1.0.0", &[Part::Settings]),
    )
    .await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("victim", &spec("infrastructure-victim")).await;
    s.wait_for::<InfrastructureProvider>("victim", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    s.stop_operator().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    configmaps.delete("victim-settings", &DeleteParams::default()).await.unwrap();
    let theirs: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "victim-settings"}, "data": {"mine": "yes"}}))
            .unwrap();
    for _ in 0..100 {
        match configmaps.create(&PostParams::default(), &theirs).await {
            Ok(_) => break,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    s.start_operator();
    let (_, message) = refused(&s, "victim", "ApplyFailed").await;
    assert!(
        message.contains(&format!(
            "ConfigMap {}/victim-settings is listed in the provider's inventory but does not carry its labels",
            s.namespace
        )),
        "{message}"
    );
    let kept = configmaps.get("victim-settings").await.unwrap();
    assert_eq!(kept.data.unwrap().get("mine").map(String::as_str), Some("yes"), "left as its maker made it");
    s.stop_operator().await;
}
