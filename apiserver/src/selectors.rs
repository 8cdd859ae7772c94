//! Label selectors (equality and set-based) and field selectors.

use serde_json::Value;

use super::errors::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum LabelRequirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelRequirement>);

/// A JSON label selector (`matchLabels`, `matchExpressions`) in its string form
/// (`app=web,tier in (a,b)`), as a Scale's status says it and [`LabelSelector::parse`] reads it.
pub fn text_of(selector: &Value) -> String {
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    for expression in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = expression["key"].as_str().unwrap_or_default();
        let values: Vec<&str> =
            expression["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        parts.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            _ => format!("!{key}"),
        });
    }
    parts.join(",")
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
    pub fn parse(text: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let bad = || {
                ApiError::bad_request(format!(
                    "unable to parse requirement: {part:?} in label selector {text:?}"
                ))
            };
            let requirement = if let Some(key) = part.strip_prefix('!') {
                LabelRequirement::NotExists(key.trim().to_string())
            } else if let Some((key, rest)) = split_word(part, " notin ") {
                LabelRequirement::NotIn(key, parse_set(&rest).ok_or_else(bad)?)
            } else if let Some((key, rest)) = split_word(part, " in ") {
                LabelRequirement::In(key, parse_set(&rest).ok_or_else(bad)?)
            } else if let Some((key, value)) = part.split_once("!=") {
                LabelRequirement::NotIn(key.trim().to_string(), vec![value.trim().to_string()])
            } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                LabelRequirement::In(key.trim().to_string(), vec![value.trim().to_string()])
            } else if part.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                LabelRequirement::Exists(part.to_string())
            } else {
                return Err(bad());
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    /// Whether an object's labels satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
            LabelRequirement::In(k, values) => label(k).is_some_and(|v| values.iter().any(|x| x == v)),
            LabelRequirement::NotIn(k, values) => label(k).is_none_or(|v| values.iter().all(|x| x != v)),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(String::new());
                continue;
            }
            _ => {}
        }
        parts.last_mut().expect("never empty").push(c);
    }
    parts
}

fn split_word(part: &str, word: &str) -> Option<(String, String)> {
    part.split_once(word).map(|(k, rest)| (k.trim().to_string(), rest.trim().to_string()))
}

fn parse_set(text: &str) -> Option<Vec<String>> {
    let inner = text.strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

/// A parsed `fieldSelector`: `metadata.name`, `metadata.namespace`, and for events the fields
/// the API server indexes for them, with `=`, `==` or `!=`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "reportingController",
];

impl FieldSelector {
    pub fn parse(text: &str, kind: &str) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {text:?}; can't understand {part:?}"
                )));
            };
            let field = field.trim();
            let supported = field == "metadata.name"
                || field == "metadata.namespace"
                || (kind == "Event" && EVENT_FIELDS.contains(&field));
            if !supported {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            // Events are stored as core Events: the fields of events.k8s.io select their twins.
            let field = match field.strip_prefix("regarding.") {
                Some(rest) => format!("involvedObject.{rest}"),
                None if field == "reportingController" => "reportingComponent".to_string(),
                None => field.to_string(),
            };
            terms.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| {
            let actual = field.split('.').fold(object, |node, step| &node[step]);
            let actual = match actual {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_of_every_form() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("app,tier", true),
            ("!app", false),
            ("!missing", true),
            ("missing notin (x)", true),
            ("app=web,tier in (back)", false),
            ("", true),
        ];
        for (text, expect) in cases {
            assert_eq!(LabelSelector::parse(text).unwrap().matches(&obj), expect, "{text}");
        }
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors_accept_the_supported_fields_only() {
        let obj = json!({"metadata": {"name": "a", "namespace": "n"}, "reason": "Started"});
        assert!(FieldSelector::parse("metadata.name=a", "ConfigMap").unwrap().matches(&obj));
        assert!(!FieldSelector::parse("metadata.namespace!=n", "ConfigMap").unwrap().matches(&obj));
        assert!(FieldSelector::parse("reason=Started", "Event").unwrap().matches(&obj));
        let err = FieldSelector::parse("spec.x=1", "ConfigMap").unwrap_err();
        assert_eq!(err.message, "field label not supported: spec.x");
    }
}
