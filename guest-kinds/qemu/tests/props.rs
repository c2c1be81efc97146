//! Property tests of what the VM kinds read: PVE's answers (config, pending, a
//! `/cluster/resources` entry) as any text or any JSON, and manifests (the example's richest VM
//! with one field replaced by any JSON value) through the real validation. No input panics; a
//! refused manifest says which field. Fixed seed and case counts; `fuzz/` runs the same entry
//! points unbounded.

use proptest::prelude::*;
use proptest::test_runner::{Config as Runner, RngSeed};
use proxops_kind_qemu::live::{Config, Resource, pending_rows};
use proxops_kind_qemu::{Flavour, NoSecrets, validate_json};
use serde_json::{Value, json};

fn runner(cases: u32) -> Runner {
    Runner {
        cases,
        rng_seed: RngSeed::Fixed(0x0051_454d),
        failure_persistence: None,
        ..Runner::default()
    }
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z0-9=,:. -]{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z0-9]{1,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// examples/homelab's db-01 (disks, NICs, EFI, TPM, options) as JSON.
fn manifest() -> Value {
    json!({
        "apiVersion": "proxops/v1alpha1", "kind": "VM", "metadata": {"name": "db-01"},
        "spec": {
            "node": "pve02", "vmid": 201, "memory": "8GiB",
            "cpu": {"type": "x86-64-v2-AES", "cores": 4},
            "disks": [
                {"storage": "local-lvm", "size": "32GiB", "interface": "scsi0", "controller": "virtio-scsi-single", "iothread": true},
                {"storage": "local-lvm", "size": "200GiB", "interface": "scsi1", "iothread": true, "ssd": true, "aio": "io_uring"}
            ],
            "networks": [
                {"model": "virtio", "bridge": "vmbr0", "vlan": 30},
                {"model": "virtio", "bridge": "vmbr1", "mac": "BC:24:11:00:02:01"}
            ],
            "hardware": {
                "machine": "q35", "bios": "ovmf",
                "efi-disk": {"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"},
                "tpm": {"storage": "local-lvm", "version": "v2.0"}, "sockets": 1, "numa": true
            },
            "options": {"protection": true, "onboot": true, "startup": "order=1"},
            "tags": ["db"]
        }
    })
}

/// JSON pointers of every value in `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| pointers(c, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{at}/{i}"), out)),
        _ => {}
    }
    out.push(at);
}

proptest! {
    #![proptest_config(runner(256))]

    #[test]
    fn pve_answers_as_any_text_never_panic(text in any::<String>()) {
        let _ = Config::from_json(&text);
        let _ = pending_rows(&text);
        let _ = Resource::from_json(&text);
    }

    #[test]
    fn pve_answers_as_any_json_never_panic(v in any_json()) {
        let text = v.to_string();
        let _ = Config::from_value(&v);
        let _ = Config::from_json(&text);
        let _ = Resource::from_value(&v);
        let _ = pending_rows(&text);
        let _ = pending_rows(&json!([v]).to_string());
    }

    #[test]
    fn a_manifest_with_any_field_replaced_validates_or_names_what_is_wrong(
        pick in any::<prop::sample::Index>(),
        replacement in any_json(),
    ) {
        let mut doc = manifest();
        let mut all = Vec::new();
        pointers(&doc, String::new(), &mut all);
        all.retain(|p| !p.is_empty());
        let at = pick.get(&all).clone();
        *doc.pointer_mut(&at).unwrap() = replacement;
        for flavour in [Flavour::Vm, Flavour::Template] {
            if let Err(diags) = validate_json(flavour, &doc.to_string(), &NoSecrets) {
                prop_assert!(!diags.is_empty());
                for d in &diags {
                    prop_assert!(!d.message.trim().is_empty(), "{at}: {d:?}");
                }
                if at.starts_with("/spec/") {
                    prop_assert!(
                        diags.iter().any(|d| !d.path.is_empty()),
                        "{at}: no diagnostic names a field: {diags:?}"
                    );
                }
            }
        }
    }
}
