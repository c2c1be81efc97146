//! Site policies end to end: enforce, warn and monitor against the simulator, hash pins,
//! invalid settings, and a misbehaving policy failing closed.

use crate::support::{Lab, sha256_hex, vm};

/// Copy a built policy into the lab repository and pin it in proxops.yaml.
fn install(lab: &Lab, package: &str, mode: &str, settings: &str) -> String {
    let wasm =
        std::fs::read(proxops_guests::artifact_path(package).expect("policy is built")).unwrap();
    let file = format!("policies/{package}.wasm");
    std::fs::create_dir_all(lab.repo.path().join("policies")).unwrap();
    std::fs::write(lab.repo.path().join(&file), &wasm).unwrap();
    let pin = sha256_hex(&wasm);
    lab.write("proxops.yaml", &format!("policies:\n  - file: {file}\n    sha256: {pin}\n    mode: {mode}\n    settings: {settings}\n"));
    pin
}

const PROD_UNPROTECTED: &str = "  tags: [prod]\n";

#[tokio::test(flavor = "multi_thread")]
async fn enforce_denies_before_any_mutation_and_plan_says_who_and_where() {
    let lab = Lab::start().await;
    install(
        &lab,
        "proxops-policy-require-protection-prod",
        "enforce",
        "{tags: [prod]}",
    );
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, PROD_UNPROTECTED),
    );
    lab.clear();
    let plan = lab.run(&["plan"]).await;
    assert_eq!(plan.code, 1, "{}", plan.stdout);
    assert!(plan.stdout.contains("vm/lab/web.yaml"), "{}", plan.stdout);
    assert!(
        plan.stdout.contains("require-protection-prod"),
        "{}",
        plan.stdout
    );
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}", apply.stdout);
    assert!(
        apply.stdout.contains("blocked by policy"),
        "{}",
        apply.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());

    // Fixing the manifest satisfies the policy.
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
    assert_eq!(lab.config(150)["protection"], "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn warn_shows_and_continues_monitor_only_records() {
    let lab = Lab::start().await;
    install(
        &lab,
        "proxops-policy-require-protection-prod",
        "warn",
        "{tags: [prod]}",
    );
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, PROD_UNPROTECTED),
    );
    let run = lab.apply().await;
    assert!(run.stdout.contains("would deny"), "{}", run.stdout);
    assert!(lab.sim.vm_config(150).is_some());

    install(
        &lab,
        "proxops-policy-require-protection-prod",
        "monitor",
        "{tags: [prod]}",
    );
    lab.write("vm/lab/db.yaml", &vm("db", "pve01", 151, PROD_UNPROTECTED));
    let run = lab.apply().await;
    assert!(
        !run.stdout.contains("require-protection-prod"),
        "monitor is not shown:\n{}",
        run.stdout
    );
    assert!(lab.sim.vm_config(151).is_some());
    let json = lab.run(&["plan", "--json"]).await;
    let views: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let findings = views[0]["policies"]["findings"].as_array().unwrap();
    assert!(
        !findings.is_empty(),
        "monitor findings are recorded in --json"
    );
    assert_eq!(views[0]["policies"]["blocks"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hash_mismatch_refuses_to_run() {
    let lab = Lab::start().await;
    let pin = install(
        &lab,
        "proxops-policy-require-protection-prod",
        "enforce",
        "{tags: [prod]}",
    );
    let text = std::fs::read_to_string(lab.repo.path().join("proxops.yaml")).unwrap();
    lab.write("proxops.yaml", &text.replace(&pin, &"0".repeat(64)));
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("proxops.yaml") && run.stderr.contains("sha256"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty(), "no cluster was contacted");
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_settings_stop_the_run_naming_the_field() {
    let lab = Lab::start().await;
    install(
        &lab,
        "proxops-policy-require-protection-prod",
        "enforce",
        "{tags: 7}",
    );
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("policies[0].settings.tags"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty(), "no cluster was contacted");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_misbehaving_policy_fails_closed_with_the_reason() {
    let lab = Lab::start().await;
    install(
        &lab,
        "proxops-policy-misbehave",
        "enforce",
        "{manifest: loop}",
    );
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("deadline"), "{}", run.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_test_harness_prints_the_verdict() {
    let lab = Lab::start().await;
    install(
        &lab,
        "proxops-policy-require-protection-prod",
        "enforce",
        "{tags: [prod]}",
    );
    lab.write("settings.yaml", "tags: [prod]\n");
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, PROD_UNPROTECTED),
    );
    let root = lab.repo.path();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .arg("--cache-dir")
        .arg(crate::support::shared_cache())
        .args(["policy", "test"])
        .arg(root.join("policies/proxops-policy-require-protection-prod.wasm"))
        .arg("--settings")
        .arg(root.join("settings.yaml"))
        .arg("--manifest")
        .arg(root.join("vm/lab/web.yaml"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "deny exits 2:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("protection"), "{stdout}");
}

/// A scope naming a kind or a cluster the repository does not have would scope an enforce
/// policy out of what it guards (a typo away): validate, plan and apply refuse it, naming the
/// entry and the names it could mean, and nothing is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_policy_scope_naming_an_unknown_kind_or_cluster_is_refused() {
    let lab = Lab::start().await;
    let pin = install(
        &lab,
        "proxops-policy-require-protection-prod",
        "enforce",
        "{tags: [prod]}",
    );
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, PROD_UNPROTECTED),
    );
    let file = "policies/proxops-policy-require-protection-prod.wasm";
    // (scope, the field named, what it says)
    let cases = [
        (
            "{kinds: [VMM]}",
            "policies[0].scope.kinds[0]",
            "`VMM` is not one of this repository's kinds (",
        ),
        (
            "{clusters: [labb]}",
            "policies[0].scope.clusters[0]",
            "`labb` is not one of this repository's clusters (lab)",
        ),
    ];
    for (scope, field, says) in cases {
        lab.write(
            "proxops.yaml",
            &format!("policies:\n  - file: {file}\n    sha256: {pin}\n    mode: enforce\n    settings: {{tags: [prod]}}\n    scope: {scope}\n"),
        );
        lab.clear();
        for command in ["validate", "plan", "apply"] {
            let run = lab.run(&[command]).await;
            let out = format!("{}{}", run.stdout, run.stderr);
            assert_eq!(run.code, 1, "{scope} {command}: {out}");
            assert!(
                out.contains(&format!("proxops.yaml: error: {field}: {says}")),
                "{scope} {command}: {out}"
            );
        }
        assert_eq!(lab.mutations(), Vec::<String>::new());
    }
}
