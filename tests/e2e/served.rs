//! `proxops sim serve` in a process of its own (state file, task durations) with repositories
//! pointing at it, for the tests that kill or race `proxops apply`: the simulator and its
//! running tasks outlive any apply, as a PVE cluster does.

use std::path::{Path, PathBuf};

use proxops_sim::RequestRecord;

const SECRET: &str = "s3cret-for-the-reliability-tests";

/// A served simulator and a client for its API and its `/_sim` admin endpoints.
pub struct Served {
    /// Killed when the handle is dropped.
    _child: tokio::process::Child,
    pub client: proxops_pve::Client,
    url: String,
    fingerprint: String,
    pub dir: tempfile::TempDir,
}

impl Served {
    /// Starts `proxops sim serve` with a state file and `--task-duration task_ms`.
    pub async fn start(task_ms: u64) -> Served {
        Served::start_with(task_ms, &[]).await
    }

    /// [`Served::start`] with more `sim serve` flags (`--agent-boot 500`).
    pub async fn start_with(task_ms: u64, extra: &[&str]) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("sim.json");
        let task_ms = task_ms.to_string();
        let mut args = vec![
            "--task-duration",
            task_ms.as_str(),
            "--state",
            state.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let sim = crate::support::sim_child("ci", SECRET, &args).await;
        Served {
            _child: sim.child,
            client: sim.client,
            url: sim.url,
            fingerprint: sim.fingerprint,
            dir,
        }
    }

    /// A repository folder below this simulator's temporary folder, its `lab` cluster pointing
    /// at the simulator; returns its path.
    pub fn repo(&self, name: &str) -> PathBuf {
        let repo = self.dir.path().join(name);
        std::fs::create_dir_all(repo.join("clusters")).unwrap();
        std::fs::write(
            repo.join("clusters/lab.yaml"),
            format!(
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {}\n  token: {{id: 'root@pam!ci', secret: {{env: {}}}}}\n  tls: {{fingerprint: '{}'}}\n",
                self.url,
                crate::support::TOKEN_VAR,
                self.fingerprint
            ),
        )
        .unwrap();
        repo
    }

    /// `proxops apply REPO` with its own component cache `cache`, not waited for.
    pub fn apply(&self, repo: &Path, cache: &Path) -> tokio::process::Child {
        self.run(&["apply"], repo, cache)
    }

    /// `proxops ARGS… REPO` with its own component cache `cache`, not waited for.
    pub fn run(&self, args: &[&str], repo: &Path, cache: &Path) -> tokio::process::Child {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
            .arg("--cache-dir")
            .arg(cache)
            .args(args)
            .arg(repo)
            .env(crate::support::TOKEN_VAR, SECRET)
            .env_remove("PROXOPS_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run proxops")
    }

    /// A `/_sim` admin endpoint's `data`. The client joins paths below `/api2/json`; the dot
    /// segments climb back to the root (URLs are normalised before they are sent).
    async fn admin(&self, what: &str) -> serde_json::Value {
        self.client
            .get(&format!("/../../_sim/{what}"), &[])
            .await
            .unwrap_or_else(|e| panic!("GET /_sim/{what}: {e}"))
    }

    pub async fn requests(&self) -> Vec<RequestRecord> {
        serde_json::from_value(self.admin("requests").await).unwrap()
    }

    pub async fn state(&self) -> serde_json::Value {
        self.admin("state").await
    }
}

/// A copy of the tests' shared component cache without its run state (locks, memory), so that
/// an apply using it neither compiles the components again nor shares the advisory lock.
pub fn private_cache(into: &Path) -> PathBuf {
    let cache = into.join("cache");
    copy_dir(&crate::support::shared_cache(), &cache);
    cache
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if name == "state" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(&name));
        } else {
            let _ = std::fs::copy(&path, to.join(&name));
        }
    }
}

/// Output of a finished apply child.
pub async fn finish(child: tokio::process::Child) -> crate::support::Run {
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(180),
        child.wait_with_output(),
    )
    .await
    .expect("apply finished within 180 s")
    .expect("wait for proxops");
    crate::support::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A small seeded generator (splitmix64) for kill points and trial layouts.
pub struct Seeded(pub u64);

impl Seeded {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}
