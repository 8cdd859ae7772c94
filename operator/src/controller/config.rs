//! A provider's config Secret: its keys are the variables of the components, and
//! `GITHUB_TOKEN` / `GITLAB_ACCESS_TOKEN` reach the repository. Values never leave this module
//! but as variables and tokens: messages name keys, never values.

use std::collections::BTreeMap;

use butler_repository::RemoteOptions;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use crate::api::ProviderSpec;

/// The variables and repository access of a provider.
pub struct ProviderConfig {
    pub variables: BTreeMap<String, String>,
    pub remote: RemoteOptions,
}

/// Why the config Secret could not be used: a message for the provider's condition.
pub struct Unreadable(pub String);

/// Reads the Secret of `spec.configSecret`, if any; the provider's namespace is the default.
pub async fn load(
    client: &kube::Client,
    namespace: &str,
    spec: &ProviderSpec,
    base: &RemoteOptions,
) -> Result<ProviderConfig, Unreadable> {
    let mut config = ProviderConfig { variables: BTreeMap::new(), remote: base.clone() };
    let Some(reference) = &spec.config_secret else { return Ok(config) };
    let secret_namespace = reference.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(namespace);
    let api: Api<Secret> = Api::namespaced(client.clone(), secret_namespace);
    let what = format!("the Secret {secret_namespace}/{} of spec.configSecret", reference.name);
    let secret = match api.get_opt(&reference.name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            return Err(Unreadable(format!("{what} does not exist; create it, or remove spec.configSecret")));
        }
        Err(e) => return Err(Unreadable(format!("cannot read {what}: {e}"))),
    };
    config.variables = variables(&secret).map_err(|key| {
        Unreadable(format!("key {key:?} of {what} is not UTF-8 text; variables must be text"))
    })?;
    if let Some(token) = config.variables.get("GITHUB_TOKEN").filter(|t| !t.is_empty()) {
        config.remote.github.token = Some(token.clone());
    }
    if let Some(token) = config.variables.get("GITLAB_ACCESS_TOKEN").filter(|t| !t.is_empty()) {
        config.remote.gitlab_token = Some(token.clone());
    }
    Ok(config)
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
}
