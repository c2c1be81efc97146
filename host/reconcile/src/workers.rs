//! Parallel guest calls: worker threads take the items in small batches, each with its own lazily
//! created instance per bundled kind (trusted to be reused within a cycle); third-party kinds
//! get a fresh instance per object.
//! The workers are plain threads, never tokio's: wasmtime-wasi's synchronous bindings block
//! on their own runtime, which a tokio thread must not do (a guest printing or sleeping
//! would crash the host). Instances share their kind's run (see [`KindRegistry`]), so a kind
//! that fails on one worker is not called again on any.
//!
//! Every guest call goes through [`KindCalls`]. A component instance
//! ([`proxops_runtime::KindInstance`]) implements it; so can a native backend registered with
//! [`KindRegistry::register_native`] (benchmarks measure the WebAssembly overhead by running
//! the same kind logic compiled into the host). The dispatch costs one indirect call per
//! guest call, nothing next to a component call.

use std::sync::Arc;

use proxops_runtime::kind::{
    Action, Adopted, Call, Diagnostic, ObjectKey, Observation, Proposal, Reference, Resolved,
    Validated,
};
use proxops_runtime::{GuestError, KindInstance, SecretSource};

use crate::KindRegistry;

/// The calls the engine makes into a kind, in the host's (WIT) types.
pub trait KindCalls: Send {
    /// Where secret lookups go from now on (`None` denies them).
    fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>);
    fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError>;
    fn references(&mut self, desired: &str) -> Result<Vec<Reference>, GuestError>;
    fn check_references(
        &mut self,
        desired: &str,
        resolved: &[Resolved],
    ) -> Result<Vec<Diagnostic>, GuestError>;
    fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError>;
    fn observe(
        &mut self,
        desired: Option<&str>,
        live: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Result<Vec<Call>, GuestError>;
    fn plan(
        &mut self,
        desired: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError>;
    fn claims(&mut self, listing: &str, entry: &str) -> Result<bool, GuestError>;
    fn finally(&mut self, changed: &[String]) -> Result<Vec<Action>, GuestError>;
    fn adopt(&mut self, observed: &Observation) -> Result<Result<Adopted, String>, GuestError>;
    /// Whether the last call's answer may be replayed from [`crate::Memo`] next time (a
    /// component call that read no secret and logged nothing); never for a native backend.
    fn last_call_replayable(&self) -> bool {
        false
    }
}

impl KindCalls for KindInstance {
    fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        KindInstance::set_secrets(self, source);
    }
    fn last_call_replayable(&self) -> bool {
        KindInstance::last_call_replayable(self)
    }
    fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError> {
        KindInstance::validate(self, manifest)
    }
    fn references(&mut self, desired: &str) -> Result<Vec<Reference>, GuestError> {
        KindInstance::references(self, desired)
    }
    fn check_references(
        &mut self,
        desired: &str,
        resolved: &[Resolved],
    ) -> Result<Vec<Diagnostic>, GuestError> {
        KindInstance::check_references(self, desired, resolved)
    }
    fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError> {
        KindInstance::identity(self, desired)
    }
    fn observe(
        &mut self,
        desired: Option<&str>,
        live: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Result<Vec<Call>, GuestError> {
        KindInstance::observe(self, desired, live, resolved, referrers)
    }
    fn plan(
        &mut self,
        desired: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError> {
        KindInstance::plan(self, desired, resolved, referrers, observed)
    }
    fn claims(&mut self, listing: &str, entry: &str) -> Result<bool, GuestError> {
        KindInstance::claims(self, listing, entry)
    }
    fn finally(&mut self, changed: &[String]) -> Result<Vec<Action>, GuestError> {
        KindInstance::finally(self, changed)
    }
    fn adopt(&mut self, observed: &Observation) -> Result<Result<Adopted, String>, GuestError> {
        KindInstance::adopt(self, observed)
    }
}

/// A kind implemented by code linked into the host, standing in for its component.
pub trait NativeKind: Send + Sync {
    /// A fresh set of calls (one per worker thread per cycle, like a component instance).
    fn instance(&self) -> Box<dyn KindCalls>;
}

/// One worker's instances, one slot per kind in the registry.
pub struct Instances<'r> {
    registry: &'r KindRegistry,
    slots: Vec<Option<Box<dyn KindCalls>>>,
}

impl Instances<'_> {
    /// The instance of kind `index`, created on first use; a third-party kind gets a fresh
    /// one every time (one per object), so nothing one object's call left in its memory
    /// reaches another's.
    pub fn get(&mut self, index: usize) -> Result<&mut dyn KindCalls, GuestError> {
        let slot = &mut self.slots[index];
        if slot.is_none() || !self.registry.reuses_instances(index) {
            *slot = Some(self.registry.instance(index)?);
        }
        Ok(slot.as_deref_mut().expect("just created"))
    }
}

/// Worker threads for guest calls: `available_parallelism`, at most one per item.
fn threads_for(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.max(1))
}

/// Map `f` over `items` on up to `available_parallelism` threads, keeping order; the threads
/// take small batches by a shared counter ([`proxops_core::parallel`]). Called from a tokio
/// thread, even a single item goes to a worker thread of its own.
pub fn par_map<T: Sync, R: Send>(
    registry: &KindRegistry,
    items: &[T],
    f: impl Fn(&mut Instances<'_>, &T) -> R + Sync,
) -> Vec<R> {
    let threads = threads_for(items.len());
    let new_instances = || Instances {
        registry,
        slots: (0..registry.len()).map(|_| None).collect(),
    };
    let on_tokio = tokio::runtime::Handle::try_current().is_ok();
    if threads <= 1 && !on_tokio {
        let mut instances = new_instances();
        return items.iter().map(|item| f(&mut instances, item)).collect();
    }
    proxops_core::parallel::map_ordered(items, threads, new_instances, f)
}
