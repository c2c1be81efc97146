//! `proxops sim serve` (URL, token and fingerprint printed; the PVE API served; `--task-duration`) and
//! `proxops sim unlock`.

#[tokio::test(flavor = "multi_thread")]
async fn sim_serve_prints_url_token_fingerprint_and_serves_pve() {
    let sim = crate::support::sim_child("ci", "s3cret", &["--nodes", "pve01,pve02,pve03"]).await;
    let (mut child, url, token, fingerprint, client) =
        (sim.child, sim.url, sim.token, sim.fingerprint, sim.client);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert_eq!(token, "root@pam!ci=s3cret");
    assert_eq!(fingerprint.split(':').count(), 32, "{fingerprint}");
    let nodes = client.get("/nodes", &[]).await.unwrap();
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
    let version = client.get("/version", &[]).await.unwrap();
    assert!(
        version["version"].as_str().unwrap().starts_with("9."),
        "{version}"
    );
    child.kill().await.unwrap();
}

/// A `proxops sim serve` child with a fixed token over HTTPS, and a client for it.
struct Served {
    child: tokio::process::Child,
    client: proxops_pve::Client,
}

async fn serve(extra: &[&str]) -> Served {
    let sim = crate::support::sim_child("ci", "s3cret", extra).await;
    Served {
        child: sim.child,
        client: sim.client,
    }
}

async fn create(client: &proxops_pve::Client, vmid: &str) -> String {
    let upid = client
        .request(
            proxops_pve::Method::Post,
            "/nodes/pve01/qemu",
            &[proxops_pve::Param::new("vmid", vmid)],
            false,
        )
        .await
        .unwrap();
    upid.as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn sim_serve_task_duration_shows_locks_and_running_tasks() {
    let mut served = serve(&["--task-duration", "60000"]).await;
    let upid = create(&served.client, "100").await;
    let resources = served
        .client
        .get(
            "/cluster/resources",
            &[proxops_pve::Param::new("type", "vm")],
        )
        .await
        .unwrap();
    assert_eq!(resources[0]["lock"], "create", "{resources}");
    let active = served
        .client
        .get(
            "/nodes/pve01/tasks",
            &[proxops_pve::Param::new("source", "active")],
        )
        .await
        .unwrap();
    assert_eq!(active[0]["upid"], upid.as_str(), "{active}");
    assert_eq!(active[0]["status"], "RUNNING");
    let status = served
        .client
        .get(
            &format!(
                "/nodes/pve01/tasks/{}/status",
                upid.replace(':', "%3A")
                    .replace('@', "%40")
                    .replace('!', "%21")
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(status["status"], "running", "{status}");
    served.child.kill().await.unwrap();
}

/// Runs `proxops sim unlock ARGS`; returns exit code, stdout and stderr.
fn unlock(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(["sim", "unlock"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn sim_unlock_clears_the_lock_of_a_task_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("sim.json");
    let state_arg = state.to_str().unwrap().to_string();
    let mut served = serve(&["--state", &state_arg, "--task-duration", "3600000"]).await;
    create(&served.client, "100").await;
    // Ctrl-C while the create task runs: the state is saved with the VM still `lock: create`.
    let pid = served.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(served.child.wait().await.unwrap().success());
    let saved = std::fs::read_to_string(&state).unwrap();
    assert!(saved.contains(r#""lock":"create""#), "{saved}");

    let (code, out, _) = unlock(&["100", "--state", &state_arg]);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        format!("VM 100: removed lock 'create' ({state_arg})")
    );
    let (code, out, _) = unlock(&["100", "--state", &state_arg]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("VM 100 is not locked ({state_arg})").as_str())
    );
    let (code, _, err) = unlock(&["101", "--state", &state_arg]);
    assert_eq!(code, 1);
    assert!(err.contains("no VM 101 in the simulator state"), "{err}");

    // A repository's `sim:` state: found by the VM it holds, or named by --cluster.
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(repo.join(".proxops")).unwrap();
    std::fs::copy(&state, repo.join(".proxops/sim-lab.json")).unwrap();
    std::fs::copy(&state, repo.join(".proxops/sim-dr.json")).unwrap();
    let repo_arg = repo.to_str().unwrap();
    let (code, _, err) = unlock(&["100", repo_arg]);
    assert_eq!(code, 1);
    assert!(err.contains("several `sim:` clusters hold VM 100"), "{err}");
    let (code, out, _) = unlock(&["100", repo_arg, "--cluster", "lab"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("VM 100 is not locked"), "{out}");
    let (code, _, err) = unlock(&["200", repo_arg]);
    assert_eq!(code, 1);
    assert!(err.contains("holds VM 200"), "{err}");
}

/// `--ha-crm-delay`: PVE's HA manager in `proxops sim serve` carries out a request state after
/// the delay (an HA resource asked to keep a running VM stopped stops it), and
/// `/cluster/resources` shows the guest's `hastate`.
#[tokio::test(flavor = "multi_thread")]
async fn sim_serve_runs_the_ha_manager_with_its_delay() {
    use proxops_pve::{Method, Param};
    let mut served = serve(&["--ha-crm-delay", "50", "--ha-fence-delay", "200"]).await;
    let client = &served.client;
    client
        .request(
            Method::Post,
            "/nodes/pve01/qemu",
            &[Param::new("vmid", "100"), Param::new("start", "1")],
            false,
        )
        .await
        .unwrap();
    let status = async || {
        let s = client
            .get("/nodes/pve01/qemu/100/status/current", &[])
            .await
            .unwrap();
        s["status"].as_str().unwrap_or_default().to_string()
    };
    for _ in 0..100 {
        if status().await == "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    client
        .request(
            Method::Post,
            "/cluster/ha/resources",
            &[Param::new("sid", "vm:100"), Param::new("state", "stopped")],
            false,
        )
        .await
        .unwrap();
    let mut seen = String::new();
    for _ in 0..100 {
        seen = status().await;
        if seen == "stopped" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        seen, "stopped",
        "HA stopped the VM it was told to keep stopped"
    );
    let listing = client.get("/cluster/resources", &[]).await.unwrap();
    let vm = listing
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 100)
        .unwrap();
    assert_eq!(vm["hastate"], "stopped", "{vm}");
    served.child.kill().await.unwrap();
}
