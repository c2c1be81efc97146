//! Guest migration over HTTP: what `migrate` refuses before its task and in it, with qemu-server's and
//! pve-container's messages; what it moves (config, local volumes; shared ones stay); the preconditions answer;
//! an HA-managed guest's `hamigrate`.

use super::T;
use super::ha::cluster;
use crate::{PciMapping, StorageConfig};

const M: &str = "/nodes/pve01/qemu/100/migrate";

/// The ha cluster plus `pve01-only` (a storage restricted to pve01) and a GPU mapped on pve01 only.
fn config() -> crate::SimConfig {
    let mut c = cluster();
    let mut only = StorageConfig::new("pve01-only", "lvmthin", &["images"]);
    only.nodes = Some(vec!["pve01".into()]);
    c.storages.push(only);
    c.pci_mappings = vec![PciMapping {
        id: "gpu".into(),
        description: String::new(),
        map: vec!["node=pve01,path=0000:01:00.0,id=10de:2204".into()],
    }];
    c
}

#[tokio::test]
async fn migrate_refuses_what_pve_refuses_before_the_task() {
    let t = T::with(config()).await;
    t.vm_on("pve01", 100, "local-lvm").await;
    t.vm_on("pve01", 101, "pve01-only").await;
    assert_eq!(
        t.task("POST", "/nodes/pve01/qemu/100/status/start", &[])
            .await,
        "OK"
    );
    // (path, parameters, status, fragment)
    let cases: &[(&str, super::P, u16, &str)] = &[
        (M, &[("target", "pve01")], 400, "target is local node."),
        (
            M,
            &[("target", "pve09")],
            500,
            "no such cluster node 'pve09'",
        ),
        (
            M,
            &[("target", "pve02")],
            500,
            "can't migrate running VM without --online",
        ),
        (
            M,
            &[("target", "pve02"), ("online", "1"), ("force", "1")],
            400,
            "Only root may use this option.",
        ),
        (
            "/nodes/pve01/qemu/101/migrate",
            &[("target", "pve02")],
            500,
            "storage 'pve01-only' is not available on node 'pve02'",
        ),
        (
            "/nodes/pve01/qemu/102/migrate",
            &[("target", "pve02")],
            500,
            "Configuration file 'nodes/pve01/qemu-server/102.conf' does not exist",
        ),
    ];
    for (path, params, status, fragment) in cases {
        t.check("POST", path, params, *status, fragment).await;
    }
    t.sim
        .sim
        .write()
        .vms
        .get_mut(&101)
        .unwrap()
        .conf
        .insert("lock".into(), "backup".into());
    t.check(
        "POST",
        "/nodes/pve01/qemu/101/migrate",
        &[("target", "pve02")],
        500,
        "VM is locked (backup)",
    )
    .await;
}

#[tokio::test]
async fn migrate_tasks_fail_as_qemu_migrate_does() {
    let t = T::with(config()).await;
    t.add_volume("pve01", "local:iso/debian.iso", "iso", 1 << 20);
    t.vm_on("pve01", 100, "local-lvm").await;
    t.vm_on("pve01", 101, "ceph").await;
    t.vm_on("pve01", 102, "ceph").await;
    t.vm_on("pve01", 103, "ceph").await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/101/config",
        &[("ide2", "local:iso/debian.iso,media=cdrom")],
        200,
        "null",
    )
    .await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/103/config",
        &[("hostpci0", "mapping=gpu")],
        200,
        "null",
    )
    .await;
    t.sim
        .sim
        .write()
        .vms
        .get_mut(&102)
        .unwrap()
        .conf
        .insert("hostpci0".into(), "0000:01:00.0".into());
    assert_eq!(
        t.task("POST", "/nodes/pve01/qemu/100/status/start", &[])
            .await,
        "OK"
    );
    t.sim.set_node_online("pve03", false).unwrap();
    // (vmid, parameters, a line of the task log)
    let cases: &[(u32, super::P, &str)] = &[
        (
            100,
            &[("target", "pve02"), ("online", "1")],
            "can't migrate local disk 'local-lvm:vm-100-disk-0': can't live migrate attached local disks without with-local-disks option",
        ),
        (
            101,
            &[("target", "pve02")],
            "can't migrate local disk 'local:iso/debian.iso': local cdrom image",
        ),
        (
            102,
            &[("target", "pve02")],
            "ERROR: migration aborted (duration 00:00:00): can't migrate VM which uses local devices: hostpci0",
        ),
        (
            103,
            &[("target", "pve02")],
            "ERROR: migration aborted (duration 00:00:00): can't migrate to 'pve02': missing mapped devices hostpci0",
        ),
        (
            100,
            &[
                ("target", "pve03"),
                ("online", "1"),
                ("with-local-disks", "1"),
            ],
            "ERROR: migration aborted (duration 00:00:00): Can't connect to destination address using public key",
        ),
    ];
    for (vmid, params, line) in cases {
        let upid = t
            .upid("POST", &format!("/nodes/pve01/qemu/{vmid}/migrate"), params)
            .await;
        assert!(upid.contains(&format!(":qmigrate:{vmid}:")), "{upid}");
        assert_eq!(
            t.wait(&upid).await,
            "migration aborted",
            "{vmid} {params:?}"
        );
        let log = t.task_log(&upid).await;
        assert!(
            log.iter().any(|l| l == line),
            "{vmid}: {line:?} not in {log:?}"
        );
        assert_eq!(t.sim.guest_node(*vmid).as_deref(), Some("pve01"));
    }
}

#[tokio::test]
async fn migrate_moves_the_config_and_the_local_volumes() {
    let t = T::with(config()).await;
    t.vm_on("pve01", 100, "local-lvm").await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/100/config",
        &[("scsi1", "ceph:1")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", "/nodes/pve01/qemu/100/status/start", &[])
            .await,
        "OK"
    );
    let pre = t.get(M, &[("target", "pve02")]).await;
    assert_eq!(pre["running"], 1);
    assert_eq!(pre["allowed_nodes"], serde_json::json!(["pve02", "pve03"]));
    let disks = pre["local_disks"].as_array().unwrap();
    assert_eq!(disks.len(), 1, "{pre}");
    assert_eq!(disks[0]["volid"], "local-lvm:vm-100-disk-0");
    assert_eq!(disks[0]["size"], 1u64 << 30);
    assert_eq!(pre["local_resources"], serde_json::json!([]));
    let exit = t
        .task(
            "POST",
            M,
            &[
                ("target", "pve02"),
                ("online", "1"),
                ("with-local-disks", "1"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(t.sim.guest_node(100).as_deref(), Some("pve02"));
    assert_eq!(t.sim.vm_status(100).as_deref(), Some("running"));
    let on = |node: &str| {
        let st = t.sim.sim.read();
        st.volumes
            .values()
            .filter(|v| v.node == node)
            .map(|v| v.volid.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(on("pve02"), vec!["local-lvm:vm-100-disk-0".to_string()]);
    assert!(on("pve01").is_empty());
    assert_eq!(on("*"), vec!["ceph:vm-100-disk-0".to_string()]);
    t.check(
        "GET",
        M,
        &[],
        500,
        "Configuration file 'nodes/pve01/qemu-server/100.conf' does not exist",
    )
    .await;
    // Offline to another storage with a storage map.
    assert_eq!(
        t.task("POST", "/nodes/pve02/qemu/100/status/stop", &[])
            .await,
        "OK"
    );
    let exit = t
        .task(
            "POST",
            "/nodes/pve02/qemu/100/migrate",
            &[
                ("target", "pve01"),
                ("targetstorage", "local-lvm:pve01-only"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(
        t.sim.vm_config(100).unwrap()["scsi0"],
        "pve01-only:vm-100-disk-0,size=1G"
    );
}

#[tokio::test]
async fn containers_migrate_in_restart_mode() {
    let config = crate::SimConfig {
        volumes: vec![crate::VolumeSeed::new(
            "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
        )],
        ..config()
    };
    let t = T::with(config).await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                (
                    "ostemplate",
                    "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
                ),
                ("rootfs", "local-lvm:1"),
                ("start", "1"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    t.check(
        "POST",
        "/nodes/pve01/lxc/200/migrate",
        &[("target", "pve02")],
        500,
        "can't migrate running container without --online or --restart",
    )
    .await;
    let upid = t
        .upid(
            "POST",
            "/nodes/pve01/lxc/200/migrate",
            &[("target", "pve02"), ("online", "1")],
        )
        .await;
    assert_eq!(t.wait(&upid).await, "migration aborted");
    assert!(
        t.task_log(&upid)
            .await
            .iter()
            .any(|l| l.ends_with("lxc live migration is currently not implemented"))
    );
    let upid = t
        .upid(
            "POST",
            "/nodes/pve01/lxc/200/migrate",
            &[("target", "pve02"), ("restart", "1")],
        )
        .await;
    assert!(upid.contains(":vzmigrate:200:"), "{upid}");
    assert_eq!(t.wait(&upid).await, "OK");
    assert_eq!(t.sim.guest_node(200).as_deref(), Some("pve02"));
    assert_eq!(t.sim.ct_status(200).as_deref(), Some("running"));
}

#[tokio::test]
async fn an_ha_guest_migrates_through_ha() {
    let t = T::with(config()).await;
    t.vm_on("pve01", 100, "ceph").await;
    t.check(
        "POST",
        "/cluster/ha/resources",
        &[("sid", "vm:100")],
        200,
        "null",
    )
    .await;
    t.until("vm:100 runs", |t| {
        t.sim.vm_status(100).as_deref() == Some("running")
    })
    .await;
    let upid = t
        .upid("POST", M, &[("target", "pve03"), ("online", "1")])
        .await;
    assert!(upid.contains(":hamigrate:100:"), "{upid}");
    assert_eq!(t.wait(&upid).await, "OK");
    assert!(
        t.task_log(&upid)
            .await
            .contains(&"Requesting HA migration for VM 100 to node pve03".to_string())
    );
    t.until("vm:100 on pve03", |t| {
        t.sim.guest_node(100).as_deref() == Some("pve03")
    })
    .await;
    assert_eq!(t.sim.vm_status(100).as_deref(), Some("running"));
    // The HA API's own migrate request, back.
    let answer = t
        .get_post("/cluster/ha/resources/vm:100/migrate", &[("node", "pve01")])
        .await;
    assert_eq!(answer["requested-node"], "pve01");
    t.until("vm:100 back on pve01", |t| {
        t.sim.guest_node(100).as_deref() == Some("pve01")
    })
    .await;
}

impl T {
    async fn get_post(&self, path: &str, params: super::P<'_>) -> serde_json::Value {
        let (s, b) = self.req("POST", path, params).await;
        assert_eq!(s, 200, "POST {path}: {b}");
        b["data"].clone()
    }
}
