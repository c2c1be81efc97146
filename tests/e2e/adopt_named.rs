//! `proxops adopt` beyond guests: the named objects of the loaded third-party kinds (Pool,
//! BackupJob, Access) and a guest's firewall (`--kind Firewall`), through the real binary and
//! the kinds' own `adopt()`, sandbox and grants. Each round trip: adopt writes the manifests
//! (reads only), and a plan over them changes nothing, except for an unmarked object: its
//! manifest carries `metadata.adopt: {id, comment}`, and the first apply adds proxops's mark
//! to its comment and nothing else (as a guest is taken over); then nothing at all.

use proxops_pve::Method;

use crate::support::{Lab, Run, sha256_hex, workspace, writes};

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
        pool.contains("Adopted from /pools entry ops")
            && pool.contains("adopt:\n    id: ops\n    comment: made by hand\n"),
        "{pool}"
    );
    assert!(
        !all.stdout.contains("gap metadata.name"),
        "no hand-over gap is left:\n{}",
        all.stdout
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
    // taken over (their `metadata.adopt` matches): the mark added to each comment, nothing else.
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    for words in [
        "take over pool ops",
        "take over backup job hand-weekly",
        "take over user alice@pve",
        "take over group devs",
    ] {
        assert!(plan.stdout.contains(words), "{words}\n{}", plan.stdout);
    }
    lab.clear();
    ok(&lab.run(&["apply"]).await, "the take-overs");
    let mut sent = writes(&lab).await;
    sent.sort();
    assert_eq!(
        sent,
        [
            "PUT /access/groups/devs comment=developers (proxops:devs) -> 200",
            "PUT /access/users/alice@pve comment=Alice (proxops:alice@pve) -> 200",
            "PUT /cluster/backup/hand-weekly comment=by hand (proxops:hand-weekly) -> 200",
            "PUT /pools poolid=ops comment=made by hand (proxops:ops) -> 200",
        ]
    );
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

/// Entry `id` (field `field`) of PVE's listing `path`, as PVE answers it.
async fn entry(lab: &Lab, path: &str, field: &str, id: &str) -> serde_json::Value {
    let all = crate::support::TestCluster::client(lab)
        .get(path, &[])
        .await
        .unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|e| e[field] == id)
        .unwrap_or_else(|| panic!("{path} has no {id}: {all}"))
        .clone()
}

/// An unmarked pool made by hand, taken over as a guest is: `adopt --object` writes the
/// manifest with `metadata.adopt: {id, comment}`; the first apply sends exactly one request,
/// the mark appended to the comment; the next apply has nothing to do, and a change to the
/// manifest then converges as for any pool proxops owns.
#[tokio::test(flavor = "multi_thread")]
async fn an_unmarked_pool_is_taken_over_by_adopt_then_apply_with_one_write() {
    let lab = Lab::start().await;
    install_platform_kinds(&lab);
    lab.pve(
        Method::Post,
        "/pools",
        &[("poolid", "web"), ("comment", "web tier")],
    )
    .await;

    lab.clear();
    let adopt = lab
        .run(&["adopt", "--cluster", "lab", "--object", "web"])
        .await;
    ok(&adopt, "adopt --object web");
    assert!(
        adopt
            .stdout
            .contains("+ Pool web (web) -> pool/lab/web.yaml"),
        "{}",
        adopt.stdout
    );
    assert!(
        !adopt.stdout.contains("gap metadata.name"),
        "no hand-over gap:\n{}",
        adopt.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");
    let manifest = read(&lab, "pool/lab/web.yaml");
    let doc: serde_json::Value = serde_yaml::from_str(&manifest).expect("YAML");
    assert_eq!(
        doc["metadata"]["adopt"],
        serde_json::json!({"id": "web", "comment": "web tier"}),
        "{manifest}"
    );

    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains("take over pool web"),
        "{}",
        plan.stdout
    );

    lab.clear();
    ok(&lab.run(&["apply"]).await, "the take-over");
    assert_eq!(
        writes(&lab).await,
        ["PUT /pools poolid=web comment=web tier (proxops:web) -> 200"]
    );
    assert_eq!(
        entry(&lab, "/pools", "poolid", "web").await["comment"],
        "web tier (proxops:web)"
    );

    lab.clear();
    let again = lab.run(&["apply"]).await;
    ok(&again, "the second apply");
    assert!(again.stdout.contains("No changes"), "{}", again.stdout);
    assert_eq!(writes(&lab).await, Vec::<String>::new());

    // Now proxops's: a change to the manifest converges normally (the claim is moot).
    lab.write(
        "pool/lab/web.yaml",
        &manifest.replace("spec:\n", "spec:\n  storages: [local]\n"),
    );
    lab.clear();
    ok(&lab.run(&["apply"]).await, "a change to the pool");
    let sent = writes(&lab).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].starts_with("PUT /pools poolid=web") && sent[0].contains("storage=local"),
        "{sent:?}"
    );
    let members = crate::support::TestCluster::client(&lab)
        .get("/pools", &[proxops_pve::Param::new("poolid", "web")])
        .await
        .unwrap();
    assert_eq!(members[0]["members"][0]["storage"], "local", "{members}");
    assert_eq!(members[0]["comment"], "web tier (proxops:web)");
}

/// A backup job made by hand, adopted, and its manifest then edited before the first apply:
/// the take-over still writes the mark alone (nothing else, whatever else differs); the next
/// apply converges the rest. A security group's take-over uses PVE's own comment form.
#[tokio::test(flavor = "multi_thread")]
async fn a_backup_job_and_a_security_group_are_taken_over_with_the_mark_alone() {
    let lab = Lab::start().await;
    install_platform_kinds(&lab);
    let grant = read(&lab, "proxops.yaml");
    assert!(grant.contains("securitygroup"), "{grant}");
    lab.pve(
        Method::Post,
        "/cluster/backup",
        &[
            ("id", "hand-weekly"),
            ("schedule", "sun 02:00"),
            ("storage", "local"),
            ("all", "1"),
            ("comment", "by hand"),
        ],
    )
    .await;
    lab.pve(
        Method::Post,
        "/cluster/firewall/groups",
        &[("group", "admins"), ("comment", "made in the GUI")],
    )
    .await;
    lab.pve(
        Method::Post,
        "/cluster/firewall/groups/admins",
        &[("type", "in"), ("action", "ACCEPT"), ("macro", "SSH")],
    )
    .await;

    lab.clear();
    let adopt = lab
        .run(&[
            "adopt",
            "--cluster",
            "lab",
            "--object",
            "hand-weekly",
            "--object",
            "admins",
        ])
        .await;
    ok(&adopt, "adopt --object");
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");
    let job = read(&lab, "backupjob/lab/hand-weekly.yaml");
    assert!(job.contains("sun 02:00"), "{job}");
    let doc: serde_json::Value = serde_yaml::from_str(&job).expect("YAML");
    assert_eq!(
        doc["metadata"]["adopt"],
        serde_json::json!({"id": "hand-weekly", "comment": "by hand"}),
        "{job}"
    );
    lab.write(
        "backupjob/lab/hand-weekly.yaml",
        &job.replace("sun 02:00", "sun 03:00"),
    );

    lab.clear();
    // The schedule differs: left for the next run, said as an anomaly (exit 3), as for a guest.
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply.stdout.contains("BackupJob hand-weekly: metadata.adopt: taken over in this run (only the ownership mark was written); left for the next run, so that a plan shows it first: update backup job hand-weekly (schedule)"),
        "{}",
        apply.stdout
    );
    let mut sent = writes(&lab).await;
    sent.sort();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        sent[1],
        "PUT /cluster/backup/hand-weekly comment=by hand (proxops:hand-weekly) -> 200"
    );
    assert!(
        sent[0].starts_with(
            "POST /cluster/firewall/groups group=admins rename=admins comment=made in the GUI (proxops:admins)"
        ),
        "{sent:?}"
    );
    let live = entry(&lab, "/cluster/backup", "id", "hand-weekly").await;
    assert_eq!(
        (live["schedule"].as_str(), live["comment"].as_str()),
        (Some("sun 02:00"), Some("by hand (proxops:hand-weekly)")),
        "the schedule waits for the next run: {live}"
    );

    // Now proxops's: the schedule is repaired, the group is as adopted.
    lab.clear();
    ok(&lab.run(&["apply"]).await, "the next apply");
    let sent = writes(&lab).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].starts_with("PUT /cluster/backup/hand-weekly")
            && sent[0].contains("schedule=sun 03:00"),
        "{sent:?}"
    );
    lab.clear();
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
}

/// A comment changed in PVE after adopt read it: the claim no longer describes the object, so
/// it is an anomaly at `metadata.adopt` and nothing is sent (as for a guest renamed since).
#[tokio::test(flavor = "multi_thread")]
async fn a_comment_edited_after_adopt_is_an_anomaly_and_nothing_is_sent() {
    let lab = Lab::start().await;
    install_platform_kinds(&lab);
    lab.pve(
        Method::Post,
        "/pools",
        &[("poolid", "web"), ("comment", "web tier")],
    )
    .await;
    ok(
        &lab.run(&["adopt", "--cluster", "lab", "--object", "web"])
            .await,
        "adopt",
    );
    lab.pve(
        Method::Put,
        "/pools",
        &[("poolid", "web"), ("comment", "edited by hand")],
    )
    .await;

    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(writes(&lab).await, Vec::<String>::new(), "{}", apply.stdout);
    assert!(
        apply.stdout.contains("metadata.adopt")
            && apply.stdout.contains(
                "metadata.adopt names web with the comment \"web tier\", but the live object has the comment \"edited by hand\""
            ),
        "{}\n{}",
        apply.stdout,
        apply.stderr
    );
    assert_eq!(
        entry(&lab, "/pools", "poolid", "web").await["comment"],
        "edited by hand"
    );

    // A claim on an object of another id, or in a guest's form: refused by validation.
    let manifest = read(&lab, "pool/lab/web.yaml");
    for (claim, field, words) in [
        (
            "{id: db, comment: web tier}",
            "metadata.adopt.id",
            "metadata.adopt names id db, but the manifest is for Pool web",
        ),
        (
            "{vmid: 100, name: web}",
            "metadata.adopt",
            "a Pool is not a guest",
        ),
        (
            "{id: web, note: x}",
            "metadata.adopt",
            "unknown field `note` in metadata.adopt",
        ),
        (
            "{id: web}",
            "metadata.adopt",
            "metadata.adopt.comment is missing or not a string",
        ),
    ] {
        let edited: Vec<String> = manifest
            .lines()
            .filter(|l| !l.starts_with("    id:") && !l.starts_with("    comment:"))
            .map(|l| {
                if l.trim_start() == "adopt:" {
                    format!("  adopt: {claim}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        lab.write("pool/lab/web.yaml", &(edited.join("\n") + "\n"));
        lab.clear();
        let plan = lab.run(&["plan"]).await;
        assert_ne!(plan.code, 0, "{claim}");
        let all = format!("{}{}", plan.stdout, plan.stderr);
        assert!(
            all.contains("pool/lab/web.yaml") && all.contains(field) && all.contains(words),
            "{claim}: {all}"
        );
        assert_eq!(lab.mutations(), Vec::<String>::new());
    }
}
