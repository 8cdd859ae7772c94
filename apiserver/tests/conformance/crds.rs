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
