//! Each provider's rendered release, kept from one reconcile to the next. Rendering (variables,
//! images and namespaces put in, then every object parsed) is the costliest step of a
//! reconcile: seconds for Cluster API's 1.3 MB core in a debug build. Most reconciles (a
//! Deployment's status changed, a drift repair, a pause or an unpause) render the same release
//! with the same inputs, so the last rendering of each provider is kept and used again while
//! they are the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use butler_repository::{ComponentsOptions, ImageOverrides, ProcessError, process_components, sha256_hex};
use serde_json::Value;

use crate::controller::vocabulary::ProviderKey;

/// A release's objects as rendered, and what rendering warned about.
#[derive(Debug)]
pub struct Rendered {
    /// Each object as compact JSON: a parsed tree takes several times the text's size (Cluster
    /// API's core, 1.3 MB of YAML, is tens of MB of values), and a kept rendering lives as long
    /// as its provider; reading it back costs milliseconds.
    packed: Vec<Box<str>>,
    pub warnings: Vec<String>,
}

impl Rendered {
    /// Each object packed as soon as it is parsed: the release is never whole as a tree.
    fn new(
        objects: impl Iterator<Item = Result<Value, ProcessError>>,
        warnings: Vec<String>,
    ) -> Result<Rendered, ProcessError> {
        let packed =
            objects.map(|o| o.map(|o| o.to_string().into_boxed_str())).collect::<Result<Vec<_>, _>>()?;
        Ok(Rendered { packed, warnings })
    }

    /// The objects, as rendered (a copy of its own for the caller to change).
    pub fn objects(&self) -> Vec<Value> {
        self.packed.iter().map(|o| serde_json::from_str(o).expect("written by Rendered::new")).collect()
    }
}

/// What a rendering was made from: equal inputs render equal objects.
struct Inputs {
    text: String,
    what: String,
    label: String,
    namespace: Option<String>,
    images: ImageOverrides,
    /// Every variable the text uses, with the value it had.
    variables: Vec<(String, Option<String>)>,
}

impl Inputs {
    fn matches(&self, text_digest: &str, options: &ComponentsOptions<'_>) -> bool {
        self.text == text_digest
            && self.what == options.what
            && self.label == options.provider_label
            && self.namespace.as_deref() == options.target_namespace
            && self.images == *options.images
            && self.variables.iter().all(|(name, value)| (options.variables)(name) == *value)
    }
}

/// The last rendering of each provider.
#[derive(Default)]
pub struct Renders {
    last: Mutex<HashMap<ProviderKey, (Inputs, Arc<Rendered>)>>,
}

impl Renders {
    /// The provider's release rendered: the last rendering when its inputs are the same, else
    /// rendered now (and kept in place of the last).
    pub fn render(
        &self,
        provider: &ProviderKey,
        text: &str,
        options: &ComponentsOptions<'_>,
    ) -> Result<Arc<Rendered>, ProcessError> {
        let digest = sha256_hex(text.as_bytes());
        if let Some((inputs, rendered)) = self.last.lock().expect("not poisoned").get(provider)
            && inputs.matches(&digest, options)
        {
            return Ok(Arc::clone(rendered));
        }
        // The last rendering is not used again: it goes before this one is made, not after.
        self.forget(provider);
        let mut components = process_components(text, options)?;
        let variables =
            components.variables.iter().map(|v| (v.name.clone(), (options.variables)(&v.name))).collect();
        let warnings = std::mem::take(&mut components.warnings);
        let rendered = Arc::new(Rendered::new(components.into_objects(), warnings)?);
        let inputs = Inputs {
            text: digest,
            what: options.what.to_string(),
            label: options.provider_label.to_string(),
            namespace: options.target_namespace.map(String::from),
            images: options.images.clone(),
            variables,
        };
        self.last.lock().expect("not poisoned").insert(provider.clone(), (inputs, Arc::clone(&rendered)));
        Ok(rendered)
    }

    /// Forgets a provider that is gone.
    pub fn forget(&self, provider: &ProviderKey) {
        self.last.lock().expect("not poisoned").remove(provider);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderKind;

    const TEXT: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: x\ndata:\n  region: ${REGION}\n";

    fn options<'a>(
        images: &'a ImageOverrides,
        variables: &'a dyn Fn(&str) -> Option<String>,
    ) -> ComponentsOptions<'a> {
        ComponentsOptions {
            what: "infrastructure-aws v1.0.0",
            provider_label: "infrastructure-aws",
            target_namespace: Some("ns"),
            images,
            variables,
        }
    }

    fn settings(rendered: &Rendered) -> Value {
        rendered.objects().into_iter().find(|o| o["kind"] == "ConfigMap").expect("the ConfigMap")
    }

    #[test]
    fn the_same_inputs_render_once_and_any_change_renders_again() {
        let renders = Renders::default();
        let key = ProviderKey::new(ProviderKind::Infrastructure, "ns", "aws");
        let images = ImageOverrides::default();
        let eu = |_: &str| Some("eu".to_string());
        let first = renders.render(&key, TEXT, &options(&images, &eu)).unwrap();
        assert_eq!(settings(&first)["data"]["region"], "eu");
        let again = renders.render(&key, TEXT, &options(&images, &eu)).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "kept");

        let us = |_: &str| Some("us".to_string());
        let changed = renders.render(&key, TEXT, &options(&images, &us)).unwrap();
        assert_eq!(settings(&changed)["data"]["region"], "us", "a variable's value changed");
        let other_text = TEXT.replace("settings", "others");
        let renamed = renders.render(&key, &other_text, &options(&images, &us)).unwrap();
        assert_eq!(settings(&renamed)["metadata"]["name"], "others", "the release changed");
        let mirrored: ImageOverrides =
            serde_saphyr::from_str("all:\n  repository: mirror.internal\n").unwrap();
        let moved = renders.render(&key, &other_text, &options(&mirrored, &us)).unwrap();
        assert!(!Arc::ptr_eq(&renamed, &moved), "the images changed");
        let none = |_: &str| None;
        assert!(renders.render(&key, TEXT, &options(&images, &none)).is_err(), "a variable went missing");

        renders.forget(&key);
        let after = renders.render(&key, TEXT, &options(&images, &eu)).unwrap();
        assert!(!Arc::ptr_eq(&first, &after));
    }
}
