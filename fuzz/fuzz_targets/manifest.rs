//! Manifests through the VM kinds' real validation (guest-kinds/qemu/tests/props.rs,
//! unbounded): nothing panics, and a refused manifest gets at least one diagnostic with a
//! message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxops_kind_qemu::{Flavour, NoSecrets, validate_json};

fuzz_target!(|text: &str| {
    for flavour in [Flavour::Vm, Flavour::Template] {
        if let Err(diags) = validate_json(flavour, text, &NoSecrets) {
            assert!(!diags.is_empty());
            assert!(diags.iter().all(|d| !d.message.trim().is_empty()));
        }
    }
});
