//! The Pool kind (guest-kinds/pool), a third-party component loaded from its file with the
//! grant of examples/grants/pool.yaml, against the simulator's `/pools`: create (members in
//! the next pass), drift repaired with the fewest calls, prune, an unmarked pool with a
//! managed name (reported, untouched), and a grant too small (refused before any request).
//! The create, drift and prune case and `spec.pool` run against a `proxops sim serve` child
//! (`Served`), the others in process (`Lab`).

use proxops_pve::Method;
use serde_json::Value;

use crate::support::{Lab, Served, TestCluster, sha256_hex, vm, writes};

fn pool_wasm() -> Vec<u8> {
    let path = proxops_guests::artifact_path("proxops-kind-pool").expect("built");
    std::fs::read(path).expect("read the pool kind")
}

/// `proxops.yaml` from examples/grants/pool.yaml with `kinds/pool.wasm` pinned to this
/// build; `edit` may change the grant.
pub fn install(lab: &impl TestCluster, edit: impl Fn(String) -> String) {
    let wasm = pool_wasm();
    lab.write_bytes("kinds/pool.wasm", &wasm);
    let example =
        std::fs::read_to_string(crate::support::workspace().join("examples/grants/pool.yaml"))
            .expect("the grant snippet");
    let pinned: Vec<String> = example
        .lines()
        .map(|l| match l.trim_start().strip_prefix("sha256:") {
            Some(_) => format!("    sha256: {}", sha256_hex(&wasm)),
            None => l.to_string(),
        })
        .collect();
    lab.write("proxops.yaml", &edit(pinned.join("\n") + "\n"));
}

fn pool(name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/v1alpha1\nkind: Pool\nmetadata: {{name: {name}}}\nspec:\n{spec}")
}

/// The pool as PVE answers `GET /pools?poolid=`: its comment, member vmids and storages.
async fn live(lab: &impl TestCluster, id: &str) -> Option<(String, Vec<u64>, Vec<String>)> {
    let all = lab.client().get("/pools", &[]).await.unwrap();
    let entry = all
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["poolid"] == id)?
        .clone();
    let info = lab
        .client()
        .get("/pools", &[proxops_pve::Param::new("poolid", id)])
        .await
        .unwrap();
    let members = info[0]["members"].as_array().cloned().unwrap_or_default();
    let vms = members.iter().filter_map(|m| m["vmid"].as_u64()).collect();
    let storages = members
        .iter()
        .filter_map(|m| m["storage"].as_str().map(str::to_string))
        .collect();
    Some((
        entry["comment"].as_str().unwrap_or("").to_string(),
        vms,
        storages,
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_kind_from_a_file_creates_repairs_drift_and_prunes() {
    // Against a `proxops sim serve` child, as an operator runs one.
    let lab = Served::start().await;
    install(&lab, |y| y);
    lab.write("vm/lab/web-01.yaml", &vm("web-01", "pve01", 100, ""));
    lab.write(
        "pool/lab/web.yaml",
        &pool(
            "web",
            "  comment: web tier\n  guests: [web-01]\n  storages: [local-lvm]\n",
        ),
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        live(&lab, "web").await,
        Some((
            "web tier (proxops:web)".into(),
            vec![100],
            vec!["local-lvm".into()]
        )),
        "{}",
        run.stdout
    );
    let pool_writes: Vec<String> = writes(&lab)
        .await
        .into_iter()
        .filter(|w| w.contains("/pools"))
        .collect();
    assert_eq!(
        pool_writes,
        [
            "POST /pools poolid=web comment=web tier (proxops:web) -> 200",
            "PUT /pools poolid=web vms=100 storage=local-lvm -> 200",
        ],
        "the create, then the members once the pool exists"
    );

    // Converged: a second run changes nothing.
    lab.clear().await;
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(
        lab.mutations().await,
        Vec::<String>::new(),
        "{}",
        again.stdout
    );

    // Drift behind proxops's back: a stranger added, the storage removed, the comment
    // edited with the mark kept. One removal and one add, nothing else.
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[("vmid", "300"), ("name", "stray")],
    )
    .await;
    lab.pve(Method::Put, "/pools", &[("poolid", "web"), ("vms", "300")])
        .await;
    lab.pve(
        Method::Put,
        "/pools",
        &[("poolid", "web"), ("storage", "local-lvm"), ("delete", "1")],
    )
    .await;
    lab.pve(
        Method::Put,
        "/pools",
        &[("poolid", "web"), ("comment", "edited proxops:web")],
    )
    .await;
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    lab.clear().await;
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert_eq!(
        writes(&lab).await,
        [
            "PUT /pools poolid=web vms=300 delete=1 -> 200",
            "PUT /pools poolid=web comment=web tier (proxops:web) storage=local-lvm -> 200",
        ]
    );
    assert_eq!(
        live(&lab, "web").await,
        Some((
            "web tier (proxops:web)".into(),
            vec![100],
            vec!["local-lvm".into()]
        ))
    );

    // Prune: the manifest goes, the pool is emptied and deleted; its guest stays.
    lab.remove("pool/lab/web.yaml");
    lab.clear().await;
    let prune = lab.run(&["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert_eq!(
        writes(&lab).await,
        [
            "PUT /pools poolid=web vms=100 storage=local-lvm delete=1 -> 200",
            "DELETE /pools poolid=web -> 200",
        ]
    );
    assert_eq!(live(&lab, "web").await, None);
    assert!(
        lab.client()
            .get("/nodes/pve01/qemu/100/config", &[])
            .await
            .is_ok(),
        "the member VM is kept"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unmarked_pool_with_a_managed_name_is_reported_and_untouched() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.pve(
        Method::Post,
        "/pools",
        &[("poolid", "ops"), ("comment", "made by hand")],
    )
    .await;
    // Another team's pool that happens to carry proxops's mark for another id.
    lab.pve(
        Method::Post,
        "/pools",
        &[("poolid", "copy"), ("comment", "proxops:ops")],
    )
    .await;
    lab.write("pool/lab/ops.yaml", &pool("ops", "  storages: [local]\n"));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(
        run.stdout
            .contains("pool ops exists but was not created by proxops"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", run.stdout);
    assert_eq!(
        live(&lab, "ops").await,
        Some(("made by hand".into(), vec![], vec![]))
    );
    assert!(
        live(&lab, "copy").await.is_some(),
        "a foreign pool is never pruned"
    );

    // The anomaly's way out, taken literally: its `metadata.adopt` line in the manifest makes
    // the next apply write the mark alone, and the one after converge the rest.
    let claim = run
        .stdout
        .split("add `metadata.adopt: ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .expect("the anomaly names the claim to add")
        .to_string();
    assert_eq!(claim, r#"{id: ops, comment: "made by hand"}"#);
    lab.write(
        "pool/lab/ops.yaml",
        &format!(
            "apiVersion: proxops/v1alpha1\nkind: Pool\nmetadata:\n  name: ops\n  adopt: {claim}\nspec:\n  comment: made by hand\n  storages: [local]\n"
        ),
    );
    lab.clear();
    let take = lab.run(&["apply"]).await;
    assert_eq!(lab.mutations(), ["PUT /pools -> 200"], "{}", take.stdout);
    assert_eq!(
        live(&lab, "ops").await,
        Some(("made by hand (proxops:ops)".into(), vec![], vec![]))
    );
    lab.clear();
    let rest = lab.run(&["apply"]).await;
    assert_eq!(rest.code, 0, "{}\n{}", rest.stdout, rest.stderr);
    assert_eq!(
        live(&lab, "ops").await,
        Some((
            "made by hand (proxops:ops)".into(),
            vec![],
            vec!["local".into()]
        ))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_kind_with_too_small_a_grant_is_refused_before_any_request() {
    let lab = Lab::start().await;
    install(&lab, |y| {
        y.lines()
            .filter(|l| !l.contains("DELETE /pools"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    lab.write("pool/lab/web.yaml", &pool("web", "  comment: web tier\n"));
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("add to its grant: call DELETE /pools"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty());
}

/// A guest already in someone else's pool: proxops never sends `allow-move` (that would
/// write the other pool), so PVE's refusal fails the pool's update and the other pool keeps it.
#[tokio::test(flavor = "multi_thread")]
async fn a_guest_in_another_pool_is_not_moved() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.write("vm/lab/web-01.yaml", &vm("web-01", "pve01", 100, ""));
    lab.apply().await;
    lab.pve(Method::Post, "/pools", &[("poolid", "theirs")])
        .await;
    lab.pve(
        Method::Put,
        "/pools",
        &[("poolid", "theirs"), ("vms", "100")],
    )
    .await;
    lab.write("pool/lab/web.yaml", &pool("web", "  guests: [web-01]\n"));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("belongs already to pool 'theirs'"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    let moved: Vec<Value> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.params.iter().any(|(k, _)| k == "allow-move"))
        .map(|r| serde_json::json!(r.path))
        .collect();
    assert!(moved.is_empty(), "never allow-move: {moved:?}");
    assert_eq!(live(&lab, "theirs").await.unwrap().1, vec![100]);
}

/// The pool a guest is in, as `/cluster/resources` lists it.
async fn guest_pool(lab: &impl TestCluster, vmid: u64) -> Option<String> {
    let all = lab.client().get("/cluster/resources", &[]).await.unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"].as_u64() == Some(vmid))
        .and_then(|e| e["pool"].as_str().map(str::to_string))
}

/// `spec.pool` on a VM: its create puts it into the pool (PVE's `pool` on create, after the
/// pool the VM references exists), the pool keeps the member it does not list, and a second
/// apply sends nothing: the two kinds agree, no flapping.
#[tokio::test(flavor = "multi_thread")]
async fn a_vm_created_with_spec_pool_lands_in_the_pool_and_stays() {
    let lab = Served::start().await;
    install(&lab, |y| y);
    lab.write(
        "vm/lab/web-01.yaml",
        &vm("web-01", "pve01", 100, "  pool: web\n"),
    );
    lab.write("vm/lab/web-02.yaml", &vm("web-02", "pve01", 101, ""));
    lab.write(
        "pool/lab/web.yaml",
        &pool("web", "  comment: web tier\n  guests: [web-02]\n"),
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    // The pool's create comes before the create that names it (the VM references the pool).
    let all = writes(&lab).await;
    let at = |what: &str| {
        all.iter()
            .position(|w| w.starts_with(what))
            .unwrap_or_else(|| panic!("no {what} in {all:#?}"))
    };
    let pool_create = at("POST /pools poolid=web ");
    let vm_create = at("POST /nodes/pve01/qemu vmid=100 ");
    assert!(pool_create < vm_create, "{all:#?}");
    assert!(all[vm_create].contains(" pool=web "), "{}", all[vm_create]);
    assert!(
        !at_has_pool(&all, "POST /nodes/pve01/qemu vmid=101 "),
        "{all:#?}"
    );
    assert_eq!(guest_pool(&lab, 100).await.as_deref(), Some("web"));
    assert_eq!(guest_pool(&lab, 101).await.as_deref(), Some("web"));
    assert_eq!(live(&lab, "web").await.unwrap().1, vec![100, 101]);

    lab.clear().await;
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(
        lab.mutations().await,
        Vec::<String>::new(),
        "{}",
        again.stdout
    );
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
}

/// A pool that lists a guest whose own manifest names another pool (or this one: declared
/// twice) is a validation error naming both manifests and fields; nothing is sent.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_listing_a_guest_of_another_pool_is_a_validation_error() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.write(
        "vm/lab/web-01.yaml",
        &vm("web-01", "pve01", 100, "  pool: db\n"),
    );
    lab.write("pool/lab/db.yaml", &pool("db", "  comment: databases\n"));
    lab.write("pool/lab/web.yaml", &pool("web", "  guests: [web-01]\n"));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(
        all.contains("pool/lab/web.yaml")
            && all.contains("spec.guests[0]")
            && all.contains("VM `web-01` declares spec.pool: db (vm/<cluster>/web-01.yaml), but this pool web lists it"),
        "{all}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());

    // The same pool named on both sides: one place only.
    lab.write(
        "vm/lab/web-01.yaml",
        &vm("web-01", "pve01", 100, "  pool: web\n"),
    );
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(
        all.contains("already joins pool web through its own spec.pool"),
        "{all}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

/// A VM's `spec.pool` is a write to that pool: a hand-made pool of that name (no mark) gets
/// no guest, and the VM is not created; an existing VM in another pool is reported, never
/// moved.
#[tokio::test(flavor = "multi_thread")]
async fn spec_pool_never_writes_a_pool_proxops_does_not_own() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.pve(
        Method::Post,
        "/pools",
        &[("poolid", "ops"), ("comment", "made by hand")],
    )
    .await;
    lab.write("pool/lab/ops.yaml", &pool("ops", "  comment: ops\n"));
    lab.write(
        "vm/lab/web-01.yaml",
        &vm("web-01", "pve01", 100, "  pool: ops\n"),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_ne!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("pool ops exists but was not created by proxops"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("puts the guest into a pool proxops cannot prove it owns: pool ops does not carry proxops's mark"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", run.stdout);
    assert!(lab.sim.vm_config(100).is_none());

    // A VM proxops created without a pool, then given spec.pool: an anomaly, nothing moved.
    lab.remove("pool/lab/ops.yaml");
    lab.write("vm/lab/web-01.yaml", &vm("web-01", "pve01", 100, ""));
    lab.apply().await;
    lab.write("pool/lab/web.yaml", &pool("web", "  comment: web\n"));
    lab.apply().await;
    lab.write(
        "vm/lab/web-01.yaml",
        &vm("web-01", "pve01", 100, "  pool: web\n"),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("is in no pool, the manifest says spec.pool: web"),
        "{}",
        run.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", run.stdout);
    assert_eq!(guest_pool(&lab, 100).await, None);
}

fn at_has_pool(all: &[String], what: &str) -> bool {
    all.iter()
        .find(|w| w.starts_with(what))
        .is_some_and(|w| w.contains(" pool="))
}
