//! The CEL of admission (ValidatingAdmissionPolicies and webhook `matchConditions`) as
//! kube-apiserver binds it: `object`, `oldObject`, `request` and `namespaceObject`, converted
//! with the objects' schemas in mind. A field whose name is a CEL keyword is escaped
//! (`namespace` is `__namespace__`), but the keys of a map (labels, annotations, a quota's
//! `hard`) are data and stay as they are: `object.metadata.labels['app.kubernetes.io/name']`.
//! (kube-cel's evaluator, having no schema, escapes every key.)

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as Cel};
use serde_json::Value;

use crate::request::Attributes;

/// The field names kube-apiserver escapes as `__{name}__`.
const KEYWORDS: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Maps whose keys are data in every object (the rest of built-in types' maps hold keys that
/// are no keyword either, so they come out the same).
const MAPS: &[&str] = &["labels", "annotations"];

/// An expression, with what a failure says.
pub(crate) struct Expression {
    pub expression: String,
    pub message: Option<String>,
    pub message_expression: Option<String>,
}

impl Expression {
    /// The expression of a policy's validation or match condition (`expression`, and with
    /// `with_messages` its `message` and `messageExpression`); a missing one never holds.
    pub(crate) fn of(node: &Value, with_messages: bool) -> Expression {
        let text = |key: &str| node[key].as_str().map(String::from).filter(|_| with_messages);
        Expression {
            expression: node["expression"].as_str().unwrap_or("false").to_string(),
            message: text("message"),
            message_expression: text("messageExpression"),
        }
    }
}

/// The outcome of an expression.
pub(crate) enum Outcome {
    Held,
    Failed(String),
    Error(String),
}

/// The variables of one write, bound once for every expression over it.
pub(crate) struct Evaluator {
    context: Context<'static>,
}

fn map(entries: impl IntoIterator<Item = (String, Cel)>) -> Cel {
    let map: HashMap<Key, Cel> = entries.into_iter().map(|(k, v)| (Key::String(Arc::new(k)), v)).collect();
    Cel::Map(Map { map: Arc::new(map) })
}

fn text(value: &str) -> Cel {
    Cel::String(Arc::new(value.to_string()))
}

/// A JSON value as CEL sees it; `data_keys`: the keys of this object are a map's.
fn to_cel(value: &Value, data_keys: bool) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Cel::Int(i),
            (None, Some(u)) => Cel::UInt(u),
            _ => Cel::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => text(s),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(|v| to_cel(v, false)).collect())),
        Value::Object(fields) => map(fields.iter().map(|(k, v)| {
            let key = match !data_keys && KEYWORDS.contains(&k.as_str()) {
                true => format!("__{k}__"),
                false => k.clone(),
            };
            (key, to_cel(v, MAPS.contains(&k.as_str())))
        })),
    }
}

fn request(a: &Attributes) -> Cel {
    let names = |pairs: [(&str, &str); 3]| map(pairs.map(|(k, v)| (k.to_string(), text(v))));
    map([
        ("operation".to_string(), text(a.operation)),
        ("name".to_string(), text(&a.name)),
        ("namespace".to_string(), text(a.namespace.as_deref().unwrap_or_default())),
        ("dryRun".to_string(), Cel::Bool(a.dry_run)),
        ("kind".to_string(), names([("group", &a.group), ("version", &a.version), ("kind", &a.kind)])),
        (
            "resource".to_string(),
            names([("group", &a.group), ("version", &a.version), ("resource", &a.resource)]),
        ),
        (
            "userInfo".to_string(),
            map([
                ("username".to_string(), text(&a.user)),
                ("uid".to_string(), text("")),
                ("groups".to_string(), Cel::List(Arc::new(a.groups.iter().map(|g| text(g)).collect()))),
            ]),
        ),
    ])
}

impl Evaluator {
    /// What the CEL of admission sees of a write: `object`, `oldObject` (null where Kubernetes
    /// has null: on CREATE; `object` is null on DELETE), `request` with the user and groups,
    /// and the write's namespace as `namespaceObject` where it has one.
    pub(crate) fn new(a: &Attributes, object: &Value, old: &Value, namespace: Option<&Value>) -> Evaluator {
        let mut context = Context::default();
        context.register_all();
        context.add_variable_from_value("object", to_cel(object, false));
        context.add_variable_from_value("oldObject", to_cel(old, false));
        context.add_variable_from_value("request", request(a));
        if let Some(namespace) = namespace {
            context.add_variable_from_value("namespaceObject", to_cel(namespace, false));
        }
        Evaluator { context }
    }

    fn run(&self, source: &str) -> Result<Cel, String> {
        let program = Program::compile(source).map_err(|e| format!("compilation failed: {e}"))?;
        program.execute(&self.context).map_err(|e| kubernetes_wording(&e.to_string()))
    }

    /// The outcome of each expression, in order.
    pub(crate) fn evaluate(&self, expressions: &[Expression]) -> Vec<Outcome> {
        expressions
            .iter()
            .map(|e| match self.run(&e.expression) {
                Ok(Cel::Bool(true)) => Outcome::Held,
                Ok(Cel::Bool(false)) => {
                    let computed = e.message_expression.as_deref().and_then(|m| match self.run(m) {
                        Ok(Cel::String(s)) => Some(s.to_string()),
                        _ => None,
                    });
                    Outcome::Failed(
                        computed
                            .or_else(|| e.message.clone())
                            .unwrap_or_else(|| format!("failed expression: {}", e.expression)),
                    )
                }
                Ok(other) => Outcome::Error(format!("expression returned non-boolean: {other:?}")),
                Err(e) => Outcome::Error(e),
            })
            .collect()
    }

    /// Whether every expression holds.
    pub(crate) fn all_hold(&self, expressions: &[Expression]) -> bool {
        self.evaluate(expressions).iter().all(|o| matches!(o, Outcome::Held))
    }
}

/// An evaluation error in the words kube-apiserver's CEL uses (`no such key: subjects`).
fn kubernetes_wording(error: &str) -> String {
    match error.strip_prefix("No such key: ") {
        Some(key) => format!("no such key: {key}"),
        None => format!("evaluation error: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds(expression: &str, object: Value) -> bool {
        let a = Attributes { operation: "CREATE", ..Attributes::default() };
        let evaluator = Evaluator::new(&a, &object, &Value::Null, None);
        let expression =
            Expression { expression: expression.into(), message: None, message_expression: None };
        evaluator.all_hold(&[expression])
    }

    #[test]
    fn map_keys_are_data_and_keyword_fields_are_escaped_as_kubernetes_does() {
        let object = json!({
            "metadata": {"labels": {"operator.butlerlabs.dev/providers": "true", "namespace": "x"}},
            "spec": {"hard": {"count/widgets.example.com": "2"}},
            "subjects": [{"name": "a", "namespace": "b"}],
        });
        assert!(holds(
            "object.metadata.labels['operator.butlerlabs.dev/providers'] == 'true'",
            object.clone()
        ));
        assert!(holds(
            "object.metadata.labels.all(k, k != 'namespace' || object.metadata.labels[k] == 'x')",
            object.clone()
        ));
        assert!(holds(
            "object.metadata.labels.exists(k, k.startsWith('operator.butlerlabs.dev/'))",
            object.clone()
        ));
        assert!(holds("'count/widgets.example.com' in object.spec.hard", object.clone()));
        assert!(holds("object.subjects.all(s, s.__namespace__ == 'b')", object.clone()));
        assert!(holds("oldObject == null && request.operation == 'CREATE'", object));
    }

    #[test]
    fn a_failure_says_its_message_and_an_error_is_told_apart() {
        let a = Attributes::default();
        let evaluator = Evaluator::new(&a, &json!({"a": 1}), &Value::Null, None);
        let failing = Expression {
            expression: "object.a == 2".into(),
            message: Some("a is not 2".into()),
            message_expression: Some("'a is ' + string(object.a)".into()),
        };
        let broken =
            Expression { expression: "object.b.c == 1".into(), message: None, message_expression: None };
        match evaluator.evaluate(&[failing, broken]).as_slice() {
            [Outcome::Failed(m), Outcome::Error(_)] => assert_eq!(m, "a is 1"),
            _ => panic!("a failure and an error"),
        }
    }
}
