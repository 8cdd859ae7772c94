//! oci-client clients for publishing (reads go through [`super::session`]), shared. A client loads the system's root certificates when made (tens
//! of milliseconds) and keeps registry tokens, so the sources that reach registries alike (a
//! reconcile makes one) share one. Credentials and extra CAs are part of the key: a client keeps
//! the first credentials it was given for a registry, and two providers' must never mix.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use oci_client::Client;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;

use super::OciOptions;
use super::credentials::Login;
use crate::digest::sha256_hex;
use crate::error::{RepositoryError, Result};

/// Plain-HTTP registries, the timeout, a digest of the extra CAs and one of the credentials.
type Key = (Vec<String>, Duration, String, String);

/// More keys than this and the cache starts again: rotated credentials leave old clients behind.
const MOST: usize = 64;

/// The client for `registry` (reached over plain HTTP when the options or `plain_http` say so).
pub(super) fn shared(
    options: &OciOptions,
    registry: &str,
    plain_http: bool,
    timeout: Duration,
    auth: &RegistryAuth,
) -> Result<Client> {
    static CLIENTS: Mutex<BTreeMap<Key, Client>> = Mutex::new(BTreeMap::new());
    let mut insecure = options.insecure.clone();
    if plain_http {
        insecure.push(registry.to_string());
    }
    insecure.sort();
    insecure.dedup();
    let who = match auth {
        RegistryAuth::Anonymous => String::new(),
        RegistryAuth::Basic(user, password) => sha256_hex(format!("basic\0{user}\0{password}").as_bytes()),
        RegistryAuth::Bearer(token) => sha256_hex(format!("bearer\0{token}").as_bytes()),
    };
    let cas = sha256_hex(options.ca_certificates.join("\0").as_bytes());
    let key = (insecure, timeout, cas, who);
    let mut clients = CLIENTS.lock().expect("not poisoned");
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let config = ClientConfig {
        protocol: ClientProtocol::HttpsExcept(key.0.clone()),
        read_timeout: Some(timeout),
        connect_timeout: Some(timeout),
        extra_root_certificates: options
            .ca_certificates
            .iter()
            .map(|pem| Certificate { encoding: CertificateEncoding::Pem, data: pem.clone().into_bytes() })
            .collect(),
        ..Default::default()
    };
    let client = Client::try_from(config).map_err(|e| RepositoryError::Oci {
        reference: format!("oci://{registry}"),
        message: format!(
            "cannot make a registry client: {e}; check the CA certificates ({})",
            super::CA_VARIABLE
        ),
    })?;
    if clients.len() >= MOST {
        clients.clear();
    }
    clients.insert(key, client.clone());
    Ok(client)
}

/// The client for `registry/repository` and the credentials to send: the given ones, or an
/// access token traded for the refresh token (scoped to pull, or to push as well).
pub(super) async fn connect(
    options: &OciOptions,
    registry: &str,
    repository: &str,
    plain_http: bool,
    push: bool,
    timeout: Duration,
) -> Result<(Client, RegistryAuth)> {
    // The command line's: every address may be reached (see `NetworkPolicy`).
    let http = crate::http::HttpOptions { timeout, cache: None, ..Default::default() };
    let auth = match options.login_for(registry) {
        Login::Auth(auth @ RegistryAuth::Basic(..)) => {
            super::refresh::check_password_realm(options, &http, registry, repository, plain_http).await?;
            auth
        }
        Login::Auth(auth) => auth,
        Login::Refresh(token) => RegistryAuth::Bearer(
            super::refresh::access_token(options, &http, registry, repository, plain_http, push, &token)
                .await?,
        ),
    };
    let client = shared(options, registry, plain_http, timeout, &auth)?;
    Ok((client, auth))
}
