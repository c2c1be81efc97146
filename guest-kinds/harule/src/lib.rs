//! The `HARule` kind: PVE 9's HA rules (`/cluster/ha/rules`), node affinity and resource
//! affinity, as their own manifests (issue #41: HA membership is `spec.ha` on a VM; the
//! rules that place HA resources are objects of their own, as PVE 9 models them).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: HARule
//! metadata:
//!   name: prefer-pve01          # the PVE rule id
//! spec:
//!   type: node-affinity         # or resource-affinity
//!   resources: [web-01, VM/web-02, ct:200]
//!   nodes: [{node: pve01, priority: 2}, pve02]
//!   strict: false               # node-affinity only
//!   # affinity: negative        # resource-affinity only (required there)
//!   disabled: false
//!   comment: web tier
//! ```
//!
//! Decisions:
//! * The rule id is `metadata.name`: a DNS label that also fits PVE's `pve-configid` (starts
//!   with a letter, at least 2 characters). Folder `harule`.
//! * `resources` name proxops VMs (`web-01`, `VM/web-01`): each is a reference to kind `VM`,
//!   so the host orders the rule after the VMs (PVE refuses a rule naming a guest that is not
//!   an HA resource yet), and `check-references` requires the VM to declare `spec.ha`. Raw
//!   sids (`vm:100`, `ct:200`) are accepted too, for guests proxops does not manage
//!   (containers have no bundled kind) and for what `adopt` writes; they are not checked nor
//!   ordered. A VM name and a raw sid that resolve to the same guest are an error.
//! * Ownership: the token `proxops:<id>` in the rule's `comment`
//!   ([`proxops_names::named_mark`]). A create writes it (`<comment> (proxops:<id>)`, or the
//!   mark alone), an update keeps it, a prune needs it, and a live rule without it is an
//!   anomaly, never written to (see [`plan`] for the rest, [`adopt`] for adoption).
//! * Everything plan needs is in the listing entry (the host reads `/cluster/ha/rules` once
//!   per cycle): the options, the rules file's `digest` and PVE's feasibility `errors`. No
//!   per-rule GET.
//! * The digest is the whole rules file's: two rule updates in one apply pass are written in
//!   turn, and the second finds the digest stale ("checksum mismatch"), which the executor
//!   re-plans in the next pass rather than failing. Creates and deletes carry no digest.

pub mod adopt;
pub mod desired;
pub mod live;
pub mod plan;
pub mod validate;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{
    Adopted, KindInfo, ObjectKey, Reference, Resolved, ResourceKind, Validated,
};
use proxops_kind_sdk::model::{Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

use crate::desired::{Desired, Member, NAMED, RULES};

/// The HARule kind.
pub struct HaRule;

impl ResourceKind for HaRule {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: vec![
                (Method::Get, RULES.into()),
                (Method::Post, RULES.into()),
                (Method::Put, format!("{RULES}/{{rule}}")),
                (Method::Delete, format!("{RULES}/{{rule}}")),
            ],
            listings: vec![NAMED.listing()],
            references_kinds: vec!["VM".into()],
            ..KindInfo::new(validate::KIND, "harule", validate::schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        validate::validate(manifest).map(Validated::new)
    }

    fn references(d: &Desired) -> Vec<Reference> {
        d.resources
            .iter()
            .enumerate()
            .filter_map(|(i, m)| match m {
                Member::Vm(name) => Some(Reference {
                    kind: "VM".into(),
                    name: name.clone(),
                    path: plan::resource_path(i),
                }),
                Member::Sid(_) => None,
            })
            .collect()
    }

    fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        plan::sids(d, resolved, true).err().unwrap_or_default()
    }

    fn identity(d: &Desired) -> ObjectKey {
        NAMED.key(&d.rule)
    }

    fn plan(
        d: Option<&Desired>,
        resolved: &[Resolved],
        _referrers: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(d, resolved, observed)
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
proxops_kind_sdk::export_kind!(HaRule);

#[cfg(test)]
mod tests;
