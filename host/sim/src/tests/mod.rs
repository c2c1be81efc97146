//! In-process HTTP tests of the simulator: each starts a server and talks to it with reqwest.

mod access;
mod behaviour;
mod clients;
mod conformance;
mod endpoints;
mod fidelity;
mod firewall;
mod ha;
mod infra;
mod locks;
mod lxc;
mod mappings;
mod migrate;
mod pools;
mod storage;
mod validation;

use std::time::Duration;

use serde_json::Value;

use crate::{SimConfig, Simulator, start};

/// A started simulator plus a client holding its token.
pub(crate) struct T {
    pub sim: Simulator,
    pub client: reqwest::Client,
}

/// Parameters as `(key, value)` pairs.
pub(crate) type P<'a> = &'a [(&'a str, &'a str)];

impl T {
    pub(crate) async fn new() -> T {
        T::with(SimConfig::default()).await
    }

    pub(crate) async fn with(config: SimConfig) -> T {
        crate::ensure_crypto_provider();
        let sim = start(config).await.expect("simulator starts");
        let client = reqwest::Client::builder()
            .danger_accept_invalid_certs(true)
            .build()
            .expect("client");
        T { sim, client }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/api2/json{}", self.sim.base_url(), path)
    }

    /// Sends a request (query for GET/DELETE, form body otherwise) and returns status and JSON body (Null when empty).
    pub(crate) async fn req(&self, method: &str, path: &str, params: P<'_>) -> (u16, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let mut rb = self
            .client
            .request(m, self.url(path))
            .header("Authorization", format!("PVEAPIToken={}", self.sim.token()));
        if method == "GET" || method == "DELETE" {
            rb = rb.query(params);
        } else {
            rb = rb.form(params);
        }
        let resp = rb.send().await.expect("request sent");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, body)
    }

    pub(crate) async fn get(&self, path: &str, params: P<'_>) -> Value {
        let (s, b) = self.req("GET", path, params).await;
        assert_eq!(s, 200, "GET {path}: {b}");
        b["data"].clone()
    }

    /// GETs every path of `paths` at once; their HTTP statuses.
    pub(crate) async fn gets_at_once(&self, paths: &[&str]) -> Vec<u16> {
        let mut requests = tokio::task::JoinSet::new();
        for path in paths {
            let (client, url) = (self.client.clone(), self.url(path));
            let auth = format!("PVEAPIToken={}", self.sim.token());
            requests.spawn(async move {
                let resp = client.get(url).header("Authorization", auth).send().await;
                resp.expect("answered").status().as_u16()
            });
        }
        requests.join_all().await
    }

    /// Runs an async request, asserts 200 and waits for its task; returns the exit status.
    pub(crate) async fn task(&self, method: &str, path: &str, params: P<'_>) -> String {
        let (s, b) = self.req(method, path, params).await;
        assert_eq!(s, 200, "{method} {path}: {b}");
        let upid = b["data"].as_str().expect("upid").to_string();
        self.wait(&upid).await
    }

    /// Polls a task until it stops; returns its exit status.
    pub(crate) async fn wait(&self, upid: &str) -> String {
        let node = upid.split(':').nth(1).expect("node in upid").to_string();
        for _ in 0..2000 {
            let st = self
                .get(&format!("/nodes/{node}/tasks/{}/status", enc(upid)), &[])
                .await;
            if st["status"] == "stopped" {
                return st["exitstatus"].as_str().unwrap_or("").to_string();
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("task {upid} did not finish");
    }

    /// Creates VM `vmid` on pve01 with the given extra parameters and asserts the task succeeded.
    pub(crate) async fn create(&self, vmid: u32, extra: P<'_>) {
        let id = vmid.to_string();
        let mut p: Vec<(&str, &str)> = vec![("vmid", id.as_str())];
        p.extend_from_slice(extra);
        let exit = self.task("POST", "/nodes/pve01/qemu", &p).await;
        assert_eq!(exit, "OK", "create {vmid}");
    }

    pub(crate) async fn config(&self, vmid: u32) -> Value {
        self.get(&format!("/nodes/pve01/qemu/{vmid}/config"), &[])
            .await
    }

    /// The data-driven check: status and a fragment that must occur in the JSON body.
    pub(crate) async fn check(
        &self,
        method: &str,
        path: &str,
        params: P<'_>,
        status: u16,
        fragment: &str,
    ) {
        let (s, b) = self.req(method, path, params).await;
        let text = b.to_string();
        assert_eq!(s, status, "{method} {path} {params:?}: {text}");
        assert!(
            text.contains(fragment),
            "{method} {path} {params:?}: expected {fragment:?} in {text}"
        );
    }
}

impl T {
    /// Takes VM `vmid`'s config flock as another PVE worker (or `qm` on the node) would; released on drop.
    pub(crate) fn hold_flock(&self, vmid: u32, shared: bool) -> crate::sim::FlockGuard {
        let f = crate::sim::Flock {
            vmid,
            shared,
            timeout: Duration::ZERO,
        };
        self.sim.sim.try_flock(f).expect("the flock is free")
    }

    /// Waits until `n` requests or tasks wait for a config flock.
    pub(crate) async fn until_flock_waiters(&self, n: usize) {
        for _ in 0..5000 {
            if self
                .sim
                .sim
                .flock_waiters
                .load(std::sync::atomic::Ordering::SeqCst)
                == n
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("never saw {n} flock waiters");
    }

    /// Puts a volume on a storage as if uploaded there (`local:iso/x.iso`), without a task.
    pub(crate) fn add_volume(&self, node: &str, volid: &str, content: &str, size: u64) {
        let (storage, _) = crate::formats::parse_volume_id(volid).expect("volid");
        let s = self.sim.sim.storage(storage).expect("storage").clone();
        let mut st = self.sim.sim.write();
        let key = crate::state::volume_key(&s, node, volid);
        st.volumes.insert(
            key,
            crate::state::Volume {
                volid: volid.to_string(),
                storage: storage.to_string(),
                node: if s.shared { "*".into() } else { node.into() },
                size,
                format: volid.rsplit('.').next().unwrap_or("raw").to_string(),
                content: content.to_string(),
                vmid: None,
                ctime: 0,
                parent: None,
                virtual_size: None,
            },
        );
        st.touch();
    }

    /// The lines of a task's log.
    pub(crate) async fn task_log(&self, upid: &str) -> Vec<String> {
        let node = upid.split(':').nth(1).expect("node in upid").to_string();
        let log = self
            .get(
                &format!("/nodes/{node}/tasks/{}/log", enc(upid)),
                &[("limit", "1000")],
            )
            .await;
        log.as_array()
            .expect("log lines")
            .iter()
            .map(|l| l["t"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Sends an async request, asserts 200 and returns its UPID.
    pub(crate) async fn upid(&self, method: &str, path: &str, params: P<'_>) -> String {
        let (s, b) = self.req(method, path, params).await;
        assert_eq!(s, 200, "{method} {path}: {b}");
        b["data"].as_str().expect("upid").to_string()
    }
}

/// Percent-encodes a path segment.
pub(crate) fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
