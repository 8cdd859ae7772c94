use butler_e2e::Cluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::discovery::Discovery;
use serde_json::json;

use crate::support::{api_error, eventually, widget, widget_api, widgets};

#[tokio::test]
async fn a_crd_registers_its_kind_until_it_is_deleted() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("crd").await;
    let resource = widgets(&cluster).await;
    let discovery = Discovery::new(cluster.client()).filter(&[&resource.group]).run().await.unwrap();
    let (found, caps) = discovery
        .resolve_gvk(&kube::api::GroupVersionKind::gvk(&resource.group, "v1", "Widget"))
        .expect("the kind is discovered");
    assert_eq!(found.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(
        caps.subresources.iter().any(|(r, _)| r.plural == "widgets/status" || r.plural == "status"),
        "{:?}",
        caps.subresources
    );

    let api = widget_api(&cluster, &resource, &ns);
    api.create(&PostParams::default(), &widget(&resource, "w", json!({"label": "w"}))).await.unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let name = format!("widgets.{}", resource.group);
    crds.delete(&name, &DeleteParams::default()).await.unwrap();
    // First it terminates while apiextensions' finalizer removes its objects (on a real
    // server that may already be over when it is read).
    match crds.get_opt(&name).await.unwrap() {
        Some(terminating) => {
            assert!(terminating.metadata.deletion_timestamp.is_some());
            let conditions = terminating.status.and_then(|s| s.conditions).unwrap_or_default();
            assert!(
                conditions.iter().any(|c| c.type_ == "Terminating" && c.status == "True"),
                "{conditions:?}"
            );
        }
        None => assert!(!cluster.is_in_memory(), "the in-memory server keeps a deleted CRD a second"),
    }
    eventually("the CRD and its objects to go", || async {
        crds.get_opt(&name).await.unwrap().is_none().then_some(())
    })
    .await;
    let error = api_error(api.get("w").await);
    assert_eq!(error.code, 404);
}

#[tokio::test]
async fn a_crd_whose_schema_is_not_structural_is_refused() {
    let cluster = Cluster::connect().await;
    let group = cluster.unique("bad").replace('-', "") + ".e2e.butlerlabs.dev";
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": "Thing", "plural": "things"},
            "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"properties": {"x": {"type": "string"}}}}}}}]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let error = api_error(crds.create(&PostParams::default(), &crd).await);
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
}

/// What names a CRD: its group is a domain (`batch` is Kubernetes' own, served without a CRD),
/// and its name is its plural and its group; both refused as kube-apiserver refuses them.
#[tokio::test]
async fn a_crd_whose_group_is_no_domain_or_whose_name_is_another_is_refused() {
    let cluster = Cluster::connect().await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let crd = |name: &str, group: &str| -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "names": {"kind": "Job", "plural": "jobs"}, "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
        }))
        .unwrap()
    };
    let error = api_error(crds.create(&PostParams::default(), &crd("jobs.batch", "batch")).await);
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert!(
        error
            .message
            .contains("spec.group: Invalid value: \"batch\": should be a domain with at least one dot"),
        "{}",
        error.message
    );
    let group = cluster.unique("named").replace('-', "") + ".e2e.butlerlabs.dev";
    let error =
        api_error(crds.create(&PostParams::default(), &crd(&format!("others.{group}"), &group)).await);
    assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
    assert!(error.message.contains("must be spec.names.plural+\".\"+spec.group"), "{}", error.message);
}

/// A CRD of two versions, `v1alpha1` and `v1beta1`, with `storage` at one of them; `v1alpha1`
/// left out when `with_old` is false.
fn gadgets(group: &str, storage: &str, with_old: bool) -> CustomResourceDefinition {
    let version = |name: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    let versions: Vec<_> =
        ["v1alpha1", "v1beta1"].into_iter().filter(|v| with_old || *v != "v1alpha1").map(version).collect();
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
                 "versions": versions},
    }))
    .unwrap()
}

/// `status.storedVersions` grows with each storage version; a version in it cannot leave
/// `spec.versions` (the error users meet when a release drops a version); once every object
/// was written again at the new storage version and the list trimmed, it can.
#[tokio::test]
async fn stored_versions_keep_a_version_until_its_objects_are_written_again() {
    use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("stored").await;
    let group = cluster.unique("s").replace('-', "") + ".e2e.butlerlabs.dev";
    cluster.install_own_crd(&gadgets(&group, "v1alpha1", true)).await;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let name = format!("gadgets.{group}");
    let stored =
        |crd: CustomResourceDefinition| crd.status.and_then(|s| s.stored_versions).unwrap_or_default();
    assert_eq!(stored(crds.get(&name).await.unwrap()), ["v1alpha1"]);
    let old = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(&group, "v1alpha1", "Gadget"),
        "gadgets",
    );
    let objects: Api<DynamicObject> = Api::namespaced_with(cluster.client(), &ns, &old);
    for i in 0..3 {
        let gadget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1alpha1"), "kind": "Gadget",
            "metadata": {"name": format!("g{i}")}, "spec": {"size": i},
        }))
        .unwrap();
        objects.create(&PostParams::default(), &gadget).await.unwrap();
    }

    let apply = PatchParams::apply("conformance").force();
    crds.patch(&name, &apply, &Patch::Apply(gadgets(&group, "v1beta1", true))).await.unwrap();
    assert_eq!(stored(crds.get(&name).await.unwrap()), ["v1alpha1", "v1beta1"]);
    let dropped = crds.patch(&name, &apply, &Patch::Apply(gadgets(&group, "v1beta1", false))).await;
    let error = api_error(dropped);
    assert_eq!(error.code, 422);
    assert!(error.message.contains("status.storedVersions[0]"), "{}", error.message);

    // Every object written again (an empty patch: the object is encoded anew), then the list
    // trimmed through the status.
    let new = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(&group, "v1beta1", "Gadget"),
        "gadgets",
    );
    let objects: Api<DynamicObject> = Api::namespaced_with(cluster.client(), &ns, &new);
    for gadget in objects.list_metadata(&ListParams::default()).await.unwrap().items {
        let name = gadget.metadata.name.unwrap();
        objects.patch(&name, &PatchParams::default(), &Patch::Merge(json!({}))).await.unwrap();
    }
    let trim = json!({"status": {"storedVersions": ["v1beta1"]}});
    crds.patch_status(&name, &PatchParams::default(), &Patch::Merge(trim)).await.unwrap();
    crds.patch(&name, &apply, &Patch::Apply(gadgets(&group, "v1beta1", false))).await.unwrap();
    assert_eq!(stored(crds.get(&name).await.unwrap()), ["v1beta1"]);
    let left = objects.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(left.len(), 3);
    assert_eq!(
        left.iter().find(|g| g.metadata.name.as_deref() == Some("g2")).unwrap().data["spec"]["size"],
        2
    );
}

/// What names a CRD's storage cannot change once it is established: its scope and kind (and
/// its group and plural, which its name holds).
#[tokio::test]
async fn an_established_crds_scope_and_kind_cannot_change() {
    let cluster = Cluster::connect().await;
    let resource = widgets(&cluster).await;
    let name = format!("widgets.{}", resource.group);
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
    let mut crd = crds.get(&name).await.unwrap();
    crd.spec.scope = "Cluster".into();
    crd.spec.names.kind = "Gizmo".into();
    let status = api_error(crds.replace(&name, &PostParams::default(), &crd).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
    assert!(
        status.message.contains("spec.scope: Invalid value: \"Cluster\": field is immutable"),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("spec.names.kind: Invalid value: \"Gizmo\": field is immutable"),
        "{}",
        status.message
    );
}
