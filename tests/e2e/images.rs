//! DiskImage and ISO end to end: downloads by PVE from a loopback server, checksums,
//! image-seeded disks, CD/DVD attachment, and what is reported instead of replaced.

use crate::support::{Lab, serve_files, sha256_hex, template, vm};

/// A raw "cloud image": PVE imports a raw file at its byte size.
fn image_bytes() -> Vec<u8> {
    (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect()
}

fn disk_image(name: &str, url: &str, checksum: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: DiskImage\nmetadata: {{name: {name}}}\nspec:\n  url: {url}\n  storage: local\n  checksum: {checksum}\n  checksum-algorithm: sha256\n{extra}"
    )
}

fn iso(name: &str, url: &str, checksum: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata: {{name: {name}}}\nspec:\n  url: {url}\n  storage: local\n  checksum: {checksum}\n  checksum-algorithm: sha256\n"
    )
}

/// A VM whose only disk is seeded from the DiskImage `image`.
fn vm_from_image(name: &str, node: &str, vmid: u32, image: &str) -> String {
    vm(name, node, vmid, "").replace(
        "{storage: local-lvm, size: 4GiB}",
        &format!("{{storage: local-lvm, image: {image}}}"),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_from_a_cloud_image_downloads_once_and_imports() {
    let bytes = image_bytes();
    let (base, _server) = serve_files(vec![("/noble.raw", bytes.clone())]).await;
    let lab = Lab::start().await;
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image(
            "noble",
            &format!("{base}/noble.raw"),
            &sha256_hex(&bytes),
            "",
        ),
    );
    lab.write("vm/lab/a.yaml", &vm_from_image("a", "pve01", 401, "noble"));
    lab.write("vm/lab/b.yaml", &vm_from_image("b", "pve01", 402, "noble"));
    lab.apply().await;

    let requests = lab.sim.requests();
    let downloads: Vec<_> = requests
        .iter()
        .filter(|r| r.path.ends_with("/download-url"))
        .collect();
    assert_eq!(downloads.len(), 1, "two VMs on one node share one download");
    let first_create = requests
        .iter()
        .position(|r| r.method == "POST" && r.path == "/nodes/pve01/qemu")
        .unwrap();
    let download = requests
        .iter()
        .position(|r| r.path.ends_with("/download-url"))
        .unwrap();
    assert!(
        download < first_create,
        "the download finishes before the VMs are created"
    );
    let create = &requests[first_create];
    assert!(
        create
            .params
            .iter()
            .any(|(k, v)| k == "scsi0" && v == "local-lvm:0,import-from=local:import/noble.raw"),
        "{:?}",
        create.params
    );
    assert!(
        lab.config(401)["scsi0"].starts_with("local-lvm:vm-401-disk-0"),
        "{:?}",
        lab.config(401)
    );

    lab.clear();
    lab.apply().await;
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checksum_mismatch_fails_the_download_and_only_the_vms_that_need_it() {
    let bytes = image_bytes();
    let (base, _server) = serve_files(vec![("/noble.raw", bytes.clone())]).await;
    let lab = Lab::start().await;
    let wrong = sha256_hex(b"something else");
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image("noble", &format!("{base}/noble.raw"), &wrong, ""),
    );
    lab.write("vm/lab/a.yaml", &vm_from_image("a", "pve01", 401, "noble"));
    // A clone named like the failing DiskImage: it needs a second pass (configure, start),
    // and objects are told apart by kind and name, so the image's failure does not stop it.
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve02", 9000, ""),
    );
    lab.write(
        "vm/lab/noble.yaml",
        &vm("noble", "pve02", 403, "  clone: golden\n")
            .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", ""),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("checksum mismatch: got"),
        "PVE's task message is shown:\n{}",
        run.stdout
    );
    // The file's checksum is not a config digest: a failure, not a re-plan, and sent once.
    assert!(!run.stdout.contains("planned again"), "{}", run.stdout);
    let downloads = lab
        .mutations()
        .into_iter()
        .filter(|m| m.contains("/download-url"))
        .count();
    assert_eq!(downloads, 1, "{:?}", lab.mutations());
    assert!(
        lab.sim.vm_config(401).is_none(),
        "the VM needing the image is not created"
    );
    assert!(lab.sim.vm_config(403).is_some(), "independent VMs proceed");
    assert_eq!(
        lab.sim.vm_status(403).as_deref(),
        Some("running"),
        "{}",
        run.stdout
    );
}

/// A download that failed on one node is still to do there only: the other node's finished.
#[tokio::test(flavor = "multi_thread")]
async fn after_one_nodes_download_fails_only_that_node_is_still_to_do() {
    let bytes = image_bytes();
    let (base, _server) = serve_files(vec![("/noble.raw", bytes.clone())]).await;
    let lab = Lab::start().await;
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image(
            "noble",
            &format!("{base}/noble.raw"),
            &sha256_hex(&bytes),
            "",
        ),
    );
    lab.write("vm/lab/a.yaml", &vm_from_image("a", "pve01", 401, "noble"));
    lab.write("vm/lab/b.yaml", &vm_from_image("b", "pve02", 402, "noble"));
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/storage/{storage}/download-url".into(),
        kind: proxops_sim::FaultKind::FailTask {
            message: "injected: mirror unreachable".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    let still = run
        .stdout
        .split("Still to do:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Still to do:\n{}", run.stdout));
    let downloads: Vec<&str> = still
        .lines()
        .filter(|l| l.contains("DiskImage noble: download"))
        .collect();
    assert_eq!(downloads.len(), 1, "{}", run.stdout);
    // The next run downloads on the failed node only.
    lab.clear();
    lab.sim.set_faults(Vec::new());
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
    let sent = lab
        .mutations()
        .into_iter()
        .filter(|m| m.contains("/download-url"))
        .count();
    assert_eq!(sent, 1, "{:?}", lab.mutations());
}

#[tokio::test(flavor = "multi_thread")]
async fn iso_attach_detach_and_cloud_init_together() {
    let bytes = b"an installer".repeat(1000);
    let (base, _server) = serve_files(vec![("/installer.iso", bytes.clone())]).await;
    let lab = Lab::start().await;
    lab.write(
        "iso/lab/installer.yaml",
        &iso(
            "installer",
            &format!("{base}/installer.iso"),
            &sha256_hex(&bytes),
        ),
    );
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  hardware: {cdrom: {iso: installer}}\n",
        ),
    );
    lab.apply().await;
    // PVE records the ISO's size (12,000 bytes, printed as bytes: not a whole KiB).
    assert_eq!(
        lab.config(150)["ide2"],
        "local:iso/installer.iso,media=cdrom,size=12000"
    );

    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {cdrom: {iso: none}}\n"),
    );
    lab.apply().await;
    assert_eq!(lab.config(150)["ide2"], "none,media=cdrom");

    lab.write(
        "vm/lab/ci.yaml",
        &vm("ci", "pve01", 151, "  hardware: {cdrom: {iso: installer}, cloud-init: {enabled: true, storage: local-lvm}}\n"),
    );
    lab.apply().await;
    let ci = lab.config(151);
    assert_eq!(ci["ide2"], "local-lvm:vm-151-cloudinit,media=cdrom");
    assert_eq!(ci["ide3"], "local:iso/installer.iso,media=cdrom,size=12000");
    lab.clear();
    lab.apply().await;
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_image_is_reported_not_replaced_and_a_moved_disk_is_an_anomaly() {
    let bytes = image_bytes();
    let (base, _server) = serve_files(vec![("/noble.raw", bytes.clone())]).await;
    let lab = Lab::start().await;
    let url = format!("{base}/noble.raw");
    let sum = sha256_hex(&bytes);
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image("noble", &url, &sum, &format!("  size: {}\n", bytes.len())),
    );
    lab.write("vm/lab/a.yaml", &vm_from_image("a", "pve01", 401, "noble"));
    lab.apply().await;

    // Upstream published a new image: the manifest records its size; the old file stays.
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image("noble", &url, &sum, "  size: 2097152\n"),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(run.stdout.contains("! DiskImage noble"), "{}", run.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());

    // The image-seeded disk asked on another pool: the data-loss guard, never a re-import.
    lab.write(
        "diskimage/lab/noble.yaml",
        &disk_image("noble", &url, &sum, &format!("  size: {}\n", bytes.len())),
    );
    lab.write(
        "vm/lab/a.yaml",
        &vm_from_image("a", "pve01", 401, "noble")
            .replace("storage: local-lvm, image", "storage: local, image"),
    );
    let run = lab.run(&["apply"]).await;
    assert!(run.stdout.contains("! VM a"), "{}", run.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
}
