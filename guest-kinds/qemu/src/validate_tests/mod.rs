//! Data-driven validation cases: a base manifest, a patch, and the exact diagnostics expected.

use serde_json::{Value, json};

use crate::desired::Flavour;
use crate::secrets::MapSecrets;
use crate::validate::validate;

mod devices;
mod ha;
mod provisioning;

/// A canary secret value: it must never appear outside a sensitive parameter.
pub const CANARY_PASSWORD: &str = "canary-pw-7f3a";
/// A canary key (public keys from refs are handled as secrets).
pub const CANARY_KEY: &str = "ssh-ed25519 AAAAcanaryKEY+/= alice@canary";

/// The cluster's SOPS document in these tests.
pub fn secrets() -> MapSecrets {
    MapSecrets::from_pairs(&[
        ("cloud-init.passwords.root", CANARY_PASSWORD),
        ("cloud-init.ssh-keys.alice", CANARY_KEY),
        (
            "cloud-init.ssh-keys.team",
            "ssh-rsa AAAAteam1 bob@h\nssh-ed25519 AAAAteam2 carol@h\n",
        ),
        ("cloud-init.ssh-keys.blank", "   \n"),
        ("cloud-init.ssh-keys.empty", ""),
        ("cloud-init.ssh-keys.notakey", "canary-not-a-key"),
        ("cloud-init.passwords.empty", ""),
    ])
}

/// A valid VM manifest.
pub fn base() -> Value {
    json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": "VM",
        "metadata": {"name": "web-01"},
        "spec": {
            "node": "pve01",
            "vmid": 100,
            "memory": "2GiB",
            "cpu": {"type": "host", "cores": 2},
            "disks": [{"storage": "local-lvm", "size": "32GiB"}],
            "networks": [{"bridge": "vmbr0"}]
        }
    })
}

/// Set (or with `null`, remove) the value at a `/`-separated path below the document root.
/// Numeric segments index lists.
pub fn patch(doc: &mut Value, path: &str, value: Value) {
    let parts: Vec<&str> = path.split('/').collect();
    let (last, parents) = parts.split_last().unwrap();
    let mut cur = doc;
    for p in parents {
        cur = match p.parse::<usize>() {
            Ok(i) => &mut cur[i],
            Err(_) => {
                if cur.get(*p).is_none() {
                    cur[*p] = json!({});
                }
                &mut cur[*p]
            }
        };
    }
    match (last.parse::<usize>(), value.is_null()) {
        (Ok(i), _) => {
            let list = cur.as_array_mut().unwrap();
            if i == list.len() {
                list.push(value);
            } else {
                list[i] = value;
            }
        }
        (Err(_), true) => {
            cur.as_object_mut().unwrap().remove(*last);
        }
        (Err(_), false) => cur[*last] = value,
    }
}

/// Validate `base()` with `patches` as `flavour`; expect exactly the `(path, message)` errors
/// and warnings given (errors and warnings together, in order), or none.
fn check(flavour: Flavour, patches: &[(&str, Value)], expected: &[(&str, &str)]) {
    let mut doc = base();
    if flavour == Flavour::Template {
        doc["kind"] = json!("TemplateVM");
    }
    for (p, v) in patches {
        patch(&mut doc, p, v.clone());
    }
    let diags = match validate(flavour, &doc, &secrets()) {
        Ok(v) => v.warnings,
        Err(d) => d,
    };
    let got: Vec<(&str, &str)> = diags
        .iter()
        .map(|d| (d.path.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(got, expected, "patches {patches:?}");
}

fn vm(patches: &[(&str, Value)], expected: &[(&str, &str)]) {
    check(Flavour::Vm, patches, expected);
}

#[test]
fn base_is_valid() {
    vm(&[], &[]);
    check(Flavour::Template, &[], &[]);
}

#[test]
fn required_fields() {
    vm(
        &[("spec/node", Value::Null)],
        &[("spec.node", "is required")],
    );
    vm(
        &[("spec/vmid", Value::Null)],
        &[("spec.vmid", "is required")],
    );
    vm(
        &[("spec/memory", Value::Null)],
        &[("spec.memory", "is required")],
    );
    vm(&[("spec/cpu", Value::Null)], &[("spec.cpu", "is required")]);
    vm(
        &[("spec/cpu/cores", Value::Null)],
        &[("spec.cpu.cores", "is required")],
    );
    vm(
        &[("spec/cpu/type", json!(""))],
        &[("spec.cpu.type", "must not be empty")],
    );
    vm(
        &[("spec/networks", Value::Null)],
        &[("spec.networks", "is required")],
    );
    vm(
        &[("spec/networks", json!([]))],
        &[("spec.networks", "needs at least one network interface")],
    );
    vm(
        &[("spec/disks", Value::Null)],
        &[(
            "spec.disks",
            "needs at least one disk (or spec.clone to clone a TemplateVM)",
        )],
    );
    vm(
        &[("spec/disks/0/storage", Value::Null)],
        &[("spec.disks[0].storage", "is required")],
    );
    vm(
        &[("spec/networks/0/bridge", Value::Null)],
        &[("spec.networks[0].bridge", "is required")],
    );
}

#[test]
fn unknown_fields() {
    vm(
        &[("spec/disks/0/sdd", json!(true))],
        &[(
            "spec.disks[0].sdd",
            "unknown field `sdd`; did you mean `ssd`?",
        )],
    );
    vm(
        &[("spec/memroy", json!("1GiB"))],
        &[(
            "spec.memroy",
            "unknown field `memroy`; did you mean `memory`?",
        )],
    );
    vm(
        &[("spec/hardware/bois", json!("ovmf"))],
        &[(
            "spec.hardware.bois",
            "unknown field `bois`; did you mean `bios`?",
        )],
    );
    vm(
        &[("spec/options/on-boot", json!(true))],
        &[(
            "spec.options.on-boot",
            "unknown field `on-boot`; did you mean `onboot`?",
        )],
    );
}

#[test]
fn ids_and_sizes() {
    vm(
        &[("spec/vmid", json!(99))],
        &[("spec.vmid", "must be from 100 to 999999999, got 99")],
    );
    vm(
        &[("spec/vmid", json!("100"))],
        &[(
            "spec.vmid",
            "expected an integer from 100 to 999999999, got a string",
        )],
    );
    vm(
        &[("spec/memory", json!("8GB"))],
        &[(
            "spec.memory",
            "decimal unit `GB` is not accepted; use the binary unit `GiB`",
        )],
    );
    vm(
        &[("spec/memory", json!(2048))],
        &[(
            "spec.memory",
            "size `2048` has no unit; write it with a binary unit such as `2048MiB` or `2048GiB`",
        )],
    );
    vm(
        &[("spec/memory", json!("8MiB"))],
        &[(
            "spec.memory",
            "must be at least 16MiB (PVE's minimum), got 8MiB",
        )],
    );
    vm(
        &[("spec/memory", json!("1536KiB"))],
        &[(
            "spec.memory",
            "must be a whole number of MiB (PVE stores MiB), got 1572864 bytes",
        )],
    );
    vm(
        &[("spec/disks/0/size", json!("1536MiB"))],
        &[(
            "spec.disks[0].size",
            "must be a whole number of GiB (PVE allocates disks in GiB), got 1536MiB",
        )],
    );
    vm(
        &[("spec/disks/0/size", Value::Null)],
        &[("spec.disks[0].size", "is required")],
    );
    vm(
        &[("spec/cpu/cores", json!(0))],
        &[("spec.cpu.cores", "must be from 1 to 4096, got 0")],
    );
    vm(
        &[("metadata/name", json!("Web_01"))],
        &[(
            "metadata.name",
            "`Web_01` contains `W`; use lower-case letters, digits and `-` only (a DNS label)",
        )],
    );
    vm(
        &[("kind", json!("TemplateVM"))],
        &[("kind", "must be `VM`, got `TemplateVM`")],
    );
}

/// `spec.pool` names a Pool manifest, and so a PVE pool id: a DNS label that starts with a
/// letter; it becomes a reference that orders the guest after the pool.
#[test]
fn pool_names_a_pool_manifest() {
    const MSG: &str = "must name a Pool manifest by its metadata.name (the PVE pool id): ";
    for (pool, problem) in [
        ("web", None),
        ("web-tier-2", None),
        ("2web", Some("a PVE pool id starts with a letter")),
        ("Web", Some("")),
    ] {
        let got = validate(
            Flavour::Vm,
            &{
                let mut d = base();
                patch(&mut d, "spec/pool", json!(pool));
                d
            },
            &secrets(),
        );
        match problem {
            None => {
                let d = got.expect(pool).desired;
                assert_eq!(d.pool.as_deref(), Some(pool));
                assert!(
                    crate::references(&d)
                        .iter()
                        .any(|r| r.kind == "Pool" && r.name == pool && r.path == "spec.pool")
                );
            }
            Some(words) => {
                let errs = got.expect_err(pool);
                assert_eq!(errs.len(), 1, "{pool}: {errs:?}");
                assert_eq!(errs[0].path, "spec.pool");
                assert!(errs[0].message.starts_with(MSG), "{}", errs[0].message);
                assert!(errs[0].message.contains(words), "{}", errs[0].message);
            }
        }
    }
    assert_eq!(
        validate(Flavour::Vm, &base(), &secrets())
            .unwrap()
            .desired
            .pool,
        None
    );
}
