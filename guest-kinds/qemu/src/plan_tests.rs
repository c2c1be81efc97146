//! Data-driven planning cases: desired (base manifest + patches) and observed PVE state (in the
//! forms PVE prints, pve-api.md 4.9 / 5.1) -> the proposal rendered as text lines.

use proxops_kind_sdk::model::{Call, Method, Observation, Proposal, Read};
use serde_json::{Value, json};

use crate::desired::Flavour;
use crate::validate_tests::{base, patch};

/// The live config PVE prints for `base()` after create (sim-faithful shapes: memory as a string,
/// cores as a number, PVE-assigned upper-case MAC, `size=32G`, `;`-joined tags).
fn live_config() -> Value {
    json!({
        "boot": "order=scsi0;net0", "cores": 2, "cpu": "host", "digest": "d1", "memory": "2048",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "smbios1": "uuid=5d5b0f4e-0000-4000-8000-000000000001", "tags": "proxops", "vmgenid": "00000000-0000-4000-8000-000000000002"
    })
}

fn entry(status: &str, template: bool) -> Value {
    let mut e = json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01", "status": status,
        "name": "web-01", "tags": "proxops"});
    if template {
        e["template"] = json!(1);
    }
    e
}

/// Render a proposal as compact lines.
fn render(p: &Proposal) -> Vec<String> {
    let mut out = Vec::new();
    for a in &p.actions {
        out.push(format!(
            "{:?}{}{}: {}",
            a.operation,
            if a.requires_stop { " [stop]" } else { "" },
            if a.destructive { " [destructive]" } else { "" },
            a.summary
        ));
        for c in &a.calls {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|(k, v, _)| format!("{k}={v}"))
                .collect();
            out.push(
                format!("  {:?} {} {}", c.method, c.path, params.join(" "))
                    .trim_end()
                    .to_string(),
            );
        }
    }
    for d in &p.drift {
        out.push(format!(
            "drift {}: {} -> {}",
            d.path,
            d.live.as_deref().unwrap_or("-"),
            d.desired.as_deref().unwrap_or("-")
        ));
    }
    for d in &p.pending {
        out.push(format!(
            "pending {}: {} -> {}",
            d.path,
            d.live.as_deref().unwrap_or("-"),
            d.desired.as_deref().unwrap_or("-")
        ));
    }
    for a in &p.anomalies {
        out.push(format!("anomaly {}", a.path));
    }
    out
}

struct Case<'a> {
    flavour: Flavour,
    patches: &'a [(&'a str, Value)],
    /// `None`: no manifest (prune).
    manifest: bool,
    live: Option<Value>,
    config: &'a [(&'a str, Value)],
    pending: Option<Value>,
}

impl Default for Case<'_> {
    fn default() -> Self {
        Case {
            flavour: Flavour::Vm,
            patches: &[],
            manifest: true,
            live: Some(entry("stopped", false)),
            config: &[],
            pending: None,
        }
    }
}

fn run(c: Case<'_>) -> Proposal {
    let mut doc = base();
    if c.flavour == Flavour::Template {
        doc["kind"] = json!("TemplateVM");
    } else {
        // Cases start from a stopped VM; those about running guests say `started`.
        patch(&mut doc, "spec/state", json!("stopped"));
    }
    for (p, v) in c.patches {
        patch(&mut doc, p, v.clone());
    }
    let desired = crate::validate(c.flavour, &doc)
        .expect("test manifest is valid")
        .desired;
    let mut cfg = live_config();
    for (k, v) in c.config {
        patch(&mut cfg, k, v.clone());
    }
    let mut reads = vec![Read {
        call: Call::new(Method::Get, "/nodes/pve01/qemu/100/config").param("current", "1"),
        status: 200,
        body: cfg.to_string(),
    }];
    if let Some(p) = &c.pending {
        reads.push(Read {
            call: Call::new(Method::Get, "/nodes/pve01/qemu/100/pending"),
            status: 200,
            body: p.to_string(),
        });
    }
    let obs = Observation {
        live: c.live.map(|l| l.to_string()),
        reads,
    };
    crate::plan(c.flavour, c.manifest.then_some(&desired), &obs).expect("plan succeeds")
}

fn check(c: Case<'_>, expected: &[&str]) {
    let got = render(&run(c));
    assert_eq!(got, expected, "\ngot:\n{}\n", got.join("\n"));
}

#[test]
fn converged_is_empty() {
    check(Case::default(), &[]);
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn pve_normalisation_is_never_drift() {
    check(
        Case {
            patches: &[
                ("spec/tags", json!(["Web", "db", "web"])),
                ("spec/networks/0/mac", json!("bc:24:11:5e:0a:1f")),
                ("spec/networks/0/vlan", json!(20)),
                ("spec/networks/0/firewall", json!(true)),
                ("spec/networks/0/rate-limit", json!(10)),
                ("spec/disks/0/iothread", json!(true)),
                ("spec/disks/0/discard", json!("ignore")),
                ("spec/disks/0/ssd", json!(false)),
                ("spec/hardware/bios", json!("ovmf")),
                ("spec/hardware/machine", json!("q35")),
                (
                    "spec/hardware/efi-disk",
                    json!({"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"}),
                ),
                ("spec/hardware/sockets", json!(1)),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "device": "0000:01:00.0", "pcie": true}]),
                ),
                ("spec/options/agent", json!(true)),
                ("spec/options/acpi", json!(true)),
                ("spec/options/hotplug", json!("usb,network,disk")),
                ("spec/options/startup", json!("order=10")),
                ("spec/options/boot-order", json!(["scsi0", "net0"])),
                ("spec/memory", json!("2048MiB")),
                ("spec/extra/ostype", json!("l26")),
            ],
            config: &[
                ("tags", json!("db;proxops;web")),
                ("memory", json!(2048)),
                ("cores", json!("2")),
                (
                    "net0",
                    json!("virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,rate=10,tag=20"),
                ),
                (
                    "scsi0",
                    json!("local-lvm:vm-100-disk-0,iothread=1,size=32768M"),
                ),
                ("bios", json!("ovmf")),
                ("machine", json!("pc-q35-9.2+pve1")),
                (
                    "efidisk0",
                    json!(
                        "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
                    ),
                ),
                ("hostpci0", json!("01:00.0,pcie=1")),
                ("agent", json!("enabled=1,fstrim_cloned_disks=1")),
                ("startup", json!("10")),
                ("ostype", json!("l26")),
            ],
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn create_vm_then_start() {
    check(
        Case {
            live: None,
            patches: &[
                ("spec/state", json!("started")),
                ("spec/tags", json!(["Web"])),
                ("spec/disks/0/controller", json!("virtio-scsi-single")),
                ("spec/disks/0/iothread", json!(true)),
                ("spec/hardware/bios", json!("ovmf")),
                ("spec/hardware/machine", json!("i440fx")),
                ("spec/hardware/efi-disk", json!({"storage": "local-lvm"})),
                (
                    "spec/hardware/cloud-init",
                    json!({"enabled": true, "storage": "local-lvm"}),
                ),
                ("spec/hardware/cdrom", json!({"iso": "none"})),
                ("spec/networks/0/vlan", json!(10)),
            ],
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;web memory=2048 cores=2 cpu=host machine=pc bios=ovmf \
scsihw=virtio-scsi-single scsi0=local-lvm:32,iothread=1 efidisk0=local-lvm:1,efitype=4m,pre-enrolled-keys=1 \
ide2=local-lvm:cloudinit ide3=none,media=cdrom net0=virtio,bridge=vmbr0,tag=10",
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

#[test]
fn create_template_marks_it() {
    check(
        Case {
            flavour: Flavour::Template,
            live: None,
            patches: &[
                ("spec/hardware/bios", json!("ovmf")),
                ("spec/hardware/machine", json!("q35")),
                ("spec/hardware/tpm", json!({"storage": "local-lvm"})),
            ],
            ..Case::default()
        },
        &[
            "Create: create template 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops memory=2048 cores=2 cpu=host machine=q35 bios=ovmf \
scsi0=local-lvm:32 tpmstate0=local-lvm:1,version=v2.0 net0=virtio,bridge=vmbr0 start=0",
            "  Post /nodes/pve01/qemu/100/template",
            "drift : - -> template 100 on pve01",
        ],
    );
}

#[test]
fn out_of_scope_provisioning_is_an_anomaly() {
    check(
        Case {
            live: None,
            patches: &[("spec/clone", json!("golden")), ("spec/disks", Value::Null)],
            ..Case::default()
        },
        &["anomaly spec.clone"],
    );
    check(
        Case {
            live: None,
            patches: &[
                ("spec/disks/0/image", json!("noble")),
                ("spec/disks/0/size", Value::Null),
            ],
            ..Case::default()
        },
        &["anomaly spec.disks[0].image"],
    );
    check(
        Case {
            live: None,
            patches: &[("spec/hardware/cdrom", json!({"iso": "debian-13"}))],
            ..Case::default()
        },
        &["anomaly spec.hardware.cdrom.iso"],
    );
}

#[test]
fn hot_changes_on_a_running_vm() {
    // Written; PVE keeps what it cannot hot-plug pending.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/memory", json!("4GiB")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 memory=4096",
            "drift spec.memory: 2048 -> 4096",
        ],
    );
    // Already pending with the desired value: reported, not written again.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(
                json!([{"key": "memory", "value": "2048", "pending": "4096"}, {"key": "cores", "value": 2}]),
            ),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/memory", json!("4GiB")),
            ],
            ..Case::default()
        },
        &["pending spec.memory: 2048 -> 4096"],
    );
}

#[test]
fn stop_required_changes() {
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/hardware/machine", json!("q35")),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve01 with a restart: machine",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve01/qemu/100/config digest=d1 machine=q35",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.hardware.machine: - -> q35",
        ],
    );
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("stopped")),
                ("spec/hardware/bios", json!("ovmf")),
            ],
            ..Case::default()
        },
        &[
            "Power [stop]: shut down VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "Update: update VM 100 on pve01: bios",
            "  Post /nodes/pve01/qemu/100/config digest=d1 bios=ovmf",
            "drift spec.hardware.bios: - -> ovmf",
            "drift spec.state: running -> stopped",
        ],
    );
    // A pending change elsewhere: the stop applies it, so the stale digest is not sent.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "cores", "value": 2, "pending": 4}])),
            patches: &[
                ("spec/state", json!("started")),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "device": "0000:01:00.0"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve01 with a restart: hostpci0",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve01/qemu/100/config hostpci0=0000:01:00.0",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.hardware.pci-devices[0]: - -> 0000:01:00.0",
        ],
    );
}

#[test]
fn disks() {
    check(
        Case {
            patches: &[("spec/disks/0/size", json!("40GiB"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: scsi0.size",
            "  Put /nodes/pve01/qemu/100/resize disk=scsi0 size=40G",
            "drift spec.disks[0].size: 32G -> 40G",
        ],
    );
    check(
        Case {
            patches: &[("spec/disks/0/size", json!("20GiB"))],
            ..Case::default()
        },
        &["anomaly spec.disks[0].size"],
    );
    check(
        Case {
            patches: &[("spec/disks/0/storage", json!("ceph"))],
            ..Case::default()
        },
        &["anomaly spec.disks[0].storage"],
    );
    check(
        Case {
            patches: &[
                ("spec/disks/0/discard", json!("on")),
                ("spec/disks/0/ssd", json!(true)),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: scsi0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 scsi0=local-lvm:vm-100-disk-0,discard=on,size=32G,ssd=1",
            "drift spec.disks[0].discard: - -> on",
            "drift spec.disks[0].ssd: - -> 1",
        ],
    );
    check(
        Case {
            patches: &[(
                "spec/disks/1",
                json!({"storage": "local-lvm", "size": "10GiB"}),
            )],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: scsi1",
            "  Post /nodes/pve01/qemu/100/config digest=d1 scsi1=local-lvm:10",
            "drift spec.disks[1]: - -> local-lvm:10",
        ],
    );
    check(
        Case {
            config: &[("scsi1", json!("local-lvm:vm-100-disk-1,size=8G"))],
            ..Case::default()
        },
        &["anomaly spec.disks"],
    );
}

#[test]
fn nics() {
    // Bridge change: the PVE-assigned MAC is kept verbatim.
    check(
        Case {
            patches: &[("spec/networks/0/bridge", json!("vmbr1"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: net0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 net0=virtio=BC:24:11:5E:0A:1F,bridge=vmbr1",
            "drift spec.networks[0].bridge: vmbr0 -> vmbr1",
        ],
    );
    check(
        Case {
            config: &[("net1", json!("e1000=BC:24:11:00:00:02,bridge=vmbr9"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: net1",
            "  Post /nodes/pve01/qemu/100/config digest=d1 delete=net1",
            "drift spec.networks (net1): e1000=BC:24:11:00:00:02,bridge=vmbr9 -> -",
        ],
    );
    check(
        Case {
            patches: &[
                ("spec/networks/0/mac", json!("BC:24:11:AA:BB:CC")),
                ("spec/networks/0/model", json!("e1000")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: net0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 net0=e1000=BC:24:11:AA:BB:CC,bridge=vmbr0",
            "drift spec.networks[0].model: virtio -> e1000",
            "drift spec.networks[0].mac: BC:24:11:5E:0A:1F -> BC:24:11:AA:BB:CC",
        ],
    );
}

#[test]
fn power_and_kind_flips() {
    check(
        Case {
            live: Some(entry("stopped", false)),
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: Some(entry("stopped", false)),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.state: stopped -> started",
        ],
    );
    // Config first (applied at once on a stopped VM), then the start.
    check(
        Case {
            patches: &[
                ("spec/state", json!("started")),
                ("spec/cpu/cores", json!(4)),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: cores",
            "  Post /nodes/pve01/qemu/100/config digest=d1 cores=4",
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.cpu.cores: 2 -> 4",
            "drift spec.state: stopped -> started",
        ],
    );
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[("spec/state", json!("stopped"))],
            ..Case::default()
        },
        &[
            "Power [stop]: shut down VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "drift spec.state: running -> stopped",
        ],
    );
    check(
        Case {
            flavour: Flavour::Template,
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            ..Case::default()
        },
        &[
            "Power [stop]: shut down template 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "MarkTemplate [stop]: mark VM 100 on pve01 as a template",
            "  Post /nodes/pve01/qemu/100/template",
            "drift spec.state: running -> stopped",
            "drift kind: VM (template=0) -> TemplateVM (template=1)",
        ],
    );
    check(
        Case {
            flavour: Flavour::Template,
            live: Some(entry("stopped", true)),
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: Some(entry("stopped", true)),
            ..Case::default()
        },
        &["anomaly kind"],
    );
    let mut elsewhere = entry("stopped", false);
    elsewhere["node"] = json!("pve02");
    check(
        Case {
            live: Some(elsewhere),
            ..Case::default()
        },
        &["anomaly spec.node"],
    );
}

#[test]
fn prune() {
    check(
        Case {
            manifest: false,
            live: Some(entry("running", false)),
            ..Case::default()
        },
        &[
            "Delete [stop] [destructive]: delete VM 100 on pve01 (no manifest)",
            "  Post /nodes/pve01/qemu/100/status/stop",
            "  Delete /nodes/pve01/qemu/100 purge=1",
            "drift : VM 100 on pve01 -> -",
        ],
    );
    check(
        Case {
            manifest: false,
            config: &[("protection", json!(1))],
            ..Case::default()
        },
        &["anomaly "],
    );
    let mut foreign = entry("stopped", false);
    foreign["tags"] = json!("prod");
    check(
        Case {
            manifest: false,
            live: Some(foreign),
            ..Case::default()
        },
        &["anomaly "],
    );
    check(
        Case {
            manifest: false,
            live: None,
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn special_drives_and_pci() {
    check(
        Case {
            patches: &[
                (
                    "spec/hardware/cloud-init",
                    json!({"enabled": true, "storage": "local-lvm"}),
                ),
                ("spec/hardware/cdrom", json!({"iso": "none"})),
            ],
            config: &[("ide2", json!("none,media=cdrom"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ide2, ide3",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ide2=local-lvm:cloudinit ide3=none,media=cdrom",
            "drift spec.hardware.cloud-init: none,media=cdrom -> local-lvm:cloudinit",
            "drift spec.hardware.cdrom: - -> none,media=cdrom",
        ],
    );
    check(
        Case {
            patches: &[(
                "spec/hardware/cloud-init",
                json!({"enabled": true, "storage": "local-lvm"}),
            )],
            config: &[("ide2", json!("ceph:vm-100-cloudinit,media=cdrom"))],
            ..Case::default()
        },
        &["anomaly spec.hardware.cloud-init.storage"],
    );
    check(
        Case {
            patches: &[
                ("spec/hardware/bios", json!("ovmf")),
                (
                    "spec/hardware/efi-disk",
                    json!({"storage": "local-lvm", "secure-boot": "disabled"}),
                ),
            ],
            config: &[
                ("bios", json!("ovmf")),
                (
                    "efidisk0",
                    json!(
                        "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
                    ),
                ),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: efidisk0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 efidisk0=local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=0,size=4M",
            "drift spec.hardware.efi-disk.secure-boot: 1 -> disabled",
        ],
    );
    check(
        Case {
            config: &[("hostpci3", json!("0000:02:00.0"))],
            ..Case::default()
        },
        &["anomaly spec.hardware.pci-devices"],
    );
}

#[test]
fn failed_read_fails_closed() {
    let desired = crate::validate(Flavour::Vm, &base()).unwrap().desired;
    let obs = Observation {
        live: Some(entry("stopped", false).to_string()),
        reads: vec![Read {
            call: Call::new(Method::Get, "/nodes/pve01/qemu/100/config"),
            status: 500,
            body: "{\"message\":\"Configuration file 'nodes/pve01/qemu-server/100.conf' does not exist\\n\"}".into(),
        }],
    };
    let err = crate::plan(Flavour::Vm, Some(&desired), &obs).unwrap_err();
    assert!(
        err[0]
            .message
            .starts_with("reading /nodes/pve01/qemu/100/config failed with HTTP 500"),
        "{}",
        err[0].message
    );
}

#[test]
fn observe_reads() {
    let d = crate::validate(Flavour::Vm, &base()).unwrap().desired;
    let show = |calls: Vec<Call>| {
        calls
            .iter()
            .map(|c| format!("{:?} {} {:?}", c.method, c.path, c.params))
            .collect::<Vec<_>>()
    };
    assert!(crate::observe(Some(&d), None).is_empty());
    assert_eq!(
        show(crate::observe(Some(&d), Some(&entry("stopped", false)))),
        vec!["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
    let mut running = entry("running", false);
    running["node"] = json!("pve02");
    assert_eq!(
        show(crate::observe(Some(&d), Some(&running))),
        vec![
            "Get /nodes/pve02/qemu/100/config [(\"current\", \"1\", false)]",
            "Get /nodes/pve02/qemu/100/pending []",
        ]
    );
    assert_eq!(crate::observe(None, Some(&running)).len(), 1);
}

#[test]
fn claims_and_identity() {
    for (e, vm, tpl) in [
        (entry("running", false), true, false),
        (entry("stopped", true), false, true),
        (
            json!({"id": "qemu/101", "type": "qemu", "vmid": 101, "node": "pve01", "status": "stopped", "tags": "prod"}),
            false,
            false,
        ),
        (
            json!({"id": "qemu/102", "type": "qemu", "vmid": 102, "node": "pve01", "status": "stopped"}),
            false,
            false,
        ),
        (
            json!({"id": "lxc/103", "type": "lxc", "vmid": 103, "node": "pve01", "status": "stopped", "tags": "proxops"}),
            false,
            false,
        ),
        (
            json!({"id": "qemu/104", "type": "qemu", "vmid": 104, "node": "pve01", "template": 0, "tags": "a;Proxops"}),
            true,
            false,
        ),
    ] {
        assert_eq!(crate::claims(Flavour::Vm, &e), vm, "{e}");
        assert_eq!(crate::claims(Flavour::Template, &e), tpl, "{e}");
    }
    let d = crate::validate(Flavour::Vm, &base()).unwrap().desired;
    let k = crate::identity(&d);
    assert_eq!(
        (
            k.node.as_deref(),
            k.space.as_str(),
            k.key.as_str(),
            k.resource_id.as_deref()
        ),
        (Some("pve01"), "guest-id", "100", Some("qemu/100"))
    );
}
