//! The VM and TemplateVM kinds as [`ResourceKind`]s: one implementation over the
//! [`Flavour`] that tells them apart.

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::Listing;
use proxops_kind_sdk::kind::{KindInfo, ObjectKey, Reference, Resolved, ResourceKind, Validated};
use proxops_kind_sdk::model::{Call, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

use crate::desired::{Desired, Flavour};

/// A VM-like kind: `Qemu<false>` is VM, `Qemu<true>` is TemplateVM.
#[derive(Debug, Clone, Copy, Default)]
pub struct Qemu<const TEMPLATE: bool>;

/// The VM kind.
pub type Vm = Qemu<false>;
/// The TemplateVM kind.
pub type TemplateVm = Qemu<true>;

impl<const TEMPLATE: bool> Qemu<TEMPLATE> {
    /// Its flavour.
    pub const fn flavour() -> Flavour {
        if TEMPLATE {
            Flavour::Template
        } else {
            Flavour::Vm
        }
    }
}

/// `(reference, target desired JSON)` pairs, the form the planning functions take.
fn pairs(resolved: &[Resolved]) -> Vec<(Reference, String)> {
    resolved
        .iter()
        .map(|r| (r.reference.clone(), r.desired.clone()))
        .collect()
}

impl<const TEMPLATE: bool> ResourceKind for Qemu<TEMPLATE> {
    type Desired = Desired;

    fn describe() -> KindInfo {
        crate::describe(Self::flavour())
    }

    fn validate(manifest: &Value, secrets: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        crate::validate(Self::flavour(), manifest, secrets)
    }

    fn references(desired: &Desired) -> Vec<Reference> {
        crate::references(desired)
    }

    fn check_references(desired: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        crate::check_references(desired, &pairs(resolved))
    }

    fn identity(desired: &Desired) -> ObjectKey {
        crate::identity(desired)
    }

    fn observe(
        desired: Option<&Desired>,
        live: Option<&Value>,
        _resolved: &[Resolved],
        _referrers: &[Resolved],
    ) -> Vec<Call> {
        crate::observe(desired, live)
    }

    fn observe_text(
        desired: Option<&str>,
        live: Option<&str>,
        _resolved: &[Resolved],
        _referrers: &[Resolved],
    ) -> Vec<Call> {
        crate::observe_text(desired, live)
    }

    fn plan(
        desired: Option<&Desired>,
        resolved: &[Resolved],
        _referrers: &[Resolved],
        observed: &Observation,
        secrets: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        crate::plan(
            Self::flavour(),
            desired,
            &pairs(resolved),
            secrets,
            observed,
        )
    }

    /// Only `/cluster/resources` entries: qemu guests of this flavour with the ownership tag.
    fn claims(listing: &str, entry: &Value) -> bool {
        listing == Listing::cluster_resources().path && crate::claims(Self::flavour(), entry)
    }

    fn adopt(
        observed: &Observation,
        secrets: &dyn Secrets,
    ) -> Result<proxops_kind_sdk::kind::Adopted, String> {
        crate::adopt::adopt(Self::flavour(), observed, secrets)
    }
}
