//! Planning cases: fresh creates and provisioning from a TemplateVM (the one clone, then its own configuration).

use super::*;

#[test]
fn create_vm_and_start_it_in_one_task() {
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
            // Every owned key, cloud-init included, is in the create: it is the last write
            // before the start, so PVE starts the guest in the create's task.
            "Create: create VM 100 (web-01) on pve01 and start it",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100;web memory=2048 cores=2 cpu=host machine=pc bios=ovmf \
scsihw=virtio-scsi-single scsi0=local-lvm:32,iothread=1 efidisk0=local-lvm:1,efitype=4m \
ide2=local-lvm:cloudinit ide3=none,media=cdrom net0=virtio,bridge=vmbr0,tag=10 start=1",
            "drift : - -> VM 100 on pve01",
        ],
    );
}

/// `secure-boot` omitted is not owned: the create leaves `pre-enrolled-keys` to PVE's default
/// (no keys enrolled); declared, it is written either way.
#[test]
fn create_writes_pre_enrolled_keys_only_when_secure_boot_is_declared() {
    for (efi, efidisk0) in [
        (json!({"storage": "local-lvm"}), "local-lvm:1,efitype=4m"),
        (
            json!({"storage": "local-lvm", "secure-boot": "enabled"}),
            "local-lvm:1,efitype=4m,pre-enrolled-keys=1",
        ),
        (
            json!({"storage": "local-lvm", "template": "2m", "secure-boot": "disabled"}),
            "local-lvm:1,efitype=2m,pre-enrolled-keys=0",
        ),
    ] {
        check(
            Case {
                live: None,
                patches: &[
                    ("spec/hardware/bios", json!("ovmf")),
                    ("spec/hardware/efi-disk", efi),
                ],
                ..Case::default()
            },
            &[
                "Create: create VM 100 (web-01) on pve01",
                &format!(
                    "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host bios=ovmf \
scsi0=local-lvm:32 efidisk0={efidisk0} net0=virtio,bridge=vmbr0"
                ),
                "drift : - -> VM 100 on pve01",
            ],
        );
    }
}

#[test]
fn create_vm_declared_stopped_sends_no_start() {
    check(
        Case {
            live: None,
            ..Case::default()
        },
        &[
            "Create: create VM 100 (web-01) on pve01",
            "  Post /nodes/pve01/qemu vmid=100 name=web-01 tags=proxops;proxops-100 memory=2048 cores=2 cpu=host \
scsi0=local-lvm:32 net0=virtio,bridge=vmbr0",
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
pub(super) fn fresh_clone() -> Value {
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

pub(super) fn clone_patches(extra: &[(&'static str, Value)]) -> Vec<(&'static str, Value)> {
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

/// A clone inherits the template's cipassword, and cipassword is written only where none is
/// set: a clone's own ci-password-ref next to a template that sets another one is warned
/// about (decisions: "so nobody believes the SOPS password is set").
#[test]
fn a_clones_password_ref_beside_the_templates_is_a_warning() {
    let template = |password_ref: Option<&str>| {
        let mut t = json!({"kind": "TemplateVM", "node": "pve01", "vmid": 9000});
        if let Some(r) = password_ref {
            t["cloud-init-data"] = json!({"ci-password-ref": r});
        }
        t.to_string()
    };
    let clone_desired = |password_ref: Option<&str>| {
        let mut doc = base();
        patch(&mut doc, "spec/clone", json!("golden"));
        patch(&mut doc, "spec/disks", Value::Null);
        if let Some(r) = password_ref {
            patch(&mut doc, "spec/cloud-init-data/ci-password-ref", json!(r));
        }
        crate::validate(Flavour::Vm, &doc, &secrets())
            .unwrap()
            .desired
    };
    let golden = |t: String| {
        vec![(
            Reference {
                kind: "TemplateVM".into(),
                name: "golden".into(),
                path: "spec.clone".into(),
            },
            t,
        )]
    };
    let warned = "warning spec.cloud-init-data.ci-password-ref: TemplateVM `golden` sets its cipassword from `cloud-init.passwords.admin`, and a clone inherits it; proxops writes cipassword only where none is set, so `cloud-init.passwords.root` has no effect on this VM (its password is the template's). Use `cloud-init.passwords.admin` here, or drop ci-password-ref from the template";
    for (own, theirs, want) in [
        (
            Some("cloud-init.passwords.root"),
            Some("cloud-init.passwords.admin"),
            vec![warned],
        ),
        (
            Some("cloud-init.passwords.root"),
            Some("cloud-init.passwords.root"),
            vec![],
        ),
        (Some("cloud-init.passwords.root"), None, vec![]),
        (None, Some("cloud-init.passwords.admin"), vec![]),
    ] {
        let got: Vec<String> =
            crate::check_references(&clone_desired(own), &golden(template(theirs)))
                .into_iter()
                .map(|d| {
                    let severity = match d.severity {
                        proxops_kind_sdk::check::Severity::Error => "error",
                        proxops_kind_sdk::check::Severity::Warning => "warning",
                    };
                    format!("{severity} {}: {}", d.path, d.message)
                })
                .collect();
        assert_eq!(got, want, "own {own:?}, template's {theirs:?}");
    }
}
