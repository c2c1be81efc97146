//! Item 5 behaviours: disks, cloud-init, MACs, tags, digests, locks, pending, clone, template, destroy, resize, the guest agent (storage in `storage.rs`, parameter validation in `validation.rs`).

use std::time::Duration;

use serde_json::json;

use super::{T, enc};
use crate::SimConfig;

const VM: &str = "/nodes/pve01/qemu/100";

#[tokio::test]
async fn disks_allocated_in_sorted_key_order_with_pve_sizes() {
    let t = T::new().await;
    t.create(
        100,
        &[
            ("virtio0", "local-lvm:1"),
            ("scsi2", "local-lvm:2"),
            ("scsi10", "local-lvm:0.5"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1"),
            ("sata0", "local-lvm:3,format=raw,ssd=on"),
            ("tpmstate0", "local-lvm:1,version=v2.0"),
        ],
    )
    .await;
    let c = t.config(100).await;
    assert_eq!(
        c["efidisk0"],
        "local-lvm:vm-100-disk-0,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
    );
    assert_eq!(c["sata0"], "local-lvm:vm-100-disk-1,size=3G,ssd=1");
    assert_eq!(c["scsi10"], "local-lvm:vm-100-disk-2,size=512M");
    assert_eq!(c["scsi2"], "local-lvm:vm-100-disk-3,size=2G");
    assert_eq!(
        c["tpmstate0"],
        "local-lvm:vm-100-disk-4,size=4M,version=v2.0"
    );
    assert_eq!(c["virtio0"], "local-lvm:vm-100-disk-5,size=1G");
    // disks are searched ide, scsi, virtio, sata: scsi2 is the boot disk
    assert_eq!(c["boot"], "order=scsi2");
    let content = t.get("/nodes/pve01/storage/local-lvm/content", &[]).await;
    let volids: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    let mut sorted = volids.clone();
    sorted.sort();
    assert_eq!(volids, sorted);
    assert_eq!(volids.len(), 6);
    assert_eq!(content[0]["size"], json!(4194304));
    assert_eq!(content[0]["vmid"], json!(100));
}

#[tokio::test]
async fn create_sets_defaults_and_normalises() {
    let t = T::new().await;
    t.create(
        100,
        &[
            ("name", "web1"),
            ("memory", "2048"),
            ("cores", "2"),
            ("scsihw", "virtio-scsi-single"),
            ("scsi0", "local-lvm:32,iothread=1,discard=on"),
            ("ide2", "local-lvm:cloudinit"),
            ("net0", "virtio,bridge=vmbr0,firewall=1"),
            ("net1", "e1000=bc:24:11:aa:bb:cc,bridge=vmbr1,tag=20"),
            ("agent", "1"),
            ("tags", "k8s,Prod web;K8S"),
            ("cipassword", "hunter2"),
            ("sshkeys", "ssh-ed25519%20AAAAC3Nza%20me%40host"),
        ],
    )
    .await;
    let c = t.config(100).await;
    assert_eq!(
        c["scsi0"],
        "local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32G"
    );
    assert_eq!(c["ide2"], "local-lvm:vm-100-cloudinit,media=cdrom");
    assert_eq!(c["boot"], "order=scsi0;ide2;net0");
    assert_eq!(c["tags"], "k8s;prod;web");
    assert_eq!(c["cipassword"], "**********");
    assert_eq!(c["sshkeys"], "ssh-ed25519%20AAAAC3Nza%20me%40host");
    assert_eq!(c["memory"], "2048");
    assert_eq!(c["cores"], json!(2));
    assert_eq!(c["agent"], "1");
    let net0 = c["net0"].as_str().unwrap();
    assert!(net0.starts_with("virtio=BC:24:11:"), "{net0}");
    assert!(net0.ends_with(",bridge=vmbr0,firewall=1"), "{net0}");
    assert_eq!(c["net1"], "e1000=bc:24:11:aa:bb:cc,bridge=vmbr1,tag=20");
    assert!(c["smbios1"].as_str().unwrap().starts_with("uuid="));
    assert_eq!(c["vmgenid"].as_str().unwrap().len(), 36);
    assert!(c["meta"].as_str().unwrap().starts_with("creation-qemu="));
    assert_eq!(c["digest"].as_str().unwrap().len(), 40);
    // the stored password is hashed, never the plain text
    let raw = t.sim.vm_config(100).unwrap();
    assert_ne!(raw["cipassword"], "hunter2");
}

#[tokio::test]
async fn cloudinit_drive_resend_fails_task() {
    let t = T::new().await;
    t.create(100, &[("ide2", "local-lvm:cloudinit")]).await;
    let exit = t
        .task(
            "POST",
            &format!("{VM}/config"),
            &[("ide2", "local-lvm:cloudinit")],
        )
        .await;
    assert_eq!(exit, "Logical Volume vm-100-cloudinit already exists");
    // re-sending the live value is a no-op
    let exit = t
        .task(
            "POST",
            &format!("{VM}/config"),
            &[("ide2", "local-lvm:vm-100-cloudinit,media=cdrom")],
        )
        .await;
    assert_eq!(exit, "OK");
}

#[tokio::test]
async fn cloudinit_on_storage_without_images_fails_at_start() {
    let t = T::new().await;
    t.create(100, &[("ide2", "local:cloudinit")]).await;
    let c = t.config(100).await;
    assert_eq!(c["ide2"], "local:100/vm-100-cloudinit.qcow2,media=cdrom");
    let exit = t.task("POST", &format!("{VM}/status/start"), &[]).await;
    assert!(
        exit.contains("does not support content-type 'images'"),
        "{exit}"
    );
    assert_eq!(t.sim.vm_status(100).unwrap(), "stopped");
}

#[tokio::test]
async fn digest_mismatch_is_500() {
    let t = T::new().await;
    t.create(100, &[("name", "a")]).await;
    let digest = t.config(100).await["digest"].as_str().unwrap().to_string();
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "b"), ("digest", &digest)],
        200,
        "null",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "c"), ("digest", &digest)],
        500,
        "checksum mismatch (file change by other user?)",
    )
    .await;
    assert_ne!(t.config(100).await["digest"], json!(digest));
}

#[tokio::test]
async fn locks_visible_during_clone_and_destroy() {
    let t = T::with(SimConfig {
        task_duration: Duration::from_millis(200),
        ..SimConfig::default()
    })
    .await;
    t.create(100, &[("scsi0", "local-lvm:1")]).await;
    let (_, b) = t
        .req("POST", &format!("{VM}/clone"), &[("newid", "101")])
        .await;
    let upid = b["data"].as_str().unwrap().to_string();
    let target = t.get("/nodes/pve01/qemu/101/config", &[]).await;
    assert_eq!(target["lock"], "clone");
    assert_eq!(target["description"], "qmclone temporary file");
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    let r101 = res
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["vmid"] == 101)
        .unwrap();
    assert_eq!(r101["lock"], "clone");
    t.check(
        "POST",
        "/nodes/pve01/qemu/101/template",
        &[],
        500,
        "VM is locked (clone)",
    )
    .await;
    assert_eq!(t.wait(&upid).await, "OK");
    let (_, b) = t.req("DELETE", "/nodes/pve01/qemu/101", &[]).await;
    let upid = b["data"].as_str().unwrap().to_string();
    let st = t.get("/nodes/pve01/qemu/101/status/current", &[]).await;
    assert_eq!(st["lock"], "destroyed");
    t.check(
        "PUT",
        "/nodes/pve01/qemu/101/config",
        &[("name", "x")],
        500,
        "VM is locked (destroyed)",
    )
    .await;
    assert_eq!(t.wait(&upid).await, "OK");
}

#[tokio::test]
async fn pending_changes_on_running_vm() {
    let t = T::new().await;
    t.create(100, &[("cores", "1"), ("name", "a"), ("memory", "1024")])
        .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("cores", "4"), ("name", "b"), ("ipconfig0", "ip=dhcp")],
        200,
        "null",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("delete", "memory")],
        200,
        "null",
    )
    .await;
    let merged = t.config(100).await;
    assert_eq!(merged["cores"], json!(4));
    assert_eq!(merged["name"], "b");
    assert!(merged.get("memory").is_none());
    let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
    assert_eq!(current["cores"], json!(1));
    assert_eq!(current["name"], "b");
    assert_eq!(current["ipconfig0"], "ip=dhcp");
    assert_eq!(current["memory"], "1024");
    let pending = t.get(&format!("{VM}/pending"), &[]).await;
    let cores = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "cores")
        .unwrap();
    assert_eq!(cores["value"], json!("1"));
    assert_eq!(cores["pending"], json!("4"));
    let mem = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "memory")
        .unwrap();
    assert_eq!(mem["delete"], json!(1));
    let name = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "name")
        .unwrap();
    assert!(name.get("pending").is_none());
    // stop applies pending
    assert_eq!(
        t.task("POST", &format!("{VM}/status/stop"), &[]).await,
        "OK"
    );
    let current = t.get(&format!("{VM}/config"), &[("current", "1")]).await;
    assert_eq!(current["cores"], json!(4));
    assert!(current.get("memory").is_none());
    // stopped VMs apply at once
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("cores", "2")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.sim.vm_config(100).unwrap()["cores"], "2");
}

#[tokio::test]
async fn clone_copies_and_regenerates() {
    let t = T::new().await;
    t.create(
        100,
        &[
            ("name", "golden"),
            ("scsi0", "local-lvm:4,discard=on"),
            ("ide2", "local-lvm:cloudinit"),
            ("net0", "virtio,bridge=vmbr0"),
            ("ciuser", "ops"),
            ("tags", "tpl"),
        ],
    )
    .await;
    let src = t.config(100).await;
    t.check(
        "POST",
        &format!("{VM}/clone"),
        &[("newid", "101"), ("start", "1")],
        400,
        "property is not defined in schema",
    )
    .await;
    let exit = t
        .task(
            "POST",
            &format!("{VM}/clone"),
            &[("newid", "101"), ("name", "app1")],
        )
        .await;
    assert_eq!(exit, "OK");
    let c = t.get("/nodes/pve01/qemu/101/config", &[]).await;
    assert_eq!(c["name"], "app1");
    assert_eq!(c["ciuser"], "ops");
    assert_eq!(c["tags"], "tpl");
    assert_eq!(c["scsi0"], "local-lvm:vm-101-disk-0,discard=on,size=4G");
    assert_eq!(c["ide2"], "local-lvm:vm-101-cloudinit,media=cdrom");
    assert_ne!(c["net0"], src["net0"]);
    assert!(c["net0"].as_str().unwrap().ends_with(",bridge=vmbr0"));
    assert_ne!(c["smbios1"], src["smbios1"]);
    assert_ne!(c["vmgenid"], src["vmgenid"]);
    assert!(c.get("template").is_none());
    t.check(
        "POST",
        &format!("{VM}/clone"),
        &[("newid", "101")],
        500,
        "unable to create VM 101: config file already exists",
    )
    .await;
    // template then linked clone by default
    assert_eq!(t.task("POST", &format!("{VM}/template"), &[]).await, "OK");
    assert_eq!(
        t.task("POST", &format!("{VM}/clone"), &[("newid", "102")])
            .await,
        "OK"
    );
    let c = t.get("/nodes/pve01/qemu/102/config", &[]).await;
    assert!(c.get("template").is_none());
    assert_eq!(c["name"], "Copy-of-VM-golden");
    let content = t
        .get("/nodes/pve01/storage/local-lvm/content", &[("vmid", "102")])
        .await;
    let disk = content
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["volid"] == "local-lvm:vm-102-disk-0")
        .unwrap();
    assert_eq!(disk["parent"], "base-100-disk-0");
    let exit = t.task("DELETE", VM, &[]).await;
    assert_eq!(
        exit,
        "base volume 'local-lvm:base-100-disk-0' is still in use by linked cloned"
    );
    assert!(!t.sim.vm_config(100).unwrap().contains_key("lock"));
    t.check(
        "POST",
        &format!("{VM}/clone"),
        &[("newid", "103"), ("full", "1"), ("storage", "local")],
        400,
        "does not support vm images",
    )
    .await;
}

#[tokio::test]
async fn template_converts_and_refuses() {
    let t = T::new().await;
    t.create(
        100,
        &[("scsi0", "local-lvm:2"), ("ide2", "local-lvm:cloudinit")],
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    t.check(
        "POST",
        &format!("{VM}/template"),
        &[],
        500,
        "you can't convert a VM to template if VM is running",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/stop"), &[]).await,
        "OK"
    );
    assert_eq!(t.task("POST", &format!("{VM}/template"), &[]).await, "OK");
    let c = t.config(100).await;
    assert_eq!(c["template"], json!(1));
    assert_eq!(c["scsi0"], "local-lvm:base-100-disk-0,size=2G");
    assert_eq!(c["ide2"], "local-lvm:vm-100-cloudinit,media=cdrom");
    t.check(
        "POST",
        &format!("{VM}/template"),
        &[],
        500,
        "you can't convert a template to a template",
    )
    .await;
    let exit = t.task("POST", &format!("{VM}/status/start"), &[]).await;
    assert_eq!(exit, "you can't start a vm if it's a template");
    let st = t.get(&format!("{VM}/status/current"), &[]).await;
    assert_eq!(st["template"], json!(1));
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert_eq!(res[0]["template"], json!(1));
}

#[tokio::test]
async fn destroy_rules() {
    let t = T::new().await;
    t.add_volume("pve01", "local:iso/x.iso", "iso", 1 << 20);
    t.create(
        100,
        &[
            ("scsi0", "local-lvm:1"),
            ("protection", "1"),
            ("ide2", "local:iso/x.iso,media=cdrom"),
        ],
    )
    .await;
    t.create(101, &[("scsi0", "local-lvm:1")]).await;
    t.check(
        "DELETE",
        VM,
        &[],
        500,
        "can't remove VM 100 - protection mode enabled",
    )
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("delete", "protection")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    t.check("DELETE", VM, &[], 500, "VM 100 is running - destroy failed")
        .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/stop"), &[]).await,
        "OK"
    );
    // detach the disk: it becomes unused0 and is still owned
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("delete", "scsi0")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.sim.vm_config(100).unwrap()["unused0"],
        "local-lvm:vm-100-disk-0"
    );
    assert_eq!(t.task("DELETE", VM, &[]).await, "OK");
    let content = t.get("/nodes/pve01/storage/local-lvm/content", &[]).await;
    let volids: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(volids, vec!["local-lvm:vm-101-disk-0"]);
    assert!(t.sim.vm_config(100).is_none());
    // The attached ISO is not the guest's: destroy leaves it.
    let isos = t.get("/nodes/pve01/storage/local/content", &[]).await;
    assert_eq!(isos[0]["volid"], "local:iso/x.iso");
}

#[tokio::test]
async fn resize_grows_only() {
    let t = T::new().await;
    t.create(100, &[("scsi0", "local-lvm:2")]).await;
    assert_eq!(
        t.task(
            "PUT",
            &format!("{VM}/resize"),
            &[("disk", "scsi0"), ("size", "+252M")]
        )
        .await,
        "OK"
    );
    assert_eq!(
        t.config(100).await["scsi0"],
        "local-lvm:vm-100-disk-0,size=2300M"
    );
    assert_eq!(
        t.task(
            "PUT",
            &format!("{VM}/resize"),
            &[("disk", "scsi0"), ("size", "4G")]
        )
        .await,
        "OK"
    );
    assert_eq!(
        t.config(100).await["scsi0"],
        "local-lvm:vm-100-disk-0,size=4G"
    );
    let exit = t
        .task(
            "PUT",
            &format!("{VM}/resize"),
            &[("disk", "scsi0"), ("size", "1G")],
        )
        .await;
    assert_eq!(exit, "shrinking disks is not supported");
    let exit = t
        .task(
            "PUT",
            &format!("{VM}/resize"),
            &[("disk", "scsi1"), ("size", "1G")],
        )
        .await;
    assert_eq!(exit, "disk 'scsi1' does not exist");
    t.check(
        "PUT",
        &format!("{VM}/resize"),
        &[("disk", "scsi0"), ("size", "-1G")],
        400,
        "value does not match the regex pattern",
    )
    .await;
}

#[tokio::test]
async fn cluster_resources_and_lists() {
    let t = T::new().await;
    t.create(
        100,
        &[
            ("name", "a"),
            ("tags", "x"),
            ("memory", "2048"),
            ("scsi0", "local-lvm:8"),
        ],
    )
    .await;
    let res = t.get("/cluster/resources", &[]).await;
    let arr = res.as_array().unwrap();
    assert!(
        arr.iter()
            .any(|r| r["type"] == "node" && r["node"] == "pve02")
    );
    assert!(
        arr.iter()
            .any(|r| r["type"] == "storage" && r["storage"] == "local-lvm")
    );
    let vm = arr.iter().find(|r| r["type"] == "qemu").unwrap();
    assert_eq!(vm["id"], "qemu/100");
    assert_eq!(vm["vmid"], json!(100));
    assert_eq!(vm["template"], json!(0));
    assert_eq!(vm["maxmem"], json!(2147483648u64));
    assert_eq!(vm["maxdisk"], json!(8589934592u64));
    assert_eq!(vm["tags"], "x");
    let list = t.get("/nodes/pve01/qemu", &[]).await;
    assert_eq!(list[0]["vmid"], json!(100));
    assert_eq!(list[0]["status"], "stopped");
    assert!(
        t.get("/nodes/pve02/qemu", &[])
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(t.get("/cluster/nextid", &[]).await, json!("101"));
}

#[tokio::test]
async fn scale_ten_thousand_vms() {
    let t = T::with(SimConfig {
        nodes: (1..=10).map(|i| format!("pve{i:02}")).collect(),
        tls: false,
        ..SimConfig::default()
    })
    .await;
    t.sim.populate(10_000);
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert_eq!(res.as_array().unwrap().len(), 10_000);
}

/// A fault rule on the start endpoint fails the start a create with `start=1` makes (PVE's
/// create calls `vm_start` itself): a warning, the VM created and stopped; once the rule is
/// used up, the create starts the VM.
#[tokio::test]
async fn a_start_fault_fails_the_start_of_a_create_not_the_create() {
    let t = T::new().await;
    t.sim.set_faults(vec![crate::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/status/start".into(),
        kind: crate::FaultKind::FailTask {
            message: "start failed: injected".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    let create = |vmid: &'static str| [("vmid", vmid), ("memory", "512"), ("start", "1")];
    let upid = t.upid("POST", "/nodes/pve01/qemu", &create("100")).await;
    assert_eq!(t.wait(&upid).await, "WARNINGS: 1");
    assert_eq!(t.sim.vm_status(100).unwrap(), "stopped");
    let log = t
        .get(&format!("/nodes/pve01/tasks/{}/log", enc(&upid)), &[])
        .await;
    let lines: Vec<&str> = log
        .as_array()
        .expect("log lines")
        .iter()
        .filter_map(|l| l["t"].as_str())
        .collect();
    assert!(lines.contains(&"WARN: start failed: injected"), "{lines:?}");
    let exit = t.task("POST", "/nodes/pve01/qemu", &create("101")).await;
    assert_eq!(exit, "OK");
    assert_eq!(t.sim.vm_status(101).unwrap(), "running");
}

#[tokio::test]
async fn failed_start_after_create_is_a_warning() {
    let t = T::new().await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "100"), ("template", "1"), ("start", "1")],
        )
        .await;
    assert_eq!(exit, "WARNINGS: 1");
    assert_eq!(t.sim.vm_status(100).unwrap(), "stopped");
    t.check(
        "POST",
        "/nodes/pve01/qemu/100/clone",
        &[("newid", "101"), ("snapname", "s1")],
        500,
        "snapshot 's1' does not exist",
    )
    .await;
}

/// The guest agent (`agent/ping`), as qemu-server's `assert_agent_available` answers: the VM
/// must run and have `agent` on, and the agent answers once the guest booted
/// (`agent_boot`, whole seconds after the start).
#[tokio::test]
async fn the_guest_agent_answers_a_running_vm_with_agent_on_after_its_boot() {
    let t = T::with(crate::SimConfig {
        agent_boot: std::time::Duration::from_millis(1500),
        ..crate::SimConfig::default()
    })
    .await;
    let ping = "/nodes/pve01/qemu/100/agent/ping";
    t.task("POST", "/nodes/pve01/qemu", &[("vmid", "100")])
        .await;
    t.task(
        "POST",
        "/nodes/pve01/qemu",
        &[
            ("vmid", "101"),
            ("agent", "enabled=1,fstrim_cloned_disks=1"),
        ],
    )
    .await;
    t.check("POST", ping, &[], 500, "VM 100 is not running")
        .await;
    t.task("POST", "/nodes/pve01/qemu/100/status/start", &[])
        .await;
    t.check("POST", ping, &[], 500, "No QEMU guest agent configured")
        .await;
    // Turned on while it runs, the agent waits for the next start (its device is added then).
    t.req("PUT", "/nodes/pve01/qemu/100/config", &[("agent", "1")])
        .await;
    t.check("POST", ping, &[], 500, "No QEMU guest agent configured")
        .await;
    let ping = "/nodes/pve01/qemu/101/agent/ping";
    t.task("POST", "/nodes/pve01/qemu/101/status/start", &[])
        .await;
    t.check("POST", ping, &[], 500, "QEMU guest agent is not running")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (status, body) = t.req("POST", ping, &[]).await;
    assert_eq!(
        (status, &body["data"]),
        (200, &json!({"result": {}})),
        "{body}"
    );
}
