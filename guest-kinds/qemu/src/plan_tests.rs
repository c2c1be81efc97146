//! Data-driven planning cases: desired (base manifest + patches) and observed PVE state (in the
//! forms PVE prints, pve-api.md 4.9 / 5.1) -> the proposal rendered as text lines.

use proxops_kind_sdk::model::{Call, Method, Observation, Proposal, Read};
use serde_json::{Value, json};

use crate::Reference;
use crate::desired::Flavour;
use crate::validate_tests::{base, patch, secrets};

/// The desired states of the objects the test manifests reference, by name.
fn catalog(name: &str) -> Option<Value> {
    Some(match name {
        "golden" => json!({"kind": "TemplateVM", "name": "golden", "node": "pve01", "vmid": 9000}),
        "golden-b" => {
            json!({"kind": "TemplateVM", "name": "golden-b", "node": "pve02", "vmid": 9001})
        }
        "noble" => {
            json!({"kind": "DiskImage", "name": "noble", "node": "pve01", "storage": "local",
            "url": "https://h/noble.qcow2", "filename": "noble.qcow2", "content": "import",
            "volid": "local:import/noble.qcow2", "verify-certificates": true})
        }
        "debian-13" => {
            json!({"kind": "ISO", "name": "debian-13", "node": "pve01", "storage": "local",
            "url": "https://h/debian-13.iso", "filename": "debian-13.iso", "content": "iso",
            "volid": "local:iso/debian-13.iso", "verify-certificates": true})
        }
        _ => return None,
    })
}

/// The targets of `d`'s references as the host resolves them (by kind and name).
fn resolve_all(d: &crate::Desired) -> Vec<(Reference, String)> {
    crate::references(d)
        .into_iter()
        .filter_map(|r| {
            let t = catalog(&r.name)?;
            (t["kind"] == r.kind.as_str()).then(|| (r, t.to_string()))
        })
        .collect()
}

/// The live config PVE prints for `base()` after create (sim-faithful shapes: memory as a string,
/// cores as a number, PVE-assigned upper-case MAC, `size=32G`, `;`-joined tags).
fn live_config() -> Value {
    json!({
        "boot": "order=scsi0;net0", "cores": 2, "cpu": "host", "digest": "d1", "memory": "2048",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "smbios1": "uuid=5d5b0f4e-0000-4000-8000-000000000001", "tags": "proxops;proxops-100", "vmgenid": "00000000-0000-4000-8000-000000000002"
    })
}

fn entry(status: &str, template: bool) -> Value {
    let mut e = json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01", "status": status,
        "name": "web-01", "tags": "proxops;proxops-100"});
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
                .map(|(k, v, sensitive)| {
                    format!("{k}={v}{}", if *sensitive { "[sensitive]" } else { "" })
                })
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
            "drift {}: {} -> {}{}",
            d.path,
            d.live.as_deref().unwrap_or("-"),
            d.desired.as_deref().unwrap_or("-"),
            if d.sensitive { " [sensitive]" } else { "" }
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
    /// Replaces the config read entirely (e.g. a fresh clone of a template).
    whole_config: Option<Value>,
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
            whole_config: None,
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
    let desired = crate::validate(c.flavour, &doc, &secrets())
        .expect("test manifest is valid")
        .desired;
    let mut cfg = c.whole_config.unwrap_or_else(live_config);
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
    let resolved = resolve_all(&desired);
    crate::plan(
        c.flavour,
        c.manifest.then_some(&desired),
        &resolved,
        &secrets(),
        &obs,
    )
    .expect("plan succeeds")
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
                ("tags", json!("db;proxops;proxops-100;web")),
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
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100;web memory=2048 cores=2 cpu=host machine=pc bios=ovmf \
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
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host machine=q35 bios=ovmf \
scsi0=local-lvm:32 tpmstate0=local-lvm:1,version=v2.0 net0=virtio,bridge=vmbr0 start=0",
            "  Post /nodes/pve01/qemu/100/template",
            "drift : - -> template 100 on pve01",
        ],
    );
}

/// The config PVE prints for a fresh full clone of TemplateVM `golden` onto vmid 100: the
/// template's values and cloud-init identity, the clone's own name, new MAC and volumes.
fn fresh_clone() -> Value {
    json!({
        "boot": "order=scsi0;ide2;net0", "cores": 1, "cpu": "kvm64", "digest": "c1", "memory": "1024",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:00:00:77,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=3G",
        "scsihw": "virtio-scsi-single", "ide2": "local-lvm:vm-100-cloudinit,media=cdrom",
        "ciuser": "ubuntu", "sshkeys": "ssh-ed25519%20AAAAtpl%20tpl%40h", "ipconfig0": "ip=dhcp",
        "ipconfig1": "ip=10.9.9.9/24", "nameserver": "9.9.9.9", "searchdomain": "tpl.example",
        "cipassword": "**********", "tags": "proxops;tpl"
    })
}

fn clone_patches(extra: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
    let mut p = vec![
        ("spec/clone", json!("golden")),
        ("spec/disks", Value::Null),
        (
            "spec/hardware/cloud-init",
            json!({"enabled": true, "storage": "local-lvm"}),
        ),
    ];
    p.extend(extra.iter().cloned());
    p
}

#[test]
fn clone_creates_once_without_start() {
    for state in ["started", "stopped"] {
        check(
            Case {
                live: None,
                patches: &clone_patches(&[("spec/state", json!(state))]),
                ..Case::default()
            },
            &[
                "Create: create VM 100 (web-01) on pve01 as a full clone of TemplateVM `golden` (9000)",
                "  Post /nodes/pve01/qemu/9000/clone newid=100 full=1 name=web-01",
                "drift : - -> VM 100 on pve01",
            ],
        );
    }
    // A TemplateVM may be cloned from another template; it is marked after its config write.
    check(
        Case {
            flavour: Flavour::Template,
            live: None,
            patches: &clone_patches(&[("spec/pve-name", json!("tpl-02"))]),
            ..Case::default()
        },
        &[
            "Create: create template 100 (web-01) on pve01 as a full clone of TemplateVM `golden` (9000)",
            "  Post /nodes/pve01/qemu/9000/clone newid=100 full=1 name=tpl-02",
            "drift : - -> template 100 on pve01",
        ],
    );
}

#[test]
fn clone_is_configured_with_its_own_identity() {
    // Declared keys are set, inherited identity keys the manifest does not declare are cleared
    // (sets and deletes disjoint), the inherited cloud-init drive and cipassword are kept, and
    // the VM is started in the same pass (after its config write).
    check(
        Case {
            whole_config: Some(fresh_clone()),
            patches: &clone_patches(&[
                ("spec/state", json!("started")),
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "192.168.0.50/24", "gateway": "192.168.0.1"}]),
                ),
            ]),
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: tags, memory, cores, cpu, ciuser, ipconfig0, sshkeys, nameserver, searchdomain, ipconfig1, then start it",
            "  Post /nodes/pve01/qemu/100/config digest=c1 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host ciuser=deploy \
ipconfig0=ip=192.168.0.50/24,gw=192.168.0.1 delete=sshkeys,nameserver,searchdomain,ipconfig1",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.tags: proxops;tpl -> proxops;proxops-100",
            "drift spec.memory: 1024 -> 2048",
            "drift spec.cpu.cores: 1 -> 2",
            "drift spec.cpu.type: kvm64 -> host",
            "drift spec.cloud-init-data.ci-user: ubuntu -> deploy",
            "drift spec.cloud-init-data.ssh-keys: ssh-ed25519%20AAAAtpl%20tpl%40h -> - [sensitive]",
            "drift spec.cloud-init-data.nameservers: 9.9.9.9 -> -",
            "drift spec.cloud-init-data.search-domains: tpl.example -> -",
            "drift spec.cloud-init-data.ipconfigs[0]: ip=dhcp -> ip=192.168.0.50/24,gw=192.168.0.1",
            "drift spec.cloud-init-data.ipconfigs (ipconfig1): ip=10.9.9.9/24 -> -",
            "drift spec.state: stopped -> started",
        ],
    );
    // No cloud-init data at all: every inherited identity key goes; the `*` sentinel keeps
    // PVE's keys.
    check(
        Case {
            whole_config: Some(fresh_clone()),
            patches: &clone_patches(&[
                ("spec/memory", json!("1GiB")),
                ("spec/cpu", json!({"type": "kvm64", "cores": 1})),
                ("spec/tags", json!(["tpl"])),
                ("spec/cloud-init-data/ssh-keys", json!(["*"])),
            ]),
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: tags, ciuser, nameserver, searchdomain, ipconfig0, ipconfig1",
            "  Post /nodes/pve01/qemu/100/config digest=c1 tags=proxops;proxops-100;tpl delete=ciuser,nameserver,searchdomain,ipconfig0,ipconfig1",
            "drift spec.tags: proxops;tpl -> proxops;proxops-100;tpl",
            "drift spec.cloud-init-data.ci-user: ubuntu -> -",
            "drift spec.cloud-init-data.nameservers: 9.9.9.9 -> -",
            "drift spec.cloud-init-data.search-domains: tpl.example -> -",
            "drift spec.cloud-init-data.ipconfigs (ipconfig0): ip=dhcp -> -",
            "drift spec.cloud-init-data.ipconfigs (ipconfig1): ip=10.9.9.9/24 -> -",
        ],
    );
    // Converged clone: the template's disks and scsihw are not the VM's to judge.
    let mut converged = fresh_clone();
    for k in [
        "ciuser",
        "sshkeys",
        "ipconfig0",
        "ipconfig1",
        "nameserver",
        "searchdomain",
    ] {
        converged.as_object_mut().unwrap().remove(k);
    }
    converged["memory"] = json!("2048");
    converged["cores"] = json!(2);
    converged["cpu"] = json!("host");
    converged["tags"] = json!("proxops;proxops-100");
    converged["scsi1"] = json!("local-lvm:vm-100-disk-1,size=8G");
    check(
        Case {
            whole_config: Some(converged.clone()),
            patches: &clone_patches(&[]),
            ..Case::default()
        },
        &[],
    );
    // Template without a cloud-init drive: written into the empty slot. A drive on another
    // pool or another slot is an anomaly, never rewritten.
    let mut no_drive = converged.clone();
    no_drive.as_object_mut().unwrap().remove("ide2");
    check(
        Case {
            whole_config: Some(no_drive),
            patches: &clone_patches(&[]),
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ide2",
            "  Post /nodes/pve01/qemu/100/config digest=c1 ide2=local-lvm:cloudinit",
            "drift spec.hardware.cloud-init: - -> local-lvm:cloudinit",
        ],
    );
    let mut other_pool = converged.clone();
    other_pool["ide2"] = json!("ceph:vm-100-cloudinit,media=cdrom");
    check(
        Case {
            whole_config: Some(other_pool),
            patches: &clone_patches(&[]),
            ..Case::default()
        },
        &["anomaly spec.hardware.cloud-init.storage"],
    );
    let mut other_slot = converged.clone();
    other_slot.as_object_mut().unwrap().remove("ide2");
    other_slot["ide0"] = json!("local-lvm:vm-100-cloudinit,media=cdrom");
    check(
        Case {
            whole_config: Some(other_slot),
            patches: &clone_patches(&[]),
            ..Case::default()
        },
        &["anomaly spec.hardware.cloud-init"],
    );
    // The clone is still being copied: wait.
    check(
        Case {
            whole_config: Some(
                json!({"description": "qmclone temporary file", "lock": "clone", "digest": "x"}),
            ),
            patches: &clone_patches(&[]),
            ..Case::default()
        },
        &["anomaly "],
    );
}

#[test]
fn clone_references_fail_closed() {
    let mut doc = base();
    patch(&mut doc, "spec/clone", json!("golden"));
    patch(&mut doc, "spec/disks", Value::Null);
    let d = crate::validate(Flavour::Vm, &doc, &secrets())
        .unwrap()
        .desired;
    let r = |kind: &str, name: &str| Reference {
        kind: kind.into(),
        name: name.into(),
        path: "spec.clone".into(),
    };
    let show = |diags: Vec<proxops_kind_sdk::check::Diag>| {
        diags
            .into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect::<Vec<_>>()
    };
    for (resolved, want) in [
        (
            vec![(
                r("TemplateVM", "golden"),
                catalog("golden").unwrap().to_string(),
            )],
            vec![],
        ),
        (
            vec![],
            vec!["spec.clone: no TemplateVM named `golden` in this cluster"],
        ),
        (
            vec![(
                r("VM", "golden"),
                json!({"kind": "VM", "node": "pve01", "vmid": 9000}).to_string(),
            )],
            vec!["spec.clone: `golden` is a VM, not a TemplateVM"],
        ),
        (
            vec![(
                r("TemplateVM", "golden"),
                json!({"kind": "VM", "node": "pve01", "vmid": 9000}).to_string(),
            )],
            vec!["spec.clone: `golden` is a VM, not a TemplateVM"],
        ),
        (
            vec![(
                r("TemplateVM", "golden"),
                catalog("golden-b").unwrap().to_string(),
            )],
            vec![
                "spec.clone: TemplateVM `golden` is on node pve02, this VM on pve01; a clone source must be on the same node",
            ],
        ),
        (
            vec![(
                r("TemplateVM", "golden"),
                json!({"kind": "TemplateVM", "node": "pve01", "vmid": 100}).to_string(),
            )],
            vec![
                "spec.clone: TemplateVM `golden` has this VM's own vmid 100; a VM cannot clone onto itself",
            ],
        ),
        (
            vec![(
                r("TemplateVM", "golden"),
                json!({"kind": "TemplateVM", "node": "pve01"}).to_string(),
            )],
            vec!["spec.clone: the desired state of TemplateVM `golden` has no vmid"],
        ),
        (
            vec![(r("TemplateVM", "golden"), "not json".to_string())],
            vec!["spec.clone: the desired state of TemplateVM `golden` could not be read"],
        ),
    ] {
        let got = show(crate::check_references(&d, &resolved));
        assert_eq!(got, want);
        // plan fails closed with the same diagnostics, before proposing anything.
        let obs = Observation::default();
        match crate::plan(Flavour::Vm, Some(&d), &resolved, &secrets(), &obs) {
            Ok(p) => assert!(want.is_empty() && p.actions.len() == 1, "{p:?}"),
            Err(e) => assert_eq!(show(e), want),
        }
    }
}

#[test]
fn cloud_init_data() {
    // Re-encoding (lower-case hex, `!` kept raw), reordering and DNS order are never drift.
    check(
        Case {
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h", "ssh-rsa AAAA2+/= b@h"]),
                ),
                (
                    "spec/cloud-init-data/nameservers",
                    json!(["1.1.1.1", "9.9.9.9"]),
                ),
                (
                    "spec/cloud-init-data/search-domains",
                    json!(["b.example", "a.example"]),
                ),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]),
                ),
            ],
            config: &[
                ("ciuser", json!("deploy")),
                (
                    "sshkeys",
                    json!("ssh-rsa%20AAAA2%2b%2f%3d%20b%40h%0assh-ed25519%20AAAA1%20a%40h%0A"),
                ),
                ("nameserver", json!("9.9.9.9 1.1.1.1")),
                ("searchdomain", json!("a.example b.example")),
                ("ipconfig0", json!("gw=10.0.0.1,ip=10.0.0.5/24")),
            ],
            ..Case::default()
        },
        &[],
    );
    // Undeclared keys are not owned on a VM that is not a clone: never drift.
    check(
        Case {
            config: &[
                ("ciuser", json!("someone")),
                ("sshkeys", json!("ssh-ed25519%20X%20y")),
                ("ipconfig0", json!("ip=dhcp")),
                ("nameserver", json!("8.8.8.8")),
                ("searchdomain", json!("x.example")),
                ("cipassword", json!("**********")),
            ],
            ..Case::default()
        },
        &[],
    );
    // The `*` sentinel: PVE owns sshkeys; nothing written whatever the live value.
    for live in [None, Some(json!("ssh-ed25519%20X%20y"))] {
        let config: Vec<(&str, Value)> = live.into_iter().map(|v| ("sshkeys", v)).collect();
        check(
            Case {
                patches: &[("spec/cloud-init-data/ssh-keys", json!(["*"]))],
                config: &config,
                ..Case::default()
            },
            &[],
        );
    }
    // Drift is written; the keys in manifest order, joined with %0A, percent-encoded.
    check(
        Case {
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h", "ssh-rsa AAAA2+/= b@h"]),
                ),
                (
                    "spec/cloud-init-data/nameservers",
                    json!(["9.9.9.9", "1.1.1.1"]),
                ),
                ("spec/cloud-init-data/search-domains", json!(["a.example"])),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24"}]),
                ),
            ],
            config: &[
                ("ciuser", json!("ubuntu")),
                ("sshkeys", json!("ssh-ed25519%20AAAA1%20a%40h")),
                ("nameserver", json!("1.1.1.1")),
                ("ipconfig0", json!("ip=10.0.0.5/24,gw=10.0.0.1")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ciuser, sshkeys, nameserver, searchdomain, ipconfig0",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ciuser=deploy sshkeys=ssh-ed25519%20AAAA1%20a%40h%0Assh-rsa%20AAAA2%2B%2F%3D%20b%40h \
nameserver=1.1.1.1 9.9.9.9 searchdomain=a.example ipconfig0=ip=10.0.0.5/24",
            "drift spec.cloud-init-data.ci-user: ubuntu -> deploy",
            "drift spec.cloud-init-data.ssh-keys: ssh-ed25519%20AAAA1%20a%40h -> ssh-ed25519%20AAAA1%20a%40h%0Assh-rsa%20AAAA2%2B%2F%3D%20b%40h",
            "drift spec.cloud-init-data.nameservers: 1.1.1.1 -> 1.1.1.1 9.9.9.9",
            "drift spec.cloud-init-data.search-domains: - -> a.example",
            "drift spec.cloud-init-data.ipconfigs[0]: ip=10.0.0.5/24,gw=10.0.0.1 -> ip=10.0.0.5/24",
        ],
    );
    // Created with the VM, in one POST.
    check(
        Case {
            live: None,
            patches: &[
                ("spec/cloud-init-data/ci-user", json!("deploy")),
                (
                    "spec/cloud-init-data/ssh-keys",
                    json!(["ssh-ed25519 AAAA1 a@h"]),
                ),
                (
                    "spec/cloud-init-data/ipconfigs",
                    json!([{"nic": 0, "ip": "10.0.0.5/24", "gateway": "10.0.0.1"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
net0=virtio,bridge=vmbr0 ciuser=deploy sshkeys=ssh-ed25519%20AAAA1%20a%40h ipconfig0=ip=10.0.0.5/24,gw=10.0.0.1",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

#[test]
fn cloud_init_secrets() {
    // ssh-key-refs: resolved in manifest order (a ref may hold several lines), sensitive.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.team", "cloud-init.ssh-keys.alice"]),
            )],
            config: &[("sshkeys", json!("ssh-rsa%20AAAAteam1%20bob%40h"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: sshkeys",
            "  Post /nodes/pve01/qemu/100/config digest=d1 sshkeys=ssh-rsa%20AAAAteam1%20bob%40h%0Assh-ed25519%20AAAAteam2%20carol%40h%0A\
ssh-ed25519%20AAAAcanaryKEY%2B%2F%3D%20alice%40canary[sensitive]",
            "drift spec.cloud-init-data.ssh-key-refs: ssh-rsa%20AAAAteam1%20bob%40h -> cloud-init.ssh-keys.team, cloud-init.ssh-keys.alice [sensitive]",
        ],
    );
    // Same key set, other order and encoding: converged.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ssh-key-refs",
                json!(["cloud-init.ssh-keys.team"]),
            )],
            config: &[(
                "sshkeys",
                json!("ssh-ed25519%20AAAAteam2%20carol%40h%0assh-rsa%20AAAAteam1%20bob%40h"),
            )],
            ..Case::default()
        },
        &[],
    );
    // cipassword: written only when absent; present (masked) is satisfied; never deleted.
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ci-password-ref",
                json!("cloud-init.passwords.root"),
            )],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: cipassword",
            "  Post /nodes/pve01/qemu/100/config digest=d1 cipassword=canary-pw-7f3a[sensitive]",
            "drift spec.cloud-init-data.ci-password-ref: - -> cloud-init.passwords.root [sensitive]",
        ],
    );
    check(
        Case {
            patches: &[(
                "spec/cloud-init-data/ci-password-ref",
                json!("cloud-init.passwords.root"),
            )],
            config: &[("cipassword", json!("**********"))],
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: None,
            patches: &[
                (
                    "spec/cloud-init-data/ci-password-ref",
                    json!("cloud-init.passwords.root"),
                ),
                (
                    "spec/cloud-init-data/ssh-key-refs",
                    json!(["cloud-init.ssh-keys.alice"]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
net0=virtio,bridge=vmbr0 cipassword=canary-pw-7f3a[sensitive] sshkeys=ssh-ed25519%20AAAAcanaryKEY%2B%2F%3D%20alice%40canary[sensitive]",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

/// A secret value appears in the serialised proposal only inside sensitive params and
/// sensitive changes; never in a summary, drift value, anomaly or diagnostic.
#[test]
fn secrets_never_leak() {
    use crate::validate_tests::{CANARY_KEY, CANARY_PASSWORD};
    let encoded_key = crate::cloudinit::urlencode(CANARY_KEY);
    let canaries = [
        CANARY_PASSWORD,
        CANARY_KEY,
        encoded_key.as_str(),
        "AAAAcanaryKEY",
    ];
    let patches = [
        (
            "spec/cloud-init-data/ci-password-ref",
            json!("cloud-init.passwords.root"),
        ),
        (
            "spec/cloud-init-data/ssh-key-refs",
            json!(["cloud-init.ssh-keys.alice"]),
        ),
    ];
    for live in [None, Some(entry("stopped", false))] {
        let mut p = run(Case {
            live,
            patches: &patches,
            ..Case::default()
        });
        let mut found = 0;
        for a in &mut p.actions {
            for c in &mut a.calls {
                for (_, v, sensitive) in &mut c.params {
                    if canaries.iter().any(|k| v.contains(k)) {
                        assert!(*sensitive, "{v}");
                        found += 1;
                        *v = String::new();
                    }
                }
            }
            for c in &mut a.changes {
                if c.sensitive {
                    c.old = None;
                    c.new = None;
                }
            }
        }
        assert_eq!(found, 2);
        let text = format!("{}\n{p:?}", serde_json::to_string(&p).unwrap());
        for k in canaries {
            assert!(!text.contains(k), "{k} leaked: {text}");
        }
    }
    // Debug of the resolved state and of a secrets map never prints a value either.
    let d = crate::validate(
        Flavour::Vm,
        &{
            let mut doc = base();
            for (k, v) in &patches {
                patch(&mut doc, k, v.clone());
            }
            doc
        },
        &secrets(),
    )
    .unwrap()
    .desired;
    let r = crate::cloudinit::resolve(d.cloud_init_data.as_ref(), &secrets()).unwrap();
    let text = format!(
        "{d:?} {r:?} {:?} {}",
        secrets(),
        serde_json::to_string(&d).unwrap()
    );
    for k in canaries {
        assert!(!text.contains(k), "{k} leaked: {text}");
    }
}

#[test]
fn secret_failures_fail_plan_closed() {
    use crate::secrets::{MapSecrets, NoSecrets, Secrets};
    let mut doc = base();
    patch(
        &mut doc,
        "spec/cloud-init-data/ci-password-ref",
        json!("cloud-init.passwords.root"),
    );
    patch(
        &mut doc,
        "spec/cloud-init-data/ssh-key-refs",
        json!(["cloud-init.ssh-keys.alice"]),
    );
    let d = crate::validate(Flavour::Vm, &doc, &secrets())
        .unwrap()
        .desired;
    let obs = Observation::default();
    let plan = |s: &dyn Secrets| {
        crate::plan(Flavour::Vm, Some(&d), &[], s, &obs)
            .unwrap_err()
            .into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect::<Vec<_>>()
    };
    // The SOPS document changed after validation: nothing is created.
    assert_eq!(
        plan(&MapSecrets::default()),
        vec![
            "spec.cloud-init-data.ssh-key-refs[0]: `cloud-init.ssh-keys.alice` is not in the cluster's SOPS document; add it, or fix the reference",
            "spec.cloud-init-data.ci-password-ref: `cloud-init.passwords.root` is not in the cluster's SOPS document; add it, or fix the reference",
        ]
    );
    assert_eq!(
        plan(&NoSecrets),
        vec![
            "spec.cloud-init-data.ssh-key-refs[0]: cannot resolve `cloud-init.ssh-keys.alice`: this kind is not granted access to the cluster's SOPS secrets; grant it, or remove the reference",
            "spec.cloud-init-data.ci-password-ref: cannot resolve `cloud-init.passwords.root`: this kind is not granted access to the cluster's SOPS secrets; grant it, or remove the reference",
        ]
    );
}

#[test]
fn image_seeded_disks() {
    let image = [
        ("spec/disks/0/image", json!("noble")),
        ("spec/disks/0/size", Value::Null),
    ];
    check(
        Case {
            live: None,
            patches: &image,
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host \
scsi0=local-lvm:0,import-from=local:import/noble.qcow2 net0=virtio,bridge=vmbr0",
            "drift : - -> VM 100 on pve01",
        ],
    );
    // Live: only the pool is compared (size and tokens come from the import).
    check(
        Case {
            patches: &[
                ("spec/disks/0/image", json!("noble")),
                ("spec/disks/0/size", Value::Null),
                ("spec/disks/0/iothread", json!(true)),
            ],
            config: &[("scsi0", json!("local-lvm:vm-100-disk-0,size=3584M"))],
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            patches: &image,
            config: &[("scsi0", json!("ceph:vm-100-disk-0,size=3G"))],
            ..Case::default()
        },
        &["anomaly spec.disks[0].storage"],
    );
    // An empty slot is imported into, once.
    check(
        Case {
            patches: &[(
                "spec/disks/1",
                json!({"storage": "local-lvm", "image": "noble", "interface": "virtio1", "discard": "on"}),
            )],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: virtio1",
            "  Post /nodes/pve01/qemu/100/config digest=d1 virtio1=local-lvm:0,discard=on,import-from=local:import/noble.qcow2",
            "drift spec.disks[1]: - -> local-lvm:0,discard=on,import-from=local:import/noble.qcow2",
        ],
    );
}

#[test]
fn cdrom_iso() {
    let iso = [("spec/hardware/cdrom", json!({"iso": "debian-13"}))];
    let with_ci = [
        ("spec/hardware/cdrom", json!({"iso": "debian-13"})),
        (
            "spec/hardware/cloud-init",
            json!({"enabled": true, "storage": "local-lvm"}),
        ),
    ];
    check(
        Case {
            live: None,
            patches: &iso,
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
ide2=local:iso/debian-13.iso,media=cdrom net0=virtio,bridge=vmbr0",
            "drift : - -> VM 100 on pve01",
        ],
    );
    check(
        Case {
            live: None,
            patches: &with_ci,
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host scsi0=local-lvm:32 \
ide2=local-lvm:cloudinit ide3=local:iso/debian-13.iso,media=cdrom net0=virtio,bridge=vmbr0",
            "drift : - -> VM 100 on pve01",
        ],
    );
    // Converged (PVE prints `file=` folded and the size); another ISO or an empty drive is
    // rewritten; `none` detaches.
    check(
        Case {
            patches: &iso,
            config: &[(
                "ide2",
                json!("local:iso/debian-13.iso,media=cdrom,size=600M"),
            )],
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            patches: &with_ci,
            config: &[
                ("ide2", json!("local-lvm:vm-100-cloudinit,media=cdrom")),
                ("ide3", json!("local:iso/debian-12.iso,media=cdrom")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ide3",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ide3=local:iso/debian-13.iso,media=cdrom",
            "drift spec.hardware.cdrom.iso: local:iso/debian-12.iso,media=cdrom -> local:iso/debian-13.iso,media=cdrom",
        ],
    );
    check(
        Case {
            patches: &iso,
            config: &[("ide2", json!("none,media=cdrom"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ide2",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ide2=local:iso/debian-13.iso,media=cdrom",
            "drift spec.hardware.cdrom.iso: none,media=cdrom -> local:iso/debian-13.iso,media=cdrom",
        ],
    );
    check(
        Case {
            patches: &[("spec/hardware/cdrom", json!({"iso": "none"}))],
            config: &[("ide2", json!("local:iso/debian-13.iso,media=cdrom"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: ide2",
            "  Post /nodes/pve01/qemu/100/config digest=d1 ide2=none,media=cdrom",
            "drift spec.hardware.cdrom: local:iso/debian-13.iso,media=cdrom -> none,media=cdrom",
        ],
    );
    // Block absent: the slot is not owned.
    check(
        Case {
            config: &[("ide2", json!("local:iso/other.iso,media=cdrom"))],
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn references_and_their_targets() {
    let mut doc = base();
    patch(&mut doc, "spec/disks/0/image", json!("noble"));
    patch(&mut doc, "spec/disks/0/size", Value::Null);
    patch(
        &mut doc,
        "spec/disks/1",
        json!({"storage": "local-lvm", "size": "8GiB"}),
    );
    patch(
        &mut doc,
        "spec/disks/2",
        json!({"storage": "local-lvm", "image": "noble"}),
    );
    patch(&mut doc, "spec/hardware/cdrom", json!({"iso": "debian-13"}));
    let d = crate::validate(Flavour::Vm, &doc, &secrets())
        .unwrap()
        .desired;
    let refs: Vec<String> = crate::references(&d)
        .iter()
        .map(|r| format!("{} {} {}", r.kind, r.name, r.path))
        .collect();
    assert_eq!(
        refs,
        vec![
            "DiskImage noble spec.disks[0].image",
            "DiskImage noble spec.disks[2].image",
            "ISO debian-13 spec.hardware.cdrom.iso",
        ]
    );
    let mut clone = base();
    patch(&mut clone, "spec/clone", json!("golden"));
    patch(&mut clone, "spec/disks", Value::Null);
    patch(&mut clone, "spec/hardware/cdrom", json!({"iso": "none"}));
    let c = crate::validate(Flavour::Vm, &clone, &secrets())
        .unwrap()
        .desired;
    assert_eq!(
        crate::references(&c),
        vec![Reference {
            kind: "TemplateVM".into(),
            name: "golden".into(),
            path: "spec.clone".into()
        }]
    );
    let show = |resolved: &[(Reference, String)]| {
        crate::check_references(&d, resolved)
            .into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect::<Vec<_>>()
    };
    let good = resolve_all(&d);
    assert_eq!(show(&good), Vec::<String>::new());
    let t = crate::refs::targets(&d, &good).unwrap();
    assert_eq!(
        t.images.get(&0).map(String::as_str),
        Some("local:import/noble.qcow2")
    );
    assert_eq!(
        t.images.get(&2).map(String::as_str),
        Some("local:import/noble.qcow2")
    );
    assert_eq!(t.iso.as_deref(), Some("local:iso/debian-13.iso"));
    let mut bad = good.clone();
    bad[0].1 = catalog("debian-13").unwrap().to_string();
    bad[1].1 = json!({"kind": "DiskImage", "storage": "local"}).to_string();
    bad[2].0.kind = "DiskImage".into();
    assert_eq!(
        show(&bad),
        vec![
            "spec.disks[0].image: DiskImage `noble` has content iso, expected import",
            "spec.disks[2].image: the desired state of DiskImage `noble` has no storage or file name",
            "spec.hardware.cdrom.iso: `debian-13` is a DiskImage, not an ISO",
        ]
    );
    assert_eq!(
        show(&good[..1]),
        vec![
            "spec.disks[2].image: no DiskImage named `noble` in this cluster",
            "spec.hardware.cdrom.iso: no ISO named `debian-13` in this cluster",
        ]
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
            "Update [stop]: update VM 100 on pve01 with a restart (shut down, write, start; started again if the write fails): machine",
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
    // A pending change made behind proxops's back (cores 4, desired 2): the stop applies
    // it, so the digest is not sent and cores is written back after the stop.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "cores", "value": 2, "pending": 4}])),
            patches: &[
                ("spec/state", json!("started")),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "mapping": "gpu0"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve01 with a restart (shut down, write, start; started again if the write fails): hostpci0, cores",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve01/qemu/100/config hostpci0=mapping=gpu0 cores=2",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.cpu.cores (pending): 4 -> 2",
            "drift spec.hardware.pci-devices[0]: - -> mapping=gpu0",
        ],
    );
    // A raw device: PVE lets only root@pam write it and proxops uses an API token, so the
    // write is known to fail: an anomaly, and nothing is stopped for it (the other pending
    // change is reverted as on any running VM).
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
            "Update: update VM 100 on pve01: cores",
            "  Post /nodes/pve01/qemu/100/config digest=d1 revert=cores",
            "drift spec.cpu.cores (pending): 4 -> 2",
            "drift spec.hardware.pci-devices[0]: - -> 0000:01:00.0",
            "anomaly spec.hardware.pci-devices[0]",
        ],
    );
}

#[test]
fn pending_changes_against_desired_are_reverted() {
    // Memory raised behind proxops's back on a running VM: PVE keeps it pending; left alone
    // it would apply at the next reboot, so the pending change is reverted.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "memory", "value": "2048", "pending": "4096"}])),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 revert=memory",
            "drift spec.memory (pending): 4096 -> 2048",
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
            "Delete [stop] [destructive]: delete VM 100 `web-01` on pve01 (no manifest)",
            "  Post /nodes/pve01/qemu/100/status/stop",
            "  Delete /nodes/pve01/qemu/100 purge=1",
            "drift : VM 100 `web-01` on pve01 -> -",
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
            "drift spec.hardware.efi-disk.secure-boot: enabled -> disabled",
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
    let desired = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let obs = Observation {
        live: Some(entry("stopped", false).to_string()),
        reads: vec![Read {
            call: Call::new(Method::Get, "/nodes/pve01/qemu/100/config"),
            status: 500,
            body: "{\"message\":\"Configuration file 'nodes/pve01/qemu-server/100.conf' does not exist\\n\"}".into(),
        }],
    };
    let err = crate::plan(Flavour::Vm, Some(&desired), &[], &secrets(), &obs).unwrap_err();
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
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let show = |calls: Vec<Call>| {
        calls
            .iter()
            .map(|c| format!("{:?} {} {:?}", c.method, c.path, c.params))
            .collect::<Vec<_>>()
    };
    assert!(crate::observe(Some(&d), None).is_empty());
    assert_eq!(
        show(crate::observe(
            Some(&d),
            Some(&entry("stopped", false).to_string())
        )),
        vec!["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
    let mut running = entry("running", false);
    running["node"] = json!("pve02");
    assert_eq!(
        show(crate::observe(Some(&d), Some(&running.to_string()))),
        vec!["Get /nodes/pve02/qemu/100/pending []",]
    );
    assert_eq!(crate::observe(None, Some(&running.to_string())).len(), 1);
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
        assert_eq!(crate::claims(Flavour::Vm, &e.to_string()), vm, "{e}");
        assert_eq!(crate::claims(Flavour::Template, &e.to_string()), tpl, "{e}");
    }
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
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

#[test]
fn a_running_vm_is_planned_from_its_pending_read_alone() {
    // /pending lists every applied key in `value` (and the digest), so a running VM needs no
    // config read: converged stays converged, drift is found and the write carries the digest.
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let rows = |memory: &str| {
        let mut rows: Vec<Value> = live_config()
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| json!({"key": k, "value": if k == "memory" { json!(memory) } else { v.clone() }}))
            .collect();
        rows.push(json!({"key": "vmgenid", "value": "00000000-0000-4000-8000-000000000002"}));
        Value::Array(rows)
    };
    let plan = |memory: &str| {
        let obs = Observation {
            live: Some(entry("running", false).to_string()),
            reads: vec![Read {
                call: Call::new(Method::Get, "/nodes/pve01/qemu/100/pending"),
                status: 200,
                body: rows(memory).to_string(),
            }],
        };
        render(
            &crate::plan(Flavour::Vm, Some(&d), &resolve_all(&d), &secrets(), &obs)
                .expect("plan succeeds"),
        )
    };
    assert_eq!(plan("2048"), Vec::<String>::new());
    assert_eq!(
        plan("4096"),
        vec![
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 memory=2048",
            "drift spec.memory: 4096 -> 2048",
        ]
    );
}
