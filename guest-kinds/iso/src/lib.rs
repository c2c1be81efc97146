//! The `ISO` kind. For now it answers `describe` and the structural part of `validate`
//! (shared with the other download kind in `proxops_kind_sdk::download`); planning is not
//! implemented yet and says so as an anomaly, never by failing or panicking.

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
        _desired: Option<String>,
        _live: Option<String>,
        _referrers: Vec<Resolved>,
    ) -> Vec<Call> {
        glue::observe()
    }

    fn plan(
        _desired: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        _observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        Ok(glue::plan(&ISO))
    }

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
mod tests {
    use super::*;

    #[test]
    fn describes_and_validates() {
        let info = Kind::describe();
        assert_eq!(info.kind, "ISO");
        assert!(info.schema.contains("2020-12"));
        let ok = Kind::validate(
            r#"{"apiVersion":"proxops/v1alpha1","kind":"ISO","metadata":{"name":"x"},"spec":{"node":"pve01","storage":"local","url":"https://example.org/x.iso","checksum":"ab","checksum-algorithm":"sha256"}}"#.into(),
        );
        assert!(ok.is_ok());
        let bad = Kind::validate(
            r#"{"apiVersion":"proxops/v1alpha1","kind":"ISO","metadata":{"name":"x"},"spec":{}}"#
                .into(),
        );
        assert!(bad.is_err());
        assert!(
            Kind::plan(
                None,
                Observation {
                    live: None,
                    reads: vec![]
                }
            )
            .is_ok()
        );
    }
}
