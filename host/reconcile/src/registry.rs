//! The kinds proxops knows: the bundled ones embedded in the binary, loaded once per
//! process through the runtime, and (tests only) the files `PROXOPS_TEST_KINDS` names.
//!
//! A registry also holds one [`GuestRun`] per kind: the kind's budget and the first failure
//! that stopped it. Every instance handed out shares it, so a kind that trapped, timed out,
//! ran out of memory or used up its budget is not called again: each later call of that
//! kind (and so each of its objects) fails at once with the first failure, which the caller
//! reports as that object's error. [`KindRegistry::for_run`] starts a new run (one cycle of
//! one cluster) with the same compiled kinds.

use std::sync::Arc;
use std::time::Duration;

use proxops_guests::Role;
use proxops_runtime::{GuestError, GuestRun, KindComponent, Limits, Runtime, RuntimeError};

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
    /// Per kind, this run's state (shared by clones of this registry).
    runs: Vec<Arc<GuestRun>>,
    /// The time each kind's calls may take in one run (`None`: unbounded).
    budget: Option<Duration>,
}

/// Environment variable naming extra kind components (`:`-separated paths), loaded without
/// any grant after the bundled kinds: how end-to-end tests run the test-only `misbehave`
/// kind through the real binary. Not a way to ship kinds (those come with the third-party
/// kind support of `proxops.yaml`).
pub const TEST_KINDS_VAR: &str = "PROXOPS_TEST_KINDS";

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
        // One thread per kind: with a cold cache, compiling is most of a first run, and
        // each component's compile has serial stretches that the others can fill.
        let loaded: Vec<Result<KindComponent, RuntimeError>> = std::thread::scope(|scope| {
            let threads: Vec<_> = proxops_guests::bundled(Role::Kind)
                .map(|b| {
                    scope.spawn(move || {
                        let name = b.package.trim_start_matches("proxops-kind-");
                        runtime.load_kind(name, b.bytes, Limits::KIND, true)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        let mut kinds = Vec::new();
        for component in loaded {
            kinds.push((component?, KindSource::Bundled));
        }
        let extra = std::env::var_os(TEST_KINDS_VAR).unwrap_or_default();
        for path in std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()) {
            let wasm = std::fs::read(&path).map_err(|source| RuntimeError::Read {
                path: path.clone(),
                source,
            })?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let component = runtime.load_kind(&name, &wasm, Limits::KIND, false)?;
            kinds.push((component, KindSource::File(path.display().to_string())));
        }
        let native = kinds.iter().map(|_| None).collect();
        let runs = kinds.iter().map(|_| GuestRun::new(None)).collect();
        Ok(KindRegistry {
            kinds,
            native,
            runs,
            budget: None,
        })
    }

    /// The same kinds in a new run (one cycle of one cluster): no kind is stopped, and each
    /// may take `budget` in total (`None`: unbounded; each call keeps its deadline).
    pub fn for_run(&self, budget: Option<Duration>) -> KindRegistry {
        KindRegistry {
            kinds: self.kinds.clone(),
            native: self.native.clone(),
            runs: self.kinds.iter().map(|_| GuestRun::new(budget)).collect(),
            budget,
        }
    }

    /// The budget of each kind in this run.
    pub fn budget(&self) -> Option<Duration> {
        self.budget
    }

    /// This run's state of kind `index`: calls made, time used, the failure that stopped it.
    pub fn run(&self, index: usize) -> &GuestRun {
        &self.runs[index]
    }

    /// Kinds stopped in this run, with the failure that stopped each.
    pub fn failures(&self) -> Vec<(&str, GuestError)> {
        self.kinds
            .iter()
            .zip(&self.runs)
            .filter_map(|((k, _), run)| Some((k.info().kind.as_str(), run.failure()?)))
            .collect()
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

    /// A new instance of kind `index` in this registry's run: its native backend if one is
    /// registered, else a component instance (refused at once when the kind is stopped).
    pub fn instance(&self, index: usize) -> Result<Box<dyn KindCalls>, GuestError> {
        match &self.native[index] {
            Some(native) => Ok(native.instance()),
            None => Ok(Box::new(
                self.kinds[index].0.instance_in(&self.runs[index])?,
            )),
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
