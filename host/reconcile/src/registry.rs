//! The kinds proxops knows: the bundled ones embedded in the binary, loaded once per
//! process through the runtime; the third-party kinds `proxops.yaml` lists, each pinned by
//! its sha256 and held to its grant ([`KindRegistry::load_granted`]); and (tests only) the
//! files `PROXOPS_TEST_KINDS` names.
//!
//! A registry also holds one [`GuestRun`] per kind: the kind's budget and the first failure
//! that stopped it. Every instance handed out shares it, so a kind that trapped, timed out,
//! ran out of memory or used up its budget is not called again: each later call of that
//! kind (and so each of its objects) fails at once with the first failure, which the caller
//! reports as that object's error. [`KindRegistry::for_run`] starts a new run (one cycle of
//! one cluster) with the same compiled kinds.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_core::Diagnostic;
use proxops_core::grant::{Grant, KindEntry};
use proxops_guests::Role;
use proxops_runtime::{
    GuestError, GuestRun, KindComponent, Limits, Runtime, RuntimeError, SecretAccess,
};

use crate::grant::{Trust, declared_beyond, listing_problems};
use proxops_runtime::calls::{KindCalls, NativeKind};

/// Where a kind came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KindSource {
    Bundled,
    /// A file: its path (relative to the repository for `proxops.yaml` kinds).
    File(String),
}

/// Loaded kinds, looked up by `(apiVersion, kind)` or by folder.
#[derive(Clone)]
pub struct KindRegistry {
    kinds: Vec<(KindComponent, KindSource)>,
    /// Per kind, how far it is trusted (bundled, or held to a grant).
    trust: Vec<Trust>,
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

/// Why `folder` cannot be a kind's manifest folder, if it cannot: the repository's own
/// folders (cluster files, kinds, policies, the simulator's state), or not one plain name.
fn folder_problem(folder: &str) -> Option<&'static str> {
    const RESERVED: [&str; 4] = ["clusters", "kinds", "policies", "secrets"];
    let plain = !folder.is_empty()
        && folder.len() <= 63
        && folder
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !folder.starts_with('-');
    if !plain {
        Some("is not a plain folder name")
    } else if RESERVED.contains(&folder) {
        Some("holds the repository's own files")
    } else {
        None
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
                        runtime.load_kind_precompiled(
                            name,
                            b.bytes,
                            b.precompiled,
                            Limits::KIND,
                            SecretAccess::Values,
                        )
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
        let mut trust = Vec::new();
        for component in loaded {
            kinds.push((component?, KindSource::Bundled));
            trust.push(Trust::Bundled);
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
            let component = runtime.load_kind(&name, &wasm, Limits::KIND, SecretAccess::None)?;
            // Granted the calls it declares, never secrets or capabilities.
            let grant = Grant {
                calls: component
                    .info()
                    .calls
                    .iter()
                    .map(|c| proxops_core::grant::CallGrant {
                        method: crate::plan::method_name(c.method).to_string(),
                        path: c.path.clone(),
                    })
                    .collect(),
                ..Grant::default()
            };
            kinds.push((component, KindSource::File(path.display().to_string())));
            trust.push(Trust::Granted(grant));
        }
        let native = kinds.iter().map(|_| None).collect();
        let runs = kinds.iter().map(|_| GuestRun::new(None)).collect();
        Ok(KindRegistry {
            kinds,
            trust,
            native,
            runs,
            budget: None,
        })
    }

    /// Load the third-party kinds `proxops.yaml` lists (`entries`, files below `root`). Each
    /// must match its sha256 pin, be built for this contract, add a new kind name and folder
    /// (never shadow a loaded kind), and declare nothing beyond its grant. Every problem is
    /// reported against its `kinds[i]` field; on any, no kind is added.
    pub fn load_granted(
        &mut self,
        runtime: &Runtime,
        root: &Path,
        entries: &[KindEntry],
    ) -> Result<(), Vec<Diagnostic>> {
        let file = proxops_core::settings::FILE;
        let mut diags = Vec::new();
        let mut added: Vec<(KindComponent, KindSource, Trust)> = Vec::new();
        for entry in entries {
            let at = |field: &str| format!("{}.{field}", entry.path());
            let bytes =
                match proxops_core::settings::read_pinned_file(root, &entry.file, &entry.sha256) {
                    Ok(b) => b,
                    Err(e) => {
                        diags.push(Diagnostic::error(file, at("file"), e));
                        continue;
                    }
                };
            let actual = proxops_core::settings::sha256_hex(&bytes);
            if actual != entry.sha256 {
                diags.push(Diagnostic::error(
                    file,
                    at("sha256"),
                    format!(
                        "{} has sha256 {actual}, but proxops.yaml pins {}; the kind is not loaded. If you rebuilt or updated it on purpose, review it and pin the new hash",
                        entry.file, entry.sha256
                    ),
                ));
                continue;
            }
            let limits = granted_limits(&entry.grant);
            let name = entry.file.rsplit('/').next().unwrap_or(&entry.file);
            let name = name.strip_suffix(".wasm").unwrap_or(name);
            let unsafe_refs = crate::request::secret::grant_problems(&entry.grant.secrets);
            if !unsafe_refs.is_empty() {
                for why in unsafe_refs {
                    diags.push(Diagnostic::error(file, at("grant.secrets"), why));
                }
                continue;
            }
            // References to the refs the grant names, never values (`proxops:kind@0.2.1`).
            let secrets = if entry.grant.secrets.is_empty() {
                SecretAccess::None
            } else {
                SecretAccess::Refs(entry.grant.secrets.keys().cloned().collect())
            };
            let component = match runtime.load_kind(name, &bytes, limits, secrets) {
                Ok(c) => c,
                Err(e) => {
                    diags.push(Diagnostic::error(file, at("file"), e.to_string()));
                    continue;
                }
            };
            let info = component.info();
            let taken = self
                .kinds
                .iter()
                .map(|(k, s)| (k.info(), s))
                .chain(added.iter().map(|(k, s, _)| (k.info(), s)));
            let mut clash = folder_problem(&info.folder).map(|why| {
                format!(
                    "{} (kind `{}`) declares the manifest folder `{}`, which {why}; a kind's folder is one lowercase name (letters, digits, `-`)",
                    entry.file,
                    info.kind,
                    proxops_core::diag::quote(&info.folder)
                )
            });
            for (other, source) in taken {
                if clash.is_some() {
                    break;
                }
                let whose = match source {
                    KindSource::Bundled => "the bundled".to_string(),
                    KindSource::File(f) => format!("{f}'s"),
                };
                if other.kind == info.kind {
                    clash = Some(format!(
                        "{} declares kind `{}`, which is already {whose} kind; a third-party kind cannot shadow another kind",
                        entry.file, info.kind
                    ));
                } else if other.folder == info.folder {
                    clash = Some(format!(
                        "{} (kind `{}`) declares the manifest folder `{}/`, which is {whose} kind `{}`'s; a kind cannot take another kind's folder",
                        entry.file, info.kind, info.folder, other.kind
                    ));
                }
                if clash.is_some() {
                    break;
                }
            }
            if let Some(why) = clash {
                diags.push(Diagnostic::error(file, at("file"), why));
                continue;
            }
            let mut beyond = declared_beyond(info, &entry.grant);
            beyond.extend(listing_problems(
                info,
                self.kinds
                    .iter()
                    .map(|(k, _)| k.info())
                    .chain(added.iter().map(|(k, _, _)| k.info())),
            ));
            if !beyond.is_empty() {
                diags.push(Diagnostic::error(
                    file,
                    at("grant"),
                    format!(
                        "the {} kind ({}) declares more than its grant, so proxops does not start; review it, and if you trust it with this, add to its grant: {}",
                        info.kind,
                        entry.file,
                        beyond.join("; ")
                    ),
                ));
                continue;
            }
            added.push((
                component,
                KindSource::File(entry.file.clone()),
                Trust::Granted(entry.grant.clone()),
            ));
        }
        if !diags.is_empty() {
            return Err(diags);
        }
        for (component, source, trust) in added {
            self.kinds.push((component, source));
            self.trust.push(trust);
            self.native.push(None);
            self.runs.push(GuestRun::new(self.budget));
        }
        Ok(())
    }

    /// What kind `index`'s answers depend on besides their inputs
    /// ([`proxops_runtime::KindComponent::fingerprint`]); `None` for a native backend, whose
    /// answers are never replayed ([`crate::memo::Memo`]).
    pub fn fingerprint(&self, index: usize) -> Option<String> {
        self.native[index]
            .is_none()
            .then(|| self.kinds[index].0.fingerprint())
    }

    /// How far kind `index` is trusted.
    pub fn trust(&self, index: usize) -> &Trust {
        &self.trust[index]
    }

    /// Whether instances of kind `index` may serve many objects (bundled kinds, and native
    /// backends); a third-party kind gets a fresh instance per object.
    pub fn reuses_instances(&self, index: usize) -> bool {
        self.native[index].is_some() || self.trust[index] == Trust::Bundled
    }

    /// The same kinds in a new run (one cycle of one cluster): no kind is stopped, and each
    /// may take `budget` in total (`None`: unbounded; each call keeps its deadline).
    pub fn for_run(&self, budget: Option<Duration>) -> KindRegistry {
        KindRegistry {
            kinds: self.kinds.clone(),
            trust: self.trust.clone(),
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

/// A third-party kind's limits: its grant's, each defaulting to the host's kind limits (the
/// grant's parser already refused values above the host's maxima).
fn granted_limits(grant: &Grant) -> Limits {
    let l = grant.limits;
    let base = Limits::KIND;
    Limits {
        deadline: l.deadline_ms.map_or(base.deadline, Duration::from_millis),
        memory: l.memory_mib.map_or(base.memory, |m| (m as usize) << 20),
        output: l.output_kib.map_or(base.output, |k| (k as usize) << 10),
        log_lines: l.log_lines.map_or(base.log_lines, |n| n as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::folder_problem;

    #[test]
    fn a_kinds_folder_is_one_plain_name_outside_the_repositorys_own() {
        let plain = "is not a plain folder name";
        let own = "holds the repository's own files";
        let cases: &[(&str, Option<&str>)] = &[
            ("box", None),
            ("sdn-zone", None),
            ("pool2", None),
            ("", Some(plain)),
            ("../up", Some(plain)),
            ("a/b", Some(plain)),
            (".hidden", Some(plain)),
            ("Box", Some(plain)),
            ("-x", Some(plain)),
            ("clusters", Some(own)),
            ("kinds", Some(own)),
            ("policies", Some(own)),
            ("secrets", Some(own)),
        ];
        for (folder, expected) in cases {
            assert_eq!(folder_problem(folder), *expected, "{folder:?}");
        }
    }
}
