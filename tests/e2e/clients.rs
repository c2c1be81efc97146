//! Real PVE clients against `proxops sim serve`: proxmoxer (Python, what Ansible's
//! community.proxmox is built on) drives a VM's life (create, config, power, resize, clone,
//! delete, refusals), then the test checks the simulator's own state.
//!
//! Without python3 and proxmoxer the test is skipped with a note, except in CI (`CI=true`, as
//! .ci/run runs, which installs proxmoxer) or with PROXOPS_REQUIRE_CLIENTS=1, where it fails.

use tokio::io::{AsyncBufReadExt, BufReader};

const INSTALL: &str = "install it with `pip install proxmoxer==2.3.0 requests`";

/// Whether python3 can import proxmoxer; `false` (skip) when not, outside CI.
fn have_proxmoxer() -> bool {
    let found = std::process::Command::new("python3")
        .args(["-c", "import proxmoxer, requests"])
        .output()
        .is_ok_and(|o| o.status.success());
    let required = std::env::var("CI").as_deref() == Ok("true")
        || std::env::var("PROXOPS_REQUIRE_CLIENTS").as_deref() == Ok("1");
    assert!(
        found || !required,
        "python3 cannot import proxmoxer: {INSTALL}"
    );
    if !found {
        eprintln!("skipping the proxmoxer test: python3 cannot import proxmoxer; {INSTALL}");
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn proxmoxer_drives_a_vm_through_its_life() {
    if !have_proxmoxer() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args([
            "sim",
            "serve",
            "--nodes",
            "pve01,pve02",
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--token",
            "root@pam!client=0c0ffee0-1111-2222-3333-444444444444",
        ])
        .arg("--state")
        .arg(dir.path().join("sim.json"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().unwrap();
    let _token = lines.next_line().await.unwrap().unwrap();
    let fingerprint = lines.next_line().await.unwrap().unwrap();
    let port = url.rsplit(':').next().unwrap().to_string();

    let flow = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/e2e/clients/proxmoxer_flow.py"
    );
    let run = tokio::process::Command::new("python3")
        .arg(flow)
        .args([
            "127.0.0.1",
            &port,
            "client",
            "0c0ffee0-1111-2222-3333-444444444444",
        ])
        .output()
        .await
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout.trim(), "ok", "{stderr}");

    // The simulator's own view: the clone is the only guest left, with the source's config
    // as proxmoxer wrote it and the grown disk.
    let client = proxops_pve::Client::new(proxops_pve::ClientConfig {
        base_url: url,
        token_id: "root@pam!client".into(),
        token_secret: "0c0ffee0-1111-2222-3333-444444444444".into(),
        tls: proxops_pve::TlsMode::Fingerprint(fingerprint),
        timeout: std::time::Duration::from_secs(10),
    })
    .unwrap();
    let guests = client.get("/nodes/pve01/qemu", &[]).await.unwrap();
    let vmids: Vec<u64> = guests
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["vmid"].as_u64().unwrap())
        .collect();
    assert_eq!(vmids, [101], "{guests}");
    let config = client
        .get("/nodes/pve01/qemu/101/config", &[])
        .await
        .unwrap();
    assert_eq!(config["name"], "web-copy", "{config}");
    assert_eq!(config["memory"], "2048", "{config}");
    assert_eq!(config["description"], "set by proxmoxer", "{config}");
    let disk = config["scsi0"].as_str().unwrap();
    assert!(
        disk.starts_with("local-lvm:vm-101-disk-0") && disk.ends_with("size=5G"),
        "{disk}"
    );
    child.kill().await.unwrap();
}
