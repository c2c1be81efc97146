//! The `BackupJob` kind: PVE's scheduled backup jobs (`/cluster/backup`).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: BackupJob
//! metadata:
//!   name: nightly               # the PVE job id
//! spec:
//!   schedule: "mon..fri 21:00"  # PVE's calendar-event grammar
//!   storage: backups            # must have `backup` content
//!   pool: web                   # or `all: true` (with `exclude`), or `guests: [web-01, 300]`
//!   mode: snapshot              # suspend, stop
//!   compression: zstd           # none, gzip, lzo
//!   retention: {keep-daily: 7, keep-weekly: 4}
//!   notes-template: "{{guestname}} on {{node}}"
//!   enabled: true
//!   comment: nightly web backups
//! ```
//!
//! Decisions:
//! * A third-party component, never embedded: it writes cluster-level objects, and a bundled
//!   kind would bypass the grant the operator gives it (examples/grants/backupjob.yaml).
//! * The job id is `metadata.name` (PVE's `id`): a DNS label starting with a letter, at most
//!   50 characters. Folder `backupjob`.
//! * Named guests and the pool are references (`VM`, `TemplateVM`, `Pool`): the job is written
//!   after them, and PVE refuses a job naming a pool that does not exist yet.
//! * The schedule is checked with PVE's grammar ([`proxops_names::calendar`], shared with the
//!   simulator). The storage is read every cycle and must have `backup` content.
//! * Ownership: the token `proxops:<id>` in the job's `comment`, as for every named object
//!   (docs/kinds.md §7).

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

use crate::desired::{Desired, JOBS, NAMED, Selection};

/// The BackupJob kind.
pub struct BackupJob;

impl ResourceKind for BackupJob {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: vec![
                (Method::Get, JOBS.into()),
                (Method::Get, "/storage/{storage}".into()),
                (Method::Post, JOBS.into()),
                (Method::Put, format!("{JOBS}/{{id}}")),
                (Method::Delete, format!("{JOBS}/{{id}}")),
            ],
            listings: vec![NAMED.listing()],
            references_kinds: vec!["VM".into(), "TemplateVM".into(), "Pool".into()],
            ..KindInfo::new(validate::KIND, "backupjob", validate::schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        validate::validate(manifest).map(Validated::new)
    }

    fn references(d: &Desired) -> Vec<Reference> {
        let guests = |list: &str, g: &[desired::Guest]| -> Vec<Reference> {
            g.iter()
                .enumerate()
                .filter_map(|(i, g)| {
                    let (kind, name) = g.kind()?;
                    Some(Reference {
                        kind: kind.into(),
                        name: name.into(),
                        path: plan::guest_path(list, i),
                    })
                })
                .collect()
        };
        match &d.selection {
            Selection::All { exclude } => guests("exclude", exclude),
            Selection::Guests(g) => guests("guests", g),
            Selection::Pool(p) => vec![Reference {
                kind: "Pool".into(),
                name: p.clone(),
                path: "spec.pool".into(),
            }],
        }
    }

    fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        plan::desired_opts(d, resolved).err().unwrap_or_default()
    }

    fn identity(d: &Desired) -> ObjectKey {
        NAMED.key(&d.id)
    }

    fn observe(
        d: Option<&Desired>,
        _: Option<&Value>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Vec<Call> {
        plan::observe(d)
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
proxops_kind_sdk::export_kind!(BackupJob);

#[cfg(test)]
mod tests;
