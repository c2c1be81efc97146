//! `proxops sim serve`: prints base URL, token and fingerprint, and serves the PVE API.

use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread")]
async fn sim_serve_prints_url_token_fingerprint_and_serves_pve() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args([
            "sim",
            "serve",
            "--nodes",
            "pve01,pve02,pve03",
            "--listen",
            "127.0.0.1:0",
            "--token",
            "root@pam!ci=s3cret",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().unwrap();
    let token = lines.next_line().await.unwrap().unwrap();
    let fingerprint = lines.next_line().await.unwrap().unwrap();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert_eq!(token, "root@pam!ci=s3cret");
    assert_eq!(fingerprint.split(':').count(), 32, "{fingerprint}");

    let client = proxops_pve::Client::new(proxops_pve::ClientConfig {
        base_url: url,
        token_id: "root@pam!ci".into(),
        token_secret: "s3cret".into(),
        tls: proxops_pve::TlsMode::Fingerprint(fingerprint),
        timeout: std::time::Duration::from_secs(10),
    })
    .unwrap();
    let nodes = client.get("/nodes", &[]).await.unwrap();
    assert_eq!(nodes.as_array().map(Vec::len), Some(3), "{nodes}");
    let version = client.get("/version", &[]).await.unwrap();
    assert!(
        version["version"].as_str().unwrap().starts_with("9."),
        "{version}"
    );
    child.kill().await.unwrap();
}
