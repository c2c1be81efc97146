//! The sandbox of third-party kinds, tried from outside as an operator would meet it: one
//! hostile component (`guest-kinds/hostile`, a puppet whose every proposal is data in its
//! manifest), loaded from a file through `proxops.yaml` with a pinned sha256 and a grant of
//! the ordinary-looking calls it declares, against a simulator seeded with victims:
//!
//! - container 101, running, untagged (proxops does not own it);
//! - VM 100 `web`, managed by `vm/lab/web.yaml`, its disk `local-lvm:vm-100-disk-0`;
//! - container 102, tagged `proxops` without its `proxops-102` mark;
//! - the ISO `local:iso/other.iso`, which no manifest declares;
//! - and a second cluster `lab2` (its own simulator) with the VM `db` (vmid 120).
//!
//! Each case is one hostile manifest `hostile/lab/<name>.yaml` whose spec carries the attack.
//! A case asserts on the simulator's request log and state, not on proxops's words alone: no
//! mutating request reaches a victim, no read leaves the object's own paths, and the
//! legitimate objects (`web` in the same cluster, `db` in the other) still plan and converge.
//! Where the output is checked, the refusal must name the kind, the object and the sandbox
//! rule ([`refusal`], the one place that knows the wording).
//!
//! `plan` is read-only, so the plan cases of a group share one world; every `apply` case gets
//! a world of its own, started from the seeded simulator state (seeded once per test binary).
//! Every case runs, and a test fails at its end with the table of the cases that failed
//! (`cargo test -p proxops --test e2e hostile:: -- --nocapture` prints the whole table; the
//! cases themselves are in `cases.rs`).

use std::collections::BTreeMap;

use proxops_pve::Method as PveMethod;
use serde_json::{Value, json};

use crate::support::{Lab, Run, sha256_hex, vm};

mod cases;
mod secrets;

use cases::*;

const HOSTILE: &str = "proxops-kind-hostile";
const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";
const ISO: &str = "local:iso/other.iso";
/// The hostile object's own vmid, where a case does not attack the identity itself.
const OWN: u32 = 160;
/// The environment variable of the second cluster's token.
const SECOND_TOKEN: &str = "PROXOPS_TEST_TOKEN_HOSTILE_LAB2";
/// What `web`'s manifest changes after the seed, so every run has a legitimate write to make.
const WEB_DESCRIPTION: &str = "converged by proxops";

/// The calls `guest-kinds/hostile` declares (its `CALLS`), granted as they stand: each looks
/// ordinary.
const GRANT_CALLS: &[&str] = &[
    "GET /cluster/resources",
    "GET /nodes/{node}/lxc/{vmid}/config",
    "GET /nodes/{node}/{what}",
    "POST /nodes/{node}/lxc",
    "PUT /nodes/{node}/lxc/{vmid}/config",
    "POST /nodes/{node}/lxc/{vmid}/status/{op}",
    "DELETE /nodes/{node}/lxc/{vmid}",
    "POST /nodes/{node}/qemu/{vmid}/config",
    "POST /nodes/{node}/qemu/{vmid}/status/{op}",
    "DELETE /nodes/{node}/qemu/{vmid}",
    "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
    "POST /nodes/{node}/{op}",
    "POST /nodes/{node}/{area}/{what}",
    "POST /{area}/{what}",
];

// ---------------------------------------------------------------------------------------------
// The wording: the one place that knows how a refusal reads.

/// The rules whose refusal is, by design, a validation error of the object's cluster (the
/// cluster stops before its first PVE call), so its other objects are not planned in that run.
/// Every other refusal must leave `web` planned and applied.
const RULES_THAT_STOP_THE_CLUSTER: &[&str] = &["identity"];

/// Whether `out` refuses object `name` of the Hostile kind by one of `rules` (alternatives
/// separated by `|`): one line holds the kind, the object's name and `sandbox rule `RULE``.
fn refusal(out: &str, name: &str, rules: &str) -> Result<(), String> {
    let wanted: Vec<String> = rules
        .split('|')
        .map(|r| format!("sandbox rule `{r}`"))
        .collect();
    let named = |l: &str| l.contains("Hostile") && l.contains(name);
    if out
        .lines()
        .any(|l| named(l) && wanted.iter().any(|w| l.contains(w.as_str())))
    {
        return Ok(());
    }
    // Not refused at all: the plan lists the object's action, so an apply would send it.
    let planned = ["+", "~", "-"]
        .iter()
        .any(|sign| out.contains(&format!("  {sign} Hostile {name}: ")));
    let what = if planned {
        "PLANNED (not refused; an apply sends it)"
    } else {
        "WORDING"
    };
    Err(format!(
        "{what}: no line names Hostile, `{name}` and {}; the lines about it:\n{}",
        wanted.join(" or "),
        about(out, name)
    ))
}

/// The output lines that mention `name` (or, failing that, the last few), for a report.
fn about(out: &str, name: &str) -> String {
    let mut lines: Vec<&str> = out.lines().filter(|l| l.contains(name)).collect();
    if lines.is_empty() {
        lines = out.lines().rev().take(6).collect();
        lines.reverse();
    }
    lines
        .iter()
        .take(8)
        .map(|l| {
            let l: String = l.chars().take(400).collect();
            format!("      | {}", l.escape_debug())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------
// The world: a simulator started from the seeded state, the repository, the second cluster.

/// The simulator state after the seed (see the module doc), made once per test binary.
static SEED: tokio::sync::OnceCell<Value> = tokio::sync::OnceCell::const_new();

fn hostile_wasm() -> Vec<u8> {
    let path = proxops_guests::artifact_path(HOSTILE).expect("the hostile kind is built");
    std::fs::read(path).expect("read the hostile kind")
}

fn install(lab: &Lab, wasm: &[u8]) {
    lab.write_bytes("kinds/hostile.wasm", wasm);
    let calls: Vec<String> = GRANT_CALLS.iter().map(|c| format!("\"{c}\"")).collect();
    lab.write(
        "proxops.yaml",
        &format!(
            "kinds:\n  - file: kinds/hostile.wasm\n    sha256: {}\n    grant: {{calls: [{}]}}\n",
            sha256_hex(wasm),
            calls.join(", ")
        ),
    );
}

async fn seed() -> &'static Value {
    SEED.get_or_init(|| async {
        let config = proxops_sim::SimConfig {
            lxc: vec![proxops_sim::LxcConfig {
                vmid: 101,
                node: "pve01".into(),
                name: Some("victim".into()),
                running: true,
            }],
            volumes: vec![
                proxops_sim::VolumeSeed::new(TEMPLATE),
                proxops_sim::VolumeSeed::new(ISO),
            ],
            ..proxops_sim::SimConfig::default()
        };
        let lab = Lab::with(config).await;
        install(&lab, &hostile_wasm());
        lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
        lab.apply().await;
        lab.pve(
            PveMethod::Post,
            "/nodes/pve01/lxc",
            &[
                ("vmid", "102"),
                ("ostemplate", TEMPLATE),
                ("hostname", "tagged"),
                ("storage", "local-lvm"),
                ("tags", "proxops"),
            ],
        )
        .await;
        let state = lab.sim.state_json();
        lab.sim.shutdown();
        state
    })
    .await
}

struct World {
    lab: Lab,
    other: proxops_sim::Simulator,
    other_secret: String,
    _state: tempfile::TempDir,
}

impl World {
    /// A world from the seed, with `extra` containers added to the simulator.
    async fn start(extra: Vec<proxops_sim::LxcConfig>) -> World {
        let seeded = seed().await;
        let state = tempfile::tempdir().unwrap();
        let file = state.path().join("sim.json");
        std::fs::write(&file, serde_json::to_vec(seeded).unwrap()).unwrap();
        let config = proxops_sim::SimConfig {
            state_file: Some(file),
            lxc: extra,
            ..proxops_sim::SimConfig::default()
        };
        let lab = Lab::with(config).await;
        let cluster = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
        lab.write(
            "clusters/lab.yaml",
            &cluster.replace("spec:\n", "spec:\n  options: {max-passes: 2}\n"),
        );
        install(&lab, &hostile_wasm());
        lab.write(
            "vm/lab/web.yaml",
            &vm(
                "web",
                "pve01",
                100,
                &format!("  pve-description: {WEB_DESCRIPTION}\n"),
            ),
        );
        // The second cluster: a PVE of its own, so neither cluster sees the other's guests.
        let other = proxops_sim::start(proxops_sim::SimConfig::default())
            .await
            .expect("start the second simulator");
        let (id, secret) = other.token().split_once('=').unwrap();
        lab.write(
            "clusters/lab2.yaml",
            &format!(
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab2}}\nspec:\n  endpoint: {}\n  token: {{id: '{id}', secret: {{env: {SECOND_TOKEN}}}}}\n  tls: {{fingerprint: '{}'}}\n",
                other.base_url(),
                other.fingerprint().expect("TLS on")
            ),
        );
        lab.write("vm/lab2/db.yaml", &vm("db", "pve01", 120, ""));
        World {
            other_secret: secret.to_string(),
            lab,
            other,
            _state: state,
        }
    }

    async fn run(&self, args: &[&str]) -> Run {
        self.lab
            .run_env(args, &[(SECOND_TOKEN, self.other_secret.as_str())])
            .await
    }

    fn put_case(&self, case: &Case) {
        self.lab.write(
            &format!("hostile/lab/{}.yaml", case.name),
            &manifest(case.name, &case.spec),
        );
    }

    fn remove_case(&self, case: &Case) {
        self.lab.remove(&format!("hostile/lab/{}.yaml", case.name));
    }

    /// `METHOD path` of every request since the last clear.
    fn requests(&self) -> Vec<String> {
        self.lab
            .sim
            .requests()
            .into_iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }

    /// The victims as they stand.
    async fn victims(&self) -> Victims {
        let sim = &self.lab.sim;
        let mut web = sim.vm_config(100);
        if let Some(c) = web.as_mut() {
            c.remove("description");
        }
        let mut volumes = Vec::new();
        for storage in ["local", "local-lvm"] {
            let listed = self
                .lab
                .client
                .get(&format!("/nodes/pve01/storage/{storage}/content"), &[])
                .await
                .unwrap_or(Value::Null);
            for v in listed.as_array().into_iter().flatten() {
                if let Some(id) = v["volid"].as_str() {
                    volumes.push(id.to_string());
                }
            }
        }
        volumes.sort();
        Victims {
            ct101: sim.ct_config(101),
            ct101_status: sim.ct_status(101),
            ct102: sim.ct_config(102),
            ct102_status: sim.ct_status(102),
            web,
            web_status: sim.vm_status(100),
            volumes,
        }
    }
}

#[derive(Debug, PartialEq)]
struct Victims {
    ct101: Option<BTreeMap<String, String>>,
    ct101_status: Option<String>,
    ct102: Option<BTreeMap<String, String>>,
    ct102_status: Option<String>,
    /// `description` left out: `web`'s manifest changes it.
    web: Option<BTreeMap<String, String>>,
    web_status: Option<String>,
    volumes: Vec<String>,
}

impl Victims {
    /// What changed from `before` to `self`, as lines; volumes may be added (never removed).
    fn changes_since(&self, before: &Victims) -> Vec<String> {
        let mut out = Vec::new();
        let mut differ = |what: &str, a: String, b: String| {
            if a != b {
                out.push(format!("{what}: {a} -> {b}"));
            }
        };
        differ(
            "container 101",
            format!("{:?} {:?}", before.ct101, before.ct101_status),
            format!("{:?} {:?}", self.ct101, self.ct101_status),
        );
        differ(
            "container 102",
            format!("{:?} {:?}", before.ct102, before.ct102_status),
            format!("{:?} {:?}", self.ct102, self.ct102_status),
        );
        differ(
            "VM 100",
            format!("{:?} {:?}", before.web, before.web_status),
            format!("{:?} {:?}", self.web, self.web_status),
        );
        for v in &before.volumes {
            if !self.volumes.contains(v) {
                out.push(format!("volume {v} is gone"));
            }
        }
        out
    }
}

/// `web`'s own write: its description, on its config.
fn is_web_repair(r: &proxops_sim::RequestRecord) -> bool {
    matches!(r.method.as_str(), "POST" | "PUT")
        && r.path == "/nodes/pve01/qemu/100/config"
        && r.params
            .iter()
            .any(|(k, v)| k == "description" && v == WEB_DESCRIPTION)
        && r.params
            .iter()
            .all(|(k, _)| k == "description" || k == "digest")
}

/// Multiset difference: the entries of `now` beyond those of `baseline`.
fn beyond(now: &[String], baseline: &[String]) -> Vec<String> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for b in baseline {
        *left.entry(b.as_str()).or_default() += 1;
    }
    now.iter()
        .filter(|r| match left.get_mut(r.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

/// With `PROXOPS_HOSTILE_SHOW=<case name>` (or `all`), a case's output and requests are printed.
fn show(name: &str, run: &Run, requests: &[String]) {
    if std::env::var("PROXOPS_HOSTILE_SHOW").is_ok_and(|s| s == name || s == "all") {
        eprintln!(
            "--- {name}: exit {}\n--- stdout\n{}\n--- stderr\n{}\n--- requests\n{}",
            run.code,
            run.stdout,
            run.stderr,
            requests.join("\n")
        );
    }
}

/// Host alive and output bounded.
fn alive(run: &Run) -> Result<(), String> {
    if !(0..=3).contains(&run.code) {
        return Err(format!("HOST: exit code {}", run.code));
    }
    if run.stderr.lines().any(|l| l.starts_with("thread '")) {
        return Err(format!("HOST: panicked:\n{}", about(&run.stderr, "thread")));
    }
    if run.stdout.len() + run.stderr.len() > 1 << 20 {
        return Err(format!(
            "HOST: {} bytes of output",
            run.stdout.len() + run.stderr.len()
        ));
    }
    Ok(())
}

/// What the text of a run must show for `case` (both streams).
fn check_words(case: &Case, run: &Run) -> Result<(), String> {
    let out = format!("{}\n{}", run.stdout, run.stderr);
    match &case.expect {
        Expect::Refused(rule) => refusal(&out, case.subject(), rule),
        Expect::Shown(texts) => {
            let missing: Vec<&&str> = texts.iter().filter(|t| !out.contains(**t)).collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "WORDING: the plan does not show {missing:?}; the lines about it:\n{}",
                    about(&out, "150")
                ))
            }
        }
        Expect::NoForgedLine(forged) => {
            if out.contains('\u{1b}') {
                return Err(format!(
                    "OUTPUT: a raw ESC byte was printed:\n{}",
                    about(&out, "refresh")
                ));
            }
            let lines: Vec<&str> = run
                .stdout
                .lines()
                .filter(|l| l.trim_start().starts_with(forged))
                .collect();
            if lines.is_empty() {
                Ok(())
            } else {
                Err(format!("OUTPUT: a forged line was printed: {lines:?}"))
            }
        }
    }
}

/// A plan case in a shared world whose baseline requests (no hostile object) are `baseline`.
async fn plan_case(world: &World, baseline: &[String], case: &Case) -> Result<(), String> {
    world.put_case(case);
    world.lab.clear();
    let run = world.run(&["plan"]).await;
    let requests = world.requests();
    world.remove_case(case);
    show(case.name, &run, &requests);
    alive(&run)?;
    let mut failures = Vec::new();
    // Nothing is written by a plan; the reads beyond the baseline are the object's own.
    let extra = beyond(&requests, baseline);
    let own = format!("GET /nodes/pve01/lxc/{OWN}/");
    let foreign: Vec<&String> = extra
        .iter()
        .filter(|r| !r.starts_with(&own))
        .take(5)
        .collect();
    if !foreign.is_empty() || extra.len() > 16 {
        failures.push(format!(
            "SENT: {} requests beyond the baseline, e.g. {foreign:?}",
            extra.len()
        ));
    }
    if let Err(e) = check_words(case, &run) {
        failures.push(e);
    }
    // The legitimate objects plan on: `db` in the other cluster always, `web` here unless the
    // refusal stops this cluster by design.
    if !run.stdout.contains("create VM 120") {
        failures.push(format!(
            "OTHER CLUSTER: lab2 did not plan `db`:\n{}",
            about(&run.stdout, "lab2")
        ));
    }
    let stops_cluster = case.stops_the_cluster();
    if !stops_cluster && !run.stdout.contains(WEB_DESCRIPTION) {
        failures.push(format!(
            "SAME CLUSTER: `web` was not planned:\n{}",
            about(&run.stdout, "web")
        ));
    }
    verdict(failures)
}

/// A case passes when nothing failed; else every failure, one per line.
fn verdict(failures: Vec<String>) -> Result<(), String> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// An apply case in a world of its own.
async fn apply_case(case: &Case) -> Result<(), String> {
    let world = World::start(Vec::new()).await;
    world.put_case(case);
    let before = world.victims().await;
    world.lab.clear();
    let run = world.run(&["apply"]).await;
    show(case.name, &run, &world.requests());
    alive(&run)?;
    let mut failures = Vec::new();
    let sent: Vec<String> = world
        .lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating() && !is_web_repair(r))
        .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
        .collect();
    if !sent.is_empty() {
        failures.push(format!("SENT: {sent:?}"));
    }
    let changed = world.victims().await.changes_since(&before);
    if !changed.is_empty() {
        failures.push(format!("VICTIMS: {changed:?}"));
    }
    if let Err(e) = check_words(case, &run) {
        failures.push(e);
    }
    if world.other.vm_config(120).is_none() {
        failures.push(format!(
            "OTHER CLUSTER: lab2's `db` was not created:\n{}",
            about(&run.stdout, "lab2")
        ));
    }
    let stops_cluster = case.stops_the_cluster();
    let web_done = world
        .lab
        .sim
        .vm_config(100)
        .and_then(|c| c.get("description").cloned())
        .is_some_and(|d| d.contains("converged"));
    if !stops_cluster && !web_done {
        failures.push(format!(
            "SAME CLUSTER: `web` was not converged:\n{}",
            about(&run.stdout, "web")
        ));
    }
    verdict(failures)
}

/// Run `cases` (plans in one shared world, applies each in its own) and fail with the table.
async fn check(group: &str, cases: Vec<Case>) {
    let (applies, plans): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| c.apply);
    let mut results: Vec<(Case, &str, Result<(), String>)> = Vec::new();
    if !plans.is_empty() {
        let world = World::start(Vec::new()).await;
        world.lab.clear();
        let base = world.run(&["plan"]).await;
        assert!(
            base.stdout.contains(WEB_DESCRIPTION) && base.stdout.contains("create VM 120"),
            "the baseline plans web and db:\n{}\n{}",
            base.stdout,
            base.stderr
        );
        let baseline = world.requests();
        for case in plans {
            let result = plan_case(&world, &baseline, &case).await;
            results.push((case, "plan", result));
        }
    }
    // Each apply in a world of its own, two at a time.
    let mut pending = applies.into_iter();
    loop {
        let batch: Vec<Case> = pending.by_ref().take(2).collect();
        if batch.is_empty() {
            break;
        }
        let runs = futures_util::future::join_all(batch.iter().map(apply_case)).await;
        for (case, result) in batch.into_iter().zip(runs) {
            results.push((case, "apply", result));
        }
    }
    report(group, &results);
}

fn report(group: &str, results: &[(Case, &str, Result<(), String>)]) {
    let mut table = format!("\n== hostile {group}: {} cases\n", results.len());
    for (case, command, result) in results {
        let verdict = if result.is_ok() { "ok  " } else { "FAIL" };
        table.push_str(&format!(
            "{verdict} {:<13} {:<5} {}\n",
            case.class, command, case.name
        ));
        if let Err(e) = result {
            for line in e.lines() {
                table.push_str(&format!("       {line}\n"));
            }
        }
    }
    eprintln!("{table}");
    let failed: Vec<&str> = results
        .iter()
        .filter(|(_, _, r)| r.is_err())
        .map(|(c, _, _)| c.name)
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} hostile {group} cases failed: {failed:?}{table}",
        failed.len(),
        results.len()
    );
}

// ---------------------------------------------------------------------------------------------
// The tests: one per group, so the harness runs the groups side by side.

#[tokio::test(flavor = "multi_thread")]
async fn hostile_identities_and_labels_are_refused() {
    let mut cases = identities();
    cases.extend(labels());
    check("identities and labels", cases).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_path_encodings_are_refused() {
    check("paths", paths()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_volumes_endpoints_and_undeclared_calls_are_refused() {
    let mut cases = volumes();
    cases.extend(endpoints());
    cases.extend(declared());
    check("volumes and endpoints", cases).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_capability_spellings_and_read_floods_are_refused() {
    let mut cases = capabilities();
    cases.extend(blast_radius());
    cases.extend(names());
    cases.extend(shown());
    check("capabilities, reads, names", cases).await;
}

/// `finally` runs only in an apply, after the kind's objects changed: a harmless read makes
/// the object count as changed.
#[tokio::test(flavor = "multi_thread")]
async fn hostile_finally_steps_are_refused() {
    let changed = || {
        json!({"actions": [action("update", "read the cluster",
            vec![call("GET", "/cluster/resources", &[])])]})
    };
    let cases = vec![
        applied(refused("finally", "finally-volume", "volume", changed())),
        applied(refused("finally", "finally-stopall", "endpoint", changed())),
    ];
    check("finally", cases).await;
}

/// The sandbox is not a wall: a hostile-kind object's own writes go through. It creates its
/// unprivileged container 150 and configures it, converges, and a second plan is clean.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_kinds_own_writes_go_through_and_converge() {
    let world = World::start(Vec::new()).await;
    let case = Case {
        class: "positive",
        name: "own-container",
        spec: container_150(),
        expect: Expect::Shown(&["create container 150"]),
        apply: true,
    };
    world.put_case(&case);
    let before = world.victims().await;
    world.lab.clear();
    let run = world.run(&["apply"]).await;
    let context = format!("{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, 0, "{context}");
    let writes: Vec<String> = world
        .lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating() && !is_web_repair(r))
        .map(|r| format!("{} {} -> {}", r.method, r.path, r.status))
        .collect();
    assert_eq!(
        writes,
        [
            "POST /nodes/pve01/lxc -> 200",
            "PUT /nodes/pve01/lxc/150/config -> 200"
        ],
        "{context}"
    );
    let ct = world.lab.sim.ct_config(150).expect("container 150 exists");
    assert_eq!(
        ct.get("unprivileged").map(String::as_str),
        Some("1"),
        "{ct:?}"
    );
    assert!(
        ct.get("description").is_some_and(|d| d.contains("own")),
        "{ct:?}"
    );
    assert_eq!(
        world.victims().await.changes_since(&before),
        Vec::<String>::new()
    );
    assert!(world.other.vm_config(120).is_some(), "{context}");
    let again = world.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
}

/// `adopt` writes what a kind's `adopt()` names: a live guest's name holding a newline or an
/// ESC must neither become a file name nor forge an output line.
#[tokio::test(flavor = "multi_thread")]
async fn names_a_hostile_kind_adopts_are_contained() {
    let forged = "Adopted 9 of 9 guests in cluster lab";
    let world = World::start(vec![
        proxops_sim::LxcConfig {
            vmid: 130,
            node: "pve01".into(),
            name: Some(format!("evil\n{forged}; nothing was sent")),
            running: false,
        },
        proxops_sim::LxcConfig {
            vmid: 131,
            node: "pve01".into(),
            name: Some("esc\u{1b}[2J\u{1b}[1;1Hx".into()),
            running: false,
        },
    ])
    .await;
    world.lab.clear();
    let run = world
        .run(&[
            "adopt",
            "--cluster",
            "lab",
            "--vmid",
            "130",
            "--vmid",
            "131",
        ])
        .await;
    show("adopt", &run, &world.requests());
    let mut failures = Vec::new();
    if let Err(e) = alive(&run) {
        failures.push(e);
    }
    let out = format!("{}\n{}", run.stdout, run.stderr);
    // The kind's adopt() was asked (the VM kind adopts no container): the case is not vacuous.
    if !out
        .lines()
        .any(|l| l.contains("lxc/130") && l.contains("Hostile"))
    {
        failures.push("REACHED: the Hostile kind's adopt() was not consulted for lxc/130".into());
    }
    if out.contains('\u{1b}') {
        failures.push("OUTPUT: a raw ESC byte was printed".to_string());
    }
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with(forged))
        .collect();
    if !lines.is_empty() {
        failures.push(format!("OUTPUT: a forged line was printed: {lines:?}"));
    }
    let mut bad_files = Vec::new();
    let mut stack = vec![world.lab.repo.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.chars().any(char::is_control) {
                bad_files.push(name.escape_debug().to_string());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    if !bad_files.is_empty() {
        failures.push(format!(
            "FILES: written under a name with a control character: {bad_files:?}"
        ));
    }
    if !world.lab.mutations().is_empty() {
        failures.push(format!("SENT: {:?}", world.lab.mutations()));
    }
    let case = |name| Case {
        class: "names",
        name,
        spec: Value::Null,
        expect: Expect::NoForgedLine(""),
        apply: false,
    };
    let result = if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{}\n{}", failures.join("\n"), about(&out, "")))
    };
    report(
        "adopt",
        &[(case("adopt-newline-and-esc-names"), "adopt", result)],
    );
}
