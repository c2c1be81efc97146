//! The `VM` kind: a thin component that exports the shared qemu logic of
//! `proxops-kind-qemu` ([`proxops_kind_qemu::Vm`]).

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
use proxops_kind_qemu::Vm;
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Vm);

#[cfg(test)]
mod tests {
    use proxops_kind_sdk::kind_types::Capability;
    use proxops_kind_sdk::wit::Guest;

    type Kind = proxops_kind_qemu::Vm;

    #[test]
    fn describes_itself() {
        let info = Kind::describe();
        assert_eq!(info.kind, "VM");
        assert_eq!(info.api_version, "proxops/v1alpha1");
        assert!(info.schema.contains("2020-12"));
        let calls: Vec<String> = info
            .calls
            .iter()
            .map(|c| format!("{:?} {}", c.method, c.path))
            .collect();
        assert!(
            calls
                .iter()
                .any(|c| c == "Method::Post /nodes/{node}/qemu/{vmid}/clone")
        );
        // Only a TemplateVM marks templates.
        assert!(!calls.iter().any(|c| c.ends_with("/template")), "{calls:?}");
        assert_eq!(
            info.listings
                .iter()
                .map(|l| (l.path.as_str(), l.id_field.as_str()))
                .collect::<Vec<_>>(),
            [("/cluster/resources", "id")]
        );
        assert!(info.secrets);
        assert!(matches!(info.capabilities[..], [Capability::Devices]));
        assert_eq!(
            info.references_kinds,
            ["TemplateVM", "DiskImage", "ISO", "Pool"]
        );
    }
}
