//! The `VM` kind: a thin component that exports the shared qemu logic of
//! `proxops-kind-qemu` with the `Vm` flavour.

use proxops_kind_qemu::{Flavour, glue};
use proxops_kind_sdk::types::{Call, Diagnostic};
use proxops_kind_sdk::wit::{
    Guest, KindInfo, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};

const FLAVOUR: Flavour = Flavour::Vm;

/// The exported component type.
pub struct Kind;

impl Guest for Kind {
    fn describe() -> KindInfo {
        glue::describe(FLAVOUR)
    }

    fn validate(manifest: String) -> Result<Validated, Vec<Diagnostic>> {
        glue::validate(FLAVOUR, manifest)
    }

    fn references(desired: String) -> Vec<Reference> {
        glue::references(desired)
    }

    fn check_references(desired: String, resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        glue::check_references(desired, resolved)
    }

    fn identity(desired: String) -> ObjectKey {
        glue::identity(desired)
    }

    fn observe(
        desired: Option<String>,
        live: Option<String>,
        _referrers: Vec<Resolved>,
    ) -> Vec<Call> {
        glue::observe(desired, live)
    }

    fn plan(
        desired: Option<String>,
        resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        glue::plan(FLAVOUR, desired, resolved, observed)
    }

    fn claims(live: String) -> bool {
        glue::claims(FLAVOUR, live)
    }

    fn adopt(observed: Observation) -> Result<String, String> {
        glue::adopt(FLAVOUR, observed)
    }
}

// Exported only for the component build: the export names contain `:`, which a native
// cdylib's linker version script rejects, and native builds exist for unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Kind);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_itself() {
        let info = Kind::describe();
        assert_eq!(info.kind, "VM");
        assert_eq!(info.api_version, "proxops/v1alpha1");
        assert!(info.schema.contains("2020-12"));
        assert!(
            info.api_paths
                .iter()
                .any(|p| p == "/nodes/{node}/qemu/{vmid}/clone")
        );
        assert_eq!(info.references_kinds, ["TemplateVM", "DiskImage", "ISO"]);
    }
}
