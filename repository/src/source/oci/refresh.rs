//! Refresh tokens (cluster-api-operator's `OCI_REFRESH_TOKEN`; the `identitytoken` that
//! `docker login` stores for registries such as Azure Container Registry), traded for an access
//! token at the registry's token service with OAuth2's `refresh_token` grant, as the
//! distribution token specification, docker and oras do. Access tokens are kept per registry,
//! repository, scope and refresh token until shortly before they expire, so a reconcile costs
//! no exchange while its token lives.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::OciOptions;
use crate::digest::sha256_hex;
use crate::error::{RepositoryError, Result};
use crate::http::HttpOptions;

/// The `client_id` sent with the grant (the spec asks for one naming the client).
const CLIENT_ID: &str = "butler";
/// The lifetime of a token that states none (the distribution token spec's default).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// A token this close to its end is traded again rather than used.
pub(super) const MARGIN: Duration = Duration::from_secs(10);

/// Where a registry sends clients for tokens: its `WWW-Authenticate: Bearer` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Challenge {
    pub realm: String,
    pub service: Option<String>,
}

/// The parameters of a `Bearer` challenge (`realm="…",service="…",scope="…"`); `None` for
/// another scheme.
pub(super) fn parse_challenge(header: &str) -> Option<Challenge> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => {
                let end = quoted.find('"')?;
                (&quoted[..end], &quoted[end + 1..])
            }
            None => after.split_once(',').map_or((after, ""), |(v, a)| (v, a)),
        };
        params.insert(name.trim().to_ascii_lowercase(), value.to_string());
        rest = after.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge { realm: params.remove("realm")?, service: params.remove("service") })
}

/// The scope a source (pull) or a publish (push) needs.
pub(super) fn scope(repository: &str, push: bool) -> String {
    format!("repository:{repository}:{}", if push { "pull,push" } else { "pull" })
}

/// The body of the token request.
pub(super) fn grant(challenge: &Challenge, scope: &str, refresh_token: &str) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "refresh_token");
    if let Some(service) = &challenge.service {
        form.append_pair("service", service);
    }
    form.append_pair("scope", scope);
    form.append_pair("client_id", CLIENT_ID);
    form.append_pair("refresh_token", refresh_token);
    form.finish()
}

/// The access token and its lifetime from the token service's answer (`access_token`, or the
/// older `token`; `expires_in` in seconds).
pub(super) fn parse_answer(body: &[u8]) -> std::result::Result<(String, Duration), String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        access_token: Option<String>,
        token: Option<String>,
        expires_in: Option<u64>,
    }
    let answer: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("the token service's answer: {}", crate::yaml::describe_json_error(&e)))?;
    let token = answer
        .access_token
        .or(answer.token)
        .filter(|t| !t.is_empty())
        .ok_or("the token service's answer holds no access_token")?;
    Ok((token, answer.expires_in.map_or(DEFAULT_LIFETIME, Duration::from_secs)))
}

/// Where a refresh token may be traded: the registry's own host, or a token service that
/// `token_hosts` (`OCI_TOKEN_HOSTS`) names; a registry never sends it elsewhere.
pub(super) fn check_realm(
    realm: &str,
    registry: &str,
    token_hosts: &[String],
    plain_http: bool,
) -> std::result::Result<(), String> {
    let host = |authority: &str| {
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        match authority.rsplit_once(':') {
            Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h.to_ascii_lowercase(),
            _ => authority.to_ascii_lowercase(),
        }
    };
    // Read by the parser the request is sent with: a hand-made reading differs on forms such
    // as `https://evil\@registry/token`, which goes to `evil`.
    let realm_host = match reqwest::Url::parse(realm) {
        Ok(url) => {
            url.host_str().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase())
        }
        Err(_) if realm.contains("://") => {
            return Err(format!("the registry's challenge names no usable token service ({realm:?})"));
        }
        Err(_) => None,
    };
    if let Some(realm_host) = &realm_host
        && *realm_host != host(registry)
        && !token_hosts.iter().any(|t| host(t.trim()) == *realm_host)
    {
        return Err(format!(
            "the registry's token service {realm} is not on the registry's host; credentials go there only when {} names {realm_host}",
            super::TOKEN_HOSTS_VARIABLE
        ));
    }
    check_realm_scheme(realm, plain_http)
}

/// A token service over HTTPS, or plain HTTP only for a registry that is plain HTTP itself (no
/// downgrade by a challenge naming an `http://` realm).
pub(super) fn check_realm_scheme(realm: &str, plain_http: bool) -> std::result::Result<(), String> {
    match realm.split_once("://") {
        Some(("https", _)) => Ok(()),
        Some(("http", _)) if plain_http => Ok(()),
        Some(("http", _)) => Err(format!(
            "the registry's token service {realm} is plain HTTP; tokens are only asked for over HTTPS (or add the registry to {})",
            super::INSECURE_VARIABLE
        )),
        _ => Err(format!("the registry's challenge names no usable token service ({realm:?})")),
    }
}

type Key = (String, String, String, String);

static TOKENS: Mutex<BTreeMap<Key, (String, Instant)>> = Mutex::new(BTreeMap::new());

/// Tokens more than this and the store starts again (rotated refresh tokens leave old ones).
const MOST: usize = 256;

/// An access token for `registry/repository` traded for `refresh_token`, kept while it lives.
/// Every request goes through the repository client's guarded HTTP (`http.network`).
pub(super) async fn access_token(
    options: &OciOptions,
    http: &HttpOptions,
    registry: &str,
    repository: &str,
    plain_http: bool,
    push: bool,
    refresh_token: &str,
) -> Result<String> {
    let scope = scope(repository, push);
    let key =
        (registry.to_string(), repository.to_string(), scope.clone(), sha256_hex(refresh_token.as_bytes()));
    if let Some((token, until)) = TOKENS.lock().expect("not poisoned").get(&key)
        && Instant::now() + MARGIN < *until
    {
        return Ok(token.clone());
    }
    let reference = format!("oci://{registry}/{repository}");
    let fail = |message: String| RepositoryError::Oci { reference: reference.clone(), message };
    let plain_http = plain_http || options.is_insecure(registry);
    let client = crate::http::shared_client(http, &options.ca_certificates).map_err(fail)?;
    let (challenge, status, probe) = challenge_of(&client, http, registry, plain_http).await?;
    let challenge = challenge.ok_or_else(|| {
        fail(format!(
            "{} is set, but the registry asks for no bearer token (HTTP {status} at {probe}); use {} and {} instead",
            super::REFRESH_TOKEN_VARIABLE,
            super::USERNAME_VARIABLE,
            super::PASSWORD_VARIABLE
        ))
    })?;
    check_realm(&challenge.realm, registry, &options.token_hosts, plain_http).map_err(fail)?;
    let realm = reqwest::Url::parse(&challenge.realm)
        .map_err(|e| fail(format!("the registry's token service {:?} is not a URL: {e}", challenge.realm)))?;
    if let Some(why) = http.network.refusal_of_url(&realm) {
        return Err(RepositoryError::Refused { url: challenge.realm.clone(), why });
    }
    let network = |e: reqwest::Error| match crate::http::refusal_in(&e) {
        Some(why) => RepositoryError::Refused { url: challenge.realm.clone(), why },
        None => RepositoryError::Network {
            url: challenge.realm.clone(),
            message: format!("trading {} for an access token: {e}", super::REFRESH_TOKEN_VARIABLE),
        },
    };
    // A POST is never redirected: the refresh token would go along.
    let answer = client
        .post(realm)
        .header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(grant(&challenge, &scope, refresh_token))
        .send()
        .await
        .map_err(network)?;
    let status = answer.status().as_u16();
    let body = crate::http::read_within(answer, 1 << 20)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| fail("the token service's answer did not arrive whole within 1 MiB".into()))?;
    if status != 200 {
        // What the token service said is its own, not repeated into conditions: logged only.
        let said = String::from_utf8_lossy(&body[..body.len().min(300)]).trim().to_string();
        tracing::debug!(realm = %challenge.realm, status, body = %said, "the token service refused");
        return Err(fail(format!(
            "the token service {} refused the refresh token for {scope} (HTTP {status}); renew {} or the config.json's identitytoken",
            challenge.realm,
            super::REFRESH_TOKEN_VARIABLE
        )));
    }
    let (token, lifetime) = parse_answer(&body).map_err(fail)?;
    let mut tokens = TOKENS.lock().expect("not poisoned");
    if tokens.len() >= MOST {
        tokens.clear();
    }
    tokens.insert(key, (token.clone(), Instant::now() + lifetime));
    Ok(token)
}

/// The registry's bearer challenge (`GET /v2/`), if it sends one, with the answer's status and
/// the URL asked.
async fn challenge_of(
    client: &reqwest::Client,
    http: &HttpOptions,
    registry: &str,
    plain_http: bool,
) -> Result<(Option<Challenge>, u16, String)> {
    let probe = format!("{}://{registry}/v2/", if plain_http { "http" } else { "https" });
    let answer = crate::http::follow(client, &http.network, &probe, http::HeaderMap::new()).await.map_err(
        |e| match e {
            crate::http::SendError::Fatal(e) => e,
            crate::http::SendError::Transient(message) => {
                RepositoryError::Network { url: probe.clone(), message }
            }
        },
    )?;
    let challenge = answer
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|h| h.to_str().ok())
        .and_then(parse_challenge);
    Ok((challenge, answer.status().as_u16(), probe))
}

/// Before a user and password go to a registry (whose client trades them at the token service
/// the registry names): that service must be on the registry's host or one `OCI_TOKEN_HOSTS`
/// names, or the registry would collect them for another host.
pub(super) async fn check_password_realm(
    options: &OciOptions,
    http: &HttpOptions,
    registry: &str,
    repository: &str,
    plain_http: bool,
) -> Result<()> {
    let reference = format!("oci://{registry}/{repository}");
    let fail = |message: String| RepositoryError::Oci { reference: reference.clone(), message };
    let plain_http = plain_http || options.is_insecure(registry);
    let client = crate::http::shared_client(http, &options.ca_certificates).map_err(fail)?;
    let (challenge, _, _) = challenge_of(&client, http, registry, plain_http).await?;
    match challenge {
        Some(challenge) => {
            check_realm(&challenge.realm, registry, &options.token_hosts, plain_http).map_err(fail)
        }
        None => Ok(()),
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_as_registries_write_them() {
        let acr = r#"Bearer realm="https://r.azurecr.io/oauth2/token",service="r.azurecr.io""#;
        assert_eq!(
            parse_challenge(acr),
            Some(Challenge {
                realm: "https://r.azurecr.io/oauth2/token".into(),
                service: Some("r.azurecr.io".into())
            })
        );
        let spaced = r#"bearer realm="https://auth.docker.io/token", service="registry.docker.io", scope="repository:a/b:pull""#;
        assert_eq!(parse_challenge(spaced).unwrap().service.as_deref(), Some("registry.docker.io"));
        assert_eq!(
            parse_challenge(r#"Bearer realm=https://t.io/token"#).unwrap().realm,
            "https://t.io/token"
        );
        assert_eq!(parse_challenge(r#"Basic realm="registry""#), None);
        assert_eq!(parse_challenge(r#"Bearer service="x""#), None, "no realm");
        assert_eq!(parse_challenge(r#"Bearer realm="unclosed"#), None);
    }

    #[test]
    fn the_grant_is_a_form_with_the_scope_and_the_token() {
        let challenge = Challenge { realm: "https://t".into(), service: Some("r.io".into()) };
        assert_eq!(
            grant(&challenge, &scope("team/core", false), "a+b/c="),
            "grant_type=refresh_token&service=r.io&scope=repository%3Ateam%2Fcore%3Apull&client_id=butler&refresh_token=a%2Bb%2Fc%3D"
        );
        assert_eq!(scope("p", true), "repository:p:pull,push");
    }

    #[test]
    fn answers_give_the_token_and_its_lifetime() {
        assert_eq!(
            parse_answer(br#"{"access_token":"a","expires_in":300,"refresh_token":"r2"}"#).unwrap(),
            ("a".to_string(), Duration::from_secs(300))
        );
        assert_eq!(parse_answer(br#"{"token":"t"}"#).unwrap(), ("t".to_string(), DEFAULT_LIFETIME));
        assert!(parse_answer(br#"{"access_token":""}"#).unwrap_err().contains("no access_token"));
        assert!(parse_answer(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn refresh_tokens_travel_over_https_only_unless_the_registry_is_plain_http() {
        let none: &[String] = &[];
        assert!(check_realm("https://r.io/token", "r.io", none, false).is_ok());
        assert!(
            check_realm("http://r.io/token", "r.io", none, false)
                .unwrap_err()
                .contains("OCI_INSECURE_REGISTRIES")
        );
        assert!(check_realm("http://127.0.0.1:5000/token", "127.0.0.1:5000", none, true).is_ok());
        assert!(check_realm("/token", "r.io", none, true).is_err());
        // Another host only when named.
        // Forms a hand-made reading took for the registry's host, which go elsewhere.
        for disguised in ["https://evil\\@r.io/token", "https://r.io.evil/t", "https://[::1/t"] {
            assert!(check_realm(disguised, "r.io", none, false).is_err(), "{disguised} goes elsewhere");
        }
        let refused = check_realm("https://collector.evil/token", "r.io", none, false).unwrap_err();
        assert!(
            refused.contains("not on the registry's host") && refused.contains("OCI_TOKEN_HOSTS"),
            "{refused}"
        );
        let named = ["auth.docker.io".to_string()];
        assert!(check_realm("https://auth.docker.io/token", "registry-1.docker.io", &named, false).is_ok());
    }
}
