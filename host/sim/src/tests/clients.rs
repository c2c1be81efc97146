//! What Ansible's community.proxmox modules rely on beyond proxops's own calls: the cluster storage
//! configuration (`proxmox_storage_info`) and how a running VM takes drive changes (`proxmox_disk`).

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
            r#"{"storage":"local","type":"dir","content":"iso,import,vztmpl,snippets","digest":"#,
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
