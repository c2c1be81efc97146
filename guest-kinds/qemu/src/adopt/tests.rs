//! Adoption tests: data-driven live configs and a proptest, each adopted, validated and planned
//! against the same live state (plus the ownership marks the host writes at take-over), which
//! must give no action and no drift.

use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};
use proxops_kind_sdk::kind::{Adopted, ResourceKind};
use proxops_kind_sdk::model::{Observation, Proposal, Read};
use serde_json::{Map, Value, json};

use super::metadata_name;
use crate::desired::Flavour;
use crate::secrets::{MapSecrets, NoSecrets, Secrets};
use crate::{TemplateVm, Vm};

const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIadoptA alice@h";
const KEY_B: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADadoptB bob@h";

fn sops() -> MapSecrets {
    MapSecrets::from_pairs(&[
        ("cloud-init.ssh-keys.alice", KEY_A),
        ("cloud-init.ssh-keys.bob", KEY_B),
        ("cloud-init.passwords.root", "a-long-password"),
    ])
}

fn entry(vmid: u32, status: &str, template: bool, tags: &str) -> Value {
    json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": "pve01",
        "status": status, "template": u8::from(template), "name": "x", "tags": tags})
}

/// A pending change: key, pending value (`None`: a pending delete).
type Pending<'a> = &'a [(&'a str, Option<&'a str>)];

/// `/pending` rows for `config` with `pending` laid over it, as PVE prints them.
fn pending_rows(config: &Value, pending: Pending<'_>) -> Value {
    let mut rows = Vec::new();
    for (k, v) in config.as_object().unwrap() {
        let mut row = json!({"key": k, "value": v});
        if let Some((_, p)) = pending.iter().find(|(pk, _)| pk == k) {
            match p {
                Some(p) => row["pending"] = json!(p),
                None => row["delete"] = json!(1),
            }
        }
        rows.push(row);
    }
    for (k, p) in pending {
        if config.get(*k).is_none()
            && let Some(p) = p
        {
            rows.push(json!({"key": k, "pending": p}));
        }
    }
    Value::Array(rows)
}

/// The observation answering every read `observe` asks for.
fn observation(
    desired: Option<&crate::Desired>,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
) -> Observation {
    let reads = crate::observe(desired, Some(entry))
        .into_iter()
        .map(|call| {
            let body = if call.path == crate::plan::PCI_MAPPINGS {
                // Every mapping the config names exists on the guest's node.
                let node = entry["node"].as_str().unwrap();
                let ids = config.as_object().unwrap().iter().filter_map(|(k, v)| {
                    let v = v.as_str()?;
                    let m = v.split(',').find_map(|p| p.strip_prefix("mapping="))?;
                    k.starts_with("hostpci").then(|| m.to_string())
                });
                Value::Array(
                    ids.map(
                        |id| json!({"id": id, "map": [format!("node={node},path=0000:01:00.0")]}),
                    )
                    .collect(),
                )
            } else if call.path.ends_with("/pending") {
                pending_rows(config, pending)
            } else {
                assert!(pending.is_empty(), "a stopped guest has no pending changes");
                config.clone()
            };
            Read {
                call,
                status: 200,
                body: body.to_string(),
            }
        })
        .collect();
    Observation {
        live: Some(entry.to_string()),
        reads,
    }
}

fn adopt_with(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> Result<Adopted, String> {
    let obs = observation(None, entry, config, pending);
    match flavour {
        Flavour::Vm => <Vm as ResourceKind>::adopt(&obs, secrets),
        Flavour::Template => <TemplateVm as ResourceKind>::adopt(&obs, secrets),
    }
}

fn with_marks(tags: Option<&str>, vmid: u32) -> String {
    let marks = format!("proxops;proxops-{vmid}");
    match tags {
        Some(t) if !t.is_empty() => format!("{t};{marks}"),
        _ => marks,
    }
}

/// Adopt, validate, plan against the live state with the ownership marks added; the plan.
fn round_trip(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> (Adopted, Proposal) {
    let a = adopt_with(flavour, entry, config, pending, secrets).expect("adopt succeeds");
    let d = crate::validate(flavour, &a.manifest, secrets)
        .unwrap_or_else(|e| {
            panic!(
                "adopted manifest does not validate: {e:?}\n{:#}",
                a.manifest
            )
        })
        .desired;
    let vmid = entry["vmid"].as_u64().unwrap() as u32;
    let mut live = entry.clone();
    live["tags"] = json!(with_marks(entry["tags"].as_str(), vmid));
    let mut cfg = config.clone();
    cfg["tags"] = json!(with_marks(config.get("tags").and_then(Value::as_str), vmid));
    let obs = observation(Some(&d), &live, &cfg, pending);
    let p = crate::plan(flavour, Some(&d), &[], secrets, &obs).expect("plan succeeds");
    (a, p)
}

/// Round trip that must be clean: no action, no drift; every anomaly comes with gaps.
fn clean(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> (Adopted, Proposal) {
    let (a, p) = round_trip(flavour, entry, config, pending, secrets);
    assert!(
        p.actions.is_empty() && p.drift.is_empty(),
        "round trip is not clean:\nmanifest {:#}\nactions {:#?}\ndrift {:#?}",
        a.manifest,
        p.actions,
        p.drift
    );
    assert!(
        p.anomalies.is_empty() || !a.gaps.is_empty(),
        "anomalies without a gap: {:#?}",
        p.anomalies
    );
    (a, p)
}

fn gap_paths(a: &Adopted) -> Vec<String> {
    a.gaps.iter().map(|g| g.path.clone()).collect()
}

fn anomaly_paths(p: &Proposal) -> Vec<String> {
    p.anomalies.iter().map(|a| a.path.clone()).collect()
}

/// A realistic VM as PVE 9.2 prints its config.
fn web() -> Value {
    json!({
        "boot": "order=scsi0;net0", "cores": 2, "cpu": "host", "digest": "d1", "memory": "2048",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "scsihw": "virtio-scsi-single", "ostype": "l26",
        "smbios1": "uuid=5d5b0f4e-0000-4000-8000-000000000001", "vmgenid": "00000000-0000-4000-8000-000000000002"
    })
}

fn with(mut base: Value, patch: Value) -> Value {
    for (k, v) in patch.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

#[test]
fn a_plain_vm_adopts_to_this_manifest() {
    let (a, p) = clean(
        Flavour::Vm,
        &entry(100, "running", false, "prod;web"),
        &with(
            web(),
            json!({"tags": "prod;web", "balloon": 1024, "description": "the web server\n"}),
        ),
        &[],
        &sops(),
    );
    assert_eq!(
        a.manifest,
        json!({
            "apiVersion": "proxops/v1alpha1", "kind": "VM", "metadata": {"name": "web-01"},
            "spec": {
                "node": "pve01", "vmid": 100, "state": "started", "pve-name": "web-01",
                "pve-description": "the web server\n", "tags": ["prod", "web"],
                "memory": "2048MiB", "cpu": {"type": "host", "cores": 2},
                "disks": [{"interface": "scsi0", "storage": "local-lvm", "size": "32GiB", "controller": "virtio-scsi-single"}],
                "networks": [{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F"}],
                "options": {"boot-order": ["scsi0", "net0"]},
                "extra": {"balloon": "1024", "ostype": "l26"}
            }
        })
    );
    assert_eq!(gap_paths(&a), ["smbios1", "vmgenid"]);
    assert!(p.anomalies.is_empty());
}

/// One data-driven case: a live config, what adopt leaves out, what the first plan reports.
struct Case {
    name: &'static str,
    flavour: Flavour,
    status: &'static str,
    config: Value,
    pending: &'static [(&'static str, Option<&'static str>)],
    gaps: &'static [&'static str],
    anomalies: &'static [&'static str],
    /// Checks on the manifest's spec: (JSON pointer, value).
    spec: Vec<(&'static str, Value)>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            flavour: Flavour::Vm,
            status: "stopped",
            config: web(),
            pending: &[],
            gaps: &["smbios1", "vmgenid"],
            anomalies: &[],
            spec: Vec::new(),
        }
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "several disks on scsi, virtio and sata with flags",
            config: with(
                web(),
                json!({
                    "scsi0": "local-lvm:vm-100-disk-0,aio=io_uring,discard=on,iothread=1,size=32G,ssd=1",
                    "scsi10": "ceph:vm-100-disk-3,size=100G,cache=writeback",
                    "virtio1": "local-lvm:vm-100-disk-1,discard=ignore,iothread=0,size=10240M",
                    "sata2": "local-zfs:vm-100-disk-2,size=1T,ssd=0,backup=0",
                    "boot": "order=scsi0;virtio1;net0",
                }),
            ),
            gaps: &["sata2.backup", "scsi10.cache", "smbios1", "vmgenid"],
            spec: vec![
                (
                    "/disks/0",
                    json!({"interface": "scsi0", "storage": "local-lvm", "size": "32GiB", "iothread": true, "discard": "on", "ssd": true, "aio": "io_uring", "controller": "virtio-scsi-single"}),
                ),
                (
                    "/disks/1",
                    json!({"interface": "scsi10", "storage": "ceph", "size": "100GiB"}),
                ),
                (
                    "/disks/2",
                    json!({"interface": "virtio1", "storage": "local-lvm", "size": "10GiB", "iothread": false, "discard": "ignore"}),
                ),
                (
                    "/disks/3",
                    json!({"interface": "sata2", "storage": "local-zfs", "size": "1024GiB", "ssd": false}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "several NICs with vlan, firewall, rate and unmodelled tokens",
            status: "running",
            config: with(
                web(),
                json!({
                    "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,tag=20",
                    "net1": "e1000=bc:24:11:00:00:02,bridge=vmbr1,rate=12.5,mtu=9000",
                    "net3": "model=vmxnet3,macaddr=BC:24:11:00:00:03,bridge=vmbr2,firewall=0,link_down=1",
                }),
            ),
            gaps: &["net1.mtu", "net3.link_down", "smbios1", "vmgenid"],
            spec: vec![
                (
                    "/networks",
                    json!([
                        {"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F", "vlan": 20, "firewall": true},
                        {"slot": 1, "model": "e1000", "bridge": "vmbr1", "mac": "BC:24:11:00:00:02", "rate-limit": 12.5},
                        {"slot": 3, "model": "vmxnet3", "bridge": "vmbr2", "mac": "BC:24:11:00:00:03", "firewall": false},
                    ]),
                ),
                ("/state", json!("started")),
            ],
            ..Case::default()
        },
        Case {
            name: "q35, OVMF, EFI disk, TPM, mapped and raw PCI passthrough",
            config: with(
                web(),
                json!({
                    "bios": "ovmf", "machine": "pc-q35-9.2+pve1",
                    "efidisk0": "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M",
                    "tpmstate0": "local-lvm:vm-100-disk-2,size=4M,version=v2.0",
                    "hostpci0": "mapping=gpu,pcie=1", "hostpci1": "0000:02:00.0,x-vga=1",
                    "vga": "virtio,memory=64", "cpu": "x86-64-v2-AES,hidden=1,flags=+aes",
                    "sockets": 2, "numa": 1, "serial0": "socket",
                }),
            ),
            gaps: &[
                "cpu.flags",
                "hostpci1.x-vga",
                "machine",
                "smbios1",
                "vga.memory",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/hardware",
                    json!({
                        "machine": "q35", "bios": "ovmf", "display": "virtio", "serial0": "socket",
                        "sockets": 2, "numa": true,
                        "efi-disk": {"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"},
                        "tpm": {"storage": "local-lvm", "version": "v2.0"},
                        "pci-devices": [{"slot": 0, "mapping": "gpu", "pcie": true}, {"slot": 1, "device": "0000:02:00.0"}],
                    }),
                ),
                ("/cpu", json!({"type": "x86-64-v2-AES", "cores": 2})),
                ("/options/hidden", json!(true)),
            ],
            ..Case::default()
        },
        Case {
            name: "cloud-init with user, ipconfig, DNS and keys all in SOPS",
            status: "running",
            config: with(
                web(),
                json!({
                    "ide2": "local-lvm:vm-100-cloudinit,media=cdrom,size=4M",
                    "ide3": "none,media=cdrom",
                    "ciuser": "deploy", "cipassword": "**********", "citype": "nocloud",
                    "sshkeys": "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h%0Assh-rsa%20AAAAB3NzaC1yc2EAAAADadoptB%20bob%40h%0A",
                    "ipconfig0": "ip=192.168.0.50/24,gw=192.168.0.1", "ipconfig1": "ip=dhcp",
                    "net1": "virtio=BC:24:11:00:00:02,bridge=vmbr1",
                    "nameserver": "1.1.1.1 9.9.9.9", "searchdomain": "example.org",
                    "cicustom": "user=local:snippets/u.yaml", "ciupgrade": 0,
                }),
            ),
            gaps: &[
                "cicustom",
                "cipassword",
                "ciupgrade",
                "ipconfig1",
                "smbios1",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/hardware",
                    json!({"cloud-init": {"enabled": true, "storage": "local-lvm"}, "cdrom": {"iso": "none", "media": "cdrom"}}),
                ),
                (
                    "/cloud-init-data",
                    json!({
                        "ci-user": "deploy",
                        "ssh-key-refs": ["cloud-init.ssh-keys.alice", "cloud-init.ssh-keys.bob"],
                        "nameservers": ["1.1.1.1", "9.9.9.9"], "search-domains": ["example.org"],
                        "ipconfigs": [{"nic": 0, "ip": "192.168.0.50/24", "gateway": "192.168.0.1"}],
                    }),
                ),
                ("/extra", json!({"citype": "nocloud", "ostype": "l26"})),
            ],
            ..Case::default()
        },
        Case {
            name: "a key not in SOPS redacts all keys to the sentinel",
            config: with(
                web(),
                json!({
                    "sshkeys": "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h%0Assh-ed25519%20AAAAunknown%20eve%40h",
                }),
            ),
            gaps: &["smbios1", "sshkeys", "vmgenid"],
            spec: vec![("/cloud-init-data", json!({"ssh-keys": ["*"]}))],
            ..Case::default()
        },
        Case {
            name: "a template",
            flavour: Flavour::Template,
            config: with(
                web(),
                json!({"template": 1, "name": "golden.Noble", "ide2": "local-lvm:base-9000-cloudinit,media=cdrom",
                "scsi0": "local-lvm:base-9000-disk-0,size=3584M"}),
            ),
            gaps: &["scsi0.size", "smbios1", "vmgenid"],
            anomalies: &["spec.disks[0].size"],
            spec: vec![
                ("/pve-name", json!("golden.Noble")),
                ("/disks/0/size", json!("3GiB")),
                ("/hardware/cloud-init/storage", json!("local-lvm")),
            ],
            ..Case::default()
        },
        Case {
            name: "a clone of a template (made in PVE) looks like any VM",
            config: with(
                web(),
                json!({"ide2": "local-lvm:vm-100-cloudinit,media=cdrom", "ciuser": "ops",
                "ipconfig0": "ip=10.0.0.9/24", "tags": "web"}),
            ),
            spec: vec![
                ("/tags", json!(["web"])),
                (
                    "/cloud-init-data/ipconfigs/0",
                    json!({"nic": 0, "ip": "10.0.0.9/24"}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "unknown keys: safe ones to extra, the rest to gaps",
            config: with(
                web(),
                json!({
                    "args": "-cpu host", "hookscript": "local:snippets/hook.pl", "unused0": "local-lvm:vm-100-disk-9",
                    "usb0": "host=1234:5678", "serial1": "/dev/ttyS1", "serial2": "socket", "affinity": "0-3",
                    "cpulimit": "2.5", "localtime": 1, "kvm": 1, "rng0": "source=/dev/urandom", "watchdog": "model=i6300esb",
                    "protection": 1, "onboot": 1, "agent": "enabled=1,fstrim_cloned_disks=1", "startup": "order=3,up=30",
                    "hotplug": "disk,network,usb,memory,cpu", "acpi": 1, "tablet": 0,
                }),
            ),
            gaps: &[
                "agent.fstrim_cloned_disks",
                "args",
                "hookscript",
                "serial1",
                "smbios1",
                "unused0",
                "usb0",
                "vmgenid",
            ],
            spec: vec![
                (
                    "/extra",
                    json!({"affinity": "0-3", "cpulimit": "2.5", "kvm": "1", "localtime": "1", "ostype": "l26",
                    "rng0": "source=/dev/urandom", "serial2": "socket", "watchdog": "model=i6300esb"}),
                ),
                (
                    "/options",
                    json!({"onboot": true, "protection": true, "acpi": true, "tablet": false, "agent": true,
                    "startup": "order=3,up=30", "hotplug": "disk,network,usb,memory,cpu", "boot-order": ["scsi0", "net0"]}),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "an attached ISO is left unowned",
            config: with(
                web(),
                json!({"ide2": "local:iso/debian-13.iso,media=cdrom,size=700M", "boot": "order=scsi0;ide2;net0"}),
            ),
            gaps: &["ide2", "smbios1", "vmgenid"],
            spec: vec![("/options/boot-order", json!(["scsi0", "ide2", "net0"]))],
            ..Case::default()
        },
        Case {
            name: "no cpu, cores or memory keys: PVE's defaults",
            config: with(
                web(),
                json!({"cpu": null, "cores": null, "memory": null, "boot": "cdn", "bootdisk": "scsi0"}),
            ),
            gaps: &["boot", "smbios1", "vmgenid"],
            spec: vec![
                ("/cpu", json!({"type": "kvm64", "cores": 1})),
                ("/memory", json!("512MiB")),
                ("/extra/bootdisk", json!("scsi0")),
            ],
            ..Case::default()
        },
        Case {
            name: "a running guest with pending changes keeps them pending",
            status: "running",
            pending: &[
                ("memory", Some("4096")),
                ("cores", Some("4")),
                ("net1", None),
                ("onboot", Some("1")),
            ],
            config: with(
                web(),
                json!({"net1": "virtio=BC:24:11:00:00:02,bridge=vmbr1"}),
            ),
            gaps: &["cores", "memory", "net1", "onboot", "smbios1", "vmgenid"],
            spec: vec![
                ("/memory", json!("4096MiB")),
                ("/cpu/cores", json!(4)),
                ("/options/onboot", json!(true)),
                (
                    "/networks",
                    json!([{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F"}]),
                ),
            ],
            ..Case::default()
        },
        Case {
            name: "a locked guest",
            config: with(web(), json!({"lock": "backup"})),
            gaps: &["lock", "smbios1", "vmgenid"],
            anomalies: &[""],
            ..Case::default()
        },
        Case {
            name: "a passthrough disk and a tiny disk stay undeclared",
            config: with(
                web(),
                json!({"scsi1": "/dev/disk/by-id/ata-X,size=500G", "scsi2": "local-lvm:vm-100-disk-5,size=512M"}),
            ),
            gaps: &["scsi1", "scsi2", "smbios1", "vmgenid"],
            anomalies: &["spec.disks", "spec.disks"],
            ..Case::default()
        },
        Case {
            name: "an unusable cloud-init drive slot, hostpci and ipconfig stay unowned",
            config: with(
                web(),
                json!({"sata5": "local-lvm:vm-100-cloudinit,media=cdrom", "hostpci2": "01:00.0;02:00.0",
                "ipconfig0": "ip=10.0.0.9/24,ip6=auto", "efidisk0": "local-lvm:vm-100-disk-1,size=4M", "tpmstate0": "local-lvm:vm-100-disk-2,size=4M"}),
            ),
            gaps: &[
                "efidisk0",
                "hostpci2",
                "ipconfig0",
                "sata5",
                "smbios1",
                "tpmstate0",
                "vmgenid",
            ],
            anomalies: &["spec.hardware.pci-devices"],
            ..Case::default()
        },
        Case {
            name: "a guest of unknown status (its node is offline) is adopted stopped",
            status: "unknown",
            gaps: &["smbios1", "status", "vmgenid"],
            spec: vec![("/state", json!("stopped"))],
            ..Case::default()
        },
    ]
}

#[test]
fn data_driven_round_trips_are_clean() {
    for c in cases() {
        let template = c.flavour == Flavour::Template;
        let e = entry(
            100,
            c.status,
            template,
            c.config.get("tags").and_then(Value::as_str).unwrap_or(""),
        );
        let (a, p) = clean(c.flavour, &e, &c.config, c.pending, &sops());
        assert_eq!(gap_paths(&a), c.gaps, "{}: gaps {:#?}", c.name, a.gaps);
        assert_eq!(
            anomaly_paths(&p),
            c.anomalies,
            "{}: anomalies {:#?}",
            c.name,
            p.anomalies
        );
        for (ptr, want) in &c.spec {
            assert_eq!(
                a.manifest["spec"].pointer(ptr),
                Some(want),
                "{}: spec{ptr} in {:#}",
                c.name,
                a.manifest
            );
        }
        // Nothing secret or PVE-only ends up in the manifest.
        let text = a.manifest.to_string();
        for never in [
            "**********",
            "cicustom",
            "ciupgrade",
            "AAAAC3Nza",
            "AAAAunknown",
            "hookscript",
            "args",
        ] {
            assert!(
                !text.contains(never),
                "{}: manifest carries {never}: {text}",
                c.name
            );
        }
    }
}

#[test]
fn ssh_keys_become_refs_only_when_every_line_is_in_sops() {
    let cfg = |keys: &str| with(web(), json!({"sshkeys": crate::cloudinit::urlencode(keys)}));
    let refs = |a: &Adopted| a.manifest["spec"]["cloud-init-data"].clone();
    let e = entry(100, "stopped", false, "");
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("{KEY_B}\n{KEY_A}\n")),
        &[],
        &sops(),
    );
    assert_eq!(
        refs(&a),
        json!({"ssh-key-refs": ["cloud-init.ssh-keys.bob", "cloud-init.ssh-keys.alice"]})
    );
    // Extra whitespace and a duplicate line still match (PVE's key set is what counts).
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("  {KEY_A}  \n\n{KEY_A}")),
        &[],
        &sops(),
    );
    assert_eq!(
        refs(&a),
        json!({"ssh-key-refs": ["cloud-init.ssh-keys.alice"]})
    );
    // One unmatched line: the sentinel, and a gap that says why.
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("{KEY_A}\nssh-ed25519 AAAAother x@y")),
        &[],
        &sops(),
    );
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
    let g = a.gaps.iter().find(|g| g.path == "sshkeys").unwrap();
    assert!(g.reason.contains("1 of 2"), "{}", g.reason);
    // No access to secrets: the sentinel.
    let (a, _) = clean(Flavour::Vm, &e, &cfg(KEY_A), &[], &NoSecrets);
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
    // A SOPS entry nested deeper than `cloud-init.ssh-keys.<name>` is no valid ref.
    let nested = MapSecrets::from_pairs(&[("cloud-init.ssh-keys.team.alice", KEY_A)]);
    let (a, _) = clean(Flavour::Vm, &e, &cfg(KEY_A), &[], &nested);
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
}

#[test]
fn names_are_dns_labels() {
    for (pve, want) in [
        (Some("web-01"), "web-01"),
        (Some("Web_01.Example.ORG"), "web-01-example-org"),
        (Some("--db  server--"), "db-server"),
        (Some("___"), "vm-7"),
        (None, "vm-7"),
        (Some(&*"a".repeat(70)), &*"a".repeat(63)),
        (Some(&*format!("{}-b", "a".repeat(62))), &*"a".repeat(62)),
    ] {
        let got = metadata_name(pve, 7);
        assert_eq!(got, want, "{pve:?}");
        assert!(proxops_kind_sdk::manifest::dns_label_problem(&got).is_none());
    }
}

#[test]
fn a_nameless_vm_gets_a_name_written() {
    // The one shape whose first plan writes: PVE has no name, the manifest must have one.
    // PVE's listing names such a guest `VM <vmid>` (qemu-server `vmstatus`).
    for listed in [json!(null), json!("VM 100")] {
        let (a, p) = round_trip(
            Flavour::Vm,
            &with(entry(100, "stopped", false, ""), json!({ "name": listed })),
            &with(web(), json!({"name": null})),
            &[],
            &sops(),
        );
        assert_eq!(a.manifest["metadata"]["name"], json!("vm-100"), "{listed}");
        assert!(gap_paths(&a).contains(&"name".to_string()), "{listed}");
        assert_eq!(p.actions.len(), 1, "{listed}");
        assert_eq!(p.drift.len(), 1, "{listed}");
        assert_eq!(p.drift[0].path, "spec.pve-name", "{listed}");
    }
}

#[test]
fn a_clone_keeps_no_foreign_ownership_mark() {
    // PVE copies tags on clone: a clone of a proxops template carries `proxops-9000`. The
    // manifest drops it (a gap says so), so the first plan rewrites the tags without it.
    let cfg = with(web(), json!({"tags": "proxops;proxops-9000;web"}));
    let (a, p) = round_trip(
        Flavour::Vm,
        &entry(100, "stopped", false, "proxops;proxops-9000;web"),
        &cfg,
        &[],
        &sops(),
    );
    assert_eq!(a.manifest["spec"]["tags"], json!(["web"]));
    assert_eq!(gap_paths(&a), ["smbios1", "tags", "vmgenid"]);
    assert_eq!(p.actions.len(), 1);
    assert_eq!(
        p.actions[0].calls[0].get("tags"),
        Some("proxops;proxops-100;web")
    );
    assert_eq!(p.drift.len(), 1);
}

#[test]
fn observe_without_a_manifest_reads_what_adopt_needs() {
    let paths = |status| {
        crate::observe(None, Some(&entry(100, status, false, "")))
            .iter()
            .map(crate::plan_tests::call_line)
            .collect::<Vec<_>>()
    };
    // A running guest: /pending (applied values, pending changes, digest, protection).
    assert_eq!(paths("running"), ["Get /nodes/pve01/qemu/100/pending []"]);
    // A stopped one has nothing pending: the applied config.
    assert_eq!(
        paths("stopped"),
        ["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
}

#[test]
fn wrong_kind_or_shape_is_an_error_naming_the_way_out() {
    let e = entry(100, "stopped", false, "");
    let t = entry(9000, "stopped", true, "");
    let err = |f, e: &Value, c: &Value| adopt_with(f, e, c, &[], &sops()).unwrap_err();
    assert!(err(Flavour::Vm, &t, &web()).contains("the TemplateVM kind adopts it"));
    assert!(err(Flavour::Template, &e, &web()).contains("the VM kind adopts it"));
    let lxc = with(e.clone(), json!({"type": "lxc", "id": "lxc/100"}));
    assert!(err(Flavour::Vm, &lxc, &web()).contains("not qemu"));
    assert!(
        err(Flavour::Vm, &e, &with(web(), json!({"net0": null}))).contains("no network interface")
    );
    assert!(
        err(
            Flavour::Vm,
            &e,
            &with(web(), json!({"net0": "virtio=BC:24:11:00:00:01"}))
        )
        .contains("on no bridge")
    );
    assert!(err(Flavour::Vm, &e, &with(web(), json!({"scsi0": null}))).contains("no disk"));
    assert!(err(Flavour::Vm, &e, &with(web(), json!({"memory": "8"}))).contains("memory"));
    let only_nic_going = observation(
        None,
        &entry(100, "running", false, ""),
        &web(),
        &[("net0", None)],
    );
    assert!(
        <Vm as ResourceKind>::adopt(&only_nic_going, &sops())
            .unwrap_err()
            .contains("no network interface")
    );
    let no_reads = Observation {
        live: Some(e.to_string()),
        reads: vec![],
    };
    assert!(
        <Vm as ResourceKind>::adopt(&no_reads, &sops())
            .unwrap_err()
            .contains("no config read")
    );
}

// --- proptest over generated configs ------------------------------------------------------

fn arb_disk(bus: &'static str, n: u32) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![Just("local-lvm"), Just("ceph"), Just("local-zfs")],
        prop_oneof![
            (1u64..512).prop_map(|g| format!("{g}G")),
            (1u64..64).prop_map(|g| format!("{}M", g * 1024)),
            (1025u64..9000).prop_map(|m| format!("{m}M"))
        ],
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![Just("on"), Just("ignore")]),
        proptest::option::of(any::<bool>()),
        proptest::option::of(prop_oneof![
            Just("native"),
            Just("threads"),
            Just("io_uring")
        ]),
        proptest::option::of(prop_oneof![Just("writeback"), Just("none")]),
    )
        .prop_map(move |(pool, size, iothread, discard, ssd, aio, cache)| {
            let mut v = format!("{pool}:vm-100-disk-{n},size={size}");
            if let Some(b) = iothread.filter(|_| bus == "scsi" || bus == "virtio") {
                v.push_str(&format!(",iothread={}", u8::from(b)));
            }
            if let Some(d) = discard {
                v.push_str(&format!(",discard={d}"));
            }
            if let Some(b) = ssd.filter(|_| bus != "virtio") {
                v.push_str(&format!(",ssd={}", u8::from(b)));
            }
            if let Some(a) = aio {
                v.push_str(&format!(",aio={a}"));
            }
            if let Some(c) = cache {
                v.push_str(&format!(",cache={c}"));
            }
            (format!("{bus}{n}"), v)
        })
}

fn arb_nic(n: u32) -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            Just("virtio"),
            Just("e1000"),
            Just("vmxnet3"),
            Just("rtl8139")
        ],
        0u8..=255,
        prop_oneof![Just("vmbr0"), Just("vmbr1"), Just("vnet_a")],
        proptest::option::of(1u16..4095),
        proptest::option::of(prop_oneof![Just("10"), Just("12.5"), Just("0.5")]),
        proptest::option::of(any::<bool>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(model, last, bridge, tag, rate, fw, mtu, legacy)| {
            let mac = format!("BC:24:11:00:{n:02X}:{last:02X}");
            let mut v = if legacy {
                format!(
                    "model={model},macaddr={},bridge={bridge}",
                    mac.to_ascii_lowercase()
                )
            } else {
                format!("{model}={mac},bridge={bridge}")
            };
            if let Some(t) = tag {
                v.push_str(&format!(",tag={t}"));
            }
            if let Some(r) = rate {
                v.push_str(&format!(",rate={r}"));
            }
            if let Some(f) = fw {
                v.push_str(&format!(",firewall={}", u8::from(f)));
            }
            if mtu {
                v.push_str(",mtu=1400");
            }
            (format!("net{n}"), v)
        })
}

#[derive(Debug, Clone)]
struct Generated {
    template: bool,
    running: bool,
    config: Map<String, Value>,
    pending: Vec<(&'static str, Option<&'static str>)>,
}

fn arb_config() -> impl Strategy<Value = Generated> {
    let disks = proptest::sample::subsequence(
        vec![
            ("scsi", 0u32),
            ("scsi", 1),
            ("scsi", 12),
            ("virtio", 0),
            ("virtio", 3),
            ("sata", 0),
            ("sata", 4),
            ("ide", 0),
        ],
        1..4,
    )
    .prop_flat_map(|slots| {
        slots
            .into_iter()
            .map(|(b, n)| arb_disk(b, n))
            .collect::<Vec<_>>()
    });
    let nics = proptest::sample::subsequence(vec![0u32, 1, 2, 7], 1..4)
        .prop_flat_map(|slots| slots.into_iter().map(arb_nic).collect::<Vec<_>>());
    let firmware = prop_oneof![
        Just(vec![]),
        Just(vec![("bios", "seabios"), ("machine", "pc-i440fx-9.2+pve1")]),
        Just(vec![
            ("bios", "ovmf"),
            ("machine", "q35"),
            (
                "efidisk0",
                "local-lvm:vm-100-disk-8,efitype=4m,pre-enrolled-keys=0,size=4M"
            ),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M,version=v2.0")
        ]),
        Just(vec![
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:vm-100-disk-8,size=128K")
        ]),
        Just(vec![
            ("bios", "ovmf"),
            ("machine", "type=pc-q35-9.2,viommu=virtio"),
            (
                "efidisk0",
                "local-lvm:vm-100-disk-8,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
            ),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M")
        ]),
        // An EFI disk and a TPM the manifest cannot state without OVMF and q35.
        Just(vec![
            ("efidisk0", "local-lvm:vm-100-disk-8,efitype=4m,size=4M"),
            ("tpmstate0", "local-lvm:vm-100-disk-9,size=4M,version=v2.0")
        ]),
    ];
    let ci = prop_oneof![
        Just(vec![]),
        Just(vec![
            ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
            ("ciuser", "ops"),
            ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
            (
                "sshkeys",
                "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIadoptA%20alice%40h"
            )
        ]),
        Just(vec![
            ("ide2", "local-lvm:vm-100-cloudinit,media=cdrom"),
            ("ide3", "none,media=cdrom"),
            ("cipassword", "**********"),
            ("nameserver", "10.0.0.53"),
            ("searchdomain", "corp.example"),
            ("ipconfig0", "ip=dhcp")
        ]),
        Just(vec![("ide2", "none,media=cdrom")]),
        Just(vec![("ide2", "local:iso/x.iso,media=cdrom")]),
    ];
    let misc = proptest::sample::subsequence(
        vec![
            ("onboot", "1"),
            ("protection", "1"),
            ("agent", "1"),
            ("tablet", "0"),
            ("hotplug", "0"),
            ("startup", "order=2"),
            ("balloon", "512"),
            ("ostype", "win11"),
            ("numa", "1"),
            ("sockets", "2"),
            ("vga", "qxl"),
            ("serial0", "socket"),
            ("description", "made by hand"),
            ("tags", "db;Prod"),
            ("hostpci0", "mapping=nic-vf,pcie=0"),
            ("args", "-no-hpet"),
            ("scsihw", "virtio-scsi-pci"),
            ("hostpci1", "0000:01:00.0,pcie=1,rombar=0"),
            ("ide3", "local:iso/y.iso,media=cdrom"),
            ("net9", "virtio=BC:24:11:00:09:01,bridge=vmbr0,queues=4"),
            ("usb0", "spice"),
            ("vga", "type=std,memory=32"),
            ("boot", "order=net0;scsi0"),
            ("cpu", "host,flags=+pcid"),
            ("cores", "4"),
            ("memory", "current=3072"),
        ],
        0..12,
    );
    let name = prop_oneof![
        Just("gen-vm"),
        Just("Gen.VM-01"),
        Just("db1.corp.example.org"),
        Just("x")
    ];
    (
        any::<bool>(),
        any::<bool>(),
        disks,
        nics,
        firmware,
        ci,
        misc,
        16u64..65536,
        proptest::sample::subsequence(
            vec![
                ("memory", Some("8192")),
                ("cores", Some("8")),
                ("onboot", Some("1")),
                ("net1", None),
                ("description", Some("new text")),
            ],
            0..3,
        ),
        name,
    )
        .prop_map(
            |(template, running, disks, nics, firmware, ci, misc, mem, pending, name)| {
                let mut c = Map::new();
                c.insert("name".into(), json!(name));
                c.insert("memory".into(), json!(mem.to_string()));
                c.insert("digest".into(), json!("d"));
                for (k, v) in disks.into_iter().chain(nics) {
                    c.insert(k, json!(v));
                }
                for (k, v) in firmware.into_iter().chain(ci).chain(misc) {
                    c.insert(k.into(), json!(v));
                }
                if template {
                    c.insert("template".into(), json!(1));
                }
                let running = running && !template;
                // Only a running guest has pending changes; a pending delete needs the key, and
                // one NIC must stay (without any, adopt fails: see the error test).
                let nics = c.keys().filter(|k| k.starts_with("net")).count();
                let pending = if running {
                    pending
                        .into_iter()
                        .filter(|(k, v)| v.is_some() || (c.contains_key(*k) && nics > 1))
                        .collect()
                } else {
                    Vec::new()
                };
                Generated {
                    template,
                    running,
                    config: c,
                    pending,
                }
            },
        )
}

#[test]
fn generated_configs_round_trip_clean() {
    let mut runner = TestRunner::new_with_rng(
        PtConfig {
            cases: 64,
            failure_persistence: None,
            ..PtConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let ran = std::cell::Cell::new(0);
    // (templates, running, with pending changes, with gaps)
    let seen = std::cell::Cell::new((0, 0, 0, 0));
    runner
        .run(&arb_config(), |g| {
            let flavour = if g.template {
                Flavour::Template
            } else {
                Flavour::Vm
            };
            let status = if g.running { "running" } else { "stopped" };
            let config = Value::Object(g.config.clone());
            let tags = config.get("tags").and_then(Value::as_str).unwrap_or("");
            let e = entry(100, status, g.template, tags);
            let (a, _) = clean(flavour, &e, &config, &g.pending, &sops());
            // Every live NIC is declared with its MAC pinned, so no plan can change it.
            for (k, v) in &g.config {
                let Some(n) = k.strip_prefix("net") else {
                    continue;
                };
                if g.pending.contains(&(k.as_str(), None)) {
                    continue;
                }
                let nics = a.manifest["spec"]["networks"].as_array().unwrap();
                let nic = nics
                    .iter()
                    .find(|x| x["slot"].as_u64() == n.parse().ok())
                    .unwrap_or_else(|| panic!("{k} not declared"));
                let mac = nic["mac"].as_str().unwrap();
                assert!(
                    v.as_str().unwrap().to_ascii_uppercase().contains(mac),
                    "{k}: {v} vs {mac}"
                );
            }
            let text = a.manifest.to_string();
            assert!(
                !text.contains("*****")
                    && !text.contains("AAAAC3Nza")
                    && !text.contains("-no-hpet"),
                "{text}"
            );
            ran.set(ran.get() + 1);
            let (t, r, p, gp) = seen.get();
            seen.set((
                t + usize::from(g.template),
                r + usize::from(g.running),
                p + usize::from(!g.pending.is_empty()),
                gp + usize::from(a.gaps.len() > 2),
            ));
            Ok(())
        })
        .unwrap();
    assert_eq!(ran.get(), 64);
    let (t, r, p, gp) = seen.get();
    assert!(
        t > 5 && r > 5 && p > 3 && gp > 20,
        "too narrow: {:?}",
        seen.get()
    );
    eprintln!(
        "generated: 64 cases; (templates, running, pending, >2 gaps) = {:?}",
        seen.get()
    );
}
