//! A provider named on the command line, in every form its users write: `NAME`,
//! `NAME:VERSION` (clusterctl), `NAMESPACE/NAME[:VERSION]` (clusterctl upgrade), and
//! cluster-api-operator's `NAME:NAMESPACE:VERSION`, `NAME::VERSION` and `NAME:NAMESPACE` (two
//! parts whose second is no version name a namespace there).

/// What a provider argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRef {
    pub name: String,
    pub namespace: Option<String>,
    pub version: Option<String>,
}

/// `text` read as a provider argument; the error says which forms there are.
pub fn parse(text: &str) -> Result<ProviderRef, String> {
    let bad = |why: &str| {
        format!(
            "{text:?}: {why}; write NAME, NAME:VERSION, NAME:NAMESPACE, NAMESPACE/NAME:VERSION, NAME:NAMESPACE:VERSION or NAME::VERSION"
        )
    };
    let (slashed, rest) = match text.split_once('/') {
        Some((namespace, rest)) => (Some(namespace), rest),
        None => (None, text),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let (name, namespace, version) = match (slashed, parts.as_slice()) {
        (_, [name]) => (*name, slashed, None),
        (_, [name, version]) if looks_like_version(version) => (*name, slashed, Some(*version)),
        (None, [name, namespace]) => (*name, Some(*namespace), None),
        (Some(_), [_, _]) => return Err(bad("a namespace both before the name and after it")),
        (None, [name, namespace, version]) => (*name, Some(*namespace), Some(*version)),
        (Some(_), [_, _, _]) => return Err(bad("a namespace both before the name and after it")),
        _ => return Err(bad("too many parts")),
    };
    let given = |s: Option<&str>| s.map(str::trim).filter(|s| !s.is_empty()).map(String::from);
    let name = given(Some(name)).ok_or_else(|| bad("no provider name"))?;
    if slashed.is_some_and(|ns| ns.trim().is_empty()) {
        return Err(bad("an empty namespace before the /"));
    }
    Ok(ProviderRef { name, namespace: given(namespace), version: given(version) })
}

/// Whether the part after a name is a version (`v2.5.0`, `2.5.0`, `v2`) rather than a namespace
/// (`capa-system`): a version starts with a digit, after an optional `v`.
fn looks_like_version(part: &str) -> bool {
    let part = part.trim();
    part.is_empty() || part.strip_prefix('v').unwrap_or(part).starts_with(|c: char| c.is_ascii_digit())
}

/// The one namespace a command acts in: `flag` (`-n`), and the namespaces the provider
/// arguments name, which must agree with it and with each other.
pub fn one_namespace(flag: Option<String>, named: &[ProviderRef]) -> Result<Option<String>, String> {
    let mut chosen = flag.clone();
    for r in named {
        match (&chosen, &r.namespace) {
            (_, None) => {}
            (None, Some(ns)) => chosen = Some(ns.clone()),
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                return Err(format!(
                    "{} names namespace {b}, but {} {a}: one namespace at a time (-n NAMESPACE)",
                    r.name,
                    if flag.is_some() { "-n says" } else { "another argument names" }
                ));
            }
        }
    }
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, namespace: Option<&str>, version: Option<&str>) -> ProviderRef {
        ProviderRef {
            name: name.into(),
            namespace: namespace.map(String::from),
            version: version.map(String::from),
        }
    }

    #[test]
    fn every_form_users_write() {
        assert_eq!(parse("aws"), Ok(named("aws", None, None)));
        assert_eq!(parse("aws:v2.5.0"), Ok(named("aws", None, Some("v2.5.0"))));
        assert_eq!(parse("capa-system/aws:v2.5.0"), Ok(named("aws", Some("capa-system"), Some("v2.5.0"))));
        assert_eq!(parse("capa-system/aws"), Ok(named("aws", Some("capa-system"), None)));
        assert_eq!(parse("aws:capa-system:v2.5.0"), Ok(named("aws", Some("capa-system"), Some("v2.5.0"))));
        assert_eq!(parse("aws::v2.5.0"), Ok(named("aws", None, Some("v2.5.0"))));
        assert_eq!(parse("aws:custom-namespace"), Ok(named("aws", Some("custom-namespace"), None)));
        assert_eq!(parse("aws:2.5.0"), Ok(named("aws", None, Some("2.5.0"))));
        assert!(parse("capa-system/aws:other").is_err(), "two namespaces");
        assert_eq!(parse("aws:capa-system:"), Ok(named("aws", Some("capa-system"), None)));
        assert_eq!(parse("aws:"), Ok(named("aws", None, None)));
        let refs = [parse("aws:capa-system:v2").unwrap(), parse("gcp::v1").unwrap()];
        assert_eq!(one_namespace(None, &refs), Ok(Some("capa-system".into())));
        assert_eq!(one_namespace(Some("capa-system".into()), &refs), Ok(Some("capa-system".into())));
        let error = one_namespace(Some("other".into()), &refs).unwrap_err();
        assert!(error.contains("names namespace capa-system, but -n says other"), "{error}");
        for bad in [":v1.0.0", "a:b:c:d", "ns/aws:ns:v1", "/aws:v1"] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains("NAME:NAMESPACE:VERSION"), "{bad}: {error}");
        }
    }
}
