//! The kinds proxops knows: the bundled ones embedded in the binary, loaded once per
//! process through the runtime.

use proxops_guests::Role;
use proxops_runtime::{KindComponent, Limits, Runtime, RuntimeError};

/// Where a kind came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindSource {
    Bundled,
    File(String),
}

/// Loaded kinds, looked up by `(apiVersion, kind)` or by folder.
#[derive(Debug, Clone)]
pub struct KindRegistry {
    kinds: Vec<(KindComponent, KindSource)>,
}

impl KindRegistry {
    /// Load every bundled kind. Bundled kinds are granted secrets (only the VM-like kinds
    /// ask for any).
    pub fn bundled(runtime: &Runtime) -> Result<Self, RuntimeError> {
        let mut kinds = Vec::new();
        for b in proxops_guests::bundled(Role::Kind) {
            let name = b.package.trim_start_matches("proxops-kind-");
            let component = runtime.load_kind(name, b.bytes, Limits::KIND, true)?;
            kinds.push((component, KindSource::Bundled));
        }
        Ok(KindRegistry { kinds })
    }

    pub fn iter(&self) -> impl Iterator<Item = (&KindComponent, &KindSource)> {
        self.kinds.iter().map(|(k, s)| (k, s))
    }

    /// Index of the kind handling `(api_version, kind)`.
    pub fn route(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.kinds
            .iter()
            .position(|(k, _)| k.info().api_version == api_version && k.info().kind == kind)
    }

    pub fn by_kind(&self, kind: &str) -> Option<&KindComponent> {
        self.kinds
            .iter()
            .map(|(k, _)| k)
            .find(|k| k.info().kind == kind)
    }

    pub fn get(&self, index: usize) -> &KindComponent {
        &self.kinds[index].0
    }

    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// Every kind folder, in registry order.
    pub fn folders(&self) -> Vec<String> {
        self.kinds
            .iter()
            .map(|(k, _)| k.info().folder.clone())
            .collect()
    }

    /// `VM, TemplateVM, …` for messages.
    pub fn kind_names(&self) -> String {
        self.kinds
            .iter()
            .map(|(k, _)| k.info().kind.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}
