//! Certificates for a webhook server, made here so that no cert-manager is needed: a CA of the
//! controller's own, and serving certificates it signs for the webhook Service's DNS names. Time
//! is passed in, so the renewal decisions are pure.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// Why a certificate could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("making the {what} certificate: {source}")]
    Make { what: &'static str, source: rcgen::Error },
    #[error("the certificate does not read as a PEM X.509 certificate")]
    Unreadable,
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
pub fn new_ca(common_name: &str, now: jiff::Timestamp, days: i64) -> Result<Pem, CertificateError> {
    let failed = |source| CertificateError::Make { what: "CA", source };
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    validity(&mut params, now, days);
    let cert = params.self_signed(&key).map_err(failed)?;
    Ok(Pem { cert: cert.pem(), key: key.serialize_pem() })
}

/// A serving certificate for `names` (DNS names, and IP addresses written among them), signed
/// by the CA, valid for `days` from `now`.
pub fn issue(ca: &Pem, names: &[String], now: jiff::Timestamp, days: i64) -> Result<Pem, CertificateError> {
    let failed = |source| CertificateError::Make { what: "serving", source };
    let ca_key = KeyPair::from_pem(&ca.key).map_err(failed)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(failed)?;
    let key = KeyPair::generate().map_err(failed)?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(failed)?;
    if let Some(first) = names.first() {
        params.distinguished_name.push(DnType::CommonName, first.as_str());
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut params, now, days);
    let cert = params.signed_by(&key, &issuer).map_err(failed)?;
    Ok(Pem { cert: cert.pem(), key: key.serialize_pem() })
}

/// What a certificate says of itself: when it expires and the names it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub not_after: jiff::Timestamp,
    pub names: Vec<String>,
}

/// Reads the first certificate of a PEM text.
pub fn facts(cert_pem: &str) -> Result<Facts, CertificateError> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).map_err(|_| CertificateError::Unreadable)?;
    let (_, cert) = X509Certificate::from_der(&pem.contents).map_err(|_| CertificateError::Unreadable)?;
    let not_after = jiff::Timestamp::from_second(cert.validity().not_after.timestamp())
        .map_err(|_| CertificateError::Unreadable)?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => names.push(dns.to_string()),
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => names
                        .push(std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string()),
                    16 => {
                        let octets: [u8; 16] = (*bytes).try_into().unwrap_or([0; 16]);
                        names.push(std::net::Ipv6Addr::from(octets).to_string());
                    }
                    _ => {}
                },
                _ => {}
            }
        }
    }
    Ok(Facts { not_after, names })
}

/// Whether a certificate must be made anew at `now`: unreadable, covering other names, or in
/// the last `renew_before_days` of its life.
pub fn needs_renewal(cert_pem: &str, names: &[String], now: jiff::Timestamp, renew_before_days: i64) -> bool {
    match facts(cert_pem) {
        Err(_) => true,
        Ok(f) => {
            let left = f.not_after.as_second() - now.as_second();
            left < renew_before_days * 86_400 || names.iter().any(|n| !f.names.contains(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_say_when_they_expire_and_what_they_cover() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let ca = new_ca("test-ca", now, 3650).unwrap();
        let names = vec!["hooks.butler-system.svc".to_string(), "127.0.0.1".to_string()];
        let serving = issue(&ca, &names, now, 365).unwrap();
        let f = facts(&serving.cert).unwrap();
        assert_eq!(f.not_after.as_second(), now.as_second() + 365 * 86_400);
        assert_eq!(f.names, names);
        assert!(!needs_renewal(&serving.cert, &names, now, 30));
        let late = jiff::Timestamp::from_second(now.as_second() + 340 * 86_400).unwrap();
        assert!(needs_renewal(&serving.cert, &names, late, 30), "within 30 days of its end");
        assert!(needs_renewal(&serving.cert, &["other.svc".to_string()], now, 30), "another name");
        assert!(needs_renewal("garbage", &names, now, 30));
        assert!(facts(&ca.cert).unwrap().names.is_empty());
    }
}
