//! The `ISO` kind: an ISO image PVE downloads (`download-url`, `content=iso`, optionally
//! decompressed) onto a storage of the nodes that need it, so that VMs can attach it as
//! `<storage>:iso/<filename>`. The logic is shared with `DiskImage` and lives in
//! `proxops_kind_sdk::download` (its module documentation holds the desired-state shape and the
//! rules); this crate is the WIT glue.

use proxops_kind_sdk::download::{ISO, glue};
use proxops_kind_sdk::types::{Call, Diagnostic};
use proxops_kind_sdk::wit::{
    Guest, KindInfo, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};

/// The exported component type.
pub struct Kind;

impl Guest for Kind {
    fn describe() -> KindInfo {
        glue::describe(&ISO)
    }

    fn validate(manifest: String) -> Result<Validated, Vec<Diagnostic>> {
        glue::validate(&ISO, &manifest)
    }

    fn references(_desired: String) -> Vec<Reference> {
        Vec::new()
    }

    fn check_references(_desired: String, _resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn identity(desired: String) -> ObjectKey {
        glue::identity(&desired)
    }

    fn observe(
        desired: Option<String>,
        _live: Option<String>,
        referrers: Vec<Resolved>,
    ) -> Vec<Call> {
        glue::observe(desired, referrers)
    }

    fn plan(
        desired: Option<String>,
        _resolved: Vec<Resolved>,
        referrers: Vec<Resolved>,
        observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        glue::plan(desired, referrers, observed)
    }

    /// Volumes never appear in `/cluster/resources`, and nothing proves proxops created a
    /// file, so no live entry is ever claimed for pruning.
    fn claims(_live: String) -> bool {
        false
    }

    fn adopt(_observed: Observation) -> Result<String, String> {
        glue::adopt(&ISO)
    }
}

// Exported only for the component build: the export names contain `:`, which a native
// cdylib's linker version script rejects, and native builds exist for unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Kind);

#[cfg(test)]
mod tests;
