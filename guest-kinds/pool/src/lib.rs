//! The `Pool` kind: PVE resource pools (`/pools`) with their member guests and storages, the
//! worked example of proxops's ownership model for named objects (docs/kinds.md §7).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: Pool
//! metadata:
//!   name: web                   # the PVE pool id
//! spec:
//!   comment: web tier
//!   guests: [web-01, TemplateVM/base, 300]   # VM names, templates, raw vmids
//!   storages: [local-lvm]
//! ```
//!
//! Decisions:
//! * A third-party component, never embedded: it writes cluster-level objects, and a bundled
//!   kind would bypass the grant the operator gives it in `proxops.yaml` (examples/pools).
//! * The pool id is `metadata.name`: a DNS label starting with a letter (PVE's
//!   `verify_poolname`). Nested pools (`a/b`) are not modelled. Folder `pool`.
//! * `guests` name proxops VMs and templates (`web-01`, `VM/web-01`, `TemplateVM/base`): each
//!   is a reference, so the host orders the pool after them (PVE lists a member only once the
//!   guest exists). Raw vmids are accepted for guests proxops does not manage. A name and a
//!   vmid that resolve to the same guest are an error.
//! * A VM or TemplateVM may name its pool itself (`spec.pool`, set by its create): such a
//!   guest is this pool's member without being listed, and is never removed from it; a listed
//!   guest whose `spec.pool` names any pool is a validation error ([`plan::check_references`]).
//! * Ownership: the token `proxops:<id>` in the pool's `comment`
//!   ([`proxops_names::named_mark`]). A create writes it, an update keeps it, a prune needs
//!   it, and a live pool without it is an anomaly, never written to. The host's gate checks
//!   the same on every call ([`plan`] for the calls, [`adopt`] for adoption).

pub mod adopt;
pub mod desired;
pub mod plan;
pub mod validate;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{
    Adopted, KindInfo, ObjectKey, Reference, Resolved, ResourceKind, Validated,
};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

use crate::desired::{Desired, NAMED, POOLS};

/// The Pool kind.
pub struct Pool;

impl ResourceKind for Pool {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: vec![
                (Method::Get, POOLS.into()),
                (Method::Post, POOLS.into()),
                (Method::Put, POOLS.into()),
                (Method::Delete, POOLS.into()),
            ],
            listings: vec![NAMED.listing()],
            references_kinds: vec!["VM".into(), "TemplateVM".into()],
            ..KindInfo::new(validate::KIND, "pool", validate::schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        validate::validate(manifest).map(Validated::new)
    }

    fn references(d: &Desired) -> Vec<Reference> {
        d.guests
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let (kind, name) = g.kind()?;
                Some(Reference {
                    kind: kind.into(),
                    name: name.into(),
                    path: plan::guest_path(i),
                })
            })
            .collect()
    }

    fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        plan::check_references(d, resolved)
    }

    fn identity(d: &Desired) -> ObjectKey {
        NAMED.key(&d.pool)
    }

    fn observe(
        _: Option<&Desired>,
        live: Option<&Value>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Vec<Call> {
        plan::observe(live)
    }

    fn plan(
        d: Option<&Desired>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(d, resolved, referrers, observed)
    }

    fn claims(listing: &str, entry: &Value) -> bool {
        NAMED.claims(listing, entry)
    }

    fn adopt(observed: &Observation, _: &dyn Secrets) -> Result<Adopted, String> {
        adopt::adopt(observed)
    }
}

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Pool);

#[cfg(test)]
mod tests;
