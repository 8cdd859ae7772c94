//! Requests a process sends the API server, counted by verb and resource as client-go's
//! `rest_client_requests_total` counts them, so that a user can check on a cluster what the
//! benchmarks count in memory: a tower layer on the process's client, and the pure reading of
//! a request into its labels.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// The labels of one request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// get, list, watch, create, update, patch, delete, deletecollection (or the HTTP method of
    /// a path that names no resource).
    pub verb: String,
    /// `configmaps`, `deployments.apps`, `deployments.apps/status`; `discovery` for the API's
    /// own paths, `openapi` for its documents.
    pub resource: String,
}

/// The counter family of requests.
pub type Requests = Family<RequestLabels, Counter>;

/// The verb of an HTTP request on a resource path (`named`: the path names one object), as
/// kube-apiserver's authorizer reads it; `None` for a method it has no verb for.
pub fn verb_of(method: &str, named: bool, watch: bool) -> Option<&'static str> {
    Some(match (method, named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    })
}

/// What a request (method, path and query) is, as the API server's authorizer reads it.
pub fn labels_of(method: &str, path: &str, query: Option<&str>) -> RequestLabels {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => Some(("", rest)),
        ["apis", group, _version, rest @ ..] => Some((*group, rest)),
        ["openapi", ..] => None,
        _ => None,
    };
    let other = |resource: &str| RequestLabels { verb: method.to_lowercase(), resource: resource.into() };
    let Some((group, rest)) = rest else {
        return other(if path.starts_with("/openapi") { "openapi" } else { "discovery" });
    };
    let rest = match rest {
        ["namespaces", _ns, resource, tail @ ..] if *resource != "status" && *resource != "finalize" => {
            let mut all = vec![*resource];
            all.extend_from_slice(tail);
            all
        }
        other => other.to_vec(),
    };
    let (resource, named, subresource) = match rest.as_slice() {
        [] => return other("discovery"),
        [resource] => (*resource, false, None),
        [resource, _name] => (*resource, true, None),
        [resource, _name, sub, ..] => (*resource, true, Some(*sub)),
    };
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let Some(verb) = verb_of(method, named, watch) else {
        return RequestLabels { verb: method.to_lowercase(), resource: resource.into() };
    };
    let mut resource = match group {
        "" => resource.to_string(),
        group => format!("{resource}.{group}"),
    };
    if let Some(sub) = subresource {
        resource = format!("{resource}/{sub}");
    }
    RequestLabels { verb: verb.into(), resource }
}

/// A client like `config`'s whose every request is counted in `requests`.
pub fn counted_client(config: kube::Config, requests: Requests) -> Result<kube::Client, kube::Error> {
    let count = tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
        let labels = labels_of(request.method().as_str(), request.uri().path(), request.uri().query());
        requests.get_or_create(&labels).inc();
        request
    });
    Ok(kube::client::ClientBuilder::try_from(config)?.with_layer(&count).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(method: &str, path: &str, query: Option<&str>) -> (String, String) {
        let l = labels_of(method, path, query);
        (l.verb, l.resource)
    }

    #[test]
    fn requests_read_as_the_authorizer_reads_them() {
        let pair = |v: &str, r: &str| (v.to_string(), r.to_string());
        assert_eq!(of("GET", "/api/v1/namespaces/a/configmaps", None), pair("list", "configmaps"));
        assert_eq!(
            of("GET", "/api/v1/namespaces/a/configmaps", Some("watch=true&rv=1")),
            pair("watch", "configmaps")
        );
        assert_eq!(
            of("GET", "/apis/apps/v1/namespaces/a/deployments/d", None),
            pair("get", "deployments.apps")
        );
        assert_eq!(
            of("PATCH", "/apis/apps/v1/namespaces/a/deployments/d/status", None),
            pair("patch", "deployments.apps/status")
        );
        assert_eq!(of("DELETE", "/api/v1/namespaces/a", None), pair("delete", "namespaces"));
        assert_eq!(of("PUT", "/api/v1/namespaces/a/finalize", None), pair("update", "namespaces/finalize"));
        assert_eq!(
            of("POST", "/apis/operator.butlerlabs.dev/v1alpha1/namespaces/a/coreproviders", None),
            pair("create", "coreproviders.operator.butlerlabs.dev")
        );
        assert_eq!(of("GET", "/apis/apps/v1", None), pair("get", "discovery"));
        assert_eq!(of("GET", "/openapi/v3", None), pair("get", "openapi"));
    }
}
