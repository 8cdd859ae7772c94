//! Fields a built-in kind does not declare: a server-side apply is refused (its typed patch
//! cannot be built), other writes follow `fieldValidation` (Strict refuses, Warn drops the
//! field with a warning, Ignore drops it).

use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::api_error;

#[tokio::test]
async fn server_side_apply_refuses_a_field_the_kind_does_not_declare_even_when_null() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("undeclared").await;
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), &ns);
    // What indexing a JSON value mutably leaves behind: `rules: null` on a ServiceAccount.
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}, "rules": null});
    let refused =
        api_error(accounts.patch("sa", &PatchParams::apply("scenario"), &Patch::Apply(&account)).await);
    assert_eq!(refused.code, 500, "{}", refused.message);
    assert!(refused.message.contains(".rules: field not declared in schema"), "{}", refused.message);
    assert!(accounts.get_opt("sa").await.unwrap().is_none(), "nothing was made");

    // At any depth.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(cluster.client(), &ns);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "manager", "image": "registry.invalid/x:v1", "imagePolicy": "x"}]}}}});
    let refused =
        api_error(deployments.patch("d", &PatchParams::apply("scenario"), &Patch::Apply(&deployment)).await);
    assert_eq!(refused.code, 500, "{}", refused.message);
    assert!(refused.message.contains("imagePolicy: field not declared in schema"), "{}", refused.message);

    // Without it, the same apply goes through.
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}});
    accounts.patch("sa", &PatchParams::apply("scenario"), &Patch::Apply(&account)).await.unwrap();
}

/// A create through the raw API: the status code, the `Warning` headers, the body.
async fn create(cluster: &Cluster, ns: &str, validation: &str, body: &Value) -> (u16, Vec<String>, Value) {
    let query = match validation {
        "" => String::new(),
        v => format!("?fieldValidation={v}"),
    };
    let request = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps{query}"))
        .header("content-type", "application/json")
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let response = cluster.client().send(request).await.expect("the server answers");
    let code = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|h| h.to_str().unwrap_or_default().to_string())
        .collect();
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn other_writes_follow_field_validation() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("validation").await;
    let body = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}, "spec": {"x": 1}});

    let (code, _, status) = create(&cluster, &ns, "Strict", &body("strict")).await;
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap_or_default().contains("unknown field \"spec\""), "{status}");

    let (code, warnings, stored) = create(&cluster, &ns, "Warn", &body("warned")).await;
    assert_eq!(code, 201, "{stored}");
    assert!(warnings.iter().any(|w| w.contains("unknown field \\\"spec\\\"")), "{warnings:?}");
    assert!(stored.get("spec").is_none() && stored["data"]["k"] == "v", "{stored}");

    // No fieldValidation is Warn, the server's default.
    let (code, warnings, _) = create(&cluster, &ns, "", &body("unset")).await;
    assert_eq!(code, 201);
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    let (code, warnings, stored) = create(&cluster, &ns, "Ignore", &body("ignored")).await;
    assert_eq!((code, warnings.len()), (201, 0), "{stored}");
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let kept = serde_json::to_value(maps.get("ignored").await.unwrap()).unwrap();
    assert!(kept.get("spec").is_none(), "{kept}");
}
