//! Storage behaviours: content types per storage, `import-from` images, `download-url` with
//! checksum verification (served from a one-shot loopback HTTP server).

use serde_json::json;

use super::{T, enc};
use crate::SimConfig;

#[tokio::test]
async fn import_from_and_format_not_reported_after_create() {
    let t = T::with(SimConfig {
        tls: false,
        ..SimConfig::default()
    })
    .await;
    let image = qcow2_image(3 * 1024 * 1024 * 1024);
    let url = serve_once(image.clone()).await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "import"),
                ("filename", "noble.qcow2"),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    t.create(
        100,
        &[(
            "scsi0",
            "local-lvm:0,import-from=local:import/noble.qcow2,format=qcow2,discard=on",
        )],
    )
    .await;
    let c = t.config(100).await;
    assert_eq!(c["scsi0"], "local-lvm:vm-100-disk-0,discard=on,size=3G");
    t.check(
        "POST",
        "/nodes/pve01/qemu",
        &[
            ("vmid", "101"),
            ("scsi0", "local-lvm:5,import-from=local:import/noble.qcow2"),
        ],
        400,
        "'import-from' requires special syntax",
    )
    .await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/qemu",
            &[
                ("vmid", "102"),
                (
                    "scsi0",
                    "local-lvm:0,import-from=local:import/missing.qcow2",
                ),
            ],
        )
        .await;
    assert!(
        exit.contains("volume 'local:import/missing.qcow2' does not exist"),
        "{exit}"
    );
    t.check(
        "GET",
        "/nodes/pve01/qemu/102/config",
        &[],
        500,
        "does not exist",
    )
    .await;
}

#[tokio::test]
async fn storage_content_types_enforced() {
    let t = T::new().await;
    t.check(
        "POST",
        "/nodes/pve01/storage/local-lvm/download-url",
        &[
            ("url", "http://127.0.0.1:1/x.qcow2"),
            ("content", "import"),
            ("filename", "x.qcow2"),
        ],
        500,
        "not a file based storage",
    )
    .await;
    let t2 = T::with(SimConfig {
        storages: vec![
            crate::StorageConfig::new("local", "dir", &["iso"]),
            crate::StorageConfig::new("local-lvm", "lvmthin", &["images"]),
        ],
        ..SimConfig::default()
    })
    .await;
    t2.check(
        "POST",
        "/nodes/pve01/storage/local/download-url",
        &[
            ("url", "http://127.0.0.1:1/x.qcow2"),
            ("content", "import"),
            ("filename", "x.qcow2"),
        ],
        500,
        "storage 'local' is not configured for content-type 'import'",
    )
    .await;
    t2.check(
        "POST",
        "/nodes/pve01/qemu",
        &[
            ("vmid", "100"),
            ("scsi0", "local-lvm:0,import-from=local:import/x.qcow2"),
        ],
        500,
        "storage 'local' is not configured for content-type 'import'",
    )
    .await;
    t.check(
        "POST",
        "/nodes/pve01/qemu",
        &[("vmid", "100"), ("scsi0", "local:4")],
        400,
        "does not support vm images",
    )
    .await;
    t.check(
        "POST",
        "/nodes/pve01/storage/local/download-url",
        &[
            ("url", "http://127.0.0.1:1/x.txt"),
            ("content", "iso"),
            ("filename", "x.txt"),
        ],
        400,
        "wrong file extension",
    )
    .await;
}

#[tokio::test]
async fn download_verifies_checksum() {
    let t = T::with(SimConfig {
        tls: false,
        ..SimConfig::default()
    })
    .await;
    let body = b"hello iso".to_vec();
    let url = serve_once(body.clone()).await;
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&body))
    };
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "iso"),
                ("filename", "a.iso"),
                ("checksum-algorithm", "sha256"),
                ("checksum", &sha),
            ],
        )
        .await;
    assert_eq!(exit, "OK");
    let url = serve_once(body.clone()).await;
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/storage/local/download-url",
            &[
                ("url", &url),
                ("content", "iso"),
                ("filename", "b.iso"),
                ("checksum-algorithm", "md5"),
                ("checksum", "00"),
            ],
        )
        .await;
    assert!(exit.starts_with("checksum mismatch"), "{exit}");
    let content = t.get("/nodes/pve01/storage/local/content", &[]).await;
    assert_eq!(content.as_array().unwrap().len(), 1);
    assert_eq!(content[0]["volid"], "local:iso/a.iso");
    assert_eq!(content[0]["size"], json!(body.len()));
    assert_eq!(content[0]["format"], "iso");
    t.check(
        "POST",
        "/nodes/pve01/storage/local/download-url",
        &[
            ("url", &url),
            ("content", "iso"),
            ("filename", "c.iso"),
            ("checksum", "00"),
        ],
        400,
        "missing property required by 'checksum'",
    )
    .await;
    // delete a volume
    let volid = "local:iso/a.iso";
    assert_eq!(
        t.task(
            "DELETE",
            &format!("/nodes/pve01/storage/local/content/{}", enc(volid)),
            &[]
        )
        .await,
        "OK"
    );
    assert!(
        t.get("/nodes/pve01/storage/local/content", &[])
            .await
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// A minimal qcow2 header announcing `virtual_size` bytes.
fn qcow2_image(virtual_size: u64) -> Vec<u8> {
    let mut v = vec![0u8; 512];
    v[0..4].copy_from_slice(&[0x51, 0x46, 0x49, 0xfb]);
    v[4..8].copy_from_slice(&3u32.to_be_bytes());
    v[24..32].copy_from_slice(&virtual_size.to_be_bytes());
    v
}

/// Serves `body` over plain HTTP on loopback for one request; returns its URL.
async fn serve_once(body: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&body).await;
            let _ = s.shutdown().await;
        }
    });
    format!("http://{addr}/file")
}
