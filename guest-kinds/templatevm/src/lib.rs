//! The `TemplateVM` kind: a thin component that exports the shared qemu logic of
//! `proxops-kind-qemu` ([`proxops_kind_qemu::TemplateVm`]).

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
use proxops_kind_qemu::TemplateVm;
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(TemplateVm);

#[cfg(test)]
mod tests {
    use proxops_kind_sdk::wit::Guest;

    type Kind = proxops_kind_qemu::TemplateVm;

    #[test]
    fn describes_itself() {
        let info = Kind::describe();
        assert_eq!(info.kind, "TemplateVM");
        assert_eq!(info.api_version, "proxops/v1alpha1");
        assert!(info.schema.contains("2020-12"));
        let calls: Vec<String> = info
            .calls
            .iter()
            .map(|c| format!("{:?} {}", c.method, c.path))
            .collect();
        for call in [
            "Method::Post /nodes/{node}/qemu/{vmid}/clone",
            "Method::Post /nodes/{node}/qemu/{vmid}/template",
        ] {
            assert!(calls.iter().any(|c| c == call), "{call} in {calls:?}");
        }
        assert!(info.secrets && info.capabilities.len() == 1 && info.listings.len() == 1);
        assert_eq!(
            info.references_kinds,
            ["TemplateVM", "DiskImage", "ISO", "Pool"]
        );
    }
}
