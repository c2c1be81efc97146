//! Resource kinds: components of the `proxops:kind/kind` world.

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker};

use crate::guest::{GuestRun, Instance, Loaded, World};
use crate::host::{
    COMPARISONS_PER_CALL, HostState, SecretAccess, SecretError as HostSecretError, SecretSource,
};
use crate::size::{OutputSize, Prose, no_prose, output_size, prose};
use crate::{GuestError, GuestLog, Limits, Runtime, RuntimeError};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: ["../../wit/common/0.1.0", "../../wit/kind/0.2.1"],
        world: "proxops:kind/kind",
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    });
}

pub use bindings::exports::proxops::kind::reconciler::{
    Adopted, Anomaly, Drift, Gap, KindInfo, ObjectKey, Observation, Proposal, Read, Reference,
    Resolved, Validated,
};
pub use bindings::proxops::common::types::{Call, Change, Diagnostic, Method, Param, Severity};
pub use bindings::proxops::kind::types::{
    Action, CallPattern, Capability, Listing, Operation, Restore,
};

/// The kind step that starts, stops or shuts an object down (`Operation::Step`).
pub const POWER: &str = "power";
/// The kind step that turns a VM into a template.
pub const MARK_TEMPLATE: &str = "mark-template";

impl Operation {
    /// Whether this is the kind step `name`.
    pub fn is_step(&self, name: &str) -> bool {
        matches!(self, Operation::Step(s) if s == name)
    }

    /// The [`POWER`] step (start, stop, shutdown): it still runs after a failed update of the
    /// same object, since a failed write never keeps an object from its declared state.
    pub fn is_power(&self) -> bool {
        self.is_step(POWER)
    }
}

/// The kind contract this host implements (`proxops:kind@…`).
pub const CONTRACT: &str = "0.2.1";

use bindings::proxops::common::{log, types};
use bindings::proxops::kind::secrets;

impl types::Host for HostState {}
impl bindings::proxops::kind::types::Host for HostState {}

impl log::Host for HostState {
    fn log(&mut self, level: log::Level, message: String) {
        let level = match level {
            log::Level::Trace => "trace",
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
        };
        self.push_log(level, &message);
    }
}

impl secrets::Host for HostState {
    fn resolve(&mut self, path: String) -> Result<String, secrets::SecretError> {
        self.secret_lookups = self.secret_lookups.saturating_add(1);
        // Values only for the bundled kinds: a third-party kind refers, never holds.
        let (SecretAccess::Values, Some(source)) = (&self.secret_access, &self.secrets) else {
            return Err(secrets::SecretError::Denied);
        };
        source.resolve(&path).map_err(secret_error)
    }

    fn find(
        &mut self,
        prefix: String,
        value: String,
    ) -> Result<Option<String>, secrets::SecretError> {
        self.secret_lookups = self.secret_lookups.saturating_add(1);
        let Some(source) = &self.secrets else {
            return Err(secrets::SecretError::Denied);
        };
        match &self.secret_access {
            SecretAccess::None => Err(secrets::SecretError::Denied),
            SecretAccess::Values => source.find(&prefix, &value).map_err(secret_error),
            // Only among the refs granted, and a few times per call: the kind learns no path
            // it could not name, and cannot guess a value by trying many.
            SecretAccess::Refs(refs) => {
                if self.comparisons >= COMPARISONS_PER_CALL {
                    return Err(too_many_comparisons());
                }
                self.comparisons += 1;
                let below = format!("{prefix}.");
                Ok(refs
                    .iter()
                    .filter(|r| r.starts_with(&below))
                    .find(|r| source.resolve(r).is_ok_and(|v| v == value))
                    .cloned())
            }
        }
    }

    fn reference(&mut self, path: String) -> Result<String, secrets::SecretError> {
        self.secret_lookups = self.secret_lookups.saturating_add(1);
        let Some(source) = &self.secrets else {
            return Err(secrets::SecretError::Denied);
        };
        if !self.secret_access.may_refer(&path) {
            return Err(secrets::SecretError::Denied);
        }
        // Resolved now so that a missing or empty secret fails the plan, not the apply.
        source.resolve(&path).map_err(secret_error)?;
        Ok(proxops_core::secret_ref::token(&path))
    }

    fn matches(&mut self, path: String, value: String) -> Result<bool, secrets::SecretError> {
        self.secret_lookups = self.secret_lookups.saturating_add(1);
        let Some(source) = &self.secrets else {
            return Err(secrets::SecretError::Denied);
        };
        if !self.secret_access.may_compare(&path) {
            return Err(secrets::SecretError::Denied);
        }
        if matches!(self.secret_access, SecretAccess::Refs(_)) {
            if self.comparisons >= COMPARISONS_PER_CALL {
                return Err(too_many_comparisons());
            }
            self.comparisons += 1;
        }
        Ok(source.resolve(&path).map_err(secret_error)? == value)
    }
}

fn too_many_comparisons() -> secrets::SecretError {
    secrets::SecretError::Other(format!(
        "more than {COMPARISONS_PER_CALL} secret comparisons in one call; a kind compares the values of its object's refs, it does not guess"
    ))
}

fn secret_error(e: HostSecretError) -> secrets::SecretError {
    match e {
        HostSecretError::Missing => secrets::SecretError::Missing,
        HostSecretError::Empty => secrets::SecretError::Empty,
        HostSecretError::Invalid(why) => secrets::SecretError::Invalid(why),
    }
}

pub(crate) fn linker(engine: &wasmtime::Engine) -> Result<Linker<HostState>, RuntimeError> {
    let mut linker = Linker::new(engine);
    crate::host::add_wasi(&mut linker)?;
    bindings::Kind::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
    Ok(linker)
}

impl World for bindings::Kind {
    type Pre = bindings::KindPre<HostState>;
    fn instantiate(pre: &Self::Pre, store: &mut Store<HostState>) -> wasmtime::Result<Self> {
        pre.instantiate(store)
    }
}

output_size!(KindInfo {
    kind,
    api_version,
    folder,
    schema,
    calls,
    listings,
    references_kinds
});
output_size!(CallPattern { path });
output_size!(Listing { path, id_field });
output_size!(Adopted { manifest, gaps });
output_size!(Gap { path, reason });
output_size!(Restore { calls });
output_size!(Validated { desired, warnings });
output_size!(Diagnostic { path, message });
output_size!(Reference { kind, name, path });
output_size!(ObjectKey {
    node,
    space,
    key,
    resource_id
});
output_size!(Call { path, params });
output_size!(Param { name, value });
output_size!(Proposal {
    actions,
    drift,
    pending,
    anomalies
});
output_size!(Action {
    operation,
    summary,
    calls,
    changes,
    restore
});
output_size!(Change { key, old, new });
output_size!(Drift {
    path,
    live,
    desired
});
output_size!(Anomaly { path, message });
no_prose!(KindInfo, Reference, ObjectKey, Call);
prose!(Diagnostic {
    path: [path],
    text: [message],
    nested: []
});
prose!(Anomaly {
    path: [path],
    text: [message],
    nested: []
});
prose!(Gap {
    path: [path],
    text: [reason],
    nested: []
});
prose!(Drift {
    path: [path],
    text: [],
    nested: []
});
prose!(Action {
    path: [],
    text: [summary],
    nested: []
});
prose!(Validated {
    path: [],
    text: [],
    nested: [warnings]
});
prose!(Adopted {
    path: [],
    text: [],
    nested: [gaps]
});
prose!(Proposal {
    path: [],
    text: [],
    nested: [actions, drift, pending, anomalies]
});

impl OutputSize for Operation {
    fn output_size(&self) -> usize {
        match self {
            Operation::Step(name) => name.len(),
            _ => 1,
        }
    }
}

/// A loaded kind: compiled once, pre-instantiated, with its `describe()` answer.
#[derive(Clone)]
pub struct KindComponent {
    loaded: Arc<Loaded<bindings::KindPre<HostState>>>,
    info: Arc<KindInfo>,
    /// The contract version the component was built for (its export's), e.g. `0.2.0`.
    contract: String,
}

impl std::fmt::Debug for KindComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindComponent")
            .field("name", &self.loaded.name)
            .field("kind", &self.info.kind)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Load a kind component. `secrets` is what the operator grants it of the cluster's
    /// secrets: with [`SecretAccess::None`] every lookup answers `denied`, whatever source an
    /// instance is given.
    pub fn load_kind(
        &self,
        name: &str,
        wasm: &[u8],
        limits: Limits,
        secrets: SecretAccess,
    ) -> Result<KindComponent, RuntimeError> {
        self.load_kind_precompiled(name, wasm, None, limits, secrets)
    }

    /// [`Runtime::load_kind`] with the artifact precompiled at build time (a bundled kind's
    /// `proxops_guests::Bundled::precompiled`): used when wasmtime accepts it for this
    /// engine and CPU, else the kind is compiled (or taken from the cache) as usual.
    pub fn load_kind_precompiled(
        &self,
        name: &str,
        wasm: &[u8],
        precompiled: Option<&[u8]>,
        limits: Limits,
        secrets: SecretAccess,
    ) -> Result<KindComponent, RuntimeError> {
        limits.check().map_err(|message| RuntimeError::Limits {
            guest: name.to_string(),
            message,
        })?;
        let (component, cache) = self.compile(name, wasm, precompiled)?;
        let contract = check_contract(name, &component, &self.engine)?;
        let world_error = |e: wasmtime::Error| RuntimeError::World {
            guest: name.to_string(),
            world: "proxops:kind/kind@0.2.1",
            message: format!("{e:#}"),
        };
        let pre = self
            .kind_linker
            .instantiate_pre(&component)
            .map_err(world_error)?;
        let pre = bindings::KindPre::new(pre).map_err(world_error)?;
        let loaded = Arc::new(Loaded::new(
            name, wasm, &component, cache, limits, secrets, pre,
        ));
        let mut instance = KindInstance {
            inner: Instance::new(loaded.clone(), GuestRun::new(None))?,
        };
        let info = instance.describe()?;
        Ok(KindComponent {
            loaded,
            info: Arc::new(info),
            contract,
        })
    }
}

impl KindComponent {
    /// Name the component was loaded under (e.g. `vm` or a file name).
    pub fn name(&self) -> &str {
        &self.loaded.name
    }

    /// SHA-256 of the component's bytes, hex.
    pub fn sha256(&self) -> &str {
        &self.loaded.sha256
    }

    /// What a call's answer depends on besides its inputs: the component's bytes and the
    /// limits it runs under. Two loads with the same fingerprint answer a call that read no
    /// secret and logged nothing ([`KindInstance::last_call_replayable`]) the same way:
    /// guests see a stopped clock, fixed randomness and no files, network or environment.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let both = format!("{}/{:?}", self.loaded.sha256, self.loaded.limits);
        hex::encode(sha2::Sha256::digest(both.as_bytes()))
    }

    /// Size of the component in bytes.
    pub fn size(&self) -> usize {
        self.loaded.size
    }

    /// Whether loading hit the compiled-component cache.
    pub fn cache_outcome(&self) -> crate::CacheOutcome {
        self.loaded.cache
    }

    /// The kind's `describe()` answer, read once at load.
    /// The contract version the component was built for, e.g. `0.2.0` (a compatible older
    /// one runs unchanged on this host's [`CONTRACT`]).
    pub fn contract(&self) -> &str {
        &self.contract
    }

    pub fn info(&self) -> &KindInfo {
        &self.info
    }

    /// A fresh instance in a run of its own (no budget); reuse it for many calls.
    pub fn instance(&self) -> Result<KindInstance, GuestError> {
        self.instance_in(&GuestRun::new(None))
    }

    /// A fresh instance in `run`: refused at once when the kind already failed in that run,
    /// and its calls count against the run's budget. One per worker per cycle.
    pub fn instance_in(&self, run: &Arc<GuestRun>) -> Result<KindInstance, GuestError> {
        Ok(KindInstance {
            inner: Instance::new(self.loaded.clone(), run.clone())?,
        })
    }
}

/// A live instance of a kind.
pub struct KindInstance {
    inner: Instance<bindings::Kind>,
}

impl std::fmt::Debug for KindInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindInstance")
            .field("guest", &self.inner.loaded.name)
            .finish_non_exhaustive()
    }
}

impl KindInstance {
    fn call<R: OutputSize + Prose + Send>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&bindings::Kind, &mut Store<HostState>) -> wasmtime::Result<R> + Send,
    ) -> Result<R, GuestError> {
        self.inner.call(call, f)
    }

    /// Log lines of the last call.
    pub fn last_log(&self) -> &GuestLog {
        self.inner.last_log()
    }

    /// Whether the last call's answer may be replayed for the same inputs to a component with
    /// the same [`KindComponent::fingerprint`]: it looked up no secret and logged nothing.
    pub fn last_call_replayable(&self) -> bool {
        self.inner.last_call_replayable()
    }

    /// Where this instance's secret lookups go from now on (only if the kind was granted
    /// secrets; `None` denies every lookup).
    pub fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        self.inner.set_secrets(source);
    }

    pub fn describe(&mut self) -> Result<KindInfo, GuestError> {
        self.call("describe", |k, s| {
            k.proxops_kind_reconciler().call_describe(s)
        })
    }

    pub fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError> {
        self.call("validate", |k, s| {
            k.proxops_kind_reconciler().call_validate(s, manifest)
        })
    }

    pub fn references(&mut self, desired: &str) -> Result<Vec<Reference>, GuestError> {
        self.call("references", |k, s| {
            k.proxops_kind_reconciler().call_references(s, desired)
        })
    }

    pub fn check_references(
        &mut self,
        desired: &str,
        resolved: &[Resolved],
    ) -> Result<Vec<Diagnostic>, GuestError> {
        self.call("check-references", |k, s| {
            k.proxops_kind_reconciler()
                .call_check_references(s, desired, resolved)
        })
    }

    pub fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError> {
        self.call("identity", |k, s| {
            k.proxops_kind_reconciler().call_identity(s, desired)
        })
    }

    pub fn observe(
        &mut self,
        desired: Option<&str>,
        live: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Result<Vec<Call>, GuestError> {
        self.call("observe", |k, s| {
            k.proxops_kind_reconciler()
                .call_observe(s, desired, live, resolved, referrers)
        })
    }

    pub fn plan(
        &mut self,
        desired: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError> {
        self.call("plan", |k, s| {
            k.proxops_kind_reconciler()
                .call_plan(s, desired, resolved, referrers, observed)
        })
    }

    pub fn claims(&mut self, listing: &str, entry: &str) -> Result<bool, GuestError> {
        self.call("claims", |k, s| {
            k.proxops_kind_reconciler().call_claims(s, listing, entry)
        })
    }

    pub fn adopt(&mut self, observed: &Observation) -> Result<Result<Adopted, String>, GuestError> {
        let mut adopted = self.call("adopt", |k, s| {
            k.proxops_kind_reconciler().call_adopt(s, observed)
        })?;
        if let Err(reason) = &mut adopted {
            crate::size::cut(reason, crate::size::MAX_PROSE);
        }
        Ok(adopted)
    }

    pub fn finally(&mut self, changed: &[String]) -> Result<Vec<Action>, GuestError> {
        self.call("finally", |k, s| {
            k.proxops_kind_reconciler().call_finally(s, changed)
        })
    }
}

/// Refuse a component built for another major version of the kind contract before linking
/// it, naming both versions (for 0.x, the first non-zero component is the major). Returns the
/// version it was built for.
fn check_contract(
    name: &str,
    component: &wasmtime::component::Component,
    engine: &wasmtime::Engine,
) -> Result<String, RuntimeError> {
    let ty = component.component_type();
    let Some(found) = ty.exports(engine).find_map(|(export, _)| {
        export
            .strip_prefix("proxops:kind/reconciler@")
            .map(str::to_string)
    }) else {
        // Not a kind at all: the world check names what is missing.
        return Ok(String::new());
    };
    if compatible(&found, CONTRACT) {
        Ok(found)
    } else {
        Err(RuntimeError::Contract {
            guest: name.to_string(),
            found: format!("proxops:kind@{found}"),
            supported: format!("proxops:kind@{CONTRACT}"),
        })
    }
}

/// Whether a component built for contract `found` runs on a host of contract `supported`:
/// same major, or for 0.x the same first non-zero component.
pub fn compatible(found: &str, supported: &str) -> bool {
    fn major(v: &str) -> Option<(u64, u64)> {
        let mut parts = v.split(['.', '-', '+']).map(str::parse::<u64>);
        let a = parts.next()?.ok()?;
        let b = parts.next()?.ok()?;
        Some(if a == 0 { (0, b) } else { (a, 0) })
    }
    matches!((major(found), major(supported)), (Some(f), Some(s)) if f == s)
}
