//! Validation cases: clones, cloud-init data and its secrets, options, tags and extra keys, the normalised desired state, images and ISOs.

use super::*;

#[test]
fn clone_and_cloud_init_data_rules() {
    vm(
        &[("spec/clone", json!("golden-tpl"))],
        &[(
            "spec.disks",
            "must be empty when spec.clone is set: a clone inherits the template's disk layout",
        )],
    );
    vm(
        &[
            ("spec/clone", json!("golden-tpl")),
            ("spec/disks", Value::Null),
        ],
        &[],
    );
    vm(
        &[(
            "spec/cloud-init-data/ssh-keys",
            json!(["*", "ssh-ed25519 AAAA user@h"]),
        )],
        &[(
            "spec.cloud-init-data.ssh-keys",
            "mixes the `*` sentinel (PVE owns the keys) with real keys; use either [\"*\"] or the keys",
        )],
    );
    vm(
        &[
            (
                "spec/cloud-init-data/ssh-keys",
                json!(["ssh-ed25519 AAAA user@h"]),
            ),
            (
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.alice"]),
            ),
        ],
        &[(
            "spec.cloud-init-data.ssh-key-refs",
            "ssh-keys and ssh-key-refs are exclusive; keep one of them",
        )],
    );
    vm(
        &[("spec/cloud-init-data/ssh-key-refs", json!([]))],
        &[(
            "spec.cloud-init-data.ssh-key-refs",
            "is empty, which proxops never reads as \"no keys\"; list at least one `cloud-init.ssh-keys.<name>`, or remove the field to leave the keys to PVE",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ci-password-ref",
            json!("passwords.root"),
        )],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`passwords.root` is not a SOPS reference; expected `cloud-init.passwords.<name>`",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ssh-key-refs",
            json!(["cloud-init.ssh-key.alice"]),
        )],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-key.alice` is not a SOPS reference; expected `cloud-init.ssh-keys.<name>`",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ipconfigs",
            json!([{"nic": 1, "ip": "10.0.0.5/24"}]),
        )],
        &[(
            "spec.cloud-init-data.ipconfigs[0].nic",
            "net1 is not declared in spec.networks",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/ipconfigs",
            json!([{"nic": 0, "ip": "10.0.0.5", "gateway": "10.0.0.1"}]),
        )],
        &[(
            "spec.cloud-init-data.ipconfigs[0].ip",
            "`10.0.0.5` is not an IPv4 address with prefix length, e.g. 192.168.0.50/24",
        )],
    );
    vm(
        &[(
            "spec/cloud-init-data/nameservers",
            json!(["1.1.1.1", "dns"]),
        )],
        &[(
            "spec.cloud-init-data.nameservers[1]",
            "`dns` is not an IP address",
        )],
    );
}

#[test]
fn options_tags_extra() {
    vm(
        &[("spec/options/startup", json!("first"))],
        &[(
            "spec.options.startup",
            "`first` is not a PVE startup value; expected e.g. `order=10` or `order=1,up=30,down=60`",
        )],
    );
    vm(
        &[("spec/options/hotplug", json!("disk,nic"))],
        &[(
            "spec.options.hotplug",
            "unknown hotplug feature `nic`; expected a comma list of `cloudinit`, `cpu`, `disk`, `memory`, `network`, `usb` (or `0` / `1`)",
        )],
    );
    vm(
        &[("spec/options/boot-order", json!(["scsi0", "cdrom"]))],
        &[(
            "spec.options.boot-order",
            "`cdrom` is not a boot device; expected disk slots (scsi0, ide2, ...) or NICs (net0, ...)",
        )],
    );
    vm(
        &[
            ("spec/cpu/type", json!("kvm64")),
            ("spec/options/nested-virt", json!(true)),
        ],
        &[(
            "spec.options.nested-virt",
            "PVE 9.2 has no nestedvirt key: nested virtualisation needs spec.cpu.type: host (and nesting enabled in the host's kvm module)",
        )],
    );
    vm(
        &[("spec/tags", json!(["Web", "-bad"]))],
        &[(
            "spec.tags[1]",
            "`-bad` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`",
        )],
    );
    vm(
        &[("spec/extra/memory", json!(4096))],
        &[(
            "spec.extra.memory",
            "`memory` is modelled by spec.memory; set it there instead of in extra",
        )],
    );
    vm(
        &[("spec/extra/net3", json!("virtio,bridge=vmbr0"))],
        &[(
            "spec.extra.net3",
            "`net3` is modelled by spec.networks; set it there instead of in extra",
        )],
    );
    vm(
        &[
            ("spec/extra/ostype", json!("l26")),
            ("spec/extra/kvm", json!(true)),
        ],
        &[],
    );
    // Values PVE stores as something else on every write would drift forever.
    vm(
        &[("spec/extra/vmgenid", json!("1"))],
        &[(
            "spec.extra.vmgenid",
            "`1` makes PVE generate a new vmgenid on every write, so it never converges; give the UUID to keep, or leave vmgenid out (PVE sets one at create)",
        )],
    );
    vm(
        &[("spec/extra/cpuunits", json!(20000))],
        &[(
            "spec.extra.cpuunits",
            "PVE 9 (cgroup v2) stores at most 10000 cpuunits, so `20000` would never converge; use 1-10000",
        )],
    );
    vm(
        &[
            ("spec/extra/cpuunits", json!(10000)),
            (
                "spec/extra/vmgenid",
                json!("c4a8e1f0-0000-4000-8000-000000000001"),
            ),
        ],
        &[],
    );
    vm(
        &[("spec/pve-name", json!("web_01"))],
        &[(
            "spec.pve-name",
            "`web_01` is not a valid PVE name; use letters, digits, `-` and `.` (no `_` or spaces)",
        )],
    );
}

#[test]
fn normalised_desired_state() {
    let mut doc = base();
    patch(&mut doc, "spec/tags", json!(["Web", "db", "web"]));
    patch(&mut doc, "spec/memory", json!("8GiB"));
    patch(
        &mut doc,
        "spec/disks/1",
        json!({"storage": "local-lvm", "size": "1TiB", "interface": "virtio0"}),
    );
    patch(&mut doc, "spec/networks/0/mac", json!("bc:24:11:aa:bb:cc"));
    patch(
        &mut doc,
        "spec/hardware/cloud-init",
        json!({"enabled": true, "storage": "local-lvm"}),
    );
    patch(&mut doc, "spec/hardware/cdrom", json!({"iso": "none"}));
    patch(
        &mut doc,
        "spec/hardware/pci-devices",
        json!([{"slot": 1, "device": "0000:0A:00.0", "pcie": true}]),
    );
    let v = validate(Flavour::Vm, &doc, &secrets()).unwrap();
    let got = serde_json::to_value(&v.desired).unwrap();
    assert_eq!(
        got,
        json!({
            "kind": "VM", "name": "web-01", "node": "pve01", "vmid": 100, "state": "started",
            "memory-mib": 8192,
            "cpu": {"type": "host", "cores": 2},
            "disks": [
                {"slot": "scsi0", "storage": "local-lvm", "size-gib": 32},
                {"slot": "virtio0", "storage": "local-lvm", "size-gib": 1024}
            ],
            "networks": [{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:AA:BB:CC"}],
            "hardware": {
                "cdrom": {"slot": "ide3", "iso": "none", "media": "cdrom"},
                "cloud-init": {"storage": "local-lvm"},
                "pci-devices": [{"slot": 1, "device": "0000:0a:00.0", "pcie": true}]
            },
            "options": {},
            "pve-name": "web-01",
            "tags": ["db", "proxops", "proxops-100", "web"]
        })
    );
    // The desired state reads back as itself.
    let back: crate::Desired = serde_json::from_value(got).unwrap();
    assert_eq!(back, v.desired);
}

#[test]
fn secret_refs_resolve_at_validation() {
    let refs = |r: &[&str]| ("spec/cloud-init-data/ssh-key-refs", json!(r));
    vm(
        &[refs(&[
            "cloud-init.ssh-keys.alice",
            "cloud-init.ssh-keys.team",
        ])],
        &[],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.bob"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.bob` is not in the cluster's SOPS document; add it, or fix the reference",
        )],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.empty"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.empty` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    // An entry of blank lines is empty, alone or beside one that holds keys.
    vm(
        &[refs(&["cloud-init.ssh-keys.blank"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.blank` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    vm(
        &[refs(&[
            "cloud-init.ssh-keys.alice",
            "cloud-init.ssh-keys.blank",
        ])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[1]",
            "`cloud-init.ssh-keys.blank` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    vm(
        &[refs(&["cloud-init.ssh-keys.notakey"])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.notakey` does not hold OpenSSH public keys (one `<type> <base64> [comment]` per line)",
        )],
    );
    // A malformed ref is reported once, structurally, and not looked up.
    vm(
        &[refs(&["cloud-init.ssh-keys."])],
        &[(
            "spec.cloud-init-data.ssh-key-refs[0]",
            "`cloud-init.ssh-keys.` is not a SOPS reference; expected `cloud-init.ssh-keys.<name>`",
        )],
    );
    let pw = |r: &str| ("spec/cloud-init-data/ci-password-ref", json!(r));
    vm(&[pw("cloud-init.passwords.root")], &[]);
    vm(
        &[pw("cloud-init.passwords.admin")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.passwords.admin` is not in the cluster's SOPS document; add it, or fix the reference",
        )],
    );
    vm(
        &[pw("cloud-init.passwords.empty")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.passwords.empty` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\"",
        )],
    );
    vm(
        &[pw("cloud-init.ssh-keys.alice")],
        &[(
            "spec.cloud-init-data.ci-password-ref",
            "`cloud-init.ssh-keys.alice` is not a SOPS reference; expected `cloud-init.passwords.<name>`",
        )],
    );
    // Denied (the kind has no secrets grant) fails closed; the desired state keeps refs only.
    let mut doc = base();
    patch(
        &mut doc,
        "spec/cloud-init-data/ci-password-ref",
        json!("cloud-init.passwords.root"),
    );
    let err = validate(Flavour::Vm, &doc, &crate::secrets::NoSecrets).unwrap_err();
    assert_eq!(
        err[0].message,
        "cannot use `cloud-init.passwords.root`: this kind is not granted access to it (a third-party kind gets references through `secrets.reference`, never values; its grant names the refs under `grant.secrets`)"
    );
    let ok = validate(Flavour::Vm, &doc, &secrets()).unwrap();
    let text = serde_json::to_string(&ok.desired).unwrap();
    assert!(
        text.contains("\"ci-password-ref\":\"cloud-init.passwords.root\""),
        "{text}"
    );
    assert!(!text.contains(CANARY_PASSWORD));
}

#[test]
fn image_iso_and_clone_rules() {
    vm(
        &[("spec/disks/0/image", json!("noble"))],
        &[(
            "spec.disks[0].size",
            "must be empty when image is set (an imported disk takes its size from the image)",
        )],
    );
    vm(
        &[
            ("spec/disks/0/image", json!("noble")),
            ("spec/disks/0/size", Value::Null),
        ],
        &[],
    );
    vm(
        &[(
            "spec/hardware/cdrom",
            json!({"iso": "debian-13", "media": "disk"}),
        )],
        &[(
            "spec.hardware.cdrom.media",
            "must be `cdrom` when an ISO is attached (PVE requires media=cdrom for iso volumes)",
        )],
    );
    vm(
        &[(
            "spec/hardware/cdrom",
            json!({"iso": "none", "media": "disk"}),
        )],
        &[],
    );
    vm(
        &[
            ("spec/clone", json!("golden")),
            (
                "spec/disks",
                json!([{"storage": "local-lvm", "image": "noble"}]),
            ),
        ],
        &[(
            "spec.disks",
            "must be empty when spec.clone is set: a clone inherits the template's disk layout",
        )],
    );
}
