//! The HA manager over HTTP: resources and rules with PVE's checks, power requests on HA-managed guests, the CRM
//! carrying them out after its delay, failover of an offline node's guests by the rules, maintenance and failback.

use std::time::Duration;

use serde_json::Value;

use super::T;
use crate::{SimConfig, StorageConfig};

/// Three nodes, `local-lvm` on each and a shared `ceph` pool; HA acts within 30 ms, fences after 150 ms.
pub(crate) fn cluster() -> SimConfig {
    let mut storages = crate::default_storages();
    let mut ceph = StorageConfig::new("ceph", "rbd", &["images", "rootdir"]);
    ceph.shared = true;
    storages.push(ceph);
    SimConfig {
        nodes: vec!["pve01".into(), "pve02".into(), "pve03".into()],
        storages,
        ha_crm_delay: Duration::from_millis(30),
        ha_fence_delay: Duration::from_millis(150),
        ..SimConfig::default()
    }
}

impl T {
    /// Creates VM `vmid` on `node` with one 1 GiB disk on `storage`.
    pub(crate) async fn vm_on(&self, node: &str, vmid: u32, storage: &str) {
        let id = vmid.to_string();
        let disk = format!("{storage}:1");
        let exit = self
            .task(
                "POST",
                &format!("/nodes/{node}/qemu"),
                &[("vmid", &id), ("scsi0", &disk)],
            )
            .await;
        assert_eq!(exit, "OK", "create {vmid} on {node}");
    }

    /// Waits (at most 5 s) until `cond` holds on the simulator.
    pub(crate) async fn until(&self, what: &str, cond: impl Fn(&T) -> bool) {
        for _ in 0..1000 {
            if cond(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never: {what}");
    }

    fn crm_state(&self, sid: &str) -> Option<String> {
        self.sim
            .ha_service(sid)
            .and_then(|s| s["state"].as_str().map(str::to_string))
    }

    /// The `/cluster/resources` entry with id `id`.
    async fn resource(&self, id: &str) -> Value {
        let all = self.get("/cluster/resources", &[]).await;
        all.as_array()
            .expect("list")
            .iter()
            .find(|e| e["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    }
}

#[tokio::test]
async fn resources_are_checked_as_pve_does() {
    let t = T::with(cluster()).await;
    t.vm_on("pve01", 100, "local-lvm").await;
    const R: &str = "/cluster/ha/resources";
    // (method, path, parameters, status, fragment of the answer)
    let cases: &[(&str, &str, super::P, u16, &str)] = &[
        (
            "POST",
            R,
            &[("sid", "100"), ("max_restart", "2")],
            200,
            "null",
        ),
        (
            "POST",
            R,
            &[("sid", "vm:100")],
            500,
            "create resource failed: resource ID 'vm:100' already defined",
        ),
        (
            "POST",
            R,
            &[("sid", "vm:999")],
            500,
            "resource 'vm:999' does not exist in cluster",
        ),
        (
            "POST",
            R,
            &[("sid", "ct:100")],
            500,
            "resource 'ct:100' - guest with ID 100 is not a container",
        ),
        (
            "POST",
            R,
            &[("sid", "999")],
            500,
            "unable to detect SID from VMID - VM/CT 999 does not exist",
        ),
        (
            "POST",
            R,
            &[("sid", "fs:x")],
            500,
            "unknown section type 'fs'",
        ),
        (
            "POST",
            R,
            &[("sid", "vm:100"), ("type", "ct")],
            500,
            "types does not match",
        ),
        (
            "POST",
            R,
            &[("sid", "vm:100"), ("group", "g1")],
            500,
            "ha groups have been migrated to rules",
        ),
        (
            "POST",
            R,
            &[("sid", "vm 1")],
            400,
            "value does not look like a valid ha resource id",
        ),
        (
            "GET",
            "/cluster/ha/resources/vm:100",
            &[],
            200,
            "\"max_restart\":2",
        ),
        (
            "GET",
            "/cluster/ha/resources/100",
            &[],
            200,
            "\"sid\":\"vm:100\"",
        ),
        (
            "GET",
            "/cluster/ha/resources/vm:101",
            &[],
            500,
            "no such resource 'vm:101'",
        ),
        (
            "PUT",
            "/cluster/ha/resources/vm:100",
            &[("digest", "0000")],
            500,
            "update resources config failed: detected modified configuration - file changed by other user? Try again.",
        ),
        (
            "PUT",
            "/cluster/ha/resources/vm:100",
            &[("delete", "bogus")],
            500,
            "no such option 'bogus'",
        ),
        (
            "PUT",
            "/cluster/ha/resources/vm:100",
            &[("comment", "web"), ("delete", "max_restart")],
            200,
            "null",
        ),
        (
            "DELETE",
            "/cluster/ha/resources/vm:101",
            &[],
            500,
            "cannot delete service 'vm:101', not HA managed!",
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    let r = t.get("/cluster/ha/resources/vm:100", &[]).await;
    assert_eq!(r["comment"], "web");
    assert!(r.get("max_restart").is_none(), "{r}");
    assert_eq!(r["type"], "vm");
    assert_eq!(r["digest"].as_str().map(str::len), Some(40));
    t.check("DELETE", "/cluster/ha/resources/vm:100", &[], 200, "null")
        .await;
    assert_eq!(
        t.get("/cluster/ha/resources", &[]).await,
        Value::Array(vec![])
    );
}

#[tokio::test]
async fn rules_are_checked_as_pve_does() {
    let t = T::with(cluster()).await;
    for vmid in [100, 101] {
        t.vm_on("pve01", vmid, "ceph").await;
        let sid = format!("vm:{vmid}");
        t.check(
            "POST",
            "/cluster/ha/resources",
            &[("sid", &sid), ("state", "stopped")],
            200,
            "null",
        )
        .await;
    }
    const R: &str = "/cluster/ha/rules";
    let na = |rule: &'static str, res: &'static str, nodes: &'static str| {
        vec![
            ("rule", rule),
            ("type", "node-affinity"),
            ("resources", res),
            ("nodes", nodes),
        ]
    };
    let r1 = na("r1", "vm:100", "pve02:2,pve03");
    let r2 = na("r2", "vm:100", "pve01");
    let unmanaged = na("r3", "vm:102", "pve01");
    let no_node = na("r4", "vm:101", "pve09");
    type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (r1, 200, "null"),
        (
            r2,
            400,
            "resource 'vm:100' is already used in another node affinity rule",
        ),
        (
            unmanaged,
            500,
            "create ha rule failed: cannot use unmanaged resource(s) vm:102.",
        ),
        (no_node, 500, "cannot use non-existent node(s) pve09."),
        (
            vec![
                ("rule", "r5"),
                ("type", "node-affinity"),
                ("resources", "vm:101"),
            ],
            500,
            "missing value for required option 'nodes'",
        ),
        (
            vec![
                ("rule", "r6"),
                ("type", "resource-affinity"),
                ("resources", "vm:101"),
                ("affinity", "negative"),
            ],
            400,
            "rule is ineffective as there are less than two resources",
        ),
        (
            vec![
                ("rule", "r7"),
                ("type", "resource-affinity"),
                ("resources", "vm:100,vm:101"),
                ("affinity", "negative"),
            ],
            200,
            "null",
        ),
        (
            vec![
                ("rule", "r1"),
                ("type", "resource-affinity"),
                ("resources", "vm:100,vm:101"),
                ("affinity", "positive"),
            ],
            500,
            "HA rule 'r1' already defined",
        ),
        (
            vec![
                ("rule", "r8"),
                ("type", "resource-affinity"),
                ("resources", "vm:100,vm:101"),
                ("strict", "1"),
                ("affinity", "positive"),
            ],
            500,
            "unexpected property 'strict'",
        ),
    ];
    for (params, status, fragment) in &cases {
        t.check("POST", R, params, *status, fragment).await;
    }
    let (s, b) = t.req("POST", R, &cases[1].0).await;
    assert_eq!(
        (s, b["message"].as_str()),
        (400, Some("Rule 'r2' is invalid.\n"))
    );
    let r1 = t.get("/cluster/ha/rules/r1", &[]).await;
    assert_eq!(r1["nodes"], "pve02:2,pve03");
    assert_eq!(r1["order"], 1);
    let listed = t.get(R, &[("type", "resource-affinity")]).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    t.check(
        "GET",
        "/cluster/ha/rules/r9",
        &[],
        500,
        "no such ha rule 'r9'",
    )
    .await;
    // Deleting a resource purges it from its rules, and a rule left without resources goes.
    t.check("DELETE", "/cluster/ha/resources/vm:100", &[], 200, "null")
        .await;
    let rules = t.get(R, &[]).await;
    let ids: Vec<&str> = rules
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .collect();
    assert_eq!(ids, vec!["r7"]);
    assert_eq!(rules[0]["resources"], "vm:101");
}

#[tokio::test]
async fn power_requests_on_ha_guests_become_ha_requests_the_crm_carries_out() {
    let t = T::with(cluster()).await;
    t.vm_on("pve01", 100, "ceph").await;
    t.vm_on("pve01", 101, "ceph").await;
    t.check(
        "POST",
        "/cluster/ha/resources",
        &[("sid", "vm:100"), ("state", "stopped")],
        200,
        "null",
    )
    .await;
    t.until("the CRM takes vm:100 up", |t| {
        t.crm_state("vm:100").as_deref() == Some("stopped")
    })
    .await;
    t.clear_requests();
    let upid = t
        .upid("POST", "/nodes/pve01/qemu/100/status/start", &[])
        .await;
    assert!(upid.contains(":hastart:100:"), "{upid}");
    assert_eq!(t.wait(&upid).await, "OK");
    assert!(
        t.task_log(&upid)
            .await
            .contains(&"Requesting HA start for VM 100".to_string())
    );
    // The task only asked: the VM starts once the CRM acted.
    assert_eq!(
        t.get("/cluster/ha/resources/vm:100", &[]).await["state"],
        "started"
    );
    t.until("vm:100 runs", |t| {
        t.sim.vm_status(100).as_deref() == Some("running")
    })
    .await;
    assert_eq!(t.crm_state("vm:100").as_deref(), Some("started"));
    let entry = t.resource("qemu/100").await;
    assert_eq!(entry["hastate"], "started");
    assert!(t.resource("qemu/101").await.get("hastate").is_none());
    assert_eq!(t.resource("node/pve01").await["hastate"], "online");
    // A shutdown is an HA stop too; a stop with overrule-shutdown is refused.
    t.check(
        "POST",
        "/nodes/pve01/qemu/100/status/stop",
        &[("overrule-shutdown", "1")],
        400,
        "Not applicable for HA resources.",
    )
    .await;
    let upid = t
        .upid("POST", "/nodes/pve01/qemu/100/status/shutdown", &[])
        .await;
    assert!(upid.contains(":hastop:100:"), "{upid}");
    assert_eq!(t.wait(&upid).await, "OK");
    t.until("vm:100 stops", |t| {
        t.sim.vm_status(100).as_deref() == Some("stopped")
    })
    .await;
    assert_eq!(
        t.get("/cluster/ha/resources/vm:100", &[]).await["state"],
        "stopped"
    );
    // A non-HA guest is still started directly.
    let upid = t
        .upid("POST", "/nodes/pve01/qemu/101/status/start", &[])
        .await;
    assert!(upid.contains(":qmstart:101:"), "{upid}");
    // Status endpoints: a service entry per resource, the LRM of every node.
    let current = t.get("/cluster/ha/status/current", &[]).await;
    let ids: Vec<&str> = current
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        vec![
            "quorum",
            "master",
            "fencing",
            "lrm:pve01",
            "lrm:pve02",
            "lrm:pve03",
            "service:vm:100"
        ]
    );
    let service = &current[6];
    assert_eq!(
        (
            service["crm_state"].as_str(),
            service["request_state"].as_str()
        ),
        (Some("stopped"), Some("stopped"))
    );
    let ms = t.get("/cluster/ha/status/manager_status", &[]).await;
    assert_eq!(
        ms["manager_status"]["service_status"]["vm:100"]["node"],
        "pve01"
    );
    assert_eq!(ms["manager_status"]["node_status"]["pve02"], "online");
    // An ignored resource is not HA managed: the power request acts directly.
    t.check(
        "PUT",
        "/cluster/ha/resources/vm:100",
        &[("state", "ignored")],
        200,
        "null",
    )
    .await;
    let upid = t
        .upid("POST", "/nodes/pve01/qemu/100/status/start", &[])
        .await;
    assert!(upid.contains(":qmstart:100:"), "{upid}");
}

impl T {
    fn clear_requests(&self) {
        self.sim.clear_requests();
    }
}

#[tokio::test]
async fn a_failed_node_s_ha_guests_are_recovered_by_the_rules() {
    let t = T::with(cluster()).await;
    t.vm_on("pve01", 100, "ceph").await;
    t.vm_on("pve01", 101, "local-lvm").await;
    t.vm_on("pve03", 102, "ceph").await;
    t.vm_on("pve01", 103, "ceph").await;
    for sid in ["vm:100", "vm:101", "vm:102"] {
        t.check(
            "POST",
            "/cluster/ha/resources",
            &[("sid", sid)],
            200,
            "null",
        )
        .await;
    }
    // vm:100 belongs on pve02 (priority 2), else pve03, never pve01; and never with vm:102.
    let rule = [
        ("rule", "pin"),
        ("type", "node-affinity"),
        ("resources", "vm:100"),
        ("nodes", "pve02:2,pve03:1"),
        ("strict", "1"),
    ];
    t.check("POST", "/cluster/ha/rules", &rule, 200, "null")
        .await;
    let apart = [
        ("rule", "apart"),
        ("type", "resource-affinity"),
        ("resources", "vm:100,vm:102"),
        ("affinity", "negative"),
    ];
    t.check("POST", "/cluster/ha/rules", &apart, 200, "null")
        .await;
    // The CRM starts them and moves vm:100 to its preferred node, running (an online migration).
    t.until("vm:100 runs on pve02", |t| {
        t.sim.guest_node(100).as_deref() == Some("pve02")
            && t.crm_state("vm:100").as_deref() == Some("started")
            && t.sim.vm_status(100).as_deref() == Some("running")
    })
    .await;
    t.until("vm:101 and vm:102 run", |t| {
        [101, 102]
            .iter()
            .all(|v| t.sim.vm_status(*v).as_deref() == Some("running"))
    })
    .await;
    // pve01 fails: unreachable at once, its guests unknown, HA waits for the fencing delay.
    t.sim.set_node_online("pve01", false).unwrap();
    let (status, _) = t.req("GET", "/nodes/pve01/qemu", &[]).await;
    assert_eq!(status, 595);
    assert_eq!(t.resource("node/pve01").await["status"], "offline");
    assert_eq!(t.resource("qemu/103").await["status"], "unknown");
    assert_eq!(t.resource("node/pve01").await["hastate"], "unknown");
    assert_eq!(t.crm_state("vm:101").as_deref(), Some("started"));
    t.until("vm:101 fenced", |t| {
        t.crm_state("vm:101").as_deref() == Some("fence")
    })
    .await;
    // vm:101's disk is on pve01's local-lvm: its config moves, the start on the new node fails.
    t.until("vm:101 in error", |t| {
        t.crm_state("vm:101").as_deref() == Some("error")
    })
    .await;
    assert_ne!(t.sim.guest_node(101).as_deref(), Some("pve01"));
    assert_eq!(t.sim.vm_status(101).as_deref(), Some("stopped"));
    // The non-HA guest stays on the failed node.
    assert_eq!(t.sim.guest_node(103).as_deref(), Some("pve01"));
    // pve02 fails too: vm:100 may only go to pve03, where vm:102 is; it waits in recovery.
    t.sim.set_node_online("pve02", false).unwrap();
    t.until("vm:100 in recovery", |t| {
        t.crm_state("vm:100").as_deref() == Some("recovery")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(t.crm_state("vm:100").as_deref(), Some("recovery"));
    // Disabling the negative affinity lets it recover to pve03, its disk on shared storage.
    t.check(
        "PUT",
        "/cluster/ha/rules/apart",
        &[("type", "resource-affinity"), ("disable", "1")],
        200,
        "null",
    )
    .await;
    t.until("vm:100 recovered to pve03", |t| {
        t.sim.guest_node(100).as_deref() == Some("pve03")
            && t.sim.vm_status(100).as_deref() == Some("running")
    })
    .await;
    assert_eq!(t.resource("qemu/100").await["hastate"], "started");
    // pve01 comes back: online again, the fenced state cleared.
    t.sim.set_node_online("pve01", true).unwrap();
    assert_eq!(t.resource("node/pve01").await["hastate"], "online");
}

#[tokio::test]
async fn maintenance_moves_ha_guests_away_and_failback_brings_them_back() {
    let t = T::with(cluster()).await;
    t.vm_on("pve01", 100, "ceph").await;
    t.vm_on("pve01", 101, "ceph").await;
    t.check(
        "POST",
        "/cluster/ha/resources",
        &[("sid", "vm:100")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        "/cluster/ha/resources",
        &[("sid", "vm:101"), ("failback", "0")],
        200,
        "null",
    )
    .await;
    t.until("both run on pve01", |t| {
        [100, 101]
            .iter()
            .all(|v| t.sim.vm_status(*v).as_deref() == Some("running"))
    })
    .await;
    assert_eq!(t.sim.guest_node(100).as_deref(), Some("pve01"));
    t.sim.set_node_maintenance("pve01", true).unwrap();
    t.until("both left pve01", |t| {
        [100, 101].iter().all(|v| {
            t.sim.guest_node(*v).as_deref() != Some("pve01")
                && t.crm_state(&format!("vm:{v}")).as_deref() == Some("started")
        })
    })
    .await;
    assert_eq!(t.sim.vm_status(100).as_deref(), Some("running"));
    assert_eq!(t.resource("node/pve01").await["hastate"], "maintenance");
    t.sim.set_node_maintenance("pve01", false).unwrap();
    t.until("vm:100 is back", |t| {
        t.sim.guest_node(100).as_deref() == Some("pve01")
            && t.crm_state("vm:100").as_deref() == Some("started")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // failback=0: vm:101 stays where maintenance put it.
    assert_ne!(t.sim.guest_node(101).as_deref(), Some("pve01"));
    assert_eq!(t.sim.vm_status(100).as_deref(), Some("running"));
}

#[tokio::test]
async fn the_control_api_takes_nodes_offline_and_into_maintenance() {
    let t = T::with(cluster()).await;
    let url = format!("{}/_sim/nodes/pve02", t.sim.base_url());
    let auth = format!("PVEAPIToken={}", t.sim.token());
    for (body, status) in [
        (r#"{"online": false}"#, 200),
        (r#"{"maintenance": true}"#, 200),
    ] {
        let r = t
            .client
            .put(&url)
            .header("Authorization", &auth)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status);
    }
    let r = t
        .client
        .put(format!("{}/_sim/nodes/pve09", t.sim.base_url()))
        .header("Authorization", &auth)
        .body(r#"{"online": false}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let nodes: Value = t
        .client
        .get(format!("{}/_sim/nodes", t.sim.base_url()))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(nodes["data"]["pve02"]["online"], false);
    assert_eq!(nodes["data"]["pve02"]["maintenance"], true);
    let status = t.get("/cluster/status", &[]).await;
    assert_eq!(status[2]["online"], 0);
}
