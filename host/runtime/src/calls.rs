//! The calls the engine makes into a kind, as a trait: a component instance
//! ([`KindInstance`]) implements it; so can a native backend (benchmarks measure the
//! WebAssembly overhead by running the same kind logic compiled into the host, registered with
//! the engine's `KindRegistry::register_native`). The dispatch costs one indirect call per
//! guest call, nothing next to a component call.

use std::sync::Arc;

use crate::kind::{
    Action, Adopted, Call, Diagnostic, ObjectKey, Observation, Proposal, Reference, Resolved,
    Validated,
};
use crate::{GuestError, KindInstance, SecretSource};

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
    /// Whether the last call's answer may be replayed from the engine's memo next time (a
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
