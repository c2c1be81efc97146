//! Planning cases: image-seeded disks, the CD/DVD drive, references and their targets, disks, NICs, special drives and PCI devices.

use super::*;

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
    // A cloud-init drive in the CD/DVD slot (a clone inherits its template's, though the VM
    // declares no cloud-init; or one PVE holds on ide3) is never written over.
    check(
        Case {
            patches: &[("spec/hardware/cdrom", json!({"iso": "none"}))],
            config: &[("ide2", json!("local-lvm:vm-100-cloudinit,media=cdrom"))],
            ..Case::default()
        },
        &["anomaly spec.hardware.cdrom"],
    );
    check(
        Case {
            patches: &with_ci,
            config: &[
                ("ide2", json!("none,media=cdrom")),
                ("ide3", json!("local-lvm:vm-100-cloudinit,media=cdrom")),
            ],
            ..Case::default()
        },
        &[
            "anomaly spec.hardware.cloud-init",
            "anomaly spec.hardware.cdrom",
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
