//! Transport, auth, envelopes, tasks, faults, request log and persistence.

use std::time::Duration;

use serde_json::json;

use super::{T, enc};
use crate::{FaultKind, FaultRule, SimConfig};

#[tokio::test]
async fn auth_is_required_and_checked() {
    let t = T::new().await;
    let url = format!("{}/api2/json/version", t.sim.base_url());
    let r = t.client.get(&url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.text().await.unwrap(), "");
    let r = t
        .client
        .get(&url)
        .header("Authorization", "PVEAPIToken=root@pam!proxops=wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v = t.get("/version", &[]).await;
    assert_eq!(v["release"], "9.2");
    assert!(t.sim.token().starts_with("root@pam!proxops="));
    let fp = t.sim.fingerprint().unwrap();
    assert_eq!(fp.split(':').count(), 32);
}

#[tokio::test]
async fn fixed_token_and_plain_http() {
    let t = T::with(SimConfig {
        token: Some("ops@pve!ci=s3cret".into()),
        tls: false,
        ..SimConfig::default()
    })
    .await;
    assert!(t.sim.base_url().starts_with("http://"));
    assert_eq!(t.sim.fingerprint(), None);
    assert_eq!(t.sim.token(), "ops@pve!ci=s3cret");
    t.check("GET", "/version", &[], 200, "9.2").await;
}

#[tokio::test]
async fn unknown_paths_and_methods_are_501() {
    let t = T::new().await;
    t.create(100, &[]).await;
    for (m, p) in [
        ("POST", "/nodes/pve01/qemu/100/untemplate"),
        ("POST", "/nodes/pve01/qemu/100/security"),
        ("GET", "/nodes/pve01/foo"),
        ("PUT", "/version"),
    ] {
        t.check(m, p, &[], 501, &format!("Method '{m} {p}' not implemented"))
            .await;
    }
}

#[tokio::test]
async fn envelopes_and_nodes() {
    let t = T::new().await;
    let nodes = t.get("/nodes", &[]).await;
    assert_eq!(nodes.as_array().unwrap().len(), 2);
    assert_eq!(nodes[0]["node"], "pve01");
    assert_eq!(
        nodes[0]["ssl_fingerprint"],
        json!(t.sim.fingerprint().unwrap())
    );
    let (s, b) = t
        .req("GET", "/cluster/resources", &[("type", "bogus")])
        .await;
    assert_eq!(s, 400);
    assert_eq!(b["data"], json!(null));
    assert_eq!(b["message"], "Parameter verification failed.\n");
    assert!(
        b["errors"]["type"]
            .as_str()
            .unwrap()
            .contains("enumeration")
    );
    let (s, b) = t.req("GET", "/nodes/pve01/qemu/555/config", &[]).await;
    assert_eq!(s, 500);
    assert_eq!(
        b["message"],
        "Configuration file 'nodes/pve01/qemu-server/555.conf' does not exist\n"
    );
    t.check(
        "GET",
        "/nodes/pve09/qemu",
        &[],
        500,
        "hostname lookup 'pve09' failed",
    )
    .await;
}

#[tokio::test]
async fn tasks_have_pve_upids_and_logs() {
    let t = T::with(SimConfig {
        task_duration: Duration::from_millis(150),
        ..SimConfig::default()
    })
    .await;
    let (s, b) = t
        .req(
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "100"), ("scsi0", "local-lvm:1")],
        )
        .await;
    assert_eq!(s, 200);
    let upid = b["data"].as_str().unwrap().to_string();
    let parts: Vec<&str> = upid.split(':').collect();
    assert_eq!(parts.len(), 9, "{upid}");
    assert_eq!(parts[0], "UPID");
    assert_eq!(parts[1], "pve01");
    assert_eq!(parts[2].len(), 8);
    assert!(
        parts[2]
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase())
    );
    assert_eq!(parts[5], "qmcreate");
    assert_eq!(parts[6], "100");
    assert_eq!(parts[7], "root@pam!proxops");
    assert_eq!(parts[8], "");
    let st = t
        .get(&format!("/nodes/pve01/tasks/{}/status", enc(&upid)), &[])
        .await;
    assert_eq!(st["status"], "running");
    assert!(st.get("exitstatus").is_none());
    assert_eq!(st["user"], "root@pam");
    assert_eq!(st["tokenid"], "proxops");
    // lock visible while the create task runs
    let conf = t.config(100).await;
    assert_eq!(conf["lock"], "create");
    t.check(
        "PUT",
        "/nodes/pve01/qemu/100/config",
        &[("name", "x")],
        500,
        "VM is locked (create)",
    )
    .await;
    assert_eq!(t.wait(&upid).await, "OK");
    let (_, log) = t
        .req(
            "GET",
            &format!("/nodes/pve01/tasks/{}/log", enc(&upid)),
            &[],
        )
        .await;
    let lines = log["data"].as_array().unwrap();
    assert_eq!(lines.last().unwrap()["t"], "TASK OK");
    assert_eq!(log["total"], json!(lines.len()));
    t.check(
        "GET",
        "/nodes/pve01/tasks/UPID:bogus/status",
        &[],
        400,
        "unable to parse worker upid",
    )
    .await;
    t.check(
        "GET",
        &format!(
            "/nodes/pve01/tasks/{}/status",
            enc("UPID:pve01:00000001:00000001:00000001:qmstart:1:root@pam:")
        ),
        &[],
        400,
        "no such task",
    )
    .await;
}

#[tokio::test]
async fn fault_status_reset_and_counters() {
    let t = T::new().await;
    t.sim.set_faults(vec![
        FaultRule {
            method: "GET".into(),
            path: "/version".into(),
            kind: FaultKind::Status {
                code: 503,
                message: "service unavailable".into(),
            },
            probability: None,
            times: Some(1),
        },
        FaultRule {
            method: "GET".into(),
            path: "/nodes".into(),
            kind: FaultKind::Reset,
            probability: None,
            times: Some(1),
        },
    ]);
    t.check("GET", "/version", &[], 503, "service unavailable")
        .await;
    t.check("GET", "/version", &[], 200, "9.2").await;
    let url = format!("{}/api2/json/nodes", t.sim.base_url());
    let r = t
        .client
        .get(&url)
        .header("Authorization", format!("PVEAPIToken={}", t.sim.token()))
        .send()
        .await;
    assert!(r.is_err(), "connection should be reset");
    t.get("/nodes", &[]).await;
    let c = t.sim.counters();
    assert_eq!(c["GET /version"], 2);
    assert_eq!(c["GET /nodes"], 2);
    let log = t.sim.requests();
    assert_eq!(log[0].status, 503);
    assert_eq!(log[1].status, 200);
    assert_eq!(log[2].status, 0);
    assert!(!log[0].is_mutating());
    t.sim.clear_requests();
    assert!(t.sim.requests().is_empty());
}

#[tokio::test]
async fn fault_failed_task_and_lock_timeout() {
    let t = T::new().await;
    t.sim.set_faults(vec![
        FaultRule {
            method: "POST".into(),
            path: "/nodes/{node}/qemu".into(),
            kind: FaultKind::FailTask {
                message: "injected failure".into(),
            },
            probability: None,
            times: Some(1),
        },
        FaultRule {
            method: "PUT".into(),
            path: "/nodes/{node}/qemu/{vmid}/config".into(),
            kind: FaultKind::LockTimeout,
            probability: None,
            times: Some(1),
        },
    ]);
    let exit = t
        .task("POST", "/nodes/pve01/qemu", &[("vmid", "100")])
        .await;
    assert_eq!(exit, "injected failure");
    t.check(
        "GET",
        "/nodes/pve01/qemu/100/config",
        &[],
        500,
        "does not exist",
    )
    .await;
    t.create(100, &[]).await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/100/config",
        &[("name", "a")],
        500,
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
    )
    .await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/100/config",
        &[("name", "a")],
        200,
        "null",
    )
    .await;
}

#[tokio::test]
async fn fault_probability_is_seeded() {
    async fn pattern(seed: u64) -> Vec<u16> {
        let t = T::with(SimConfig {
            seed,
            faults: vec![FaultRule {
                method: "*".into(),
                path: "*".into(),
                kind: FaultKind::Status {
                    code: 500,
                    message: "flaky".into(),
                },
                probability: Some(0.5),
                times: None,
            }],
            ..SimConfig::default()
        })
        .await;
        let mut out = Vec::new();
        for _ in 0..20 {
            out.push(t.req("GET", "/version", &[]).await.0);
        }
        out
    }
    let a = pattern(42).await;
    let b = pattern(42).await;
    assert_eq!(a, b);
    assert!(a.contains(&500) && a.contains(&200), "{a:?}");
}

#[tokio::test]
async fn admin_endpoints() {
    let t = T::new().await;
    t.get("/version", &[]).await;
    let auth = format!("PVEAPIToken={}", t.sim.token());
    let base = t.sim.base_url();
    let r = t
        .client
        .get(format!("{base}/_sim/requests"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: serde_json::Value = t
        .client
        .get(format!("{base}/_sim/requests"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"][0]["path"], "/version");
    let v: serde_json::Value = t
        .client
        .get(format!("{base}/_sim/counters"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"]["GET /version"], 1);
    let rules = json!([{"method": "GET", "path": "/version", "kind": {"type": "status", "code": 502, "message": "bad gateway"}, "times": 1}]);
    let r = t
        .client
        .put(format!("{base}/_sim/faults"))
        .header("Authorization", &auth)
        .json(&rules)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    t.check("GET", "/version", &[], 502, "bad gateway").await;
    let r = t
        .client
        .delete(format!("{base}/_sim/requests"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(t.sim.requests().is_empty());
    let v: serde_json::Value = t
        .client
        .get(format!("{base}/_sim/state"))
        .header("Authorization", &auth)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(v["data"]["vms"].is_object());
}

#[tokio::test]
async fn state_persists_across_restarts() {
    let dir = std::env::temp_dir().join(format!("proxops-sim-test-{}", std::process::id()));
    let file = dir.join("state.json");
    let _ = std::fs::remove_file(&file);
    let token = "root@pam!proxops=fixed".to_string();
    {
        let t = T::with(SimConfig {
            state_file: Some(file.clone()),
            token: Some(token.clone()),
            ..SimConfig::default()
        })
        .await;
        t.create(100, &[("name", "keep"), ("scsi0", "local-lvm:2")])
            .await;
        // Dropping the simulator waits for its last write: no sleep needed.
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("keep"));
    let t = T::with(SimConfig {
        state_file: Some(file.clone()),
        token: Some(token),
        ..SimConfig::default()
    })
    .await;
    let conf = t.config(100).await;
    assert_eq!(conf["name"], "keep");
    assert_eq!(conf["scsi0"], "local-lvm:vm-100-disk-0,size=2G");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn yaml_cluster_and_lxc_ids() {
    let config = SimConfig::from_yaml_str(
        "nodes: [a1, a2, a3]\nstorages:\n  - {name: local, type: dir, content: [iso, import]}\n  - {name: tank, type: zfspool, content: [images]}\nlxc:\n  - {vmid: 100, node: a2, name: web}\n",
    )
    .unwrap();
    assert_eq!((config.api_workers, config.api_proxy), (None, None));
    let pool =
        SimConfig::from_yaml_str("api_workers: 3\napi_handling_ms: 5\napi_proxy_ms: 1\n").unwrap();
    assert_eq!(
        (pool.api_workers, pool.api_handling, pool.api_proxy),
        (
            Some(3),
            std::time::Duration::from_millis(5),
            Some(std::time::Duration::from_millis(1))
        )
    );
    let t = T::with(config).await;
    assert_eq!(t.get("/cluster/nextid", &[]).await, json!("101"));
    t.check(
        "GET",
        "/cluster/nextid",
        &[("vmid", "100")],
        400,
        "VM 100 already exists",
    )
    .await;
    let lxc = t.get("/nodes/a2/lxc", &[]).await;
    assert_eq!(lxc[0]["vmid"], 100);
    t.check(
        "POST",
        "/nodes/a1/qemu",
        &[("vmid", "100")],
        500,
        "unable to create VM 100 - CT 100 already exists on node 'a2'",
    )
    .await;
    t.check(
        "POST",
        "/nodes/a1/lxc",
        &[("vmid", "100"), ("ostemplate", "local:vztmpl/x.tar.zst")],
        500,
        "CT 100 already exists on node 'a2'",
    )
    .await;
    let storages = t.get("/nodes/a1/storage", &[]).await;
    assert_eq!(storages.as_array().unwrap().len(), 2);
    assert!(SimConfig::from_yaml_str("bogus: 1").is_err());
}

#[tokio::test]
async fn a_peer_that_never_starts_tls_is_disconnected() {
    use tokio::io::AsyncReadExt as _;
    let t = T::new().await;
    let mut idle = tokio::net::TcpStream::connect(t.sim.local_addr())
        .await
        .unwrap();
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf))
        .await
        .expect("the simulator closes the connection after its handshake timeout");
    assert_eq!(
        read.map_err(|e| e.kind()).ok(),
        Some(0),
        "closed, nothing sent"
    );
    // The simulator still serves.
    assert!(t.get("/version", &[]).await.is_object());
}

#[tokio::test]
async fn a_request_outside_the_api_root_is_answered_501_and_logged() {
    let t = T::new().await;
    for path in [
        "/access/users",
        "/api2/jsonx/nodes",
        "/api2/extjs/access%2Fusers",
    ] {
        let resp = t
            .client
            .post(format!("{}{path}", t.sim.base_url()))
            .header("Authorization", format!("PVEAPIToken={}", t.sim.token()))
            .form(&[("userid", "x@pve")])
            .send()
            .await
            .expect("request sent");
        assert_eq!(resp.status().as_u16(), 501, "{path}");
    }
    let logged: Vec<(String, String, u16)> = t
        .sim
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path, r.status))
        .collect();
    assert_eq!(
        logged,
        [
            ("POST".to_string(), "/access/users".to_string(), 501),
            ("POST".into(), "/api2/jsonx/nodes".into(), 501),
            ("POST".into(), "/api2/extjs/access/users".into(), 501),
        ]
    );
}

/// PVE's API worker pool, when modelled: a node serves at most `api_workers` requests at once
/// however many arrive together, and a request for another node's guests is served by that node.
#[tokio::test]
async fn a_node_serves_at_most_its_api_workers_at_once() {
    let t = T::with(crate::SimConfig {
        api_workers: Some(2),
        api_handling: std::time::Duration::from_millis(100),
        ..crate::SimConfig::default()
    })
    .await;
    let paths = [["/nodes/pve02/qemu"; 6], ["/cluster/resources"; 6]].concat();
    let statuses = t.gets_at_once(&paths).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        t.sim.api_most_at_once("pve02"),
        2,
        "six at once, two served at a time"
    );
    assert_eq!(
        t.sim.api_most_at_once("pve01"),
        2,
        "the cluster reads, by the first node"
    );

    // Off by default: no pool, no bound.
    let free = T::new().await;
    free.get("/cluster/resources", &[]).await;
    assert_eq!(free.sim.api_most_at_once("pve01"), 0);
}

/// With `api_proxy`, a request for another node's path is routed by one of the entry node's
/// workers before that node serves it (pveproxy's `proxy_request`); without it, proxying costs
/// the entry node nothing. Counted either way.
#[tokio::test]
async fn a_request_for_another_node_takes_an_entry_worker_to_route_it() {
    for (proxy, entry_busy) in [(Some(std::time::Duration::from_millis(20)), 1), (None, 0)] {
        let t = T::with(crate::SimConfig {
            api_workers: Some(1),
            api_proxy: proxy,
            ..crate::SimConfig::default()
        })
        .await;
        let statuses = t.gets_at_once(&["/nodes/pve02/qemu"; 4]).await;
        assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
        assert_eq!(t.sim.api_proxied(), 4, "proxy {proxy:?}");
        assert_eq!(t.sim.api_most_at_once("pve02"), 1, "proxy {proxy:?}");
        assert_eq!(
            t.sim.api_most_at_once("pve01"),
            entry_busy,
            "the entry node's workers route proxied requests only with api_proxy ({proxy:?})"
        );
    }
}

/// The simulator counts client connections as pveproxy does: a client that reuses its
/// connection opens one, however many requests it sends one after another.
#[tokio::test]
async fn connections_are_counted_and_keep_alive_reuses_one() {
    let t = T::new().await;
    for _ in 0..5 {
        t.get("/cluster/resources", &[]).await;
    }
    assert_eq!(
        t.sim.connections(),
        crate::Connections {
            accepted: 1,
            most_open: 1
        }
    );
}
