//! `proxops audit` end to end: the site policies against what runs in the simulator (guests
//! made or changed behind proxops's back included), read-only, with its exit codes.

use proxops_pve::Method;

use crate::support::{Lab, sha256_hex, vm};

/// Copy the built require-protection-prod policy into the lab and pin it with `mode`.
fn install(lab: &Lab, mode: &str) {
    let package = "proxops-policy-require-protection-prod";
    let wasm =
        std::fs::read(proxops_guests::artifact_path(package).expect("policy is built")).unwrap();
    lab.write_bytes("policies/prod.wasm", &wasm);
    lab.write(
        "proxops.yaml",
        &format!(
            "policies:\n  - file: policies/prod.wasm\n    sha256: {}\n    mode: {mode}\n    settings: {{tags: [prod]}}\n",
            sha256_hex(&wasm)
        ),
    );
}

/// Every file of the lab's repository with its bytes, to prove audit wrote nothing.
fn files(lab: &Lab) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &std::path::Path, root: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else {
                let rel = path.strip_prefix(root).unwrap().display().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(lab.repo.path(), lab.repo.path(), &mut out);
    out.sort();
    out
}

/// A lab with one compliant prod VM applied from git (150), which is then made unprotected
/// behind proxops's back, and a prod VM no manifest names (160), unprotected.
async fn drifted_lab(mode: &str) -> Lab {
    let lab = Lab::start().await;
    install(&lab, mode);
    lab.write(
        "vm/lab/web.yaml",
        &vm(
            "web",
            "pve01",
            150,
            "  tags: [prod]\n  options: {protection: true}\n",
        ),
    );
    lab.apply().await;
    lab.pve(
        Method::Put,
        "/nodes/pve01/qemu/150/config",
        &[("protection", "0")],
    )
    .await;
    lab.pve(
        Method::Post,
        "/nodes/pve02/qemu",
        &[
            ("vmid", "160"),
            ("name", "rogue"),
            ("tags", "prod"),
            ("memory", "512"),
            ("net0", "virtio,bridge=vmbr0"),
            ("scsi0", "local-lvm:4"),
        ],
    )
    .await;
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "170"),
            ("name", "dev"),
            ("tags", "dev"),
            ("memory", "512"),
            ("net0", "virtio,bridge=vmbr0"),
            ("scsi0", "local-lvm:4"),
        ],
    )
    .await;
    lab
}

#[tokio::test(flavor = "multi_thread")]
async fn audit_reports_running_guests_that_break_a_rule_and_writes_nothing() {
    let lab = drifted_lab("enforce").await;
    let before = files(&lab);
    lab.clear();

    let run = lab.run(&["audit"]).await;
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("Cluster lab: 3 guests audited, 2 break an enforced rule"),
        "{}",
        run.stdout
    );
    for (guest, node) in [("qemu/150", "pve01"), ("qemu/160", "pve02")] {
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains(&format!("({guest} on {node})")))
            .unwrap_or_else(|| panic!("no line for {guest}:\n{}", run.stdout));
        assert!(line.contains("require-protection-prod denied"), "{line}");
        assert!(line.contains("spec.options.protection"), "{line}");
    }
    assert!(!run.stdout.contains("qemu/170"), "{}", run.stdout);
    // Read-only: no request but GETs, and the repository byte for byte as it was.
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert!(
        lab.sim
            .requests()
            .iter()
            .any(|r| r.path.contains("/qemu/150/")),
        "{:?}",
        lab.sim
            .requests()
            .iter()
            .map(|r| &r.path)
            .collect::<Vec<_>>()
    );
    assert_eq!(files(&lab), before);

    // The same findings for programs, per guest and rule.
    let json = lab.run(&["audit", "--json"]).await;
    assert_eq!(json.code, 3, "{}", json.stderr);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let found: Vec<(u64, String, String)> = v["clusters"][0]["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["guest"]["vmid"].as_u64().unwrap(),
                f["policy"].as_str().unwrap().to_string(),
                f["mode"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            (150, "require-protection-prod".into(), "enforce".into()),
            (160, "require-protection-prod".into(), "enforce".into()),
        ]
    );
    assert_eq!(v["clusters"][0]["audited"], 3);

    // And for an issue comment: a table row per finding.
    let md = lab.run(&["audit", "--format", "markdown"]).await;
    assert_eq!(md.code, 3, "{}", md.stderr);
    assert!(md.stdout.starts_with("## proxops audit"), "{}", md.stdout);
    assert_eq!(
        md.stdout.lines().filter(|l| l.starts_with("| VM ")).count(),
        2,
        "{}",
        md.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

/// The exit code by what was found: (policy mode, repair behind proxops's back, expected code).
#[tokio::test(flavor = "multi_thread")]
async fn audit_exit_codes_follow_what_it_found() {
    // Warn mode: shown, but nothing breaks an enforced rule.
    let lab = drifted_lab("warn").await;
    let run = lab.run(&["audit"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("would deny (not enforced)"),
        "{}",
        run.stdout
    );

    // Enforce mode, every guest repaired: clean.
    install(&lab, "enforce");
    for (node, vmid) in [("pve01", 150), ("pve02", 160)] {
        lab.pve(
            Method::Put,
            &format!("/nodes/{node}/qemu/{vmid}/config"),
            &[("protection", "1")],
        )
        .await;
    }
    let run = lab.run(&["audit"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("3 guests audited, 0 break an enforced rule, 0 other"),
        "{}",
        run.stdout
    );

    // A guest no kind can write a manifest for (no network interface): listed as not audited, exit 3.
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[("vmid", "180"), ("name", "bare"), ("memory", "512")],
    )
    .await;
    let run = lab.run(&["audit"]).await;
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("qemu/180: not audited") && l.contains("spec.networks")),
        "{}",
        run.stdout
    );

    // A cluster that is not there: an error naming it, exit 1.
    let run = lab.run(&["audit", "--cluster", "nowhere"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stderr.contains("no cluster `nowhere`"),
        "{}",
        run.stderr
    );
}

/// `watch --audit`: each cycle audits the running guests; the violations are lines when they
/// appear or are resolved, and `proxops_policy_violations{cluster,policy,mode}` counts them.
#[tokio::test(flavor = "multi_thread")]
async fn watch_audit_exports_violations_per_policy_and_follows_repairs() {
    use crate::gitops::{Watching, wait_metric};
    let lab = drifted_lab("enforce").await;
    lab.clear();
    let w = Watching::start(
        &lab,
        &[
            "--audit",
            "--interval",
            "1s",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = w.metrics_addr().await;
    let sample = "proxops_policy_violations{cluster=\"lab\",policy=\"require-protection-prod\",mode=\"enforce\"}";
    wait_metric(&addr, sample, 2.0).await;
    w.wait_for(&["[lab] new: audit: ✗ VM rogue (qemu/160 on pve02)"], 1)
        .await;

    // Repaired behind proxops's back: the gauge follows, the finding is resolved.
    lab.pve(
        Method::Put,
        "/nodes/pve02/qemu/160/config",
        &[("protection", "1")],
    )
    .await;
    wait_metric(&addr, sample, 1.0).await;
    w.wait_for(&["[lab] resolved: audit: ✗ VM rogue"], 1).await;
    // Watch without --apply and audit: reads only.
    assert!(
        lab.mutations()
            .iter()
            .all(|m| m.starts_with("PUT /nodes/pve02/qemu/160/config")),
        "{:?}",
        lab.mutations()
    );
    assert_eq!(w.stop("TERM").await, 143);
}
