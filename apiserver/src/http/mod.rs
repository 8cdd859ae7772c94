//! The HTTP face of the server: paths to kinds, verbs to store operations, errors to `Status`.

mod admitted;

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio_stream::wrappers::ReceiverStream;

use crate::Shared;
use crate::discovery;
use crate::errors::ApiError;
use crate::fields::FieldValidation;
use crate::patch::PatchType;
use crate::rbac;
use crate::registry::ResourceType;
use crate::reviews;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, ListOptions, Store, WriteOptions};
use crate::table;
use crate::watch::{self, WatchRequest};

/// A resource path taken apart.
#[derive(Debug, Default, PartialEq)]
struct Target {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

/// What a path asks for.
#[derive(Debug, PartialEq)]
enum Route {
    Version,
    CoreVersions,
    GroupList,
    Group(String),
    Resources(String, String),
    Resource(Target),
    OpenApiV2,
    OpenApiV3Index,
    /// `/openapi/v3/{path}`: one group-version's document.
    OpenApiV3(String),
}

fn route(path: &str) -> Option<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Some(Route::Version),
        ["openapi", "v2"] => return Some(Route::OpenApiV2),
        ["openapi", "v3"] => return Some(Route::OpenApiV3Index),
        ["openapi", "v3", rest @ ..] => return Some(Route::OpenApiV3(rest.join("/"))),
        ["api"] => return Some(Route::CoreVersions),
        ["apis"] => return Some(Route::GroupList),
        ["apis", group] => return Some(Route::Group(group.to_string())),
        ["api", version] => return Some(Route::Resources(String::new(), version.to_string())),
        ["apis", group, version] => return Some(Route::Resources(group.to_string(), version.to_string())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let mut target = Target { group: group.to_string(), version: version.to_string(), ..Default::default() };
    let rest = match rest {
        ["namespaces", ns, plural, tail @ ..] if *plural != "status" && *plural != "finalize" => {
            target.namespace = Some(ns.to_string());
            target.plural = plural.to_string();
            tail
        }
        [plural, tail @ ..] => {
            target.plural = plural.to_string();
            tail
        }
        [] => return None,
    };
    match rest {
        [] => {}
        [name] => target.name = Some(name.to_string()),
        [name, sub] => {
            target.name = Some(name.to_string());
            target.subresource = Some(sub.to_string());
        }
        _ => return None,
    }
    Some(Route::Resource(target))
}

/// Who sends a request: the user and the groups the API server gives them.
pub(crate) struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

impl Identity {
    /// A request without a token: the cluster's administrator, as kubeadm's admin.conf is.
    fn administrator() -> Identity {
        Identity {
            user: "kubernetes-admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
}

/// The namespace controller of kube-controller-manager (with its own credentials, as kubeadm
/// runs it).
const NAMESPACE_CONTROLLER: &str = "system:serviceaccount:kube-system:namespace-controller";

/// What the namespace controller does for a terminating namespace: each object in it deleted
/// through admission as the controller's user; one a webhook or policy refuses (or a webhook
/// that cannot be reached, failing closed) stays, and so does the namespace. Returns whether
/// every deletion went through.
pub(crate) async fn empty_terminating_namespaces(shared: &Arc<Shared>) -> bool {
    let due = lock(&shared.store).namespace_content_due();
    let identity = Identity {
        user: NAMESPACE_CONTROLLER.into(),
        groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]
            .map(String::from)
            .to_vec(),
    };
    let mut all_through = true;
    for (rt, namespace, name) in due {
        let target = Target {
            group: rt.group.clone(),
            version: rt.version.clone(),
            plural: rt.plural.clone(),
            namespace: Some(namespace.clone()),
            name: Some(name.clone()),
            subresource: None,
        };
        let deleted = admitted::write(
            shared,
            target,
            &Method::DELETE,
            &HashMap::new(),
            &HeaderMap::new(),
            b"",
            &identity,
        )
        .await;
        if let Err(e) = deleted {
            all_through = false;
            tracing::debug!(%namespace, %name, kind = %rt.kind, error = ?e, "the namespace controller could not delete");
        }
    }
    all_through
}

/// RBAC for the ServiceAccount tokens the server issued and for the users an administrator
/// impersonates; other requests without a token are an administrator's, and a token the
/// server did not issue is refused (401). Says who sent the request.
fn authorize(
    shared: &Shared,
    headers: &HeaderMap,
    route: Option<&Route>,
    method: &Method,
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<Identity, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let impersonated = headers.get("impersonate-user").and_then(|v| v.to_str().ok());
    let account = match (token, impersonated) {
        (Some(token), _) => {
            let account = shared.tokens.lock().unwrap_or_else(|e| e.into_inner()).get(token).cloned();
            account.ok_or_else(ApiError::unauthorized)?
        }
        (None, Some(user)) => {
            let groups = headers
                .get_all("impersonate-group")
                .iter()
                .filter_map(|v| v.to_str().ok().map(String::from))
                .collect();
            rbac::Account::user(user, groups)
        }
        (None, None) => return Ok(Identity::administrator()),
    };
    let identity = Identity { user: account.username().to_string(), groups: account.groups().to_vec() };
    if identity.groups.iter().any(|g| g == "system:masters") {
        return Ok(identity); // As kube-apiserver: the group RBAC never refuses.
    }
    let Some(Route::Resource(target)) = route else {
        return Ok(identity); // Discovery: open to every authenticated account.
    };
    if reviews::is_self_review(&target.plural) {
        return Ok(identity); // What `system:basic-user` gives every authenticated account.
    }
    let watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let attributes = rbac::Attributes {
        verb: rbac::Attributes::verb_of(method.as_str(), target.name.is_some(), watch).into(),
        group: target.group.clone(),
        resource: target.plural.clone(),
        subresource: target.subresource.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
    };
    rbac::authorize(&lock(&shared.store), &account, &attributes, body).map(|()| identity)
}

fn json_response(code: u16, value: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

/// A TokenReview or SubjectAccessReview: created (POST to the collection, `v1`), answered,
/// never stored.
fn review(
    shared: &Shared,
    target: &Target,
    method: &Method,
    body: &[u8],
    identity: &Identity,
) -> Result<Reply, ApiError> {
    if target.version != "v1" || target.namespace.is_some() || target.name.is_some() {
        return Err(ApiError::no_such_resource());
    }
    if method != Method::POST {
        return Err(ApiError::method_not_allowed("reviews are only created"));
    }
    let sent: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the review is not JSON: {e}")))?;
    let answer = match target.plural.as_str() {
        plural if reviews::is_self_review(plural) => {
            reviews::self_review(&lock(&shared.store), plural, &sent, &identity.user, &identity.groups)?
        }
        "tokenreviews" => reviews::token_review(&sent, |token| {
            shared.tokens.lock().unwrap_or_else(|e| e.into_inner()).get(token).cloned()
        })?,
        _ => reviews::subject_access_review(&lock(&shared.store), &sent)?,
    };
    Ok(Reply::Json(201, answer))
}

/// `POST .../serviceaccounts/{name}/token`.
fn is_token_request(target: &Target) -> bool {
    target.group.is_empty()
        && target.plural == "serviceaccounts"
        && target.subresource.as_deref() == Some("token")
}

/// A TokenRequest: a token of the ServiceAccount, which this server then takes as that
/// account's (RBAC decides its requests; TokenReview names it), as `kubectl create token` asks.
fn token_request(shared: &Shared, target: &Target, method: &Method, body: &[u8]) -> Result<Reply, ApiError> {
    if *method != Method::POST {
        return Err(ApiError::method_not_allowed("a token is only created"));
    }
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let sent: Value = match body.is_empty() {
        true => Value::Null,
        false => serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the TokenRequest is not JSON: {e}")))?,
    };
    let account = {
        let store = lock(&shared.store);
        let rt = store
            .registry
            .find("", "v1", "serviceaccounts")
            .cloned()
            .ok_or_else(ApiError::no_such_resource)?;
        store.get(&rt, &namespace, &name).map_err(|_| ApiError::not_found("", "serviceaccounts", &name))?
    };
    let request = reviews::token_request(&sent, &account, Timestamp::now())?;
    let token = format!(
        "{namespace}.{name}.{}.{}",
        shared.requests.load(Ordering::Relaxed),
        account["metadata"]["uid"].as_str().unwrap_or_default()
    );
    shared
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(token.clone(), rbac::Account::service_account(&namespace, &name));
    let mut answer = request;
    answer["status"]["token"] = Value::String(token);
    Ok(Reply::Json(201, answer))
}

fn error_response(error: ApiError) -> Response {
    json_response(error.code, &error.to_status())
}

/// The largest request body kube-apiserver reads (3 MiB).
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// Every request lands here.
pub async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    mut headers: HeaderMap,
    mut body: Bytes,
) -> Response {
    shared.requests.fetch_add(1, Ordering::Relaxed);
    if body.len() > MAX_REQUEST_BYTES {
        return error_response(ApiError::request_too_large(MAX_REQUEST_BYTES));
    }
    // kubectl's typed commands write in protobuf: read it into JSON once, here.
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if crate::protobuf::is_protobuf(content_type) {
        match crate::protobuf::to_json(&body) {
            Ok(object) => {
                body = Bytes::from(object.to_string());
                headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
            }
            Err(why) => return error_response(ApiError::unreadable_protobuf(why)),
        }
    }
    let agent = user_agent_manager(&headers);
    let line = match uri.query() {
        Some(q) => format!("{}?{q}", uri.path()),
        None => uri.path().to_string(),
    };
    shared.log.lock().unwrap_or_else(|e| e.into_inner()).push((agent, method.to_string(), line));
    let query: HashMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    tracing::debug!(%method, path = uri.path(), query = uri.query().unwrap_or_default(), "request");
    let watching = method == Method::GET && query.get("watch").is_some_and(|w| w == "true" || w == "1");
    if let Some(refused) = restarting(&shared, watching, uri.path()) {
        return error_response(refused);
    }
    if watching {
        let _ = shared.watches_open.subscribe().wait_for(|open| *open).await;
    }
    let routed = route(uri.path());
    let identity = match authorize(&shared, &headers, routed.as_ref(), &method, &query, &body) {
        Ok(identity) => identity,
        Err(refused) => return error_response(refused),
    };
    let result = match routed {
        None => Err(ApiError::no_such_resource()),
        Some(Route::Resource(target)) if reviews::is_review(&target.group, &target.plural) => {
            review(&shared, &target, &method, &body, &identity)
        }
        Some(Route::Resource(target)) if is_token_request(&target) => {
            token_request(&shared, &target, &method, &body)
        }
        Some(Route::Resource(target)) if method != Method::GET => {
            admitted::write(&shared, target, &method, &query, &headers, &body, &identity).await
        }
        Some(route) => dispatch(&shared, route, &method, &query, &headers, &body),
    };
    let metadata_only = headers
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=PartialObjectMetadata"));
    match result {
        Ok(Reply::Json(code, value)) if metadata_only && value["kind"] != "Table" => {
            json_response(code, &as_metadata(value))
        }
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Warned(code, value, warnings)) => {
            let mut response = json_response(code, &value);
            for warning in warnings {
                // The form the API server uses: code 299, no agent, the text quoted.
                let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
                if let Ok(header) = header::HeaderValue::from_str(&text) {
                    response.headers_mut().append("warning", header);
                }
            }
            response
        }
        Ok(Reply::Stream(rx)) => {
            let stream = ReceiverStream::new(rx).map(move |line| {
                let line = match metadata_only {
                    true => metadata_event(&line).unwrap_or(line),
                    false => line,
                };
                Ok::<_, Infallible>(Bytes::from(line))
            });
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], Body::from_stream(stream))
                .into_response()
        }
        Err(error) => error_response(error),
    }
}

/// What a restarting server answers: 503 while it starts, then 403 to watches while its
/// authorizer's caches fill (RBAC cannot find the roles yet).
fn restarting(shared: &Shared, watching: bool, path: &str) -> Option<ApiError> {
    use crate::outage::Phase;
    match shared.faults.phase() {
        Phase::Unavailable => Some(ApiError::unavailable()),
        Phase::WatchesForbidden if watching => {
            let resource = path.rsplit('/').next().unwrap_or_default();
            Some(ApiError::forbidden(format!(
                "{resource} is forbidden: User \"system:anonymous\" cannot watch resource {resource:?}: RBAC: the authorizer is starting"
            )))
        }
        _ => None,
    }
}

/// An object or a list as `PartialObjectMetadata` / `PartialObjectMetadataList`, which a client
/// asks for with `Accept: application/json;as=PartialObjectMetadata...`.
fn as_metadata(value: Value) -> Value {
    let partial = |object: &Value| serde_json::json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": object["metadata"]});
    match value.get("items").and_then(Value::as_array) {
        Some(items) if value["kind"].as_str().is_some_and(|k| k.ends_with("List")) => serde_json::json!({
            "apiVersion": "meta.k8s.io/v1",
            "kind": "PartialObjectMetadataList",
            "metadata": value["metadata"],
            "items": items.iter().map(partial).collect::<Vec<_>>(),
        }),
        _ if value["kind"] == "Status" => value,
        _ => partial(&value),
    }
}

/// One watch event line with its object as metadata only; errors stay as they are.
fn metadata_event(line: &str) -> Option<String> {
    let mut event: Value = serde_json::from_str(line).ok()?;
    if event["type"] == "ERROR" {
        return None;
    }
    let object = event["object"].take();
    event["object"] = as_metadata(object);
    Some(format!("{event}\n"))
}

enum Reply {
    Json(u16, Value),
    /// An answer with the `Warning` headers the write earned.
    Warned(u16, Value, Vec<String>),
    Stream(tokio::sync::mpsc::Receiver<String>),
}

fn warned(code: u16, value: Value, options: &WriteOptions) -> Reply {
    let warnings = std::mem::take(&mut *options.warnings.lock().unwrap_or_else(|e| e.into_inner()));
    match warnings.is_empty() {
        true => Reply::Json(code, value),
        false => Reply::Warned(code, value, warnings),
    }
}

fn dispatch(
    shared: &Shared,
    route: Route,
    method: &Method,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let store = &shared.store;
    if method != Method::GET && !matches!(route, Route::Resource(_)) {
        return Err(ApiError::method_not_allowed("discovery documents are read-only"));
    }
    let target = match route {
        Route::Version => return Ok(Reply::Json(200, discovery::version())),
        Route::OpenApiV2 => return Ok(Reply::Json(200, crate::openapi::v2(&lock(store).registry))),
        Route::OpenApiV3Index => {
            return Ok(Reply::Json(200, crate::openapi::v3_index(&lock(store).registry)));
        }
        Route::OpenApiV3(path) => {
            return crate::openapi::v3_at(&lock(store).registry, &path)
                .map(|d| Reply::Json(200, d))
                .ok_or_else(ApiError::no_such_resource);
        }
        Route::CoreVersions => return Ok(Reply::Json(200, discovery::core_versions(&shared.address))),
        Route::GroupList => return Ok(Reply::Json(200, discovery::group_list(&lock(store).registry))),
        Route::Group(group) => {
            return discovery::group(&lock(store).registry, &group)
                .map(|g| Reply::Json(200, g))
                .ok_or_else(ApiError::no_such_resource);
        }
        Route::Resources(group, version) => {
            return discovery::resource_list(&lock(store).registry, &group, &version)
                .map(|r| Reply::Json(200, r))
                .ok_or_else(ApiError::no_such_resource);
        }
        Route::Resource(target) => target,
    };
    let rt = lock(store)
        .registry
        .find(&target.group, &target.version, &target.plural)
        .cloned()
        .ok_or_else(ApiError::no_such_resource)?;
    if target.namespace.is_some() && !rt.namespaced {
        return Err(ApiError::no_such_resource());
    }
    if let (Some("scale"), Some(paths)) = (target.subresource.as_deref(), rt.scale.clone()) {
        return scale_request(shared, &rt, &paths, &target, method, query, headers, body);
    }
    let status_scope = match target.subresource.as_deref() {
        None => false,
        Some("status") if rt.status => true,
        Some(_) => return Err(ApiError::no_such_resource()),
    };
    let namespace = target.namespace.clone().unwrap_or_default();
    let list_options = || -> Result<ListOptions, ApiError> {
        Ok(ListOptions {
            labels: LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or_default())?,
            fields: FieldSelector::parse(
                query.get("fieldSelector").map(String::as_str).unwrap_or_default(),
                &rt.kind,
            )?,
            limit: query.get("limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0),
            continue_token: query.get("continue").filter(|c| !c.is_empty()).cloned(),
        })
    };
    let write_options = |default_manager: bool| -> Result<WriteOptions, ApiError> {
        Ok(WriteOptions {
            manager: query
                .get("fieldManager")
                .cloned()
                .unwrap_or_else(|| if default_manager { user_agent_manager(headers) } else { String::new() }),
            dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
            force: query.get("force").is_some_and(|f| f == "true"),
            validation: FieldValidation::parse(query.get("fieldValidation").map(String::as_str))
                .map_err(ApiError::bad_request)?,
            warnings: Default::default(),
        })
    };
    let scope = (rt.namespaced && target.namespace.is_some()).then_some(namespace.as_str());
    let check_scope = |name_present: bool| -> Result<(), ApiError> {
        if rt.namespaced && name_present && target.namespace.is_none() {
            return Err(ApiError::no_such_resource());
        }
        Ok(())
    };

    match (method.clone(), target.name.as_deref()) {
        (Method::GET, None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            let request = WatchRequest {
                rt: rt.clone(),
                namespace: scope.map(String::from),
                list: list_options()?,
                resource_version: query.get("resourceVersion").cloned(),
                send_initial_events: query.get("sendInitialEvents").is_some_and(|s| s == "true"),
                bookmarks: query.get("allowWatchBookmarks").is_some_and(|b| b == "true"),
                timeout: Duration::from_secs(
                    query.get("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(1800),
                ),
                open: shared.watches_open.subscribe(),
                delay: {
                    let agent = user_agent_manager(headers);
                    let delays = shared.watch_delays.lock().unwrap_or_else(|e| e.into_inner());
                    let of_group = delays.get(&format!("{agent} {}", rt.group));
                    of_group.or_else(|| delays.get(&agent)).copied().unwrap_or_default()
                },
            };
            Ok(Reply::Stream(watch::start(store, request)?))
        }
        (Method::GET, None) => {
            let list = lock(store).list_page(&rt, scope, &list_options()?)?;
            Ok(Reply::Json(200, printed(&rt, list, headers, query)))
        }
        (Method::GET, Some(name)) => {
            check_scope(true)?;
            let object = lock(store).get(&rt, &namespace, name)?;
            Ok(Reply::Json(200, printed(&rt, object, headers, query)))
        }
        (Method::POST, None) => {
            if rt.namespaced && target.namespace.is_none() {
                return Err(ApiError::method_not_allowed(format!(
                    "POST to {} needs a namespace in the path",
                    rt.plural
                )));
            }
            let object = parse_body(body)?;
            let options = write_options(true)?;
            let created = lock(store).create(&rt, &namespace, object, &options)?;
            Ok(warned(201, created, &options))
        }
        (Method::PUT, Some(name)) => {
            check_scope(true)?;
            let object = parse_body(body)?;
            let options = write_options(true)?;
            let replaced = lock(store).replace(&rt, &namespace, name, object, status_scope, &options)?;
            Ok(warned(200, replaced, &options))
        }
        (Method::PATCH, Some(name)) => {
            check_scope(true)?;
            let content_type =
                headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let kind = PatchType::from_content_type(content_type)?;
            let options = write_options(kind != PatchType::Apply)?;
            let mut guard = lock(store);
            let existed = guard.lookup(&rt, &namespace, name).is_some();
            let result = guard.patch(&rt, &namespace, name, kind, body, status_scope, &options)?;
            Ok(warned(if existed { 200 } else { 201 }, result, &options))
        }
        (Method::DELETE, Some(name)) => {
            check_scope(true)?;
            let options = DeleteOptions::from_body(body)?;
            Ok(Reply::Json(200, lock(store).delete(&rt, &namespace, name, &options)?))
        }
        (Method::DELETE, None) => {
            let options = DeleteOptions::from_body(body)?;
            Ok(Reply::Json(200, lock(store).delete_collection(&rt, scope, &list_options()?, &options)?))
        }
        (method, _) => Err(ApiError::method_not_allowed(format!("{method} is not supported on this path"))),
    }
}

/// The scale subresource: the object read as a Scale, a Scale written as its replicas.
#[allow(clippy::too_many_arguments)]
fn scale_request(
    shared: &Shared,
    rt: &ResourceType,
    paths: &crate::registry::ScalePaths,
    target: &Target,
    method: &Method,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let (Some(namespace), Some(name)) =
        (target.namespace.clone().or_else(|| (!rt.namespaced).then(String::new)), target.name.as_deref())
    else {
        return Err(ApiError::no_such_resource());
    };
    let current = lock(&shared.store).get(rt, &namespace, name)?;
    let wanted = match *method {
        Method::GET => return Ok(Reply::Json(200, crate::scale::of(paths, &current))),
        Method::PUT => parse_body(body)?,
        Method::PATCH => {
            let content_type =
                headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
            let kind = PatchType::from_content_type(content_type)?;
            let mut scale = crate::scale::of(paths, &current);
            if let Some(meta) = scale.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            crate::patch::apply_patch(rt, kind, &scale, body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "{method} is not supported on the scale subresource"
            )));
        }
    };
    let patch = crate::scale::patch_for(paths, name, &wanted)?;
    let options = WriteOptions {
        manager: query.get("fieldManager").cloned().unwrap_or_else(|| user_agent_manager(headers)),
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
        ..Default::default()
    };
    let bytes = patch.to_string().into_bytes();
    let written =
        lock(&shared.store).patch(rt, &namespace, name, PatchType::Merge, &bytes, false, &options)?;
    Ok(Reply::Json(200, crate::scale::of(paths, &written)))
}

/// The object or list as a Table when the client asks for one (kubectl does).
fn printed(rt: &ResourceType, value: Value, headers: &HeaderMap, query: &HashMap<String, String>) -> Value {
    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()).unwrap_or_default();
    match table::wanted(accept) {
        true => table::convert(rt, &value, query.get("includeObject").map(String::as_str), Timestamp::now()),
        false => value,
    }
}

fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store.lock().expect("the store lock is never poisoned")
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the body is not UTF-8"))?;
    // JSON is YAML, and kubectl may send either.
    serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON or YAML: {e}")))
}

/// The default field manager: the user agent up to its first `/`, as the API server does.
fn user_agent_manager(headers: &HeaderMap) -> String {
    let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("unknown");
    agent.split('/').next().unwrap_or(agent).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(
        group: &str,
        plural: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Resource(Target {
            group: group.into(),
            version: if group.is_empty() { "v1".into() } else { "v1alpha1".into() },
            plural: plural.into(),
            namespace: namespace.map(Into::into),
            name: name.map(Into::into),
            subresource: sub.map(Into::into),
        })
    }

    #[test]
    fn paths_are_taken_apart_like_the_api_server_does() {
        assert_eq!(route("/version"), Some(Route::Version));
        assert_eq!(route("/apis/g.io"), Some(Route::Group("g.io".into())));
        assert_eq!(route("/api/v1"), Some(Route::Resources("".into(), "v1".into())));
        assert_eq!(route("/api/v1/namespaces"), Some(target("", "namespaces", None, None, None)));
        assert_eq!(route("/api/v1/namespaces/a"), Some(target("", "namespaces", None, Some("a"), None)));
        assert_eq!(
            route("/api/v1/namespaces/a/status"),
            Some(target("", "namespaces", None, Some("a"), Some("status")))
        );
        assert_eq!(
            route("/api/v1/namespaces/a/configmaps"),
            Some(target("", "configmaps", Some("a"), None, None))
        );
        assert_eq!(
            route("/api/v1/namespaces/a/configmaps/b"),
            Some(target("", "configmaps", Some("a"), Some("b"), None))
        );
        assert_eq!(
            route("/apis/g.io/v1alpha1/teams/t/status"),
            Some(target("g.io", "teams", None, Some("t"), Some("status")))
        );
        assert_eq!(
            route("/apis/g.io/v1alpha1/namespaces/n/things/t/status"),
            Some(target("g.io", "things", Some("n"), Some("t"), Some("status")))
        );
        assert_eq!(route("/nothing"), None);
    }
}
