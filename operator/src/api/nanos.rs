//! A duration written either way cluster-api-operator's objects write it: a Go duration string
//! (`2m`) or, as its `controller.cacheSyncTimeout` (a Go `time.Duration` in JSON), an integer of
//! nanoseconds (`120000000000`).

use std::borrow::Cow;

use kube::core::Duration;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::spec::DURATION_PATTERN;

/// A duration from a Go duration string or an integer of nanoseconds; written back as a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NanosOrDuration(pub Duration);

impl Serialize for NanosOrDuration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for NanosOrDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Nanos(u64),
            Text(Duration),
        }
        match Written::deserialize(deserializer) {
            Ok(Written::Nanos(n)) => Ok(NanosOrDuration(std::time::Duration::from_nanos(n).into())),
            Ok(Written::Text(d)) => Ok(NanosOrDuration(d)),
            Err(_) => Err(serde::de::Error::custom(
                "a duration is a Go duration (2m, 1h30m) or an integer of nanoseconds",
            )),
        }
    }
}

impl JsonSchema for NanosOrDuration {
    fn schema_name() -> Cow<'static, str> {
        "NanosOrDuration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // The pattern holds for a string, the minimum for an integer.
        json_schema!({"x-kubernetes-int-or-string": true, "pattern": DURATION_PATTERN, "minimum": 0})
    }
}

impl std::fmt::Display for NanosOrDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_and_go_durations_are_the_same_duration() {
        let from_int: NanosOrDuration = serde_json::from_str("120000000000").unwrap();
        let from_text: NanosOrDuration = serde_json::from_str("\"2m\"").unwrap();
        let std = |d: NanosOrDuration| std::time::Duration::from(d.0);
        assert_eq!(std(from_int), std::time::Duration::from_secs(120));
        assert_eq!(std(from_int), std(from_text));
        let written = serde_json::to_string(&from_int).unwrap();
        assert!(written.starts_with('"'), "written back as a Go duration: {written}");
        assert_eq!(serde_json::from_str::<NanosOrDuration>(&written).unwrap(), from_int);
        let error = serde_json::from_str::<NanosOrDuration>("\"two minutes\"").unwrap_err().to_string();
        assert!(error.contains("Go duration"), "{error}");
        assert!(serde_json::from_str::<NanosOrDuration>("-5").is_err());
    }
}
