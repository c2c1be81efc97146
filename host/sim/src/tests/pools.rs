//! Resource pools: `/pools` and `/pools/{poolid}` with PVE's checks and messages, membership through guest create,
//! clone and destroy, and the pools in `/cluster/resources`.

use serde_json::{Value, json};

use super::T;
use crate::SimConfig;

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// The default cluster plus a Debian template on `local` on every node.
fn cluster() -> SimConfig {
    SimConfig::from_yaml_str(&format!("volumes:\n  - {{volid: '{TEMPLATE}'}}\n")).expect("yaml")
}

/// `(type, id)` of a pool's members as `GET /pools?poolid=` lists them.
async fn members(t: &T, pool: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut p = vec![("poolid", pool)];
    p.extend_from_slice(extra);
    let list = t.get("/pools", &p).await;
    list[0]["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["type"].as_str().unwrap_or("").to_string(),
                m["id"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn pair(t: &str, id: &str) -> (String, String) {
    (t.to_string(), id.to_string())
}

#[tokio::test]
async fn pools_are_created_listed_read_and_refused_as_pve_does() {
    let t = T::new().await;
    assert_eq!(t.get("/pools", &[]).await, json!([]));
    t.check(
        "POST",
        "/pools",
        &[("poolid", "prod"), ("comment", "Production")],
        200,
        "null",
    )
    .await;
    t.check("POST", "/pools", &[("poolid", "dev")], 200, "null")
        .await;
    // PVE lists the pools sorted, each with its comment when it has one.
    assert_eq!(
        t.get("/pools", &[]).await,
        json!([{"poolid": "dev"}, {"poolid": "prod", "comment": "Production"}])
    );
    assert_eq!(t.sim.pools(), vec!["dev".to_string(), "prod".to_string()]);
    // PVE 9's read (`GET /pools?poolid=`) and the deprecated `GET /pools/{poolid}`.
    assert_eq!(
        t.get("/pools", &[("poolid", "prod")]).await,
        json!([{"poolid": "prod", "comment": "Production", "members": []}])
    );
    assert_eq!(
        t.get("/pools/prod", &[]).await,
        json!({"poolid": "prod", "comment": "Production", "members": []})
    );
    // Refusals (pve-manager PVE/API2/Pool.pm under `lock_user_config`'s prefix; verify_poolname as a format).
    let cases: &[(&str, &str, super::P, u16, &str)] = &[
        (
            "POST",
            "/pools",
            &[("poolid", "prod")],
            500,
            "create pool failed: pool 'prod' already exists\\n",
        ),
        (
            "POST",
            "/pools",
            &[("poolid", "1st")],
            500,
            "create pool failed: pool name must start with a letter\\n",
        ),
        (
            "POST",
            "/pools",
            &[("poolid", "nope/child")],
            500,
            "create pool failed: parent 'nope' of pool 'nope/child' does not exist\\n",
        ),
        (
            "POST",
            "/pools",
            &[("poolid", "a b")],
            400,
            "invalid format - pool name 'a b' contains invalid characters\\n",
        ),
        (
            "POST",
            "/pools",
            &[("poolid", "a/b/c/d")],
            400,
            "invalid format - pool name 'a/b/c/d' nested too deeply (max levels = 3)\\n",
        ),
        (
            "GET",
            "/pools",
            &[("poolid", "nope")],
            500,
            "pool 'nope' does not exist\\n",
        ),
        (
            "GET",
            "/pools/nope",
            &[],
            500,
            "pool 'nope' does not exist\\n",
        ),
        (
            "GET",
            "/pools",
            &[("type", "qemu")],
            400,
            "missing property required by 'type'",
        ),
        (
            "PUT",
            "/pools",
            &[("poolid", "nope")],
            500,
            "update pools failed: pool 'nope' does not exist\\n",
        ),
        (
            "DELETE",
            "/pools",
            &[("poolid", "nope")],
            500,
            "delete pool failed: pool 'nope' does not exist\\n",
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    // Nested pools: the parent must exist, and goes only once its children have.
    t.check("POST", "/pools", &[("poolid", "prod/web")], 200, "null")
        .await;
    t.check(
        "DELETE",
        "/pools",
        &[("poolid", "prod")],
        500,
        "delete pool failed: pool 'prod' is not empty (contains pool 'prod/web')\\n",
    )
    .await;
    t.check("DELETE", "/pools", &[("poolid", "prod/web")], 200, "null")
        .await;
    t.check("DELETE", "/pools/prod", &[], 200, "null").await;
    t.check("DELETE", "/pools", &[("poolid", "dev")], 200, "null")
        .await;
    assert!(t.sim.pools().is_empty());
    assert!(t.sim.state_json().get("pools").is_none());
}

#[tokio::test]
async fn members_are_added_moved_and_removed_by_update() {
    let t = T::new().await;
    t.create(100, &[]).await;
    t.create(101, &[]).await;
    for pool in ["a", "b"] {
        t.check("POST", "/pools", &[("poolid", pool)], 200, "null")
            .await;
    }
    t.check(
        "PUT",
        "/pools",
        &[
            ("poolid", "a"),
            ("vms", "100,101"),
            ("storage", "local"),
            ("comment", "A"),
        ],
        200,
        "null",
    )
    .await;
    assert_eq!(t.sim.guest_pool(100).as_deref(), Some("a"));
    assert_eq!(
        members(&t, "a", &[]).await,
        vec![
            pair("qemu", "qemu/100"),
            pair("qemu", "qemu/101"),
            pair("storage", "storage/pve01/local")
        ]
    );
    assert_eq!(
        members(&t, "a", &[("type", "storage")]).await,
        vec![pair("storage", "storage/pve01/local")]
    );
    assert_eq!(members(&t, "a", &[("type", "lxc")]).await, vec![]);
    let read = t.get("/pools/a", &[("type", "qemu")]).await;
    assert_eq!(read["comment"], "A");
    assert_eq!(read["members"][0]["vmid"], 100);
    assert_eq!(read["members"][0]["node"], "pve01");
    assert!(read["members"][0].get("pool").is_none());
    let cases: &[(&str, super::P, &str)] = &[
        (
            "/pools",
            &[("poolid", "a"), ("vms", "100")],
            "update pools failed: VM 100 is already a pool member\\n",
        ),
        (
            "/pools",
            &[("poolid", "b"), ("vms", "100")],
            "update pools failed: VM 100 belongs already to pool 'a' and 'allow-move' is not set\\n",
        ),
        (
            "/pools",
            &[("poolid", "b"), ("vms", "100"), ("delete", "1")],
            "update pools failed: VM 100 is not a pool member\\n",
        ),
        (
            "/pools",
            &[("poolid", "a"), ("storage", "local")],
            "update pools failed: Storage 'local' is already a pool member\\n",
        ),
        (
            "/pools/b",
            &[("storage", "local"), ("delete", "1")],
            "update pools failed: Storage 'local' is not a pool member\\n",
        ),
    ];
    for (path, params, message) in cases {
        t.check("PUT", path, params, 500, message).await;
    }
    // A refusal in the middle of a list changes nothing (PVE dies before it writes user.cfg).
    t.check(
        "PUT",
        "/pools",
        &[("poolid", "b"), ("vms", "101,100")],
        500,
        "belongs already to pool 'a'",
    )
    .await;
    assert_eq!(t.sim.guest_pool(101).as_deref(), Some("a"));
    // `allow-move` moves a guest from its pool.
    t.check(
        "PUT",
        "/pools/b",
        &[("vms", "100"), ("allow-move", "1")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.sim.guest_pool(100).as_deref(), Some("b"));
    assert_eq!(
        members(&t, "a", &[("type", "qemu")]).await,
        vec![pair("qemu", "qemu/101")]
    );
    // A pool with members is not deleted; `delete` takes them out.
    t.check(
        "DELETE",
        "/pools/a",
        &[],
        500,
        "delete pool failed: pool 'a' is not empty (contains VM 101)\\n",
    )
    .await;
    t.check(
        "PUT",
        "/pools",
        &[("poolid", "a"), ("vms", "101"), ("delete", "1")],
        200,
        "null",
    )
    .await;
    t.check(
        "DELETE",
        "/pools",
        &[("poolid", "a")],
        500,
        "delete pool failed: pool 'a' is not empty (contains storage 'local')\\n",
    )
    .await;
    t.check(
        "PUT",
        "/pools/a",
        &[("storage", "local"), ("delete", "1"), ("comment", "")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/pools/a", &[]).await,
        json!({"poolid": "a", "members": []})
    );
    t.check("DELETE", "/pools", &[("poolid", "a")], 200, "null")
        .await;
    assert_eq!(t.sim.guest_pool(101), None);
}

#[tokio::test]
async fn guests_join_their_pool_at_create_and_clone_and_leave_it_when_destroyed() {
    let t = T::with(cluster()).await;
    t.check("POST", "/pools", &[("poolid", "web")], 200, "null")
        .await;
    // An unknown pool is refused before anything is created (`check_pool_exist`: a permission exception).
    t.check(
        "POST",
        "/nodes/pve01/qemu",
        &[("vmid", "100"), ("pool", "nope")],
        403,
        "Permission check failed (pool 'nope' does not exist)\\n",
    )
    .await;
    assert_eq!(t.sim.vm_count(), 0);
    t.create(100, &[("pool", "web"), ("scsi0", "local-lvm:1")])
        .await;
    assert_eq!(t.sim.guest_pool(100).as_deref(), Some("web"));
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("pool", "web"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    t.check(
        "POST",
        "/nodes/pve01/lxc",
        &[("vmid", "201"), ("ostemplate", TEMPLATE), ("pool", "nope")],
        403,
        "Permission check failed (pool 'nope' does not exist)\\n",
    )
    .await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/qemu/100/clone",
            &[("newid", "102"), ("pool", "web")],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(
        members(&t, "web", &[]).await,
        vec![
            pair("qemu", "qemu/100"),
            pair("qemu", "qemu/102"),
            pair("lxc", "lxc/200")
        ]
    );
    // Destroying a guest takes it out of its pool (`remove_vm_access`), and the pool can go once it is empty.
    for (path, vmid) in [
        ("/nodes/pve01/qemu/100", 100),
        ("/nodes/pve01/qemu/102", 102),
        ("/nodes/pve01/lxc/200", 200),
    ] {
        assert_eq!(t.task("DELETE", path, &[]).await, "OK");
        assert_eq!(t.sim.guest_pool(vmid), None);
    }
    assert_eq!(members(&t, "web", &[]).await, vec![]);
    t.check("DELETE", "/pools", &[("poolid", "web")], 200, "null")
        .await;
}

#[tokio::test]
async fn cluster_resources_list_pools_first_and_the_pool_of_member_guests() {
    let t = T::with(cluster()).await;
    t.create(100, &[("memory", "1024"), ("cores", "2")]).await;
    t.create(101, &[]).await;
    let before = t.get("/cluster/resources", &[]).await;
    assert!(
        before
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e.get("pool").is_none() && e["type"] != "pool")
    );
    // A pool without members is listed (pve-manager: id `/pool/<id>`, with the slash).
    t.check("POST", "/pools", &[("poolid", "web")], 200, "null")
        .await;
    let with_pool = t.get("/cluster/resources", &[]).await;
    assert_eq!(
        with_pool[0],
        json!({"id": "/pool/web", "pool": "web", "type": "pool"})
    );
    assert_eq!(
        with_pool.as_array().unwrap().len(),
        before.as_array().unwrap().len() + 1
    );
    t.check(
        "PUT",
        "/pools",
        &[("poolid", "web"), ("vms", "100,200"), ("storage", "local")],
        200,
        "null",
    )
    .await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/lxc",
            &[
                ("vmid", "200"),
                ("ostemplate", TEMPLATE),
                ("rootfs", "local-lvm:1"),
                ("memory", "256"),
                ("cores", "1"),
                ("start", "1"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(
        t.task("POST", "/nodes/pve01/qemu/100/status/start", &[])
            .await,
        "OK"
    );
    let all = t.get("/cluster/resources", &[]).await;
    let find = |id: &str| -> Value {
        all.as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(find("qemu/100")["pool"], "web");
    assert!(find("qemu/101").get("pool").is_none());
    assert_eq!(find("lxc/200")["pool"], "web");
    // Storages carry no `pool` in /cluster/resources (extract_storage_stats has none).
    assert!(find("storage/pve01/local").get("pool").is_none());
    // The running members' sums: 1 GiB + 256 MiB, 2 + 1 CPUs.
    let pool = find("/pool/web");
    assert_eq!(pool["maxmem"], 1280u64 * 1024 * 1024);
    assert_eq!(pool["maxcpu"], 3);
    assert_eq!(pool["mem"], 0);
    assert!(pool["uptime"].is_u64());
    // `type` filters leave the pools out (its enum has no `pool`); members keep their `pool`.
    let vms = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert!(vms.as_array().unwrap().iter().all(|e| e["type"] != "pool"));
    assert!(vms.as_array().unwrap().iter().any(|e| e["pool"] == "web"));
    let storages = t.get("/cluster/resources", &[("type", "storage")]).await;
    assert!(
        storages
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["type"] == "storage")
    );
}

#[tokio::test]
async fn pools_survive_a_restart_on_the_state_file() {
    let dir = std::env::temp_dir().join(format!("proxops-sim-pools-{}", std::process::id()));
    let state_file = dir.join("state.json");
    let _ = std::fs::remove_file(&state_file);
    let config = SimConfig {
        state_file: Some(state_file.clone()),
        ..SimConfig::default()
    };
    let t = T::with(config.clone()).await;
    t.create(100, &[]).await;
    t.check(
        "POST",
        "/pools",
        &[("poolid", "web"), ("comment", "kept")],
        200,
        "null",
    )
    .await;
    t.check(
        "PUT",
        "/pools",
        &[("poolid", "web"), ("vms", "100")],
        200,
        "null",
    )
    .await;
    t.sim.shutdown();
    drop(t);
    let t = T::with(config).await;
    assert_eq!(t.sim.guest_pool(100).as_deref(), Some("web"));
    assert_eq!(
        t.get("/pools", &[]).await,
        json!([{"poolid": "web", "comment": "kept"}])
    );
    // An older state file, without `pools`, loads with none.
    let mut state: Value =
        serde_json::from_str(&std::fs::read_to_string(&state_file).unwrap()).unwrap();
    t.sim.shutdown();
    drop(t);
    state.as_object_mut().unwrap().remove("pools");
    std::fs::write(&state_file, state.to_string()).unwrap();
    let t = T::with(SimConfig {
        state_file: Some(state_file),
        ..SimConfig::default()
    })
    .await;
    assert!(t.sim.pools().is_empty());
    assert_eq!(t.sim.vm_count(), 1);
}
