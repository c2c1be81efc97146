//! Running the proxops binary in tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Output of one proxops run.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The repository's top folder.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// A component cache shared by the tests of one run, so components compile once.
pub fn shared_cache() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("proxops-cache")
}

/// Run proxops with `args` (after the global `--cache-dir`) in `cwd`.
pub fn proxops_in(cwd: &Path, cache: &Path, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(cwd)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .env_remove("PROXOPS_LOG")
        .output()
        .expect("run proxops");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run proxops from the workspace with the shared cache.
pub fn proxops(args: &[&str]) -> Run {
    proxops_in(&workspace(), &shared_cache(), args)
}

/// A simulator started in the test process and a repository whose `lab` cluster points at
/// it over HTTPS with a pinned fingerprint, as a real cluster would be configured.
pub struct Lab {
    pub sim: proxops_sim::Simulator,
    pub repo: tempfile::TempDir,
    pub client: proxops_pve::Client,
    secret: String,
}

pub const TOKEN_VAR: &str = "PROXOPS_TEST_TOKEN";

impl Lab {
    pub async fn start() -> Lab {
        Lab::with(proxops_sim::SimConfig::default()).await
    }

    pub async fn with(config: proxops_sim::SimConfig) -> Lab {
        let sim = proxops_sim::start(config)
            .await
            .expect("start the simulator");
        let (id, secret) = sim.token().split_once('=').unwrap();
        let fingerprint = sim.fingerprint().expect("TLS on");
        let repo = tempfile::tempdir().unwrap();
        let cluster = format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {}\n  token: {{id: '{id}', secret: {{env: {TOKEN_VAR}}}}}\n  tls: {{fingerprint: '{fingerprint}'}}\n",
            sim.base_url()
        );
        let client = proxops_pve::Client::new(proxops_pve::ClientConfig {
            base_url: sim.base_url(),
            token_id: id.to_string(),
            token_secret: secret.to_string(),
            tls: proxops_pve::TlsMode::Fingerprint(fingerprint),
            timeout: std::time::Duration::from_secs(30),
        })
        .unwrap();
        let lab = Lab {
            secret: secret.to_string(),
            sim,
            repo,
            client,
        };
        lab.write("clusters/lab.yaml", &cluster);
        lab
    }

    /// Write `clusters/<name>.yaml`: a second cluster file for the same simulator, reached as
    /// `localhost` (two cluster files may not name one endpoint; two addresses of one PVE
    /// cluster cannot be told apart, as with two of its nodes' addresses).
    pub fn second_cluster(&self, name: &str) {
        let lab = std::fs::read_to_string(self.repo.path().join("clusters/lab.yaml")).unwrap();
        self.write(
            &format!("clusters/{name}.yaml"),
            &lab.replace("{name: lab}", &format!("{{name: {name}}}"))
                .replace("127.0.0.1", "localhost"),
        );
    }

    /// The API token secret the `lab` cluster file takes from [`TOKEN_VAR`].
    pub fn token_secret(&self) -> &str {
        &self.secret
    }

    pub fn write(&self, path: &str, text: &str) {
        let path = self.repo.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn remove(&self, path: &str) {
        std::fs::remove_file(self.repo.path().join(path)).unwrap();
    }

    /// Run proxops on this lab's repository (the repository path is appended to `args`).
    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[]).await
    }

    /// [`Lab::run`] with extra environment variables (set after the defaults, so they win).
    pub async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        use tokio::io::AsyncReadExt as _;
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"));
        // A test that names its own cache folder gets it instead of the shared one.
        if !args.contains(&"--cache-dir") {
            command.arg("--cache-dir").arg(shared_cache());
        }
        let mut child = command
            .args(args)
            .arg(self.repo.path())
            .env(TOKEN_VAR, &self.secret)
            .env_remove("PROXOPS_LOG")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run proxops");
        // Read both pipes as the run goes, so that a run that hangs still shows how far it got.
        let mut out_pipe = child.stdout.take().expect("stdout piped");
        let mut err_pipe = child.stderr.take().expect("stderr piped");
        let stdout = tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = out_pipe.read_to_end(&mut buf).await;
            buf
        });
        let stderr = tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = err_pipe.read_to_end(&mut buf).await;
            buf
        });
        // A hang is a bug: fail the test instead of waiting for CI's limit.
        let status = match tokio::time::timeout(std::time::Duration::from_secs(120), child.wait())
            .await
        {
            Ok(status) => status.expect("wait for proxops"),
            Err(_) => {
                let _ = child.kill().await;
                let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
                let out = text(stdout.await.unwrap_or_default());
                let err = text(stderr.await.unwrap_or_default());
                let log = self.sim.requests();
                let last: Vec<String> = log
                    .iter()
                    .rev()
                    .take(20)
                    .rev()
                    .map(|r| format!("{} {} {} {:?}", r.status, r.method, r.path, r.params))
                    .collect();
                panic!(
                    "proxops {args:?} did not finish within 120 s\n--- stdout\n{out}\n--- stderr\n{err}\n--- the simulator's last {} requests\n{}",
                    last.len(),
                    last.join("\n")
                );
            }
        };
        Run {
            code: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout.await.unwrap_or_default()).into_owned(),
            stderr: String::from_utf8_lossy(&stderr.await.unwrap_or_default()).into_owned(),
        }
    }

    /// Start proxops on this lab's repository without waiting for it (output discarded).
    pub fn spawn(&self, args: &[&str]) -> tokio::process::Child {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
            .arg("--cache-dir")
            .arg(shared_cache())
            .args(args)
            .arg(self.repo.path())
            .env(TOKEN_VAR, &self.secret)
            .env_remove("PROXOPS_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("run proxops")
    }

    /// `apply`, asserting success.
    pub async fn apply(&self) -> Run {
        let run = self.run(&["apply"]).await;
        assert_eq!(run.code, 0, "apply failed:\n{}\n{}", run.stdout, run.stderr);
        run
    }

    /// Mutating requests the simulator received since the last `clear`.
    pub fn mutations(&self) -> Vec<String> {
        self.sim
            .requests()
            .into_iter()
            .filter(|r| r.is_mutating())
            .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
            .collect()
    }

    pub fn clear(&self) {
        self.sim.clear_requests();
    }

    /// A VM's current config as PVE prints it.
    pub fn config(&self, vmid: u32) -> std::collections::BTreeMap<String, String> {
        self.sim
            .vm_config(vmid)
            .unwrap_or_else(|| panic!("VM {vmid} does not exist"))
    }

    /// Call the PVE API directly (a change "behind proxops's back"), waiting for its task.
    pub async fn pve(&self, method: proxops_pve::Method, path: &str, params: &[(&str, &str)]) {
        let params: Vec<proxops_pve::Param> = params
            .iter()
            .map(|(k, v)| proxops_pve::Param::new(*k, *v))
            .collect();
        let data = self
            .client
            .request(method, path, &params, false)
            .await
            .expect("PVE call");
        if let Some(upid) = data.as_str().filter(|s| s.starts_with("UPID:")) {
            self.client
                .wait_task(upid, std::time::Duration::from_secs(30))
                .await
                .expect("task");
        }
    }
}

/// A VM manifest with the fields every test needs; `extra` is appended under `spec:`.
pub fn vm(name: &str, node: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: local-lvm, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n{extra}"
    )
}

/// The same shape as a TemplateVM.
pub fn template(name: &str, node: &str, vmid: u32, extra: &str) -> String {
    vm(name, node, vmid, extra).replace("kind: VM", "kind: TemplateVM")
}

/// Serve `files` (path -> bytes) over plain HTTP on loopback until the returned handle is
/// dropped; returns the base URL. Just enough HTTP/1.1 for PVE's download-url.
pub async fn serve_files(
    files: Vec<(&'static str, Vec<u8>)>,
) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let files = std::sync::Arc::new(files);
    let handle = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let files = files.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&request)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                let response = match files.iter().find(|(p, _)| *p == path) {
                    Some((_, body)) => {
                        let mut r = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    None => {
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                            .to_vec()
                    }
                };
                let _ = socket.write_all(&response).await;
            });
        }
    });
    (base, handle)
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

impl Lab {
    /// Write a binary file (a policy's .wasm) into the lab repository.
    pub fn write_bytes(&self, path: &str, bytes: &[u8]) {
        let path = self.repo.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

/// xorshift64*: deterministic, seeded, enough for picking cases in property tests.
pub struct Rng(pub u64);

impl Rng {
    /// A generator for case `seed` (never the all-zero state).
    pub fn for_seed(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Apply options for in-process tests: no gate, two writes per node, in-memory stop memory.
pub fn apply_options() -> proxops_reconcile::ApplyOptions {
    proxops_reconcile::ApplyOptions {
        gate: None,
        limits: proxops_reconcile::execute::Limits {
            write_concurrency: 2,
            task_timeout: std::time::Duration::from_secs(60),
        },
        secrets: None,
        read_concurrency: Some(8),
        max_passes: 5,
        memory: std::sync::Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
        cancel: None,
        rollout: None,
    }
}

/// A `proxops sim serve` child (killed on drop): what it printed on its first three lines and
/// a client pinned to its certificate.
pub struct SimChild {
    pub child: tokio::process::Child,
    pub url: String,
    /// The token line, `USER@REALM!ID=SECRET`.
    pub token: String,
    pub fingerprint: String,
    pub client: proxops_pve::Client,
}

/// Start `proxops sim serve --listen 127.0.0.1:0 --token root@pam!TOKEN_ID=SECRET EXTRA…`.
pub async fn sim_child(token_id: &str, secret: &str, extra: &[&str]) -> SimChild {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(["sim", "serve", "--listen", "127.0.0.1:0", "--token"])
        .arg(format!("root@pam!{token_id}={secret}"))
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start proxops sim serve");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut line = async || {
        lines
            .next_line()
            .await
            .unwrap()
            .expect("sim serve printed a line")
    };
    let (url, token, fingerprint) = (line().await, line().await, line().await);
    let client = proxops_pve::Client::new(proxops_pve::ClientConfig {
        base_url: url.clone(),
        token_id: format!("root@pam!{token_id}"),
        token_secret: secret.into(),
        tls: proxops_pve::TlsMode::Fingerprint(fingerprint.clone()),
        timeout: std::time::Duration::from_secs(30),
    })
    .unwrap();
    SimChild {
        child,
        url,
        token,
        fingerprint,
        client,
    }
}

/// The mutating requests (`METHOD path`) the simulator saw about guest `vmid`.
pub fn requests_about(lab: &Lab, vmid: u32) -> Vec<String> {
    let needle = format!("/qemu/{vmid}");
    lab.sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating() && r.path.contains(&needle))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// The mutating requests `lab` served, in order, with their parameters:
/// `PUT /pools poolid=web comment=… -> 200`.
pub async fn writes(lab: &impl TestCluster) -> Vec<String> {
    lab.requests()
        .await
        .into_iter()
        .filter(|r| r.is_mutating())
        .map(|r| {
            let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{} {} {} -> {}",
                r.method,
                r.path,
                params.join(" "),
                r.status
            )
        })
        .collect()
}

/// What a test of a kind drives: a repository whose `lab` cluster points at a simulator, and
/// that simulator's API and request log. [`Lab`] runs the simulator in the test process;
/// [`Served`] is a `proxops sim serve` child, the way an operator runs one.
pub trait TestCluster {
    /// The repository's folder.
    fn repo_path(&self) -> &Path;
    /// A root client of the simulator.
    fn client(&self) -> &proxops_pve::Client;
    /// The simulator's request log since the last [`TestCluster::clear`].
    async fn requests(&self) -> Vec<proxops_sim::RequestRecord>;
    /// Empty the request log.
    async fn clear(&self);
    /// Run proxops on the repository (its path appended to `args`).
    async fn run(&self, args: &[&str]) -> Run;

    fn write(&self, path: &str, text: &str) {
        self.write_bytes(path, text.as_bytes());
    }

    fn write_bytes(&self, path: &str, bytes: &[u8]) {
        let path = self.repo_path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn remove(&self, path: &str) {
        std::fs::remove_file(self.repo_path().join(path)).unwrap();
    }

    /// Mutating requests since the last clear, as `METHOD path -> status`.
    async fn mutations(&self) -> Vec<String> {
        self.requests()
            .await
            .into_iter()
            .filter(|r| r.is_mutating())
            .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
            .collect()
    }

    /// Call the PVE API directly (a change "behind proxops's back"), waiting for its task.
    async fn pve(&self, method: proxops_pve::Method, path: &str, params: &[(&str, &str)]) {
        let params: Vec<proxops_pve::Param> = params
            .iter()
            .map(|(k, v)| proxops_pve::Param::new(*k, *v))
            .collect();
        let data = self
            .client()
            .request(method, path, &params, false)
            .await
            .expect("PVE call");
        if let Some(upid) = data.as_str().filter(|s| s.starts_with("UPID:")) {
            self.client()
                .wait_task(upid, std::time::Duration::from_secs(30))
                .await
                .expect("task");
        }
    }
}

impl TestCluster for Lab {
    fn repo_path(&self) -> &Path {
        self.repo.path()
    }

    fn client(&self) -> &proxops_pve::Client {
        &self.client
    }

    async fn requests(&self) -> Vec<proxops_sim::RequestRecord> {
        self.sim.requests()
    }

    async fn clear(&self) {
        self.sim.clear_requests();
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.run_env(args, &[]).await
    }
}

/// A `proxops sim serve` child and a repository whose `lab` cluster points at it over HTTPS
/// with its pinned fingerprint; the request log is read from its `/_sim/requests`.
pub struct Served {
    pub sim: SimChild,
    pub repo: tempfile::TempDir,
    secret: String,
}

impl Served {
    /// `proxops sim serve --nodes pve01,pve02` with a fixed root token, and an empty repository
    /// with `clusters/lab.yaml`.
    pub async fn start() -> Served {
        let secret = "served-e2e-secret-0000";
        let sim = sim_child("e2e", secret, &["--nodes", "pve01,pve02"]).await;
        let repo = tempfile::tempdir().unwrap();
        let served = Served {
            sim,
            repo,
            secret: secret.to_string(),
        };
        served.write(
            "clusters/lab.yaml",
            &format!(
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {}\n  token: {{id: 'root@pam!e2e', secret: {{env: {TOKEN_VAR}}}}}\n  tls: {{fingerprint: '{}'}}\n",
                served.sim.url, served.sim.fingerprint
            ),
        );
        served
    }

    /// A request to the simulator's admin API (`/_sim/<path>`, outside `/api2/json`), over the
    /// host's own TLS stack pinned to its certificate; the answer's text.
    async fn admin(&self, delete: bool, path: &str) -> String {
        let http = proxops_pve::https_builder(&proxops_pve::TlsMode::Fingerprint(
            self.sim.fingerprint.clone(),
        ))
        .expect("a TLS client")
        .build()
        .expect("a TLS client");
        let url = format!("{}/_sim/{path}", self.sim.url);
        let request = if delete {
            http.delete(url)
        } else {
            http.get(url)
        };
        request
            .header("Authorization", format!("PVEAPIToken={}", self.sim.token))
            .send()
            .await
            .expect("the simulator's admin API")
            .text()
            .await
            .expect("its answer")
    }
}

impl TestCluster for Served {
    fn repo_path(&self) -> &Path {
        self.repo.path()
    }

    fn client(&self) -> &proxops_pve::Client {
        &self.sim.client
    }

    async fn requests(&self) -> Vec<proxops_sim::RequestRecord> {
        let text = self.admin(false, "requests").await;
        let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        serde_json::from_value(v["data"].clone()).expect("request records")
    }

    async fn clear(&self) {
        self.admin(true, "requests").await;
    }

    async fn run(&self, args: &[&str]) -> Run {
        let out = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
                .arg("--cache-dir")
                .arg(shared_cache())
                .args(args)
                .arg(self.repo.path())
                .env(TOKEN_VAR, &self.secret)
                .env_remove("PROXOPS_LOG")
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("proxops {args:?} did not finish within 120 s"))
        .expect("run proxops");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}
