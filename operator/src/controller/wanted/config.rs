//! A provider's config Secret: its keys are the variables of the components, and
//! `GITHUB_TOKEN` / `GITLAB_ACCESS_TOKEN` and the OCI credentials (`OCI_USERNAME`,
//! `OCI_PASSWORD`, `OCI_ACCESS_TOKEN`, a Docker config.json under `.dockerconfigjson`) reach
//! the repository. Values never leave this module
//! but as variables and tokens: messages name keys, never values, and [`Redactor`] takes them
//! out of messages that others (API servers, the renderer) write.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use butler_repository::{ImageOverrides, RemoteOptions, oci};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use crate::api::ProviderSpec;

/// The variables and repository access of a provider.
pub struct ConfigSecretValues {
    pub variables: BTreeMap<String, String>,
    pub remote: RemoteOptions,
    /// The `images` key: image overrides as clusterctl's `images:` config writes them.
    pub images: ImageOverrides,
}

/// The config Secret's key for image overrides.
pub const IMAGES_KEY: &str = "images";

/// Why the config Secret could not be used: a message for the provider's condition.
pub struct Unreadable(pub String);

/// Config Secrets as last read, and the resourceVersion that the Secret watch last saw of each:
/// a Secret that has not changed since it was read is not read again at every reconcile (a
/// provider reconciles whenever its Deployments' status moves).
#[derive(Default)]
pub struct SecretCache {
    /// resourceVersions from the watch (or from the first read, when the watch has not spoken).
    seen: Mutex<HashMap<(String, String), String>>,
    read: Mutex<HashMap<(String, String), Secret>>,
}

impl SecretCache {
    /// The watch saw the Secret at `resource_version`.
    pub fn saw(&self, namespace: &str, name: &str, resource_version: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.seen.lock().expect("not poisoned").insert(key, resource_version.to_string());
    }

    /// After a relist: Secrets that are not among `present` are gone.
    pub fn keep_only(&self, present: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta]) {
        let here: std::collections::HashSet<(String, String)> = present
            .iter()
            .map(|m| (m.namespace.clone().unwrap_or_default(), m.name.clone().unwrap_or_default()))
            .collect();
        self.seen.lock().expect("not poisoned").retain(|k, _| here.contains(k));
        self.read.lock().expect("not poisoned").retain(|k, _| here.contains(k));
    }

    /// The watch saw the Secret go.
    pub fn gone(&self, namespace: &str, name: &str) {
        let key = (namespace.to_string(), name.to_string());
        self.seen.lock().expect("not poisoned").remove(&key);
        self.read.lock().expect("not poisoned").remove(&key);
    }

    fn current(&self, key: &(String, String)) -> Option<Secret> {
        let seen = self.seen.lock().expect("not poisoned").get(key).cloned()?;
        let read = self.read.lock().expect("not poisoned").get(key).cloned()?;
        (read.metadata.resource_version.as_deref() == Some(seen.as_str())).then_some(read)
    }

    fn keep(&self, key: (String, String), secret: &Secret) {
        if let Some(rv) = &secret.metadata.resource_version {
            // The watch's word wins: it may have seen a newer version while this read was on
            // its way, and then the next reconcile reads again.
            self.seen.lock().expect("not poisoned").entry(key.clone()).or_insert_with(|| rv.clone());
        }
        self.read.lock().expect("not poisoned").insert(key, secret.clone());
    }
}

/// The one check of every path that reads a config Secret (a provider's reconcile, an
/// upgrade's planning): it lives beside the provider. Another namespace would let whoever may
/// write a provider object (or a ProviderUpgrade) have the operator read any Secret it can read,
/// and send its tokens to a registry of their choosing.
pub fn beside_the_provider(namespace: &str, spec: &ProviderSpec) -> Result<(), String> {
    match spec
        .config_secret
        .as_ref()
        .and_then(|s| s.namespace.as_deref())
        .filter(|n| !n.is_empty() && *n != namespace)
    {
        Some(elsewhere) => Err(format!(
            "spec.configSecret.namespace {elsewhere:?} is not the provider's namespace {namespace:?}; the config Secret must be in the provider's namespace: create it there and drop the namespace"
        )),
        None => Ok(()),
    }
}

/// Reads the Secret of `spec.configSecret`, if any, in the provider's namespace (see
/// [`beside_the_provider`]).
pub async fn load(
    client: &kube::Client,
    cache: &SecretCache,
    namespace: &str,
    spec: &ProviderSpec,
    base: &RemoteOptions,
) -> Result<ConfigSecretValues, Unreadable> {
    let mut config = ConfigSecretValues {
        variables: BTreeMap::new(),
        remote: base.clone(),
        images: ImageOverrides::default(),
    };
    let Some(reference) = &spec.config_secret else { return Ok(config) };
    beside_the_provider(namespace, spec).map_err(Unreadable)?;
    let secret_namespace = namespace;
    let key = (secret_namespace.to_string(), reference.name.clone());
    let what = format!("the Secret {secret_namespace}/{} of spec.configSecret", reference.name);
    let secret = match cache.current(&key) {
        Some(secret) => secret,
        None => {
            let api: Api<Secret> = Api::namespaced(client.clone(), secret_namespace);
            match api.get_opt(&reference.name).await {
                Ok(Some(secret)) => {
                    cache.keep(key, &secret);
                    secret
                }
                Ok(None) => {
                    return Err(Unreadable(format!(
                        "{what} does not exist; create it, or remove spec.configSecret"
                    )));
                }
                Err(e) => {
                    return Err(Unreadable(format!(
                        "cannot read {what}: {}",
                        butler_runtime::error::describe(&e)
                    )));
                }
            }
        }
    };
    config.variables = variables(&secret).map_err(|key| {
        Unreadable(format!("key {key:?} of {what} is not UTF-8 text; variables must be text"))
    })?;
    // Under clusterctl's names too: cluster-api-operator's config Secrets hold `github-token`.
    let lookup = |key: &str| config.variables.get(key).cloned();
    if let Some(token) = butler_repository::token(&butler_repository::GITHUB_TOKEN, lookup) {
        config.remote.github.token = Some(token);
    }
    if let Some(token) = butler_repository::token(&butler_repository::GITLAB_TOKEN, lookup) {
        config.remote.gitlab_token = Some(token);
    }
    // Which registries are reached over plain HTTP is the operator's to say, never a config
    // Secret's (whoever may write one would move a fetch, and its credentials, off TLS).
    // Nor where refresh tokens may be traded.
    let (plain_http, token_hosts) =
        (config.remote.oci.insecure.clone(), config.remote.oci.token_hosts.clone());
    config.remote.oci.apply_variables(|key| config.variables.get(key).cloned());
    config.remote.oci.insecure = plain_http;
    config.remote.oci.token_hosts = token_hosts;
    if let Some(text) = config.variables.get(IMAGES_KEY) {
        config.images = images(text).map_err(|e| {
            Unreadable(format!(
                "key {IMAGES_KEY:?} of {what} is not an images map as clusterctl's config writes it ({{all: {{repository: mirror.local/capi}}}}): {e}"
            ))
        })?;
    }
    if let Some(json) = config.variables.get(oci::DOCKER_CONFIG_KEY) {
        let docker = oci::DockerConfig::parse(json.as_bytes())
            .map_err(|e| Unreadable(format!("key {:?} of {what} {e}", oci::DOCKER_CONFIG_KEY)))?;
        config.remote.oci.docker_config = Some(docker);
    }
    Ok(config)
}

/// Image overrides written as clusterctl's `images:` (YAML or JSON).
pub fn images(text: &str) -> Result<ImageOverrides, String> {
    let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// `base` with `over`'s entries put in, entry by entry (a provider's own win).
pub fn merged_images(base: &ImageOverrides, over: &ImageOverrides) -> ImageOverrides {
    let mut all = base.0.clone();
    all.extend(over.0.clone());
    ImageOverrides(all)
}

/// The Secret's data as text; the key of the first value that is not UTF-8 otherwise.
pub fn variables(secret: &Secret) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for (key, value) in secret.data.iter().flatten() {
        let text = String::from_utf8(value.0.clone()).map_err(|_| key.clone())?;
        out.insert(key.clone(), text);
    }
    // stringData is write-only on a real API server, but a Secret built by hand may carry it.
    for (key, value) in secret.string_data.iter().flatten() {
        out.entry(key.clone()).or_insert_with(|| value.clone());
    }
    Ok(out)
}

/// Values shorter than this stay in messages: replacing every "1" or "true" would make
/// messages unreadable and protects nothing.
const SHORTEST_REDACTED: usize = 4;

/// Keys of the operator's config file whose values are treated as secrets, like every value
/// of a config Secret.
const SECRET_KEY_WORDS: [&str; 6] = ["TOKEN", "PASSWORD", "SECRET", "KEY", "CREDENTIAL", "B64ENCODED"];

/// Takes secret values out of messages that API servers, the repository or the renderer
/// produce (a rejected object is often quoted back whole), before they reach a condition, an
/// event or a log line. The value is replaced by the name of its key.
#[derive(Debug, Default)]
pub struct Redactor {
    /// (value, key), longest value first, so a value inside another is not replaced first.
    values: Vec<(String, String)>,
}

impl Redactor {
    /// Every value of the config Secret, and the values of the operator's config file whose
    /// keys name a token, password, secret, key or credential.
    pub fn new(secret: &BTreeMap<String, String>, operator: &BTreeMap<String, String>) -> Redactor {
        let credential = |key: &str| {
            let upper = key.to_ascii_uppercase();
            SECRET_KEY_WORDS.iter().any(|w| upper.contains(w))
        };
        let pairs = secret.iter().chain(operator.iter().filter(|(k, _)| credential(k)));
        let mut values = Vec::new();
        for (key, value) in pairs {
            // A multi-line value (a certificate, a kubeconfig) is often quoted a line at a time,
            // and Go's %q (API server messages) escapes quotes, backslashes and newlines.
            let lines = value.lines().map(str::trim).filter(|l| *l != value.as_str()).map(String::from);
            let quoted = value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            for part in std::iter::once(value.clone()).chain(lines).chain(std::iter::once(quoted)) {
                if part.chars().count() >= SHORTEST_REDACTED {
                    values.push((part, key.clone()));
                }
            }
        }
        values.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.cmp(b)));
        values.dedup_by(|a, b| a.0 == b.0);
        Redactor { values }
    }

    pub fn redact(&self, message: &str) -> String {
        let mut out = message.to_string();
        for (value, key) in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("<redacted {key}>"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    #[test]
    fn values_must_be_text_and_the_error_names_the_key_only() {
        let mut secret = Secret {
            data: Some(BTreeMap::from([("AWS_REGION".to_string(), ByteString(b"eu-west-1".to_vec()))])),
            ..Default::default()
        };
        assert_eq!(variables(&secret).unwrap()["AWS_REGION"], "eu-west-1");
        secret.data.as_mut().unwrap().insert("KEY".into(), ByteString(vec![0xff, 0xfe]));
        assert_eq!(variables(&secret).unwrap_err(), "KEY");
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn secret_values_are_replaced_by_their_key_names() {
        let secret = map(&[
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
            ("AWS_ACCESS_KEY_ID", "AKIA"),
            ("REPLICAS", "1"),
            ("CA", "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----"),
        ]);
        let operator = map(&[("GITHUB_TOKEN", "ghp_abcdef"), ("CLUSTER_TOPOLOGY", "true-ish")]);
        let r = Redactor::new(&secret, &operator);
        let message = "Secret \"x\" is invalid: data[key]: Invalid value: \"wJalrXUtnFEMI\", AKIA, \
                       line MIIBszCCAVmgAwIBAgIU, token ghp_abcdef, topology true-ish, replicas 1";
        assert_eq!(
            r.redact(message),
            "Secret \"x\" is invalid: data[key]: Invalid value: \"<redacted AWS_SECRET_ACCESS_KEY>\", \
             <redacted AWS_ACCESS_KEY_ID>, line <redacted CA>, token <redacted GITHUB_TOKEN>, \
             topology true-ish, replicas 1"
        );
    }

    fn secret_at(rv: &str, value: &str) -> Secret {
        let mut secret = Secret {
            data: Some(BTreeMap::from([("K".to_string(), ByteString(value.as_bytes().to_vec()))])),
            ..Default::default()
        };
        secret.metadata.resource_version = Some(rv.into());
        secret
    }

    #[test]
    fn a_secret_read_once_is_used_until_the_watch_sees_it_change() {
        let cache = SecretCache::default();
        let key = ("ns".to_string(), "vars".to_string());
        assert!(cache.current(&key).is_none(), "nothing read yet");
        cache.keep(key.clone(), &secret_at("5", "a"));
        assert_eq!(variables(&cache.current(&key).unwrap()).unwrap()["K"], "a");
        cache.saw("ns", "vars", "5");
        assert!(cache.current(&key).is_some(), "the watch saw the version that was read");
        cache.saw("ns", "vars", "6");
        assert!(cache.current(&key).is_none(), "changed since: read again");
        cache.keep(key.clone(), &secret_at("6", "b"));
        assert_eq!(variables(&cache.current(&key).unwrap()).unwrap()["K"], "b");
        cache.gone("ns", "vars");
        assert!(cache.current(&key).is_none());
    }

    #[test]
    fn a_read_that_the_watch_overtook_is_not_trusted() {
        let cache = SecretCache::default();
        let key = ("ns".to_string(), "vars".to_string());
        // The read answered version 5, but the watch had already reported 6.
        cache.saw("ns", "vars", "6");
        cache.keep(key.clone(), &secret_at("5", "old"));
        assert!(cache.current(&key).is_none());
    }

    #[test]
    fn values_are_found_as_go_quotes_them_too() {
        let r = Redactor::new(&map(&[("PASSWORD", "pa\"ss\\word")]), &BTreeMap::new());
        let message = r#"spec.password: Invalid value: "pa\"ss\\word": too weak"#;
        assert_eq!(r.redact(message), r#"spec.password: Invalid value: "<redacted PASSWORD>": too weak"#);
    }

    #[test]
    fn a_value_inside_a_longer_value_does_not_break_the_longer_one() {
        let r = Redactor::new(&map(&[("SHORT", "abcd"), ("LONG", "xxabcdxx")]), &BTreeMap::new());
        assert_eq!(r.redact("xxabcdxx and abcd"), "<redacted LONG> and <redacted SHORT>");
    }
}
