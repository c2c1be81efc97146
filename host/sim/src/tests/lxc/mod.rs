//! Containers over the served API: create, config with digest and pending, power, destroy, PVE's refusals, the
//! shared VMID pool, locks and unlock, checked against the simulator's state and request log.

use std::time::Duration;

use serde_json::{Value, json};

use super::{P, T};
use crate::SimConfig;

mod refusals;

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
const CT: &str = "/nodes/pve01/lxc/200";

/// The default cluster plus a Debian template on `local` on every node.
fn cluster() -> SimConfig {
    SimConfig::from_yaml_str(&format!("volumes:\n  - {{volid: '{TEMPLATE}'}}\n")).expect("yaml")
}

impl T {
    /// Creates container `vmid` on pve01 from the Debian template with the given extra parameters; asserts OK.
    async fn create_ct(&self, vmid: u32, extra: P<'_>) {
        let id = vmid.to_string();
        let mut p: Vec<(&str, &str)> = vec![("vmid", id.as_str()), ("ostemplate", TEMPLATE)];
        p.extend_from_slice(extra);
        let exit = self.task("POST", "/nodes/pve01/lxc", &p).await;
        assert_eq!(exit, "OK", "create CT {vmid}");
    }

    async fn ct_config(&self, vmid: u32, extra: P<'_>) -> Value {
        self.get(&format!("/nodes/pve01/lxc/{vmid}/config"), extra)
            .await
    }

    /// The container as the simulator's state holds it.
    fn ct_state(&self, vmid: u32) -> Value {
        self.sim.state_json()["lxc"][vmid.to_string()].clone()
    }

    fn volids(&self) -> Vec<String> {
        let st = self.sim.state_json();
        st["volumes"]
            .as_object()
            .expect("volumes")
            .values()
            .map(|v| v["volid"].as_str().unwrap_or("").to_string())
            .collect()
    }
}

#[tokio::test]
async fn create_stores_pve_defaults_allocates_volumes_and_never_stores_the_password() {
    let t = T::with(cluster()).await;
    t.create_ct(
        200,
        &[
            ("hostname", "web1"),
            ("cores", "2"),
            ("memory", "1024"),
            ("rootfs", "local-lvm:8"),
            ("mp0", "local-lvm:2,mp=/data,backup=1"),
            ("net0", "name=eth0,bridge=vmbr0,ip=dhcp"),
            (
                "net1",
                "name=eth1,bridge=vmbr1,hwaddr=BC:24:11:AA:BB:CC,ip=10.0.0.5/24,gw=10.0.0.1",
            ),
            ("features", "nesting=1"),
            ("tags", "web,Prod;web"),
            ("onboot", "1"),
            ("description", "line one\nline two"),
            ("password", "hunter22"),
            ("ssh-public-keys", "ssh-ed25519 AAAAC3Nza me@host"),
        ],
    )
    .await;
    let c = t.ct_config(200, &[]).await;
    let expected = [
        ("arch", json!("amd64")),
        ("cores", json!(2)),
        ("features", json!("nesting=1")),
        ("hostname", json!("web1")),
        ("memory", json!(1024)),
        (
            "mp0",
            json!("local-lvm:vm-200-disk-1,mp=/data,backup=1,size=2G"),
        ),
        ("onboot", json!(1)),
        ("ostype", json!("debian")),
        ("rootfs", json!("local-lvm:vm-200-disk-0,size=8G")),
        ("swap", json!(512)),
        ("tags", json!("prod;web")),
        ("unprivileged", json!(1)),
        ("description", json!("line one\nline two")),
        (
            "net1",
            json!(
                "name=eth1,bridge=vmbr1,gw=10.0.0.1,hwaddr=BC:24:11:AA:BB:CC,ip=10.0.0.5/24,type=veth"
            ),
        ),
    ];
    for (k, v) in &expected {
        assert_eq!(&c[k], v, "{k} in {c}");
    }
    let net0 = c["net0"].as_str().expect("net0");
    assert!(
        net0.starts_with("name=eth0,bridge=vmbr0,hwaddr=BC:24:11:"),
        "{net0}"
    );
    assert!(net0.ends_with(",ip=dhcp,type=veth"), "{net0}");
    assert_eq!(c["digest"].as_str().map(str::len), Some(40));
    for k in ["password", "ssh-public-keys", "ostemplate", "lock"] {
        assert!(c.get(k).is_none(), "{k} in {c}");
    }
    assert!(!t.sim.state_json().to_string().contains("hunter22"));
    // The volumes are the container's, with content rootdir.
    let content = t.get("/nodes/pve01/storage/local-lvm/content", &[]).await;
    let rows: Vec<(&str, &str, u64)> = content
        .as_array()
        .expect("content")
        .iter()
        .map(|v| {
            (
                v["volid"].as_str().unwrap_or(""),
                v["content"].as_str().unwrap_or(""),
                v["size"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("local-lvm:vm-200-disk-0", "rootdir", 8 << 30),
            ("local-lvm:vm-200-disk-1", "rootdir", 2 << 30),
        ]
    );
    assert_eq!(t.ct_state(200)["running"], json!(false));
    assert_eq!(t.sim.ct_status(200).as_deref(), Some("stopped"));
    let applied = t.sim.ct_config(200).expect("config");
    assert_eq!(applied["rootfs"], "local-lvm:vm-200-disk-0,size=8G");
    assert!(!applied.contains_key("password"));
    // The request log holds the create as sent.
    let log = t.sim.requests();
    let create = log
        .iter()
        .find(|r| r.method == "POST" && r.path == "/nodes/pve01/lxc")
        .expect("create logged");
    assert_eq!(create.status, 200);
    assert!(
        create
            .params
            .contains(&("rootfs".to_string(), "local-lvm:8".to_string()))
    );
}

#[tokio::test]
async fn defaults_without_optional_parameters_and_a_plain_rootfs_size() {
    let t = T::with(cluster()).await;
    t.create_ct(200, &[("rootfs", "3"), ("storage", "local-lvm")])
        .await;
    let c = t.ct_config(200, &[]).await;
    assert_eq!(c["hostname"], "CT200");
    assert_eq!(c["memory"], 512);
    assert_eq!(c["swap"], 512);
    assert_eq!(c["rootfs"], "local-lvm:vm-200-disk-0,size=3G");
    assert_eq!(c["unprivileged"], 1);
    // Only a create reads a bare size: an update refuses it and keeps the volume.
    t.check(
        "PUT",
        "/nodes/pve01/lxc/200/config",
        &[("rootfs", "4")],
        500,
        "unable to parse volume ID '4'",
    )
    .await;
    let c = t.ct_config(200, &[]).await;
    assert_eq!(c["rootfs"], "local-lvm:vm-200-disk-0,size=3G");
    assert!(c.get("unused0").is_none(), "{c}");
    // A privileged container is asked for explicitly; the key is then absent, as in PVE's config.
    t.create_ct(201, &[("rootfs", "local-lvm:1"), ("unprivileged", "0")])
        .await;
    assert!(t.ct_config(201, &[]).await.get("unprivileged").is_none());
}

#[tokio::test]
async fn lifecycle_digest_pending_power_and_destroy() {
    let t = T::with(cluster()).await;
    t.create_ct(
        200,
        &[
            ("rootfs", "local-lvm:4"),
            ("mp0", "local-lvm:1,mp=/data"),
            ("hostname", "app"),
        ],
    )
    .await;
    let digest = t.ct_config(200, &[]).await["digest"]
        .as_str()
        .expect("digest")
        .to_string();
    // (method, path suffix, params, status, fragment of the answer)
    type Case<'a> = (&'a str, &'a str, P<'a>, u16, &'a str);
    let cases: &[Case] = &[
        (
            "PUT",
            "/config",
            &[("memory", "2048"), ("digest", &digest)],
            200,
            "null",
        ),
        (
            "PUT",
            "/config",
            &[("memory", "1024"), ("digest", &digest)],
            500,
            "detected modified configuration - file changed by other user? Try again.",
        ),
        ("PUT", "/config", &[], 500, "no options specified"),
        ("POST", "/status/stop", &[], 500, "CT 200 not running"),
        ("POST", "/status/shutdown", &[], 500, "CT 200 not running"),
        ("POST", "/status/reboot", &[], 500, "VM 200 not running"),
    ];
    for (method, suffix, params, status, fragment) in cases {
        t.check(method, &format!("{CT}{suffix}"), params, *status, fragment)
            .await;
    }
    assert_eq!(t.ct_config(200, &[]).await["memory"], 2048);
    assert_eq!(
        t.task("POST", &format!("{CT}/status/start"), &[]).await,
        "OK"
    );
    t.check(
        "POST",
        &format!("{CT}/status/start"),
        &[],
        500,
        "CT 200 already running",
    )
    .await;
    let status = t.get(&format!("{CT}/status/current"), &[]).await;
    assert_eq!(status["status"], "running");
    assert_eq!(status["name"], "app");
    assert_eq!(status["maxmem"], json!(2048u64 << 20));
    assert_eq!(status["maxdisk"], json!(4u64 << 30));
    // Running: memory, cores, tags and the description apply at once; arch waits for the next start.
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[
            ("memory", "4096"),
            ("cores", "3"),
            ("tags", "b;a"),
            ("arch", "arm64"),
        ],
        200,
        "null",
    )
    .await;
    let current = t.ct_config(200, &[("current", "1")]).await;
    assert_eq!(current["memory"], 4096);
    assert_eq!(current["cores"], 3);
    assert_eq!(current["tags"], "a;b");
    assert_eq!(current["arch"], "amd64");
    assert_eq!(t.ct_config(200, &[]).await["arch"], "arm64");
    assert_eq!(t.ct_state(200)["pending"]["arch"], "arm64");
    let pending = t.get(&format!("{CT}/pending"), &[]).await;
    let arch = pending
        .as_array()
        .expect("pending rows")
        .iter()
        .find(|r| r["key"] == "arch")
        .expect("arch row")
        .clone();
    assert_eq!(
        arch,
        json!({"key": "arch", "value": "amd64", "pending": "arm64"})
    );
    // A stale digest is refused here too, and a revert drops the pending value.
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("revert", "arch"), ("digest", &digest)],
        500,
        "detected modified configuration",
    )
    .await;
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("revert", "arch")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.ct_config(200, &[]).await["arch"], "amd64");
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("swap", "0")],
        200,
        "null",
    )
    .await;
    // /cluster/resources and the node list show the container.
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    let entry = res
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["id"] == "lxc/200")
        .expect("lxc/200 listed")
        .clone();
    for (k, v) in [
        ("type", json!("lxc")),
        ("vmid", json!(200)),
        ("node", json!("pve01")),
        ("name", json!("app")),
        ("status", json!("running")),
        ("template", json!(0)),
        ("tags", json!("a;b")),
        ("maxmem", json!(4096u64 << 20)),
        ("maxdisk", json!(4u64 << 30)),
        ("maxcpu", json!(3)),
    ] {
        assert_eq!(entry[k], v, "{k} in {entry}");
    }
    assert!(entry.get("lock").is_none());
    let list = t.get("/nodes/pve01/lxc", &[]).await;
    assert_eq!(list[0]["vmid"], 200);
    assert_eq!(list[0]["maxswap"], 0);
    t.check(
        "DELETE",
        CT,
        &[],
        500,
        "unable to destroy CT 200 - container is running",
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{CT}/status/shutdown"), &[]).await,
        "OK"
    );
    assert_eq!(t.ct_state(200)["running"], json!(false));
    let upid = t
        .upid(
            "DELETE",
            CT,
            &[("purge", "1"), ("destroy-unreferenced-disks", "1")],
        )
        .await;
    assert_eq!(t.wait(&upid).await, "OK");
    assert!(upid.contains(":vzdestroy:200:"), "{upid}");
    assert_eq!(t.ct_state(200), Value::Null);
    assert!(
        t.volids().iter().all(|v| !v.contains("vm-200-")),
        "{:?}",
        t.volids()
    );
    t.check(
        "GET",
        &format!("{CT}/config"),
        &[],
        500,
        "Configuration file 'nodes/pve01/lxc/200.conf' does not exist",
    )
    .await;
}

#[tokio::test]
async fn pending_mount_point_and_deleted_volume_become_unused() {
    let t = T::with(cluster()).await;
    t.create_ct(
        200,
        &[("rootfs", "local-lvm:1"), ("mp0", "local-lvm:1,mp=/a")],
    )
    .await;
    assert_eq!(
        t.task("POST", &format!("{CT}/status/start"), &[]).await,
        "OK"
    );
    // A new mount point is hot-plugged into a running container; replacing an existing one waits.
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("mp1", "local-lvm:2,mp=/b")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.ct_config(200, &[("current", "1")]).await["mp1"],
        "local-lvm:vm-200-disk-2,mp=/b,size=2G"
    );
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("mp0", "local-lvm:3,mp=/a")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.ct_state(200)["pending"]["mp0"], "local-lvm:3,mp=/a");
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("delete", "mp1")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.ct_state(200)["pending_delete"]["mp1"], json!(false));
    // The stop applies what is pending (PVE's poststop hook).
    assert_eq!(
        t.task("POST", &format!("{CT}/status/stop"), &[]).await,
        "OK"
    );
    let c = t.ct_config(200, &[("current", "1")]).await;
    assert_eq!(c["mp0"], "local-lvm:vm-200-disk-3,mp=/a,size=3G");
    assert!(c.get("mp1").is_none(), "{c}");
    // PVE applies the pending deletes first: mp1's volume is unused0, mp0's replaced one unused1.
    assert_eq!(c["unused0"], "local-lvm:vm-200-disk-2");
    assert_eq!(c["unused1"], "local-lvm:vm-200-disk-1");
    assert!(
        t.ct_state(200)["pending"]
            .as_object()
            .is_some_and(|p| p.is_empty())
    );
}

#[tokio::test]
async fn the_vmid_pool_is_shared_with_vms_both_ways() {
    let t = T::with(cluster()).await;
    t.create(100, &[]).await;
    t.create_ct(200, &[("rootfs", "local-lvm:1")]).await;
    let cases: &[(&str, P<'_>, &str)] = &[
        (
            "/nodes/pve02/lxc",
            &[
                ("vmid", "100"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
            ],
            "VM 100 already exists on node 'pve01'",
        ),
        (
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
            ],
            "CT 200 already exists on node 'pve01'",
        ),
        (
            "/nodes/pve02/qemu",
            &[("vmid", "200")],
            "unable to create VM 200 - CT 200 already exists on node 'pve01'",
        ),
    ];
    for (path, params, fragment) in cases {
        t.check("POST", path, params, 500, fragment).await;
    }
    t.check(
        "GET",
        "/cluster/nextid",
        &[("vmid", "200")],
        400,
        "VM 200 already exists",
    )
    .await;
    assert_eq!(t.get("/cluster/nextid", &[]).await, json!("101"));
    // A container's endpoints do not serve a VM, nor a container on another node.
    for path in ["/nodes/pve01/lxc/100/config", "/nodes/pve02/lxc/200/config"] {
        t.check("GET", path, &[], 500, "does not exist").await;
    }
}

#[tokio::test]
async fn create_holds_lock_create_until_its_task_ends_and_can_start_the_container() {
    let t = T::with(SimConfig {
        task_duration: Duration::from_millis(300),
        lock_timeout: Duration::from_millis(50),
        ..cluster()
    })
    .await;
    let upid = t
        .upid(
            "POST",
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("start", "1"),
            ],
        )
        .await;
    assert_eq!(t.ct_config(200, &[]).await["lock"], "create");
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert_eq!(res[0]["lock"], "create", "{res}");
    // A config write waits for the create task's config lock, as PVE's does, and gives up.
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("cores", "2")],
        500,
        "can't lock file '/run/lock/lxc/pve-config-200.lock' - got timeout",
    )
    .await;
    t.check("DELETE", CT, &[], 500, "CT is locked (create)")
        .await;
    assert_eq!(t.wait(&upid).await, "OK");
    let c = t.ct_config(200, &[]).await;
    assert!(c.get("lock").is_none(), "{c}");
    assert_eq!(
        t.get(&format!("{CT}/status/current"), &[]).await["status"],
        "running"
    );
}

#[tokio::test]
async fn indexes_list_served_children() {
    let t = T::with(cluster()).await;
    t.create_ct(200, &[("rootfs", "local-lvm:1")]).await;
    let subdirs = |v: Value| -> Vec<String> {
        v.as_array()
            .expect("index")
            .iter()
            .map(|e| e["subdir"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        subdirs(t.get(CT, &[]).await),
        vec!["config", "pending", "status", "migrate", "firewall"]
    );
    assert_eq!(
        subdirs(t.get(&format!("{CT}/status"), &[]).await),
        vec!["current", "start", "stop", "shutdown", "reboot"]
    );
}

#[tokio::test]
async fn seeded_containers_and_volumes_come_from_the_cluster_yaml() {
    let config = SimConfig::from_yaml_str(
        "lxc:\n  - {vmid: 300, node: pve02, name: legacy, running: true}\nvolumes:\n  - {volid: 'local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz', node: pve02}\n  - {volid: 'local:iso/x.iso', size: 1024}\n",
    )
    .expect("yaml");
    let t = T::with(config).await;
    let c = t.get("/nodes/pve02/lxc/300/config", &[]).await;
    assert_eq!(c["hostname"], "legacy");
    assert_eq!(c["cores"], 1);
    assert_eq!(c["rootfs"], "local-lvm:vm-300-disk-0,size=8G");
    let vztmpl = t
        .get(
            "/nodes/pve02/storage/local/content",
            &[("content", "vztmpl")],
        )
        .await;
    assert_eq!(
        vztmpl[0]["volid"],
        "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz"
    );
    assert!(
        t.get(
            "/nodes/pve01/storage/local/content",
            &[("content", "vztmpl")]
        )
        .await
        .as_array()
        .is_some_and(|a| a.is_empty())
    );
    assert_eq!(
        t.get("/nodes/pve01/storage/local/content", &[("content", "iso")])
            .await[0]["size"],
        1024
    );
    // The template's ostype is detected from its name.
    let exit = t
        .task(
            "POST",
            "/nodes/pve02/lxc",
            &[
                ("vmid", "301"),
                (
                    "ostemplate",
                    "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz",
                ),
                ("rootfs", "local-lvm:1"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(
        t.get("/nodes/pve02/lxc/301/config", &[]).await["ostype"],
        "alpine"
    );
    // Volumes the storage cannot hold are refused with what to do.
    for (yaml, fragment) in [
        (
            "volumes:\n  - {volid: 'local-lvm:vztmpl/x.tar.zst'}\n",
            "does not hold content type 'vztmpl'",
        ),
        (
            "volumes:\n  - {volid: 'nas:vztmpl/x.tar.zst'}\n",
            "no storage 'nas'",
        ),
        (
            "volumes:\n  - {volid: 'local:x.tar.zst'}\n",
            "must start with vztmpl/, iso/, import/ or snippets/",
        ),
        (
            "volumes:\n  - {volid: 'local:vztmpl/x.tar.zst', node: pve09}\n",
            "is not on node 'pve09'",
        ),
    ] {
        let err = SimConfig::from_yaml_str(yaml).unwrap_err().to_string();
        assert!(err.contains(fragment), "{yaml}: {err}");
    }
}

#[tokio::test]
async fn unlock_clears_a_containers_lock_left_by_a_simulator_stopped_mid_task() {
    let dir = std::env::temp_dir().join(format!("proxops-sim-ct-unlock-{}", std::process::id()));
    let file = dir.join("state.json");
    let _ = std::fs::remove_dir_all(&dir);
    {
        let t = T::with(SimConfig {
            state_file: Some(file.clone()),
            task_duration: Duration::from_secs(3600),
            ..cluster()
        })
        .await;
        t.upid(
            "POST",
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
            ],
        )
        .await;
    }
    let t = T::with(SimConfig {
        state_file: Some(file.clone()),
        ..cluster()
    })
    .await;
    t.check(
        "PUT",
        &format!("{CT}/config"),
        &[("cores", "2")],
        500,
        "CT is locked (create)",
    )
    .await;
    drop(t);
    assert!(crate::state_has_vm(&file, 200).unwrap());
    assert_eq!(
        crate::unlock(&file, 200).unwrap().as_deref(),
        Some("create")
    );
    assert_eq!(crate::unlock(&file, 200).unwrap(), None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_legacy_state_file_loads_its_container_stubs() {
    let dir = std::env::temp_dir().join(format!("proxops-sim-ct-legacy-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("state.json");
    std::fs::write(
        &file,
        r#"{"vms": {}, "lxc": {"300": {"node": "pve01", "name": "old", "running": true}}, "volumes": {}}"#,
    )
    .unwrap();
    let st = crate::state::State::load(&file, 0).expect("legacy state loads");
    let ct = &st.lxc[&300];
    assert_eq!(ct.conf["hostname"], "old");
    assert!(ct.running);
    assert!(crate::state_has_vm(&file, 300).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}
