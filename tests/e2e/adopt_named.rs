//! `proxops adopt` beyond guests: the named objects of the loaded third-party kinds (Pool,
//! BackupJob, Access) and a guest's firewall (`--kind Firewall`), through the real binary and
//! the kinds' own `adopt()`, sandbox and grants. Each round trip: adopt writes the manifests
//! (reads only), and a plan over them changes nothing but what adopt's gaps say (an unmarked
//! object is reported until its comment carries proxops's mark; then nothing at all).

use proxops_pve::Method;

use crate::support::{Lab, Run, sha256_hex, workspace};

/// `proxops.yaml` of examples/platform (the four kinds and their smallest grants), each
/// `.wasm` copied into the lab's repository and pinned to this build.
pub fn install_platform_kinds(lab: &Lab) {
    let yaml = std::fs::read_to_string(workspace().join("examples/platform/proxops.yaml"))
        .expect("the platform example's proxops.yaml");
    let mut file = String::new();
    let mut out = Vec::new();
    for line in yaml.lines() {
        if let Some(f) = line.trim_start().strip_prefix("- file: ") {
            file = f.to_string();
            let package = format!(
                "proxops-kind-{}",
                f.trim_start_matches("kinds/").trim_end_matches(".wasm")
            );
            let built = proxops_guests::artifact_path(&package).expect("built");
            lab.write_bytes(f, &std::fs::read(built).expect("read the kind"));
        }
        match line.trim_start().strip_prefix("sha256:") {
            Some(_) => {
                let bytes = std::fs::read(lab.repo.path().join(&file)).unwrap();
                out.push(format!("    sha256: {}", sha256_hex(&bytes)));
            }
            None => out.push(line.to_string()),
        }
    }
    lab.write("proxops.yaml", &(out.join("\n") + "\n"));
}

/// A manifest of examples/platform, as it is there.
fn platform(path: &str) -> String {
    std::fs::read_to_string(workspace().join("examples/platform").join(path)).unwrap()
}

/// The platform's VM without `spec.pool`: these tests take the Pool manifest away (or never
/// write it), and a VM naming a pool no manifest declares does not validate. The VM is still
/// created into no pool; the pool's members are what adopt reads.
fn platform_vm() -> String {
    let vm = platform("vm/lab/web.yaml");
    assert!(vm.contains("\n  pool: web\n"), "{vm}");
    vm.replace("\n  pool: web\n", "\n")
}

fn read(lab: &Lab, path: &str) -> String {
    std::fs::read_to_string(lab.repo.path().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn ok(run: &Run, what: &str) {
    assert_eq!(run.code, 0, "{what}\n{}\n{}", run.stdout, run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_backup_jobs_and_access_objects_are_adopted_from_the_cli_with_a_zero_diff() {
    let lab = Lab::start().await;
    install_platform_kinds(&lab);
    lab.write("vm/lab/web.yaml", &platform_vm());
    for path in [
        "pool/lab/web.yaml",
        "backupjob/lab/web-nightly.yaml",
        "access/lab/operator.yaml",
    ] {
        lab.write(path, &platform(path));
    }
    ok(&lab.run(&["apply"]).await, "the platform's objects");
    // Made by hand, next to them: no mark in their comments.
    for (method, path, params) in [
        (
            Method::Post,
            "/pools",
            vec![("poolid", "ops"), ("comment", "made by hand")],
        ),
        (
            Method::Post,
            "/cluster/backup",
            vec![
                ("id", "hand-weekly"),
                ("schedule", "sun 02:00"),
                ("storage", "local"),
                ("all", "1"),
                ("comment", "by hand"),
            ],
        ),
        (
            Method::Post,
            "/access/users",
            vec![("userid", "alice@pve"), ("comment", "Alice")],
        ),
        (
            Method::Post,
            "/access/groups",
            vec![("groupid", "devs"), ("comment", "developers")],
        ),
    ] {
        lab.pve(method, path, &params).await;
    }
    // The manifests of proxops's own objects are lost.
    for path in [
        "pool/lab/web.yaml",
        "backupjob/lab/web-nightly.yaml",
        "access/lab/operator.yaml",
    ] {
        lab.remove(path);
    }

    lab.clear();
    let all = lab.run(&["adopt", "--cluster", "lab", "--all"]).await;
    ok(&all, "adopt --all");
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");
    for line in [
        "+ Pool ops (ops) -> pool/lab/ops.yaml",
        "+ BackupJob hand-weekly (hand-weekly) -> backupjob/lab/hand-weekly.yaml",
        "+ Access alice-pve (alice@pve) -> access/lab/alice-pve.yaml",
        "+ Access devs (devs) -> access/lab/devs.yaml",
        // proxops's own objects without a manifest are prune candidates: not adopted in bulk.
        "Not adopted: /pools web carry proxops's mark",
        "Not adopted: /cluster/backup web-nightly carry proxops's mark",
        "Not adopted: /access/roles proxops-operator carry proxops's mark",
        "! /access/users root@pam: not adopted",
        "Not adopted: 17 entries of /access/roles whose id does not start with `proxops-`",
    ] {
        assert!(all.stdout.contains(line), "{line}\n{}", all.stdout);
    }
    assert!(!lab.repo.path().join("access/lab/root-pam.yaml").exists());
    let pool = read(&lab, "pool/lab/ops.yaml");
    assert!(
        pool.contains("Adopted from /pools entry ops") && !pool.contains("adopt:"),
        "{pool}"
    );

    // One by one, proxops's own objects come back as they were.
    let one = lab
        .run(&[
            "adopt",
            "--cluster",
            "lab",
            "--object",
            "web",
            "--object",
            "web-nightly",
            "--object",
            "proxops-operator",
        ])
        .await;
    ok(&one, "adopt --object");
    for line in [
        "+ Pool web (web) -> pool/lab/web.yaml",
        "+ BackupJob web-nightly (web-nightly) -> backupjob/lab/web-nightly.yaml",
        "+ Access operator (proxops-operator) -> access/lab/operator.yaml",
    ] {
        assert!(one.stdout.contains(line), "{line}\n{}", one.stdout);
    }
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");

    // The plan over the adopted manifests: proxops's own objects unchanged; the hand-made ones
    // reported (their mark is missing, as their gaps say), nothing proposed.
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 3, "{}\n{}", plan.stdout, plan.stderr);
    for words in [
        "pool ops exists but was not created by proxops",
        "hand-weekly",
        "alice@pve",
        "devs",
    ] {
        assert!(plan.stdout.contains(words), "{words}\n{}", plan.stdout);
    }
    assert!(
        !plan.stdout.contains("call "),
        "no call is proposed:\n{}",
        plan.stdout
    );

    // The gaps' way to hand them over: the mark in their comment. Then nothing to do at all.
    for (method, path, params) in [
        (
            Method::Put,
            "/pools",
            vec![("poolid", "ops"), ("comment", "made by hand (proxops:ops)")],
        ),
        (
            Method::Put,
            "/cluster/backup/hand-weekly",
            vec![("comment", "by hand (proxops:hand-weekly)")],
        ),
        (
            Method::Put,
            "/access/users/alice@pve",
            vec![("comment", "Alice (proxops:alice@pve)")],
        ),
        (
            Method::Put,
            "/access/groups/devs",
            vec![("comment", "developers (proxops:devs)")],
        ),
    ] {
        lab.pve(method, path, &params).await;
    }
    lab.clear();
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guests_firewall_is_adopted_with_kind_firewall_and_plans_no_change() {
    let lab = Lab::start().await;
    install_platform_kinds(&lab);
    lab.write("vm/lab/web.yaml", &platform_vm());
    ok(&lab.run(&["apply"]).await, "the VM");
    let fw = "/nodes/pve01/qemu/100/firewall";
    lab.pve(
        Method::Put,
        &format!("{fw}/options"),
        &[("enable", "1"), ("policy_in", "DROP")],
    )
    .await;
    lab.pve(
        Method::Post,
        &format!("{fw}/aliases"),
        &[("name", "office"), ("cidr", "192.0.2.0/24")],
    )
    .await;
    for (action, source) in [("ACCEPT", "office"), ("DROP", "198.51.100.0/24")] {
        lab.pve(
            Method::Post,
            &format!("{fw}/rules"),
            &[
                ("type", "in"),
                ("action", action),
                ("source", source),
                ("enable", "1"),
            ],
        )
        .await;
    }

    // The VM has a manifest: without --kind the guest is taken.
    let taken = lab
        .run(&["adopt", "--cluster", "lab", "--vmid", "100"])
        .await;
    assert_eq!(taken.code, 1, "{}\n{}", taken.stdout, taken.stderr);
    assert!(
        taken.stderr.contains("is already named by a manifest"),
        "{}",
        taken.stderr
    );

    lab.clear();
    let run = lab
        .run(&[
            "adopt",
            "--cluster",
            "lab",
            "--vmid",
            "100",
            "--kind",
            "Firewall",
        ])
        .await;
    ok(&run, "adopt --kind Firewall");
    assert!(
        run.stdout
            .contains("+ Firewall web (qemu/100) -> firewall/lab/web.yaml"),
        "{}",
        run.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");
    let manifest = read(&lab, "firewall/lab/web.yaml");
    assert!(
        !manifest.contains("adopt:"),
        "a firewall takes over no guest:\n{manifest}"
    );
    assert!(manifest.contains("office"), "{manifest}");

    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);

    let unknown = lab
        .run(&[
            "adopt",
            "--cluster",
            "lab",
            "--vmid",
            "100",
            "--kind",
            "Nope",
        ])
        .await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown
            .stderr
            .contains("--kind Nope: no such kind is loaded"),
        "{}",
        unknown.stderr
    );
}
