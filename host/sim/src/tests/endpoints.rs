//! Endpoints real clients use beyond proxops's own: indexes, task lists, unlink, reset/suspend/resume, storage
//! status, PCI mappings; and the start-time refusals (missing volumes, unknown mappings).

use serde_json::{Value, json};

use super::T;
use crate::{PciMapping, SimConfig};

const VM: &str = "/nodes/pve01/qemu/100";

/// The names an index lists under `key`.
async fn names(t: &T, path: &str, key: &str) -> Vec<String> {
    t.get(path, &[])
        .await
        .as_array()
        .expect("index")
        .iter()
        .map(|e| e[key].as_str().expect("name").to_string())
        .collect()
}

#[tokio::test]
async fn indexes_list_only_what_is_served() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "/",
            "subdir",
            &["version", "cluster", "nodes", "storage", "pools", "access"],
        ),
        // PVE lists `ticket`, `password`, `permissions`, `tfa`, `openid` and `vncticket` too.
        (
            "/access",
            "subdir",
            &["users", "groups", "roles", "acl", "domains"],
        ),
        (
            "/cluster",
            "name",
            &[
                "resources",
                "nextid",
                "tasks",
                "status",
                "backup",
                "mapping",
                "ha",
                "firewall",
            ],
        ),
        // PVE lists `dir` too, which the simulator does not serve.
        ("/cluster/mapping", "name", &["pci", "usb"]),
        ("/nodes/pve01", "name", &["qemu", "tasks", "storage", "lxc"]),
        (
            VM,
            "subdir",
            &[
                "config", "pending", "snapshot", "unlink", "clone", "template", "status", "resize",
                "migrate", "firewall",
            ],
        ),
        (
            "/nodes/pve01/qemu/100/firewall",
            "name",
            &["options", "rules", "aliases", "ipset"],
        ),
        ("/cluster/firewall", "name", &["groups", "aliases", "ipset"]),
        (
            "/nodes/pve01/qemu/100/status",
            "subdir",
            &[
                "current", "start", "stop", "shutdown", "reboot", "reset", "suspend", "resume",
            ],
        ),
        (
            "/nodes/pve01/storage/local",
            "subdir",
            &["status", "content", "download-url"],
        ),
    ];
    for (path, key, expected) in cases {
        let got = names(&t, path, key).await;
        assert_eq!(got, *expected, "{path}");
        // Every entry is served; the readable ones answer.
        for child in got {
            let base = if *path == "/" { "" } else { path };
            let full = format!("{base}/{child}");
            let segments: Vec<&str> = full.split('/').filter(|s| !s.is_empty()).collect();
            let (template, _) = crate::server::route(&segments).expect("routed");
            let methods = ["GET", "POST", "PUT", "DELETE"];
            assert!(
                methods.iter().any(|m| crate::server::served(m, template)),
                "{full}"
            );
            if crate::server::served("GET", template) {
                let (status, body) = t.req("GET", &full, &[]).await;
                assert_eq!(status, 200, "{full}: {body}");
            }
        }
    }
}

#[tokio::test]
async fn node_task_list_filters_as_pve() {
    let t = T::new().await;
    t.create(100, &[]).await;
    t.create(101, &[]).await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    let failed = t.task("POST", &format!("{VM}/status/start"), &[]).await;
    assert_eq!(failed, "VM 100 already running");
    let tasks = "/nodes/pve01/tasks";
    let check = |params: &'static [(&'static str, &'static str)],
                 expected: &'static [&'static str]| {
        let t = &t;
        async move {
            let (status, body) = t.req("GET", tasks, params).await;
            assert_eq!(status, 200, "{params:?}: {body}");
            let got: Vec<String> = body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{}:{}",
                        e["type"].as_str().unwrap(),
                        e["id"].as_str().unwrap()
                    )
                })
                .collect();
            assert_eq!(got, expected, "{params:?}");
            body["total"].as_u64().unwrap()
        }
    };
    // Newest first.
    let total = check(
        &[],
        &["qmstart:100", "qmstart:100", "qmcreate:101", "qmcreate:100"],
    )
    .await;
    assert_eq!(total, 4);
    check(&[("vmid", "101")], &["qmcreate:101"]).await;
    check(
        &[("typefilter", "qmstart")],
        &["qmstart:100", "qmstart:100"],
    )
    .await;
    check(&[("errors", "1")], &["qmstart:100"]).await;
    check(
        &[("statusfilter", "ok")],
        &["qmstart:100", "qmcreate:101", "qmcreate:100"],
    )
    .await;
    check(
        &[("userfilter", "ROOT@pam")],
        &["qmstart:100", "qmstart:100", "qmcreate:101", "qmcreate:100"],
    )
    .await;
    check(&[("userfilter", "alice")], &[]).await;
    check(&[("source", "active")], &[]).await;
    let total = check(
        &[("start", "1"), ("limit", "2")],
        &["qmstart:100", "qmcreate:101"],
    )
    .await;
    assert_eq!(total, 4);
    check(
        &[("source", "all"), ("vmid", "100"), ("limit", "1")],
        &["qmstart:100"],
    )
    .await;
    let entry = &t.get(tasks, &[("limit", "1")]).await[0];
    assert_eq!(entry["status"], "VM 100 already running");
    assert_eq!(
        (entry["user"].as_str(), entry["tokenid"].as_str()),
        (Some("root@pam"), Some("proxops"))
    );
    assert!(entry["endtime"].as_u64().unwrap() >= entry["starttime"].as_u64().unwrap());
    t.check(
        "GET",
        tasks,
        &[("vmid", "42")],
        400,
        "value does not look like a valid VM ID",
    )
    .await;
    t.check(
        "GET",
        tasks,
        &[("source", "recent")],
        400,
        "does not have a value in the enumeration",
    )
    .await;
    t.check(
        "GET",
        tasks,
        &[("statusfilter", "ok,bogus")],
        400,
        "invalid format - invalid status 'bogus'",
    )
    .await;
    let cluster = t.get("/cluster/tasks", &[]).await;
    assert_eq!(cluster.as_array().unwrap().len(), 4);
    assert!(
        cluster[0]["upid"]
            .as_str()
            .unwrap()
            .starts_with("UPID:pve01:")
    );
    assert!(
        t.get("/nodes/pve02/tasks", &[])
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn unlink_detaches_or_destroys_disks_like_a_config_delete() {
    let t = T::new().await;
    t.create(100, &[("scsi0", "local-lvm:1"), ("scsi1", "local-lvm:1")])
        .await;
    t.check(
        "PUT",
        &format!("{VM}/unlink"),
        &[("idlist", "scsi0")],
        200,
        "null",
    )
    .await;
    let conf = t.config(100).await;
    assert!(conf.get("scsi0").is_none(), "{conf}");
    assert_eq!(conf["unused0"], "local-lvm:vm-100-disk-0");
    t.check(
        "PUT",
        &format!("{VM}/unlink"),
        &[("idlist", "scsi1"), ("force", "1")],
        200,
        "null",
    )
    .await;
    let content = t.get("/nodes/pve01/storage/local-lvm/content", &[]).await;
    let volids: Vec<&str> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(volids, ["local-lvm:vm-100-disk-0"]);
    t.check(
        "PUT",
        &format!("{VM}/unlink"),
        &[],
        400,
        "property is missing and it is not optional",
    )
    .await;
}

#[tokio::test]
async fn reset_suspend_resume() {
    let t = T::new().await;
    t.create(100, &[]).await;
    for action in ["reset", "suspend", "resume"] {
        t.check(
            "POST",
            &format!("{VM}/status/{action}"),
            &[],
            500,
            "VM 100 not running",
        )
        .await;
    }
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    let qmp = |v: Value| v["qmpstatus"].as_str().unwrap().to_string();
    let (_, b) = t.req("POST", &format!("{VM}/status/suspend"), &[]).await;
    let upid = b["data"].as_str().unwrap().to_string();
    assert!(upid.contains(":qmpause:100:"), "{upid}");
    assert_eq!(t.wait(&upid).await, "OK");
    assert_eq!(
        qmp(t.get(&format!("{VM}/status/current"), &[]).await),
        "paused"
    );
    assert_eq!(t.sim.vm_status(100).unwrap(), "running");
    assert_eq!(
        t.task("POST", &format!("{VM}/status/resume"), &[]).await,
        "OK"
    );
    assert_eq!(
        qmp(t.get(&format!("{VM}/status/current"), &[]).await),
        "running"
    );
    // Resuming a running guest is done at once, as PVE's vm_resume returns when QEMU already runs.
    assert_eq!(
        t.task("POST", &format!("{VM}/status/resume"), &[]).await,
        "OK"
    );
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("cores", "4")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/reset"), &[]).await,
        "OK"
    );
    // A reset is not a restart: pending changes stay pending.
    let pending = t.get(&format!("{VM}/pending"), &[]).await;
    let cores = pending
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "cores")
        .unwrap()
        .clone();
    assert_eq!(cores["pending"], "4", "{cores}");
    t.check(
        "POST",
        &format!("{VM}/status/suspend"),
        &[("todisk", "1")],
        500,
        "suspend to disk (hibernation) is not modelled by the simulator",
    )
    .await;
}

#[tokio::test]
async fn storage_status() {
    let t = T::new().await;
    t.create(100, &[("scsi0", "local-lvm:2")]).await;
    let st = t.get("/nodes/pve01/storage/local-lvm/status", &[]).await;
    assert_eq!(st["type"], "lvmthin");
    assert_eq!(st["used"], json!(2u64 * 1024 * 1024 * 1024));
    assert_eq!(st["content"], "images,rootdir");
    t.check(
        "GET",
        "/nodes/pve01/storage/nope/status",
        &[],
        400,
        "No such storage.",
    )
    .await;
}

fn gpu_cluster() -> SimConfig {
    SimConfig {
        pci_mappings: vec![PciMapping {
            id: "gpu".into(),
            description: "the GPU".into(),
            map: vec!["node=pve01,path=0000:01:00.0,id=10de:2204".into()],
        }],
        ..SimConfig::default()
    }
}

#[tokio::test]
async fn pci_mappings_are_listed_and_checked_per_node() {
    let t = T::with(gpu_cluster()).await;
    let list = t.get("/cluster/mapping/pci", &[]).await;
    assert_eq!(list[0]["id"], "gpu");
    assert_eq!(
        list[0]["map"][0],
        "node=pve01,path=0000:01:00.0,id=10de:2204"
    );
    assert_eq!(list[0]["digest"].as_str().unwrap().len(), 40);
    assert!(list[0].get("checks").is_none());
    let checked = t
        .get("/cluster/mapping/pci", &[("check-node", "pve02")])
        .await;
    assert_eq!(
        checked[0]["checks"][0]["message"],
        "No mapping for node pve02."
    );
    let checked = t
        .get("/cluster/mapping/pci", &[("check-node", "pve01")])
        .await;
    assert_eq!(checked[0]["checks"], json!([]));
}

#[tokio::test]
async fn an_api_token_may_attach_only_mapped_devices() {
    let t = T::with(gpu_cluster()).await;
    t.create(100, &[]).await;
    // The simulator's token is root@pam's, whose auth id is `root@pam!proxops`, not `root@pam`.
    let cases: &[(&str, u16, &str)] = &[
        (
            "0000:01:00.0",
            500,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
        (
            "host=0000:01:00.0,pcie=1",
            500,
            "only root can set 'hostpci0' config for non-mapped devices",
        ),
        (
            "mapping=gpu,romfile=x.rom",
            400,
            "only root@pam can set 'romfile' option",
        ),
        ("mapping=gpu,pcie=1", 200, "null"),
        ("mapping=nope", 200, "null"),
    ];
    for (value, status, fragment) in cases {
        t.check(
            "PUT",
            &format!("{VM}/config"),
            &[("hostpci0", value)],
            *status,
            fragment,
        )
        .await;
    }
    // The name is resolved at start, as PVE's config_to_command does.
    let exit = t.task("POST", &format!("{VM}/status/start"), &[]).await;
    assert_eq!(exit, "PCI device mapping not found for 'nope'");
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("hostpci0", "mapping=gpu")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
}

#[tokio::test]
async fn a_guest_whose_disk_or_iso_is_missing_does_not_start() {
    let t = T::new().await;
    // A volume that does not exist is refused by the create itself (`create_disks` activates
    // every existing volume, an ISO too), and one that exists gets its size recorded.
    assert_eq!(
        t.task(
            "POST",
            "/nodes/pve01/qemu",
            &[
                ("vmid", "100"),
                ("ide2", "local:iso/missing.iso,media=cdrom")
            ],
        )
        .await,
        "unable to create VM 100 - volume 'local:iso/missing.iso' does not exist"
    );
    assert!(t.sim.vm_config(100).is_none());
    t.add_volume("pve01", "local:iso/missing.iso", "iso", 600 << 20);
    t.create(100, &[("ide2", "local:iso/missing.iso,media=cdrom")])
        .await;
    assert_eq!(
        t.config(100).await["ide2"],
        "local:iso/missing.iso,media=cdrom,size=600M"
    );
    assert_eq!(t.task("DELETE", VM, &[]).await, "OK");
    // (drive key, value, how the volume goes missing, the start task's error)
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        (
            "ide2",
            "local:iso/missing.iso,media=cdrom",
            Some("/nodes/pve01/storage/local/content/local:iso/missing.iso"),
            "volume 'local:iso/missing.iso' does not exist",
        ),
        (
            "scsi0",
            "local-lvm:1",
            Some("/nodes/pve01/storage/local-lvm/content/local-lvm:vm-100-disk-0"),
            "no such logical volume pve/vm-100-disk-0",
        ),
    ];
    for (key, value, delete, expected) in cases {
        t.create(100, &[(key, value)]).await;
        if let Some(path) = delete {
            assert_eq!(t.task("DELETE", path, &[]).await, "OK");
        }
        let exit = t.task("POST", &format!("{VM}/status/start"), &[]).await;
        assert_eq!(exit, *expected, "{key}={value}");
        assert_eq!(t.sim.vm_status(100).unwrap(), "stopped");
        assert_eq!(t.task("DELETE", VM, &[]).await, "OK");
    }
    // With the ISO present the same guest starts.
    t.create(
        100,
        &[("ide2", "none,media=cdrom"), ("scsi0", "local-lvm:1")],
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
}

/// `GET /cluster/status` as PVE answers it: a cluster entry only when there is more than one
/// node, then one entry per node, the answering node `local`; a node alone has node id 0.
#[tokio::test]
async fn cluster_status_lists_the_cluster_and_its_nodes() {
    async fn check(nodes: &[&str], expected: Value) {
        let t = T::with(SimConfig {
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            ..SimConfig::default()
        })
        .await;
        assert_eq!(t.get("/cluster/status", &[]).await, expected, "{nodes:?}");
    }
    check(
        &["pve01"],
        json!([{"type": "node", "id": "node/pve01", "name": "pve01", "nodeid": 0,
                "ip": "192.0.2.1", "online": 1, "local": 1, "level": ""}]),
    )
    .await;
    check(
        &["a", "b"],
        json!([
            {"type": "cluster", "id": "cluster", "name": "sim", "nodes": 2, "quorate": 1,
             "version": 2},
            {"type": "node", "id": "node/a", "name": "a", "nodeid": 1, "ip": "192.0.2.1",
             "online": 1, "local": 1, "level": ""},
            {"type": "node", "id": "node/b", "name": "b", "nodeid": 2, "ip": "192.0.2.2",
             "online": 1, "local": 0, "level": ""},
        ]),
    )
    .await;
}

/// The snapshot list of a guest is PVE's `current` entry alone (the simulator takes no
/// snapshots): its digest is the config's, `running` follows the guest; a missing guest is
/// PVE's 500.
#[tokio::test]
async fn snapshot_list_is_the_current_state() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let current = |running: u8, digest: &Value| {
        json!([{"name": "current", "description": "You are here!", "digest": digest,
                "running": running}])
    };
    let digest = t.get(&format!("{VM}/config"), &[]).await["digest"].clone();
    assert_eq!(
        t.get(&format!("{VM}/snapshot"), &[]).await,
        current(0, &digest)
    );
    assert_eq!(
        t.task("POST", &format!("{VM}/status/start"), &[]).await,
        "OK"
    );
    assert_eq!(
        t.get(&format!("{VM}/snapshot"), &[]).await,
        current(1, &digest)
    );
    let (status, body) = t.req("GET", "/nodes/pve01/qemu/999/snapshot", &[]).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(
        body["message"],
        "Configuration file 'nodes/pve01/qemu-server/999.conf' does not exist\n"
    );
}

/// A multipart body (how Ansible's proxmox_template uploads a file) is taken on the upload
/// endpoint only, as pveproxy does; the simulator does not serve uploads, so it answers 501
/// there as for any path it does not serve, and 506 on every other path.
#[tokio::test]
async fn a_multipart_body_is_taken_on_the_upload_path_only() {
    let t = T::new().await;
    let body =
        "--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--XyZ--\r\n";
    for (path, status, says) in [
        ("/nodes/pve01/storage/local/upload", 501, "not implemented"),
        ("/nodes/pve01/qemu", 506, "upload 'Content-Type"),
    ] {
        let resp = t
            .client
            .post(t.url(path))
            .header("Authorization", format!("PVEAPIToken={}", t.sim.token()))
            .header("Content-Type", "multipart/form-data; boundary=XyZ")
            .body(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(resp.status().as_u16(), status, "{path}");
        let reason = resp
            .status()
            .canonical_reason()
            .unwrap_or_default()
            .to_string();
        let text = resp.text().await.unwrap_or_default();
        assert!(
            text.contains(says) || reason.contains(says),
            "{path}: {text}"
        );
    }
}
