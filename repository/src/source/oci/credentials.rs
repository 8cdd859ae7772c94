//! How an OCI registry is reached: credentials (a user and password, an access token or a
//! refresh token, as cluster-api-operator's `OCI_USERNAME`, `OCI_PASSWORD`, `OCI_ACCESS_TOKEN`,
//! `OCI_REFRESH_TOKEN`; or a Docker `config.json`, as pull Secrets hold it), the registries
//! served over plain HTTP, and mirrors (clusterctl's `images:` overrides, which already say
//! where images are mirrored).

use std::collections::BTreeMap;

use base64::Engine;
use oci_client::secrets::RegistryAuth;

use crate::images::ImageOverrides;

pub const USERNAME_VARIABLE: &str = "OCI_USERNAME";
pub const PASSWORD_VARIABLE: &str = "OCI_PASSWORD";
pub const TOKEN_VARIABLE: &str = "OCI_ACCESS_TOKEN";
/// A refresh token, traded for access tokens at the registry's token service.
pub const REFRESH_TOKEN_VARIABLE: &str = "OCI_REFRESH_TOKEN";
/// Comma-separated registries (`host[:port]`) reached over plain HTTP.
pub const INSECURE_VARIABLE: &str = "OCI_INSECURE_REGISTRIES";
/// Token services on other hosts than their registry's that a refresh token may be sent to.
pub const TOKEN_HOSTS_VARIABLE: &str = "OCI_TOKEN_HOSTS";
/// Extra CA certificates (PEM) that registries' certificates may chain to; a provider's config
/// Secret may also hold them under cluster-api-operator's key `ca.crt`.
pub const CA_VARIABLE: &str = "OCI_CA_CERT";
const CA_SECRET_KEY: &str = "ca.crt";
/// The key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_KEY: &str = ".dockerconfigjson";

/// Credentials given for every registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum OciCredentials {
    #[default]
    Anonymous,
    Basic {
        username: String,
        password: String,
    },
    Token(String),
    Refresh(String),
}

impl std::fmt::Debug for OciCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OciCredentials::Anonymous => f.write_str("Anonymous"),
            OciCredentials::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            OciCredentials::Token(_) => f.write_str("Token(<redacted>)"),
            OciCredentials::Refresh(_) => f.write_str("Refresh(<redacted>)"),
        }
    }
}

/// How to sign in at one registry.
#[derive(Clone, PartialEq, Eq)]
pub(super) enum Login {
    Auth(RegistryAuth),
    /// A refresh token, traded for an access token first.
    Refresh(String),
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Login::Auth(RegistryAuth::Anonymous) => f.write_str("Anonymous"),
            Login::Auth(RegistryAuth::Basic(user, _)) => write!(f, "Basic({user}, <redacted>)"),
            Login::Auth(RegistryAuth::Bearer(_)) => f.write_str("Bearer(<redacted>)"),
            Login::Refresh(_) => f.write_str("Refresh(<redacted>)"),
        }
    }
}

/// Credentials per registry from a Docker `config.json`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    /// Registry host (`ghcr.io`, `registry.local:5000`) to its login.
    auths: BTreeMap<String, Login>,
}

impl std::fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.auths.keys()).finish()
    }
}

/// The registry host of a `config.json` key: `https://ghcr.io/v1/` is `ghcr.io`, Docker Hub's
/// legacy key is `docker.io`.
fn registry_of_key(key: &str) -> String {
    let host = key.split_once("://").map_or(key, |(_, rest)| rest);
    let host = host.split('/').next().unwrap_or_default().to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        _ => host,
    }
}

impl DockerConfig {
    /// Reads a `config.json`; an entry gives an `identitytoken` (a refresh token, what
    /// `docker login` keeps for registries that hand them out; it wins over `auth`, which then
    /// holds a placeholder user), `auth` (base64 of `user:password`), or `username` and
    /// `password`.
    pub fn parse(text: &[u8]) -> Result<DockerConfig, String> {
        #[derive(serde::Deserialize)]
        struct File {
            #[serde(default)]
            auths: BTreeMap<String, Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            auth: Option<String>,
            username: Option<String>,
            password: Option<String>,
            identitytoken: Option<String>,
        }
        let file: File = serde_json::from_slice(text)
            .map_err(|e| format!("is not a Docker config.json: {}", crate::yaml::describe_json_error(&e)))?;
        let mut auths = BTreeMap::new();
        for (key, entry) in file.auths {
            if let Some(token) = entry.identitytoken.filter(|t| !t.is_empty()) {
                auths.insert(registry_of_key(&key), Login::Refresh(token));
                continue;
            }
            let pair = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .ok()
                        .and_then(|b| String::from_utf8(b).ok())
                        .ok_or_else(|| format!("auths.{key:?}.auth is not base64 of user:password"))?;
                    let (user, password) = decoded
                        .split_once(':')
                        .ok_or_else(|| format!("auths.{key:?}.auth is not base64 of user:password"))?;
                    (user.to_string(), password.to_string())
                }
                (_, Some(user), Some(password)) => (user, password),
                _ => {
                    return Err(format!(
                        "auths.{key:?} has no identitytoken, auth, or username and password"
                    ));
                }
            };
            auths.insert(registry_of_key(&key), Login::Auth(RegistryAuth::Basic(pair.0, pair.1)));
        }
        Ok(DockerConfig { auths })
    }

    fn get(&self, registry: &str) -> Option<&Login> {
        self.auths.get(&registry_of_key(registry))
    }
}

/// Everything that says how OCI registries are reached.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    pub credentials: OciCredentials,
    pub docker_config: Option<DockerConfig>,
    /// Registries reached over plain HTTP (`host[:port]`); every other one over HTTPS.
    pub insecure: Vec<String>,
    /// Where artifacts are mirrored, as images are: `images:` of clusterctl's config.
    pub mirrors: ImageOverrides,
    /// Extra CA certificates (PEM) besides the system's.
    pub ca_certificates: Vec<String>,
    /// Token services on other hosts than their registry's that a refresh token may go to.
    pub token_hosts: Vec<String>,
}

impl OciOptions {
    /// The options that variables give (the environment, clusterctl's config, a provider's
    /// config Secret): `OCI_USERNAME` and `OCI_PASSWORD`, else `OCI_ACCESS_TOKEN`, else
    /// `OCI_REFRESH_TOKEN`; `OCI_CA_CERT` (or `ca.crt`) and `OCI_INSECURE_REGISTRIES`.
    pub fn apply_variables(&mut self, get: impl Fn(&str) -> Option<String>) {
        let get = |key: &str| get(key).filter(|v| !v.trim().is_empty());
        if let (Some(username), Some(password)) = (get(USERNAME_VARIABLE), get(PASSWORD_VARIABLE)) {
            self.credentials = OciCredentials::Basic { username, password };
        } else if let Some(token) = get(TOKEN_VARIABLE) {
            self.credentials = OciCredentials::Token(token);
        } else if let Some(token) = get(REFRESH_TOKEN_VARIABLE) {
            self.credentials = OciCredentials::Refresh(token);
        }
        if let Some(pem) = get(CA_VARIABLE).or_else(|| get(CA_SECRET_KEY)) {
            self.ca_certificates = vec![pem];
        }
        if let Some(list) = get(INSECURE_VARIABLE) {
            self.insecure =
                list.split(',').map(|r| r.trim().to_ascii_lowercase()).filter(|r| !r.is_empty()).collect();
        }
        if let Some(list) = get(TOKEN_HOSTS_VARIABLE) {
            self.token_hosts =
                list.split(',').map(|r| r.trim().to_ascii_lowercase()).filter(|r| !r.is_empty()).collect();
        }
    }

    /// Given credentials first, then the Docker config's entry for the registry, else none.
    pub(super) fn login_for(&self, registry: &str) -> Login {
        match &self.credentials {
            OciCredentials::Basic { username, password } => {
                Login::Auth(RegistryAuth::Basic(username.clone(), password.clone()))
            }
            OciCredentials::Token(token) => Login::Auth(RegistryAuth::Bearer(token.clone())),
            OciCredentials::Refresh(token) => Login::Refresh(token.clone()),
            OciCredentials::Anonymous => match self.docker_config.as_ref().and_then(|c| c.get(registry)) {
                Some(login) => login.clone(),
                None => Login::Auth(RegistryAuth::Anonymous),
            },
        }
    }

    pub fn is_insecure(&self, registry: &str) -> bool {
        self.insecure.iter().any(|r| r.eq_ignore_ascii_case(registry))
    }

    /// Where to read `registry/repository` from: the mirror that `images:` names for the
    /// provider (`all`, or the provider label), else where it is.
    pub fn mirror(&self, label: &str, registry: &str, repository: &str) -> (String, String) {
        let written = format!("{registry}/{repository}");
        let mirrored = self.mirrors.apply(label, &written).unwrap_or(written);
        match mirrored.split_once('/') {
            Some((registry, repository)) => (registry.to_string(), repository.to_string()),
            None => (registry.to_string(), repository.to_string()),
        }
    }
}

/// The registry refused to give `what`: say what to set (never what was sent).
pub(super) fn refused(reference: &str, what: &str) -> crate::error::RepositoryError {
    crate::error::RepositoryError::Oci {
        reference: reference.to_string(),
        message: format!(
            "the registry refused to give {what}: set {USERNAME_VARIABLE} and {PASSWORD_VARIABLE}, or {TOKEN_VARIABLE}, or {REFRESH_TOKEN_VARIABLE}, or a Docker config.json ({DOCKER_CONFIG_KEY}) with the registry's credentials"
        ),
    }
}

/// What a login sends, for a fingerprint of the credentials (never shown).
pub(super) fn login_material(login: &Login) -> String {
    match login {
        Login::Auth(RegistryAuth::Anonymous) => "anonymous".into(),
        Login::Auth(RegistryAuth::Basic(user, password)) => format!("basic\0{user}\0{password}"),
        Login::Auth(RegistryAuth::Bearer(token)) => format!("bearer\0{token}"),
        Login::Refresh(token) => format!("refresh\0{token}"),
    }
}

impl OciOptions {
    /// Every credential these options may send, as text to digest (never to show).
    pub(crate) fn credential_material(&self) -> String {
        let given = match &self.credentials {
            OciCredentials::Anonymous => "anonymous".to_string(),
            OciCredentials::Basic { username, password } => format!("basic\0{username}\0{password}"),
            OciCredentials::Token(token) => format!("token\0{token}"),
            OciCredentials::Refresh(token) => format!("refresh\0{token}"),
        };
        let docker: Vec<String> = self
            .docker_config
            .iter()
            .flat_map(|c| c.auths.iter().map(|(host, login)| format!("{host}\0{}", login_material(login))))
            .collect();
        format!("{given}\0{}", docker.join("\0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::ImageMeta;

    fn basic(user: &str, password: &str) -> Login {
        Login::Auth(RegistryAuth::Basic(user.into(), password.into()))
    }

    #[test]
    fn docker_config_entries_by_registry() {
        let auth = base64::engine::general_purpose::STANDARD.encode("robot:s3cret");
        let text = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "registry.local:5000": {{"username": "u", "password": "p"}}}}}}"#
        );
        let config = DockerConfig::parse(text.as_bytes()).unwrap();
        let options = OciOptions { docker_config: Some(config), ..Default::default() };
        assert_eq!(options.login_for("docker.io"), basic("robot", "s3cret"));
        assert_eq!(options.login_for("registry.local:5000"), basic("u", "p"));
        assert_eq!(options.login_for("ghcr.io"), Login::Auth(RegistryAuth::Anonymous));
        assert!(!format!("{options:?}").contains("s3cret"), "never printed");

        // What `docker login` writes for Azure Container Registry: a placeholder user with no
        // password, and the refresh token.
        let placeholder =
            base64::engine::general_purpose::STANDARD.encode("00000000-0000-0000-0000-000000000000:");
        let acr =
            format!(r#"{{"auths": {{"r.azurecr.io": {{"auth": "{placeholder}", "identitytoken": "rt"}}}}}}"#);
        let config = DockerConfig::parse(acr.as_bytes()).unwrap();
        let options = OciOptions { docker_config: Some(config), ..Default::default() };
        assert_eq!(options.login_for("r.azurecr.io"), Login::Refresh("rt".into()));
        assert!(!format!("{:?}", options.login_for("r.azurecr.io")).contains("rt)"), "never printed");
        assert!(DockerConfig::parse(br#"{"auths": {"x.io": {}}}"#).unwrap_err().contains("identitytoken"));
        assert!(
            DockerConfig::parse(br#"{"auths": {"x.io": {"auth": "bm9jb2xvbg=="}}}"#)
                .unwrap_err()
                .contains("user:password")
        );
        assert!(DockerConfig::parse(b"not json").unwrap_err().contains("config.json"));
    }

    #[test]
    fn variables_give_credentials_and_plain_http_registries() {
        let vars = BTreeMap::from([
            (TOKEN_VARIABLE, "tok"),
            (INSECURE_VARIABLE, " 127.0.0.1:5000, Registry.Local "),
        ]);
        let mut options = OciOptions::default();
        options.apply_variables(|k| vars.get(k).map(|v| v.to_string()));
        assert_eq!(options.login_for("ghcr.io"), Login::Auth(RegistryAuth::Bearer("tok".into())));
        assert!(options.is_insecure("127.0.0.1:5000") && options.is_insecure("registry.local"));
        assert!(!options.is_insecure("ghcr.io"));

        let vars =
            BTreeMap::from([(USERNAME_VARIABLE, "u"), (PASSWORD_VARIABLE, "p"), (TOKEN_VARIABLE, "t")]);
        options.apply_variables(|k| vars.get(k).map(|v| v.to_string()));
        assert_eq!(options.login_for("ghcr.io"), basic("u", "p"), "user first");

        let mut options = OciOptions::default();
        let vars = BTreeMap::from([(REFRESH_TOKEN_VARIABLE, "rt")]);
        options.apply_variables(|k| vars.get(k).map(|v| v.to_string()));
        assert_eq!(options.login_for("r.azurecr.io"), Login::Refresh("rt".into()));
    }

    #[test]
    fn artifacts_follow_the_image_mirrors() {
        let mut options = OciOptions::default();
        assert_eq!(
            options.mirror("butler", "ghcr.io", "butlerdotdev/butler"),
            ("ghcr.io".to_string(), "butlerdotdev/butler".to_string())
        );
        options.mirrors.0.insert(
            "all".into(),
            ImageMeta { repository: Some("mirror.local:5000/capi".into()), ..Default::default() },
        );
        assert_eq!(
            options.mirror("infrastructure-harvester", "ghcr.io", "butlerdotdev/infrastructure-harvester"),
            ("mirror.local:5000".to_string(), "capi/infrastructure-harvester".to_string())
        );
    }
}
