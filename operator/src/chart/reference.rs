//! The book's page of the chart's values, generated from `values.schema.json` (what each key
//! is) and `values.yaml` (its default), so that it says what helm accepts.

use serde_json::Value;

use super::{PROVIDER_VALUES, values_schema};

/// A schema's type, in words.
fn type_of(schema: &Value) -> String {
    match &schema["type"] {
        Value::String(t) => t.clone(),
        Value::Array(types) => types.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" or "),
        _ if schema.get("enum").is_some() => "string".into(),
        _ => "any".into(),
    }
}

/// A default as the page shows it: compact YAML-ish JSON, empty for none.
fn shown(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.is_empty() => "`\"\"`".into(),
        Some(v) => format!("`{}`", v.to_string().replace('|', "\\|")),
    }
}

/// The rows of `schema`'s properties under `prefix`, descending into closed objects.
fn rows(schema: &Value, defaults: Option<&Value>, prefix: &str, out: &mut Vec<String>) {
    let Some(properties) = schema["properties"].as_object() else { return };
    for (key, property) in properties {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        let default = defaults.and_then(|d| d.get(key));
        let nested =
            property["additionalProperties"] == Value::Bool(false) && property.get("properties").is_some();
        if nested {
            rows(property, default, &path, out);
            continue;
        }
        let description = property["description"].as_str().unwrap_or_default().replace('\n', " ");
        out.push(format!("| `{path}` | {} | {} | {description} |", type_of(property), shown(default)));
    }
}

/// The page, from the chart's `values.yaml`.
pub fn values_reference(values_yaml: &str) -> String {
    let schema = values_schema();
    let defaults: Value = serde_saphyr::from_str(values_yaml).unwrap_or(Value::Null);
    let mut operator = Vec::new();
    let mut settings = Vec::new();
    let mut accepted = Vec::new();
    let provider_keys: Vec<&str> = PROVIDER_VALUES.iter().map(|(key, _, _)| *key).collect();
    for (key, property) in schema["properties"].as_object().expect("the schema names its keys") {
        let one = serde_json::json!({"properties": {key: property}});
        let description = property["description"].as_str().unwrap_or_default();
        if provider_keys.contains(&key.as_str()) {
            continue;
        } else if description.starts_with("Accepted from cluster-api-operator") {
            rows(&one, Some(&defaults), "", &mut accepted);
        } else if ["manager", "fetchConfig", "configSecret", "additionalDeployments"].contains(&key.as_str())
        {
            rows(&one, Some(&defaults), "", &mut settings);
        } else {
            rows(&one, Some(&defaults), "", &mut operator);
        }
    }
    let entry = &schema["$defs"]["provider"];
    let mut provider = Vec::new();
    for (key, property) in entry["properties"].as_object().expect("a provider names its keys") {
        let description = property["description"].as_str().unwrap_or_default().replace('\n', " ");
        provider.push(format!("| `{key}` | {} | {description} |", type_of(property)));
    }
    let kinds: Vec<String> = PROVIDER_VALUES
        .iter()
        .map(|(key, kind, suffix)| {
            let namespace =
                if suffix.is_empty() { "capi-system".to_string() } else { format!("{{name}}-{suffix}") };
            format!("| `{key}` | {} | `{namespace}` |", crate::api::KindNames::kind(*kind))
        })
        .collect();
    let header = "| Key | Type | Default | What it does |\n|---|---|---|---|\n";
    format!(
        "# Helm chart values\n\n\
         <!-- Generated from the chart's values.schema.json and values.yaml by `make crds`: edit those (through the operator's code), not this page. -->\n\n\
         The values of `charts/butler-operator`. helm checks every value against the chart's schema\n\
         before it renders anything: a key the chart does not know is refused with its path\n\
         (`at '/infrastructure/docker': additional properties 'verison' not allowed`).\n\n\
         ## Providers\n\n\
         Each provider kind is a map of provider name to its settings, as cluster-api-operator's chart\n\
         declares them:\n\n\
         | Key | Kind | Default namespace |\n|---|---|---|\n{}\n\n\
         A provider's settings are its kind's spec (see the [API reference](api.md)) and where it goes:\n\n\
         | Key | Type | What it does |\n|---|---|---|\n{}\n\n\
         ## Settings of every provider\n\n{header}{}\n\n\
         ## The operator\n\n{header}{}\n\n\
         ## Accepted from cluster-api-operator's values\n\n\
         These keys of cluster-api-operator's chart are accepted, so that its users' values files work\n\
         unchanged, and have no effect here, for the reason given.\n\n{header}{}\n",
        kinds.join("\n"),
        provider.join("\n"),
        settings.join("\n"),
        operator.join("\n"),
        accepted.join("\n"),
    )
}
