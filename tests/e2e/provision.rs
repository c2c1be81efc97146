//! Provisioning from a TemplateVM, cloud-init data and SOPS-backed secrets, end to end.

use crate::support::{Lab, template, vm, workspace};

/// The password in tests/fixtures/sops/cluster.sops.yaml at cloud-init.passwords.root: it
/// must never appear in anything proxops prints.
const CANARY: &str = "correct horse battery staple";

/// A lab whose repository carries the test SOPS document as the cluster's secrets.
async fn sops_lab() -> Lab {
    let lab = Lab::start().await;
    let doc =
        std::fs::read_to_string(workspace().join("tests/fixtures/sops/cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &doc);
    lab
}

fn identity() -> String {
    workspace()
        .join("tests/fixtures/sops/TEST-ONLY-age-key.txt")
        .display()
        .to_string()
}

/// Run proxops with the test age identity; assert the canary never shows.
async fn run(lab: &Lab, args: &[&str]) -> crate::support::Run {
    let id = identity();
    let mut all = vec!["--age-identity", id.as_str(), "-vv"];
    all.extend_from_slice(args);
    let run = lab.run(&all).await;
    assert!(
        !run.stdout.contains(CANARY) && !run.stderr.contains(CANARY),
        "secret leaked:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

async fn apply(lab: &Lab) -> crate::support::Run {
    let run = run(lab, &["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    run
}

const GOLDEN_IDENTITY: &str = "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-user: golden\n    ssh-keys: ['ssh-ed25519 AAAAgolden golden@tpl']\n    nameservers: [192.0.2.53]\n    search-domains: [golden.example]\n    ipconfigs: [{nic: 0, ip: 192.0.2.10/24, gateway: 192.0.2.1}]\n";

fn clone(extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: app}}\nspec:\n  node: pve01\n  vmid: 500\n  clone: golden\n  memory: 2GiB\n  cpu: {{type: host, cores: 2}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n  hardware: {{cloud-init: {{enabled: true, storage: local-lvm}}}}\n{extra}"
    )
}

const OWN_IDENTITY: &str = "  cloud-init-data:\n    ci-user: deploy\n    ipconfigs: [{nic: 0, ip: 198.51.100.50/24, gateway: 198.51.100.1}]\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_clone_gets_its_own_identity_and_none_of_the_templates() {
    let lab = sops_lab().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, GOLDEN_IDENTITY),
    );
    lab.write("vm/lab/app.yaml", &clone(OWN_IDENTITY));
    apply(&lab).await;

    let clone_call = lab
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/clone"))
        .expect("a clone");
    assert_eq!(clone_call.path, "/nodes/pve01/qemu/9000/clone");
    assert!(
        clone_call.params.contains(&("full".into(), "1".into())),
        "{:?}",
        clone_call.params
    );
    let config = lab.config(500);
    assert_eq!(config["ciuser"], "deploy");
    assert_eq!(config["ipconfig0"], "ip=198.51.100.50/24,gw=198.51.100.1");
    for inherited in ["searchdomain", "sshkeys", "nameserver"] {
        assert!(
            !config.contains_key(inherited),
            "{inherited} leaked from the template: {config:?}"
        );
    }
    assert_eq!(config["memory"], "2048");
    assert_eq!(config["name"], "app");
    assert!(config["tags"].contains("proxops"));
    assert_eq!(lab.sim.vm_status(500).as_deref(), Some("running"));

    lab.clear();
    apply(&lab).await;
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cd_drive_never_replaces_the_cloud_init_drive_a_clone_inherits() {
    let lab = sops_lab().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, GOLDEN_IDENTITY),
    );
    // The VM declares a CD/DVD drive but no cloud-init, so its CD/DVD slot is ide2: where the
    // clone holds the cloud-init drive it inherited.
    let app = clone("").replace(
        "hardware: {cloud-init: {enabled: true, storage: local-lvm}}",
        "hardware: {cdrom: {iso: none}}",
    );
    lab.write("vm/lab/app.yaml", &app);
    let first = run(&lab, &["apply"]).await;
    let inherited = "local-lvm:vm-500-cloudinit,media=cdrom";
    assert_eq!(lab.config(500)["ide2"], inherited, "{}", first.stdout);
    for r in lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.path.contains("/500"))
    {
        assert!(
            !r.params.iter().any(|(k, _)| k == "ide2"),
            "{} {} wrote ide2: {:?}\n{}",
            r.method,
            r.path,
            r.params,
            first.stdout
        );
    }
    let plan = run(&lab, &["plan"]).await;
    assert!(
        plan.stdout
            .contains("ide2 holds the cloud-init drive `local-lvm:vm-500-cloudinit,media=cdrom`"),
        "{}",
        plan.stdout
    );
    assert_eq!(lab.config(500)["ide2"], inherited);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_clone_whose_config_write_failed_is_repaired_by_the_next_apply() {
    let lab = sops_lab().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, GOLDEN_IDENTITY),
    );
    apply(&lab).await;
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/config".into(),
        kind: proxops_sim::FaultKind::Status {
            code: 500,
            message: "got a disk error".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    lab.write("vm/lab/app.yaml", &clone(OWN_IDENTITY));
    let failed = run(&lab, &["apply"]).await;
    assert_eq!(failed.code, 1, "{}", failed.stdout);
    assert!(
        failed.stdout.contains("got a disk error"),
        "{}",
        failed.stdout
    );
    assert_eq!(
        lab.config(500)["searchdomain"],
        "golden.example",
        "the clone still carries the template's identity"
    );

    apply(&lab).await;
    let config = lab.config(500);
    assert_eq!(config["ciuser"], "deploy");
    assert!(
        !config.contains_key("searchdomain") && !config.contains_key("sshkeys"),
        "{config:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ci_password_from_sops_is_written_once_and_never_rewritten() {
    let lab = sops_lab().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-user: deploy\n    ci-password-ref: cloud-init.passwords.root\n    ssh-key-refs: [cloud-init.ssh-keys.alice]\n"),
    );
    let plan = run(&lab, &["plan", "--json"]).await;
    assert!(
        plan.stdout.contains("(sensitive)"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    apply(&lab).await;
    let config = lab.config(150);
    assert!(config.contains_key("cipassword"), "{config:?}");
    assert!(config["sshkeys"].contains("alice"), "{config:?}");
    let sent = lab
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path == "/nodes/pve01/qemu")
        .unwrap();
    assert!(
        sent.params
            .iter()
            .any(|(k, v)| k == "cipassword" && v == CANARY),
        "PVE receives the resolved value"
    );

    lab.clear();
    apply(&lab).await;
    assert_eq!(
        lab.mutations(),
        Vec::<String>::new(),
        "a set cipassword is never rewritten or compared"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn reordered_ssh_keys_are_not_drift() {
    let lab = sops_lab().await;
    let keys = |a: &str, b: &str| {
        vm(
            "app",
            "pve01",
            150,
            &format!(
                "  hardware: {{cloud-init: {{enabled: true, storage: local-lvm}}}}\n  cloud-init-data:\n    ssh-keys: ['{a}', '{b}']\n"
            ),
        )
    };
    lab.write(
        "vm/lab/app.yaml",
        &keys("ssh-ed25519 AAAA1 one@x", "ssh-rsa AAAA2+/= two@y"),
    );
    apply(&lab).await;
    lab.write(
        "vm/lab/app.yaml",
        &keys("ssh-rsa AAAA2+/= two@y", "ssh-ed25519 AAAA1 one@x"),
    );
    let plan = run(&lab, &["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}", plan.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_secret_ref_fails_closed_naming_the_ref() {
    let lab = sops_lab().await;
    lab.write("vm/lab/good.yaml", &vm("good", "pve02", 151, ""));
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  cloud-init-data:\n    ci-password-ref: cloud-init.passwords.nobody\n",
        ),
    );
    lab.clear();
    let failed = run(&lab, &["apply"]).await;
    assert_eq!(failed.code, 1, "{}", failed.stdout);
    assert!(
        failed.stdout.contains("cloud-init.passwords.nobody"),
        "{}",
        failed.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_api_token_can_come_from_sops() {
    // The simulator's token secret is fixed to the one in the SOPS fixture (pve.token).
    let config = proxops_sim::SimConfig {
        token: Some("root@pam!proxops=8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d".into()),
        ..proxops_sim::SimConfig::default()
    };
    let lab = Lab::with(config).await;
    let doc =
        std::fs::read_to_string(workspace().join("tests/fixtures/sops/cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &doc);
    let cluster = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
    lab.write(
        "clusters/lab.yaml",
        &cluster.replace("{env: PROXOPS_TEST_TOKEN}", "{sops: pve.token}"),
    );
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    let id = identity();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(["--cache-dir"])
        .arg(crate::support::shared_cache())
        .args(["--age-identity", &id, "plan"])
        .arg(lab.repo.path())
        .env_remove(crate::support::TOKEN_VAR)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("+ VM app"), "{stdout}");
    assert!(!stdout.contains("8d9f3c2a"), "the token never shows");
}

/// A validation that read a secret is never answered from the memo of earlier runs: the
/// secret may have changed (or gone) while the manifest did not.
#[tokio::test(flavor = "multi_thread")]
async fn a_validation_that_reads_a_secret_is_never_remembered() {
    let lab = sops_lab().await;
    let cloud_init = "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-password-ref: cloud-init.passwords.root\n";
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, cloud_init));
    lab.write("vm/lab/plain.yaml", &vm("plain", "pve02", 151, ""));
    let first = run(&lab, &["plan"]).await;
    assert_eq!(first.code, 2, "{}\n{}", first.stdout, first.stderr);
    let second = run(&lab, &["plan"]).await;
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert!(
        second.stderr.contains("(1 answered from the memo"),
        "only the manifest that reads no secret: {}",
        second.stderr
    );

    // The SOPS document now holds nothing this identity can open: the same manifest fails
    // validation, before any request.
    let other =
        std::fs::read_to_string(workspace().join("tests/fixtures/sops/other-key-only.sops.yaml"))
            .unwrap();
    lab.write("secrets/lab.sops.yaml", &other);
    lab.clear();
    let failed = run(&lab, &["plan"]).await;
    assert_eq!(failed.code, 1, "{}\n{}", failed.stdout, failed.stderr);
    let out = format!("{}{}", failed.stdout, failed.stderr);
    assert!(out.contains("vm/lab/app.yaml"), "{out}");
    assert!(lab.sim.requests().is_empty(), "{:?}", lab.sim.requests());
}
