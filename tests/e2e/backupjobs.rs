//! The BackupJob kind (guest-kinds/backupjob), a third-party component loaded from its file
//! with the grant of examples/grants/backupjob.yaml, against the simulator's
//! `/cluster/backup`: create, drift repaired with one call, prune, an unmarked job with a
//! managed name (reported, untouched), a storage without `backup` content (an error, no
//! write), a job covering a Pool (written after it), and a grant too small. The create, drift
//! and prune case runs against a `proxops sim serve` child (`Served`).

use proxops_pve::Method;
use serde_json::Value;

use crate::support::{Lab, Served, TestCluster, sha256_hex, vm, writes};

fn wasm(package: &str) -> Vec<u8> {
    let path = proxops_guests::artifact_path(package).expect("built");
    std::fs::read(path).expect("read the kind")
}

/// The `kinds:` entries of the grant snippets named, each pinned to this build.
fn install(lab: &impl TestCluster, kinds: &[(&str, &str)], edit: impl Fn(String) -> String) {
    let mut out = String::from("apiVersion: proxops/v1alpha1\nkinds:\n");
    for (package, snippet) in kinds {
        let bytes = wasm(package);
        let file = format!("kinds/{snippet}.wasm");
        lab.write_bytes(&file, &bytes);
        let text = std::fs::read_to_string(
            crate::support::workspace().join(format!("examples/grants/{snippet}.yaml")),
        )
        .expect("the grant snippet");
        let entry = text
            .split_once("kinds:\n")
            .expect("a kinds: list")
            .1
            .lines()
            .map(|l| match l.trim_start().strip_prefix("sha256:") {
                Some(_) => format!("    sha256: {}", sha256_hex(&bytes)),
                None => l.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        out.push_str(&entry);
        out.push('\n');
    }
    lab.write("proxops.yaml", &edit(out));
}

async fn lab() -> Lab {
    let config = proxops_sim::SimConfig::from_yaml_str(
        "storages:\n  - {name: local, type: dir, content: [iso, import, vztmpl, snippets]}\n  - {name: local-lvm, type: lvmthin, content: [images, rootdir]}\n  - {name: backups, type: dir, content: [backup]}\n",
    )
    .expect("sim config");
    Lab::with(config).await
}

fn job(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: BackupJob\nmetadata: {{name: {name}}}\nspec:\n{spec}"
    )
}

async fn live(lab: &impl TestCluster, id: &str) -> Option<Value> {
    let all = lab.client().get("/cluster/backup", &[]).await.unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|j| j["id"] == id)
        .cloned()
}

const NIGHTLY: &str = "  schedule: \"mon..fri 21:00\"\n  storage: backups\n  all: true\n  exclude: [web-01]\n  compression: zstd\n  retention: {keep-daily: 7, keep-weekly: 4}\n  comment: nightly\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_job_kind_from_a_file_creates_repairs_drift_and_prunes() {
    // Against a `proxops sim serve` child, as an operator runs one; its `local` storage holds
    // backups.
    let lab = Served::start().await;
    let nightly = NIGHTLY.replace("storage: backups", "storage: local");
    install(&lab, &[("proxops-kind-backupjob", "backupjob")], |y| y);
    lab.write("vm/lab/web-01.yaml", &vm("web-01", "pve01", 100, ""));
    lab.write("backupjob/lab/nightly.yaml", &job("nightly", &nightly));
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let j = live(&lab, "nightly").await.expect("the job exists");
    assert_eq!(j["schedule"], "mon..fri 21:00", "{j}");
    assert_eq!(j["storage"], "local");
    assert_eq!(
        (j["all"].clone(), j["exclude"].clone()),
        (1.into(), "100".into()),
        "{j}"
    );
    assert_eq!(
        j["prune-backups"],
        serde_json::json!({"keep-daily": 7, "keep-weekly": 4})
    );
    assert_eq!(j["comment"], "nightly (proxops:nightly)");
    assert_eq!(j["enabled"], 1);

    lab.clear().await;
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(
        lab.mutations().await,
        Vec::<String>::new(),
        "{}",
        again.stdout
    );

    // Drift behind proxops's back: another schedule, retention dropped. One PUT repairs both.
    lab.pve(
        Method::Put,
        "/cluster/backup/nightly",
        &[("schedule", "sun 03:00"), ("delete", "prune-backups")],
    )
    .await;
    lab.clear().await;
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert_eq!(
        writes(&lab).await,
        [
            "PUT /cluster/backup/nightly schedule=mon..fri 21:00 prune-backups=keep-daily=7,keep-weekly=4 -> 200"
        ]
    );

    // Prune.
    lab.remove("backupjob/lab/nightly.yaml");
    lab.clear().await;
    let prune = lab.run(&["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert_eq!(
        writes(&lab).await,
        ["DELETE /cluster/backup/nightly  -> 200"]
    );
    assert!(live(&lab, "nightly").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn unmarked_jobs_and_storages_without_backup_content_get_no_write() {
    let lab = lab().await;
    install(&lab, &[("proxops-kind-backupjob", "backupjob")], |y| y);
    lab.pve(
        Method::Post,
        "/cluster/backup",
        &[
            ("id", "nightly"),
            ("schedule", "daily"),
            ("storage", "backups"),
            ("all", "1"),
            ("comment", "by hand"),
        ],
    )
    .await;
    lab.write(
        "backupjob/lab/nightly.yaml",
        &job(
            "nightly",
            NIGHTLY.replace("  exclude: [web-01]\n", "").as_str(),
        ),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(
        run.stdout
            .contains("backup job nightly exists but was not created by proxops"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(live(&lab, "nightly").await.unwrap()["comment"], "by hand");

    // A storage without backup content: an error naming the field, nothing written.
    lab.remove("backupjob/lab/nightly.yaml");
    lab.write(
        "backupjob/lab/images.yaml",
        &job(
            "images",
            "  schedule: daily\n  storage: local-lvm\n  all: true\n",
        ),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert!(
        out.contains("storage local-lvm has no `backup` content"),
        "{out}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
    // The simulator, as PVE 9, would have taken it: the check is proxops's.
    lab.pve(
        Method::Post,
        "/cluster/backup",
        &[
            ("id", "raw"),
            ("schedule", "daily"),
            ("storage", "local-lvm"),
            ("all", "1"),
        ],
    )
    .await;
    assert!(live(&lab, "raw").await.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_covering_a_pool_is_written_after_the_pool() {
    let lab = lab().await;
    install(
        &lab,
        &[
            ("proxops-kind-pool", "pool"),
            ("proxops-kind-backupjob", "backupjob"),
        ],
        |y| y,
    );
    lab.write("vm/lab/web-01.yaml", &vm("web-01", "pve01", 100, ""));
    lab.write(
        "pool/lab/web.yaml",
        "apiVersion: proxops/v1alpha1\nkind: Pool\nmetadata: {name: web}\nspec:\n  guests: [web-01]\n",
    );
    lab.write(
        "backupjob/lab/web-nightly.yaml",
        &job(
            "web-nightly",
            "  schedule: \"21:00\"\n  storage: backups\n  pool: web\n  mode: stop\n",
        ),
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let order: Vec<String> = writes(&lab)
        .await
        .into_iter()
        .filter(|w| w.contains("/pools") || w.contains("/cluster/backup"))
        .map(|w| w.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        order.first().map(String::as_str),
        Some("POST /pools"),
        "{order:?}"
    );
    assert!(
        order.contains(&"POST /cluster/backup".to_string()),
        "{order:?}"
    );
    let j = live(&lab, "web-nightly").await.unwrap();
    assert_eq!(
        (j["pool"].clone(), j["mode"].clone()),
        ("web".into(), "stop".into())
    );
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_job_kind_with_too_small_a_grant_is_refused_before_any_request() {
    let lab = lab().await;
    install(&lab, &[("proxops-kind-backupjob", "backupjob")], |y| {
        y.lines()
            .filter(|l| !l.contains("GET /storage/{storage}"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    lab.write("backupjob/lab/nightly.yaml", &job("nightly", NIGHTLY));
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("add to its grant: call GET /storage/{storage}"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty());
}
