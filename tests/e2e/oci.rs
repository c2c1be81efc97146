//! Policies from an OCI registry: a real registry (Debian's `docker-registry`) on loopback,
//! started by this harness and stopped by PID. `proxops policy push` publishes; `plan` pulls
//! the pinned component once and uses it; a pin that differs refuses it (nothing run, nothing
//! cached); a registry that is down is no problem with a warm cache and a clear error with a
//! cold one.
//!
//! Without `docker-registry` on PATH the tests are skipped with a note, except in CI
//! (`CI=true`) or with PROXOPS_REQUIRE_TOOLCHAINS=1, where they fail.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Lab, sha256_hex, vm};

const INSTALL: &str = "install it with `apt-get install docker-registry`";

/// A `docker-registry serve` child on a free loopback port, killed (by PID) on drop.
struct LoopbackRegistry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl LoopbackRegistry {
    fn start() -> Option<LoopbackRegistry> {
        let found = Command::new("docker-registry")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        let required = std::env::var("CI").as_deref() == Ok("true")
            || std::env::var("PROXOPS_REQUIRE_TOOLCHAINS").as_deref() == Ok("1");
        assert!(found || !required, "docker-registry is missing: {INSTALL}");
        if !found {
            eprintln!("skipping the OCI test: docker-registry is missing; {INSTALL}");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let registry = LoopbackRegistry {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    fn reference(&self, repo: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo}", self.port)
    }

    /// Stop it by PID, as an outage would.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LoopbackRegistry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn policy_wasm(package: &str) -> PathBuf {
    PathBuf::from(proxops_guests::artifact_path(package).expect("policy is built"))
}

/// Pin `reference` with `pin` in the lab's proxops.yaml, enforced.
fn pin(lab: &Lab, reference: &str, pin: &str) {
    lab.write(
        "proxops.yaml",
        &format!("policies:\n  - file: {reference}\n    sha256: {pin}\n    mode: enforce\n"),
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policies_come_from_a_registry_pinned_and_cached() {
    let Some(mut registry) = LoopbackRegistry::start() else {
        return;
    };
    let wasm = policy_wasm("proxops-policy-require-protection-prod");
    let bytes = std::fs::read(&wasm).unwrap();
    let good = sha256_hex(&bytes);
    let reference = registry.reference("policies/require-protection-prod:1.0");

    // Publish it, as a policy author would.
    let push = crate::support::proxops(&["policy", "push", wasm.to_str().unwrap(), &reference]);
    assert_eq!(push.code, 0, "{}\n{}", push.stdout, push.stderr);
    assert!(
        push.stdout.contains(&format!("sha256: {good}")),
        "{}",
        push.stdout
    );

    let lab = Lab::start().await;
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, "  tags: [prod]\n"),
    );
    let cache = tempfile::tempdir().unwrap();
    let cache_arg = cache.path().to_str().unwrap();

    // A pin that differs (another policy's hash): refused, nothing run, nothing cached.
    let other = sha256_hex(&std::fs::read(policy_wasm("proxops-policy-misbehave")).unwrap());
    pin(&lab, &reference, &other);
    lab.clear();
    let refused = lab.run(&["--cache-dir", cache_arg, "plan"]).await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains(&format!(
            "refused: {reference} holds a component with sha256 {good}, but the pin is {other}"
        )),
        "{}",
        refused.stderr
    );
    assert!(!refused.stderr.contains("compiling"), "{}", refused.stderr);
    assert!(!proxops_core::pin::oci_cached_path(cache.path(), &other).exists());
    assert!(lab.sim.requests().is_empty(), "no cluster was contacted");

    // The right pin: pulled once, then run (it denies the unprotected prod VM).
    pin(&lab, &reference, &good);
    let plan = lab.run(&["--cache-dir", cache_arg, "plan"]).await;
    assert_eq!(plan.code, 1, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stderr.contains(&format!("pulled {reference}")),
        "{}",
        plan.stderr
    );
    assert!(
        plan.stdout
            .contains("policy require-protection-prod denied VM web"),
        "{}",
        plan.stdout
    );
    let cached = proxops_core::pin::oci_cached_path(cache.path(), &good);
    assert_eq!(std::fs::read(&cached).unwrap(), bytes);
    assert_eq!(lab.mutations(), Vec::<String>::new());

    // The registry goes down: the warm cache serves, without asking it.
    registry.stop();
    let offline = lab.run(&["--cache-dir", cache_arg, "plan"]).await;
    assert_eq!(offline.code, 1, "{}", offline.stderr);
    assert!(!offline.stderr.contains("pulled"), "{}", offline.stderr);
    assert!(
        offline
            .stdout
            .contains("policy require-protection-prod denied VM web"),
        "{}",
        offline.stdout
    );

    // A cold cache with the registry down: a clear error, nothing run.
    let cold = tempfile::tempdir().unwrap();
    lab.clear();
    let down = lab
        .run(&["--cache-dir", cold.path().to_str().unwrap(), "plan"])
        .await;
    assert_eq!(down.code, 1, "{}", down.stderr);
    assert!(
        down.stderr
            .contains("components of proxops.yaml cannot be pulled from their registries")
            && down.stderr.contains(&format!(
                "policies[0].file: cannot use {reference}: cannot reach 127.0.0.1:{}",
                registry.port
            )),
        "{}",
        down.stderr
    );
    assert!(lab.sim.requests().is_empty(), "no cluster was contacted");
}
