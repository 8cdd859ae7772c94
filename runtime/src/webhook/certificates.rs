//! Certificates for a webhook server, made here so that no cert-manager is needed: a CA of the
//! controller's own, and serving certificates it signs for the webhook Service's DNS names.
//! Time is passed in, so renewal decisions are pure.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// Why a certificate could not be made.
#[derive(Debug, thiserror::Error)]
#[error("making the {what} certificate: {source}")]
pub struct CertificateError {
    what: &'static str,
    source: rcgen::Error,
}

fn at(seconds: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(seconds).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn validity(params: &mut CertificateParams, now: jiff::Timestamp, days: i64) {
    // An hour back, for clocks that run a little behind.
    params.not_before = at(now.as_second() - 3600);
    params.not_after = at(now.as_second() + days * 86_400);
}

/// A CA named `common_name`, valid for `days` from `now`.
pub fn new_ca(
    common_name: &str,
    now: jiff::Timestamp,
    days: i64,
) -> Result<(Pem, CertificateParams), CertificateError> {
    let failed = |source| CertificateError { what: "CA", source };
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params, now, days);
    let cert = params.self_signed(&key).map_err(failed)?;
    Ok((Pem { cert: cert.pem(), key: key.serialize_pem() }, params))
}

/// A serving certificate for `dns_names` (and IP addresses written among them), signed by the
/// CA, valid for `days` from `now`.
pub fn issue(
    ca: &(Pem, CertificateParams),
    dns_names: &[String],
    now: jiff::Timestamp,
    days: i64,
) -> Result<Pem, CertificateError> {
    let failed = |source| CertificateError { what: "serving", source };
    let ca_key = KeyPair::from_pem(&ca.0.key).map_err(failed)?;
    let issuer = Issuer::from_params(&ca.1, &ca_key);
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(dns_names.to_vec()).map_err(failed)?;
    if let Some(first) = dns_names.first() {
        params.distinguished_name.push(DnType::CommonName, first.as_str());
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, now, days);
    let cert = params.signed_by(&key, &issuer).map_err(failed)?;
    Ok(Pem { cert: cert.pem(), key: key.serialize_pem() })
}
