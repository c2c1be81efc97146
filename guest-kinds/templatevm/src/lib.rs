//! The `TemplateVM` kind: a thin component that exports the shared qemu logic of
//! `proxops-kind-qemu` with the `Template` flavour.

proxops_kind_qemu::kind_component!(proxops_kind_qemu::Flavour::Template);

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_kind_sdk::wit::Guest;

    #[test]
    fn describes_itself() {
        let info = Kind::describe();
        assert_eq!(info.kind, "TemplateVM");
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
