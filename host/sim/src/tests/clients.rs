//! What other PVE clients (Ansible's community.proxmox modules, scripts) rely on beyond proxops's own
//! calls: the cluster storage configuration (`proxmox_storage_info`), how a running VM takes drive and
//! balloon changes (`proxmox_disk`), and how PVE stores what it is given: base volumes on templates, a
//! protected guest's drives, descriptions, CPU weights and a new CD-ROM's place in the boot order.

use serde_json::{Value, json};

use super::{P, T};
use crate::{SimConfig, StorageConfig};

const VM: &str = "/nodes/pve01/qemu/100";

/// A cluster with the default storages plus a shared NFS storage on one node.
fn cluster() -> SimConfig {
    let mut nfs = StorageConfig::new("nas", "nfs", &["images", "iso"]);
    nfs.shared = true;
    nfs.nodes = Some(vec!["pve02".to_string()]);
    let mut config = SimConfig::default();
    config.storages.push(nfs);
    config
}

#[tokio::test]
async fn storage_config_reads_back_as_pve_serves_it() {
    let t = T::with(cluster()).await;
    let cases: &[(&str, P<'_>, u16, &str)] = &[
        // The storage.cfg sections with their plugin keys, sorted by id.
        (
            "/storage",
            &[],
            200,
            r#"{"storage":"local","type":"dir","content":"iso,import,vztmpl,snippets,backup","digest":"#,
        ),
        (
            "/storage",
            &[],
            200,
            r#","path":"/var/lib/vz"},{"storage":"local-lvm","type":"lvmthin""#,
        ),
        (
            "/storage",
            &[],
            200,
            r#","thinpool":"data","vgname":"pve"},"#,
        ),
        (
            "/storage",
            &[],
            200,
            r#","path":"/mnt/pve/nas","nodes":"pve02","shared":1}]"#,
        ),
        (
            "/storage",
            &[("type", "lvmthin")],
            200,
            r#""storage":"local-lvm""#,
        ),
        ("/storage", &[("type", "zfspool")], 200, r#"{"data":[]}"#),
        (
            "/storage",
            &[("type", "ext4")],
            400,
            "value 'ext4' does not have a value in the enumeration",
        ),
        (
            "/storage/local-lvm",
            &[],
            200,
            r#""content":"images,rootdir""#,
        ),
        ("/storage/nas", &[], 200, r#""shared":1"#),
        (
            "/storage/nope",
            &[],
            500,
            "storage 'nope' does not exist\\n",
        ),
        ("/storage/no_such!", &[], 400, "invalid format - storage ID"),
    ];
    for (path, params, status, fragment) in cases {
        t.check("GET", path, params, *status, fragment).await;
    }
    // Every section carries the same digest, that of the whole file.
    let all = t.get("/storage", &[]).await;
    let digests: Vec<&Value> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["digest"])
        .collect();
    assert_eq!(digests.len(), 3, "{all}");
    assert!(digests.iter().all(|d| *d == digests[0]), "{all}");
    assert_eq!(digests[0].as_str().unwrap().len(), 40, "{all}");
    let one = t.get("/storage/local", &[]).await;
    assert_eq!(&one["digest"], digests[0], "{one}");
}

/// Sets `scsi1`/`ide2`/... on the running VM 100 with the given hotplug features, then reports where the value
/// landed: `"live"` (the current config has it) or `"pending"`.
async fn lands(hotplug: &str, key: &str, before: &str, after: &str) -> &'static str {
    let t = T::new().await;
    let mut create: Vec<(&str, &str)> = vec![("hotplug", hotplug)];
    if !before.is_empty() {
        create.push((key, before));
    }
    t.create(100, &create).await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
    let old = current[key].as_str().map(str::to_string);
    assert_eq!(
        t.task("POST", &format!("{VM}/config"), &[(key, after)])
            .await,
        "OK"
    );
    let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
    let pending = t.get(&format!("{VM}/pending"), &[]).await;
    let entry = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == key)
        .cloned()
        .unwrap_or(Value::Null);
    if entry.get("pending").is_some() {
        assert_eq!(
            current.get(key).and_then(Value::as_str),
            old.as_deref(),
            "{current}"
        );
        "pending"
    } else {
        assert!(
            current.get(key).is_some(),
            "{key} neither current nor pending: {current}"
        );
        "live"
    }
}

/// qemu-server's `vmconfig_update_disk`: what a running VM takes at once.
#[tokio::test]
async fn running_vm_takes_drive_changes_as_pve() {
    let disk = "local-lvm:1";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // (hotplug, key, value at create, value set while running, where it lands)
        ("network,disk,usb", "scsi1", "", "local-lvm:1", "live"),
        ("network,usb", "scsi1", "", "local-lvm:1", "pending"),
        ("network,disk,usb", "sata1", "", "local-lvm:1", "pending"),
        ("network,disk,usb", "ide1", "", "local-lvm:1", "pending"),
        ("network,disk,usb", "efidisk0", "", "local-lvm:1", "pending"),
        // The same volume: options QEMU cannot change on a running drive wait, throttling applies.
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,ssd=1",
            "pending",
        ),
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,discard=on",
            "pending",
        ),
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,iothread=1",
            "pending",
        ),
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,cache=writeback",
            "pending",
        ),
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,mbps_rd=100",
            "live",
        ),
        (
            "network,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,iops=500",
            "live",
        ),
        (
            "network,disk,usb",
            "scsi1",
            disk,
            "local-lvm:vm-100-disk-0,backup=0",
            "live",
        ),
        // Another volume replaces the drive with the disk feature only.
        ("network,disk,usb", "scsi1", disk, "local-lvm:2", "live"),
        ("network,usb", "scsi1", disk, "local-lvm:2", "pending"),
        // A CD-ROM changes its medium whatever the features; a new media type waits.
        (
            "network,usb",
            "ide2",
            "none,media=cdrom",
            "cdrom,media=cdrom",
            "live",
        ),
        (
            "network,disk,usb",
            "ide2",
            "none,media=cdrom",
            "local-lvm:1",
            "pending",
        ),
    ];
    for (hotplug, key, before, after, expected) in cases {
        let got = lands(hotplug, key, before, after).await;
        assert_eq!(
            got, *expected,
            "hotplug={hotplug} {key}: {before:?} -> {after:?}"
        );
    }
}

/// Deleting a drive from a running VM unplugs it only where PVE can.
#[tokio::test]
async fn running_vm_unplugs_drives_as_pve() {
    let cases: &[(&str, &str, bool)] = &[
        // (key, value at create, unplugged at once)
        ("scsi1", "local-lvm:1", true),
        ("virtio1", "local-lvm:1", true),
        ("sata1", "local-lvm:1", false),
        ("ide1", "local-lvm:1", false),
    ];
    for (key, value, live) in cases {
        let t = T::new().await;
        t.create(100, &[(key, value)]).await;
        assert_eq!(
            t.task("POST", &format!("{VM}/status/start"), &[]).await,
            "OK"
        );
        t.check(
            "PUT",
            &format!("{VM}/config"),
            &[("delete", key)],
            200,
            "null",
        )
        .await;
        let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
        assert_eq!(current.get(*key).is_none(), *live, "{key}: {current}");
        let merged = t.config(100).await;
        assert!(merged.get(*key).is_none(), "{key}: {merged}");
        // An unplugged disk is kept as unused; a pending delete keeps it attached until the next start.
        let unused = merged.get("unused0").cloned().unwrap_or(Value::Null);
        let expected = if *live {
            json!("local-lvm:vm-100-disk-0")
        } else {
            Value::Null
        };
        assert_eq!(unused, expected, "{key}: {merged}");
    }
}

/// qemu-server's `vmconfig_hotplug_pending`: switching ballooning on or off waits for the next start;
/// another balloon target while it stays on (absent counts as on) applies at once.
#[tokio::test]
async fn running_vm_takes_balloon_changes_as_pve() {
    let cases: &[(&str, &str, &str)] = &[
        // (balloon at create, set while running, where it lands)
        ("", "512", "live"),
        ("1024", "2048", "live"),
        ("0", "512", "pending"),
        ("1024", "0", "pending"),
        ("0", "0", "live"),
    ];
    for (before, after, expected) in cases {
        let got = lands("network,disk,usb", "balloon", before, after).await;
        assert_eq!(got, *expected, "balloon {before:?} -> {after:?}");
    }
}

/// qemu-server's `vmconfig_hotplug_pending` for the keys that are neither drives nor fast-plug:
/// CPU weights and limits go to the cgroup at once; a NIC keeping its model, MAC, queues and MTU
/// changes tag/firewall/rate live without the `network` feature (`vmconfig_update_net`); the
/// agent takes only `fstrim_cloned_disks` live; `tablet` needs `usb`; a `hotplug` list naming
/// `cpu` or `memory`, before or after, waits.
#[tokio::test]
async fn running_vm_takes_cpu_nic_agent_and_hotplug_changes_as_pve() {
    let nic = "virtio=BC:24:11:00:00:01,bridge=vmbr0";
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        // (hotplug, key, value at create, value set while running, where it lands)
        ("disk", "cpuunits", "", "200", "live"),
        ("disk", "cpulimit", "", "1.5", "live"),
        (
            "disk",
            "net0",
            nic,
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=10",
            "live",
        ),
        (
            "disk",
            "net0",
            nic,
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,rate=10",
            "live",
        ),
        (
            "disk",
            "net0",
            nic,
            "virtio=BC:24:11:00:00:01,bridge=vmbr0,mtu=1400",
            "pending",
        ),
        (
            "disk",
            "net0",
            nic,
            "e1000=BC:24:11:00:00:01,bridge=vmbr0",
            "pending",
        ),
        (
            "network,disk",
            "net0",
            nic,
            "e1000=BC:24:11:00:00:01,bridge=vmbr0",
            "live",
        ),
        ("disk", "net1", "", nic, "pending"),
        ("network", "net1", "", nic, "live"),
        ("disk", "agent", "1", "1,fstrim_cloned_disks=1", "live"),
        ("disk", "agent", "1", "1,type=isa", "pending"),
        ("disk", "agent", "", "1", "pending"),
        ("disk", "tablet", "", "0", "pending"),
        ("usb", "tablet", "", "0", "live"),
        ("network,disk,usb", "hotplug", "", "network,disk", "live"),
        ("network,disk,cpu", "hotplug", "", "network,disk", "pending"),
        (
            "network,disk",
            "hotplug",
            "",
            "network,disk,memory",
            "pending",
        ),
    ];
    for (hotplug, key, before, after, expected) in cases {
        let got = lands(hotplug, key, before, after).await;
        assert_eq!(
            got, *expected,
            "hotplug={hotplug} {key}: {before:?} -> {after:?}"
        );
    }
}

/// Deleting those keys from a running VM: the same rules (`vmconfig_hotplug_pending`'s delete loop).
#[tokio::test]
async fn running_vm_deletes_cpu_and_tablet_keys_as_pve() {
    let cases: &[(&str, &str, &str, bool)] = &[
        // (hotplug, key, value at create, deleted at once)
        ("disk", "cpuunits", "200", true),
        ("disk", "cpulimit", "2", true),
        ("disk", "tablet", "0", false),
        ("usb", "tablet", "0", true),
        ("disk", "agent", "1", false),
    ];
    for (hotplug, key, value, live) in cases {
        let t = T::new().await;
        t.create(100, &[("hotplug", hotplug), (key, value)]).await;
        assert_eq!(
            t.task("POST", &format!("{VM}/status/start"), &[]).await,
            "OK"
        );
        assert_eq!(
            t.task("POST", &format!("{VM}/config"), &[("delete", key)])
                .await,
            "OK"
        );
        let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
        assert_eq!(
            current.get(*key).is_none(),
            *live,
            "hotplug={hotplug} delete {key}: {current}"
        );
    }
}

/// qemu-server's `create_disks` makes every disk created on a template a base volume.
#[tokio::test]
async fn disks_created_on_a_template_are_base_volumes() {
    let t = T::new().await;
    t.create(500, &[("scsi0", "local-lvm:1"), ("template", "1")])
        .await;
    let config = t.config(500).await;
    assert_eq!(
        config["scsi0"], "local-lvm:base-500-disk-0,size=1G",
        "{config}"
    );
    assert_eq!(
        t.task(
            "POST",
            "/nodes/pve01/qemu/500/config",
            &[
                ("scsi1", "local-lvm:2"),
                ("efidisk0", "local-lvm:1,efitype=4m")
            ],
        )
        .await,
        "OK"
    );
    let config = t.config(500).await;
    for key in ["scsi1", "efidisk0"] {
        let value = config[key].as_str().unwrap_or_default();
        assert!(
            value.starts_with("local-lvm:base-500-disk-"),
            "{key}: {config}"
        );
    }
    let content = t.get("/nodes/pve01/storage/local-lvm/content", &[]).await;
    let vm_volumes = content
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["volid"].as_str().is_some_and(|id| id.contains("vm-500-")))
        .count();
    assert_eq!(vm_volumes, 0, "{content}");
    // A VM's disks stay `vm-` volumes.
    t.create(501, &[("scsi0", "local-lvm:1")]).await;
    assert_eq!(
        t.config(501).await["scsi0"],
        "local-lvm:vm-501-disk-0,size=1G"
    );
}

/// `update_vm_api` checks protection before removing a drive or an unused volume; other keys go.
#[tokio::test]
async fn a_protected_vm_keeps_its_drives() {
    let t = T::new().await;
    t.create(
        400,
        &[
            ("protection", "1"),
            ("ide3", "none,media=cdrom"),
            ("unused0", "local-lvm:vm-400-disk-9"),
            ("description", "kept"),
        ],
    )
    .await;
    let path = "/nodes/pve01/qemu/400/config";
    let cases: &[(&str, u16, &str)] = &[
        (
            "ide3",
            500,
            "can't remove drive 'ide3' - protection mode enabled",
        ),
        (
            "unused0",
            500,
            "can't remove unused disk 'local-lvm:vm-400-disk-9' - protection mode enabled",
        ),
        ("description", 200, "null"),
    ];
    for (key, status, fragment) in cases {
        t.check("PUT", path, &[("delete", key)], *status, fragment)
            .await;
    }
    let config = t.config(400).await;
    assert!(
        config.get("ide3").is_some() && config.get("unused0").is_some(),
        "{config}"
    );
    assert!(config.get("description").is_none(), "{config}");
}

/// What PVE writes to the config file: a description without trailing whitespace and none when empty
/// (`write_vm_config`); CPU weights clamped to cgroup v2's 10000 (`CGroup::clamp_cpu_shares`).
#[tokio::test]
async fn descriptions_and_cpu_weights_are_stored_as_pve_writes_them() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let cases: &[(&str, &str, Option<&str>)] = &[
        (
            "description",
            "line1\n\nline3  \n\n",
            Some("line1\n\nline3"),
        ),
        ("description", "", None),
        ("cpuunits", "20000", Some("10000")),
        ("cpuunits", "512", Some("512")),
    ];
    for (key, value, stored) in cases {
        t.check("PUT", &format!("{VM}/config"), &[(key, value)], 200, "null")
            .await;
        let config = t.config(100).await;
        let got = config.get(*key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        assert_eq!(got.as_deref(), *stored, "{key}={value:?}: {config}");
    }
}

/// `update_vm_api` appends a new CD/DVD drive to an explicit boot order, not a cloud-init drive, and not
/// when the request sets the boot order itself.
#[tokio::test]
async fn a_new_cdrom_joins_an_explicit_boot_order() {
    let cases: &[(P<'_>, &str)] = &[
        (&[("ide3", "none,media=cdrom")], "order=scsi0;net0;ide3"),
        (&[("ide2", "local-lvm:cloudinit")], "order=scsi0;net0"),
        (&[("scsi1", "local-lvm:1")], "order=scsi0;net0"),
        (
            &[("ide3", "none,media=cdrom"), ("boot", "order=ide3;scsi0")],
            "order=ide3;scsi0",
        ),
    ];
    for (set, boot) in cases {
        let t = T::new().await;
        t.create(
            100,
            &[
                ("scsi0", "local-lvm:1"),
                ("net0", "virtio,bridge=vmbr0"),
                ("boot", "order=scsi0;net0"),
            ],
        )
        .await;
        t.check("PUT", &format!("{VM}/config"), set, 200, "null")
            .await;
        assert_eq!(t.config(100).await["boot"], *boot, "{set:?}");
    }
}
