//! The kinds proxops knows: the bundled ones embedded in the binary, loaded once per
//! process through the runtime.

use std::sync::Arc;

use proxops_guests::Role;
use proxops_runtime::{GuestError, KindComponent, Limits, Runtime, RuntimeError};

use crate::workers::{KindCalls, NativeKind};

/// Where a kind came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindSource {
    Bundled,
    File(String),
}

/// Loaded kinds, looked up by `(apiVersion, kind)` or by folder.
#[derive(Clone)]
pub struct KindRegistry {
    kinds: Vec<(KindComponent, KindSource)>,
    /// Per kind, a native backend that replaces the component's calls (benchmarks).
    native: Vec<Option<Arc<dyn NativeKind>>>,
}

impl std::fmt::Debug for KindRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let native: Vec<&str> = self
            .kinds
            .iter()
            .zip(&self.native)
            .filter(|(_, n)| n.is_some())
            .map(|((k, _), _)| k.info().kind.as_str())
            .collect();
        f.debug_struct("KindRegistry")
            .field("kinds", &self.kinds)
            .field("native", &native)
            .finish()
    }
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
        let native = kinds.iter().map(|_| None).collect();
        Ok(KindRegistry { kinds, native })
    }

    /// Serve `kind`'s calls with `backend` instead of its component (the component still
    /// describes the kind). For measurements: a native backend runs outside the sandbox.
    /// Returns false when no loaded kind is called `kind`.
    pub fn register_native(&mut self, kind: &str, backend: Arc<dyn NativeKind>) -> bool {
        match self.kinds.iter().position(|(k, _)| k.info().kind == kind) {
            Some(i) => {
                self.native[i] = Some(backend);
                true
            }
            None => false,
        }
    }

    /// A new instance of kind `index`: its native backend if one is registered, else a
    /// component instance.
    pub fn instance(&self, index: usize) -> Result<Box<dyn KindCalls>, GuestError> {
        match &self.native[index] {
            Some(native) => Ok(native.instance()),
            None => Ok(Box::new(self.kinds[index].0.instance()?)),
        }
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
