//! `proxops-bench`: the proxops benchmark suite. One invocation runs every scenario and prints
//! one table; each measured plan or apply runs in a child process of this binary (so peak RSS
//! is per scenario) against a simulator living in this process.
//!
//! ```text
//! cargo run --release -p proxops-bench                # the full suite (N = 10,000)
//! cargo run --release -p proxops-bench -- --n 2000    # plan at scale with another N
//! cargo run --release -p proxops-bench -- --skip-apply  # without the ~30 s apply scenario
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proxops_bench::fixture::{self, Endpoint, TOKEN_VAR};
use proxops_bench::native::NativeQemu;
use proxops_bench::{counter_delta, peak_rss, process_cpu};
use proxops_bench::{cycle, many};
use proxops_guests::Role;
use proxops_reconcile::execute::{Limits, Silent};
use proxops_reconcile::{ApplyOptions, KindRegistry};
use proxops_runtime::kind::Observation;
use proxops_runtime::{CacheOutcome, Runtime, RuntimeConfig};
use proxops_sim::{FaultKind, FaultRule, Simulator};
use serde_json::{Value, json};

mod langs;
mod rollout;
mod scale;
mod scenarios;
mod ui;
use scale::*;
use scenarios::*;

const PLAN_NODES: usize = 10;
const READ_CONCURRENCY: usize = 16;
const APPLY_VMS: usize = 200;
const APPLY_NODES: usize = 4;
const APPLY_LATENCY_MS: u64 = 20;
const APPLY_TASK: Duration = Duration::from_secs(1);
const APPLY_WRITE_CONCURRENCY: usize = 2;
/// First-plan runs, cold and warm cache (alternating); the table shows medians.
const FIRST_RUNS: usize = 3;
/// Plan-at-scale runs per backend (alternating); the table shows medians.
const PLAN_RUNS: usize = 3;
/// Many clusters: how many, VMs in each, nodes in each, clusters planned at once.
const MANY_CLUSTERS: usize = 8;
const MANY_VMS: usize = 1_000;
const MANY_NODES: usize = 4;
const MANY_CONCURRENCY: usize = 8;
/// Many clusters: rounds of "one alone" and "all at once", alternated; the table shows medians.
const MANY_ROUNDS: usize = 3;
/// New running VMs per cluster in the many-clusters apply.
const MANY_NEW: usize = 25;
/// The status page's load check: VMs and nodes of the watched fleet.
const UI_VMS: usize = 5_000;
const UI_NODES: usize = 4;
/// Scale headroom: beyond what one PVE cluster holds.
const HEADROOM_VMS: usize = 50_000;
const HEADROOM_NODES: usize = 40;
/// Every scenario, in the order the suite runs them (`--only` takes a comma-separated subset).
const SCENARIOS: &[&str] = &[
    "components",
    "calls",
    "first-plan",
    "scale",
    "clusters",
    "headroom",
    "pool",
    "apply",
    "apply-floor",
    "ha",
    "inputs",
    "langs",
    "rollout",
    "ui",
];

const ENV_URL: &str = "PROXOPS_BENCH_URL";
const ENV_TOKEN_ID: &str = "PROXOPS_BENCH_TOKEN_ID";
const ENV_FP: &str = "PROXOPS_BENCH_FP";
const ENV_WRAPPER: &str = "PROXOPS_BENCH_CHILD_WRAPPER";
/// Many clusters: every cluster's endpoint, as a JSON array, for the `plan-many` child.
const ENV_ENDPOINTS: &str = "PROXOPS_BENCH_ENDPOINTS";
static CHILD_SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The allocator `proxops` itself uses (see host/cli/src/main.rs).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    proxops_sim::ensure_crypto_provider();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if args.first().map(String::as_str) == Some("child") {
        let out = rt.block_on(child(&args[1..]));
        println!("{out}");
        return;
    }
    let mut n = 10_000;
    let mut skip_apply = false;
    let mut only: Vec<String> = SCENARIOS.iter().map(|s| s.to_string()).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--n" => {
                n = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--n takes a number")
            }
            "--skip-apply" => skip_apply = true,
            "--only" => {
                only = it
                    .next()
                    .expect("--only takes a comma-separated list of scenarios")
                    .split(',')
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = only.iter().find(|o| !SCENARIOS.contains(&o.as_str())) {
                    panic!(
                        "unknown scenario `{bad}` (scenarios: {})",
                        SCENARIOS.join(", ")
                    );
                }
            }
            "--help" | "-h" => {
                println!(
                    "usage: proxops-bench [--n N] [--skip-apply] [--only SCENARIO,...]\n\nRuns every scenario (or those named: {}) and prints one table (see the README).",
                    SCENARIOS.join(", ")
                );
                return;
            }
            other => panic!("unknown argument `{other}` (try --help)"),
        }
    }
    if skip_apply {
        only.retain(|o| o != "apply");
    }
    rt.block_on(suite(n, &only));
}

// ---------------------------------------------------------------------------------------
// Child processes: one measured plan or apply each, answering one JSON line.

fn endpoint_from_env() -> Endpoint {
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set"));
    Endpoint {
        base_url: var(ENV_URL),
        token_id: var(ENV_TOKEN_ID),
        token_secret: var(TOKEN_VAR),
        fingerprint: var(ENV_FP),
    }
}

fn load_registry(cache: &Path, native: bool) -> (KindRegistry, Duration, Vec<CacheOutcome>) {
    let t = Instant::now();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(cache.to_path_buf()),
    })
    .expect("runtime");
    let mut registry = KindRegistry::bundled(&runtime).expect("bundled kinds");
    if native {
        assert!(
            registry.register_native("VM", Arc::new(NativeQemu(proxops_kind_qemu::Flavour::Vm)))
        );
        assert!(registry.register_native(
            "TemplateVM",
            Arc::new(NativeQemu(proxops_kind_qemu::Flavour::Template))
        ));
    }
    let outcomes = registry.iter().map(|(k, _)| k.cache_outcome()).collect();
    (registry, t.elapsed(), outcomes)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn child(args: &[String]) -> Value {
    let mut repos = Vec::new();
    let mut cache = None;
    let mut native = false;
    let mut memo = false;
    let mut concurrency = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--repo" => repos.extend(it.next().map(PathBuf::from)),
            "--concurrency" => {
                concurrency = Some(
                    it.next()
                        .and_then(|v| v.parse::<usize>().ok())
                        .expect("--concurrency takes a number"),
                )
            }
            "--cache" => cache = it.next().map(PathBuf::from),
            "--native" => native = true,
            "--memo" => memo = true,
            other => panic!("child: unknown argument {other}"),
        }
    }
    let repo = repos.first().cloned().expect("--repo");
    let cache = cache.expect("--cache");
    let endpoint = endpoint_from_env();
    if args.first().map(String::as_str) == Some("floor") {
        // No kinds: the bare requests of the no-op plan, nothing else.
        let (took, requests) = proxops_bench::floor::fetch(
            &endpoint.client(),
            concurrency.unwrap_or(READ_CONCURRENCY),
        )
        .await;
        return json!({"floor_ms": ms(took), "requests": requests});
    }
    let (registry, load, outcomes) = load_registry(&cache, native);
    let client = endpoint.client();
    match args.first().map(String::as_str) {
        Some("plan") => {
            let memo_in = memo.then_some(cache.as_path());
            let cpu_before = process_cpu();
            let reads_at_once = concurrency.unwrap_or(READ_CONCURRENCY);
            let (run, _plan) =
                cycle::plan_cycle_at(&registry, &client, &repo, memo_in, reads_at_once).await;
            let cpu = process_cpu().saturating_sub(cpu_before);
            // Time inside the kinds' components (validate, references, identity, observe,
            // plan), summed over the threads that called them; zero for a native backend.
            let guest: Duration = (0..registry.len()).map(|k| registry.run(k).used()).sum();
            json!({
                "cpu_ms": ms(cpu),
                "guest_ms": ms(guest),
                "load_ms": ms(load),
                "cache_hits": outcomes.iter().filter(|o| **o == CacheOutcome::Hit).count(),
                "precompiled": outcomes.iter().filter(|o| **o == CacheOutcome::Precompiled).count(),
                "validate_ms": ms(run.validate),
                "plan_ms": ms(run.plan),
                "total_ms": ms(run.total()),
                "objects": run.objects,
                "noop": run.is_noop(),
                "actions": run.actions,
                "drift": run.drift,
                "errors": run.errors,
                "rss": peak_rss(),
            })
        }
        Some("plan-many") => {
            let endpoints: Vec<Endpoint> = serde_json::from_str::<Vec<Vec<String>>>(
                &std::env::var(ENV_ENDPOINTS).expect("endpoints are set"),
            )
            .expect("endpoints are JSON")
            .into_iter()
            .map(|e| Endpoint {
                base_url: e[0].clone(),
                token_id: e[1].clone(),
                token_secret: e[2].clone(),
                fingerprint: e[3].clone(),
            })
            .collect();
            let clusters: Vec<(PathBuf, Endpoint)> = repos.into_iter().zip(endpoints).collect();
            // One cluster alone and all of them at once, alternated MANY_ROUNDS times (the
            // table shows medians: a shared machine's slow phases last seconds), then one
            // after another, once.
            let mut rounds = Vec::new();
            for _ in 0..MANY_ROUNDS {
                let (single, _) = many::plan_clusters(&registry, &clusters[..1], 1).await;
                let cpu_before = process_cpu();
                let (together, runs) =
                    many::plan_clusters(&registry, &clusters, concurrency.unwrap_or(1)).await;
                let cpu = process_cpu().saturating_sub(cpu_before);
                rounds.push((single, together, cpu, runs));
            }
            let (sequential, _) = many::plan_clusters(&registry, &clusters, 1).await;
            let single = median_duration(rounds.iter().map(|r| r.0).collect());
            // The CPU and the readiness figures come from the round whose all-at-once plan
            // took the median time, so that they describe the same run.
            let noop = rounds.iter().all(|r| r.3.iter().all(|run| run.is_noop()));
            rounds.sort_by_key(|r| r.1);
            let (_, together, together_cpu, runs) = rounds.swap_remove(rounds.len() / 2);
            let slowest = runs.iter().map(|r| r.total()).max().unwrap_or_default();
            // Then an apply of MANY_NEW fresh running VMs per cluster, the same ways; each
            // apply gets VMs of its own (new manifests written into the repositories first).
            let mut batch = 0;
            let mut add_vms = |which: &[(PathBuf, Endpoint)]| {
                for (repo, _) in which {
                    let nodes = fixture::nodes(MANY_NODES);
                    for k in 0..MANY_NEW {
                        let i = MANY_VMS + batch * MANY_NEW + k;
                        std::fs::write(
                            repo.join("vm")
                                .join(fixture::CLUSTER)
                                .join(format!("{}.yaml", fixture::vm_name(i))),
                            fixture::manifest(i, &nodes, "started"),
                        )
                        .expect("write a new manifest");
                    }
                }
                batch += 1;
            };
            let (mut apply_singles, mut apply_togethers) = (Vec::new(), Vec::new());
            for _ in 0..MANY_ROUNDS {
                add_vms(&clusters[..1]);
                apply_singles.push(
                    many::apply_clusters(&registry, &clusters[..1], 1, APPLY_WRITE_CONCURRENCY)
                        .await,
                );
                add_vms(&clusters);
                apply_togethers.push(
                    many::apply_clusters(
                        &registry,
                        &clusters,
                        concurrency.unwrap_or(1),
                        APPLY_WRITE_CONCURRENCY,
                    )
                    .await,
                );
            }
            add_vms(&clusters);
            let apply_sequential =
                many::apply_clusters(&registry, &clusters, 1, APPLY_WRITE_CONCURRENCY).await;
            let apply_single = median_duration(apply_singles);
            let apply_together = median_duration(apply_togethers);
            json!({
                "single_ms": ms(single),
                "concurrent_ms": ms(together),
                "concurrent_cpu_ms": ms(together_cpu),
                "sequential_ms": ms(sequential),
                "slowest_ms": ms(slowest),
                "apply_single_ms": ms(apply_single),
                "apply_concurrent_ms": ms(apply_together),
                "apply_sequential_ms": ms(apply_sequential),
                // When the last cluster's manifests were ready (each cluster is planned as
                // soon as its own are).
                "validate_ms": runs.iter().map(|r| ms(r.validate)).fold(0.0, f64::max),
                "objects": runs.iter().map(|r| r.objects).sum::<usize>(),
                "noop": noop,
                "rss": peak_rss(),
            })
        }
        Some("apply") => {
            let t0 = Instant::now();
            let (objects, _) = cycle::validated(&registry, &repo);
            let first = cycle::plan_all(&registry, &client, &objects, READ_CONCURRENCY)
                .await
                .expect("plan");
            let options = ApplyOptions {
                gate: None,
                limits: Limits {
                    write_concurrency: APPLY_WRITE_CONCURRENCY,
                    task_timeout: Duration::from_secs(120),
                },
                secrets: None,
                read_concurrency: Some(READ_CONCURRENCY),
                max_passes: 8,
                memory: std::sync::Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
                cancel: None,
                rollout: None,
            };
            let report = proxops_reconcile::apply(
                &registry,
                &client,
                &objects,
                first,
                options,
                Arc::new(Silent),
            )
            .await
            .expect("apply");
            json!({
                "total_ms": ms(t0.elapsed()),
                "passes": report.passes,
                "converged": report.converged,
                "rss": peak_rss(),
            })
        }
        other => panic!("child: unknown scenario {other:?}"),
    }
}

/// A command for a measured process. Profiling hook:
/// PROXOPS_BENCH_CHILD_WRAPPER="perf record -g -o /tmp/{label}.data --" runs every measured
/// process under that command, `{label}` naming the scenario, the backend and a sequence number.
fn measured(exe: &Path, label: &str) -> Command {
    match std::env::var(ENV_WRAPPER) {
        Ok(wrapper) if !wrapper.trim().is_empty() => {
            let seq = CHILD_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let label = format!("{label}-{seq}");
            let mut words = wrapper
                .split_whitespace()
                .map(|w| w.replace("{label}", &label));
            let mut cmd = Command::new(words.next().expect("a wrapper command"));
            cmd.args(words).arg(exe);
            cmd
        }
        _ => Command::new(exe),
    }
}

/// Run this binary as a child; returns its JSON answer and the wall time from spawn to exit.
fn spawn_child(
    scenario: &str,
    endpoint: &Endpoint,
    repo: &Path,
    cache: &Path,
    native: bool,
) -> (Value, Duration) {
    spawn_child_with(scenario, endpoint, repo, cache, native, |_| {})
}

/// [`spawn_child`], with more arguments or environment added by `more`.
fn spawn_child_with(
    scenario: &str,
    endpoint: &Endpoint,
    repo: &Path,
    cache: &Path,
    native: bool,
    more: impl FnOnce(&mut Command),
) -> (Value, Duration) {
    let exe = std::env::current_exe().expect("own path");
    let backend = if native { "native" } else { "wasm" };
    let mut cmd = measured(&exe, &format!("{scenario}-{backend}"));
    cmd.arg("child")
        .arg(scenario)
        .arg("--repo")
        .arg(repo)
        .arg("--cache")
        .arg(cache)
        .env(ENV_URL, &endpoint.base_url)
        .env(ENV_TOKEN_ID, &endpoint.token_id)
        .env(TOKEN_VAR, &endpoint.token_secret)
        .env(ENV_FP, &endpoint.fingerprint);
    if native {
        cmd.arg("--native");
    }
    more(&mut cmd);
    let t = Instant::now();
    let out = cmd.output().expect("run the child");
    let wall = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {scenario} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    (
        serde_json::from_str(line).expect("child answers JSON"),
        wall,
    )
}

/// Run `proxops plan` (the binary built beside this one) on `repo`; its wall time, or `None`
/// when the binary is not built. A plan that fails or is not a no-op fails the bench.
fn cli_plan(endpoint: &Endpoint, repo: &Path, cache: &Path) -> Option<Duration> {
    let exe = std::env::current_exe().ok()?.with_file_name("proxops");
    if !exe.exists() {
        return None;
    }
    let t = Instant::now();
    let out = measured(&exe, "plan-cli")
        .arg("--cache-dir")
        .arg(cache)
        .args(["plan", "--detailed-exitcode"])
        .arg(repo)
        .env(TOKEN_VAR, &endpoint.token_secret)
        .output()
        .expect("run proxops plan");
    let wall = t.elapsed();
    assert!(
        out.status.code() == Some(0),
        "proxops plan of the converged repository must exit 0 (no changes):\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(wall)
}

// ---------------------------------------------------------------------------------------
// The suite.

struct Row {
    section: &'static str,
    metric: String,
    value: String,
    target: String,
    ok: Option<bool>,
}

struct Table(Vec<Row>);

impl Table {
    fn add(
        &mut self,
        section: &'static str,
        metric: impl Into<String>,
        value: impl Into<String>,
        target: impl Into<String>,
        ok: Option<bool>,
    ) {
        let (metric, value) = (metric.into(), value.into());
        // Each row as soon as it is measured, so a later failure keeps the earlier figures.
        eprintln!("      {section} | {metric} | {value}");
        self.0.push(Row {
            section,
            metric,
            value,
            target: target.into(),
            ok,
        });
    }

    fn print(&self) {
        let w0 = self.0.iter().map(|r| r.section.len()).max().unwrap_or(0);
        let w1 = self.0.iter().map(|r| r.metric.len()).max().unwrap_or(0);
        let w2 = self.0.iter().map(|r| r.value.len()).max().unwrap_or(0);
        let w3 = self.0.iter().map(|r| r.target.len()).max().unwrap_or(0);
        println!(
            "| {:w0$} | {:w1$} | {:>w2$} | {:w3$} | ok |",
            "scenario", "metric", "value", "target"
        );
        println!(
            "|{}|{}|{}|{}|----|",
            "-".repeat(w0 + 2),
            "-".repeat(w1 + 2),
            "-".repeat(w2 + 2),
            "-".repeat(w3 + 2)
        );
        for r in &self.0 {
            let ok = match r.ok {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "",
            };
            println!(
                "| {:w0$} | {:w1$} | {:>w2$} | {:w3$} | {ok:3}|",
                r.section, r.metric, r.value, r.target
            );
        }
    }
}

fn median_duration(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// A simulator holding `count` converged VMs over `nodes`, and a repository of their manifests.
async fn converged(
    registry: &KindRegistry,
    dir: &Path,
    count: usize,
    nodes: &[String],
) -> (Simulator, PathBuf) {
    let state = fixture::converged_state(registry, dir, count, nodes, "started").await;
    let sim = proxops_sim::start(fixture::sim_config(
        nodes,
        Duration::ZERO,
        Vec::new(),
        Some(state),
    ))
    .await
    .expect("start the simulator");
    let repo = dir.join("repo");
    fixture::write_repo(&repo, count, nodes, "started", &Endpoint::of(&sim));
    (sim, repo)
}

async fn suite(n: usize, only: &[String]) {
    let wants = |scenario: &str| only.iter().any(|o| o == scenario);
    let tmp = tempfile::tempdir().expect("temp dir");
    let cache = tmp.path().join("cache");
    let mut table = Table(Vec::new());
    eprintln!(
        "proxops-bench: commit {}, CPU {} ({} threads)",
        commit(),
        cpu_model(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    if wants("components") {
        components(&cache, &mut table);
    }
    let (registry, _, _) = load_registry(&cache, false);
    if wants("calls") {
        guest_calls(&registry, &cache, n, &mut table).await;
    }
    let mut economy: Vec<(usize, BTreeMap<String, u64>)> = Vec::new();
    if wants("first-plan") {
        first_plan(&registry, &tmp, &cache, &mut economy, &mut table).await;
    }
    let mut scale = None;
    if wants("scale") {
        scale = Some(plan_at_scale(&registry, &tmp, &cache, n, &mut economy, &mut table).await);
    }
    api_economy(economy, &mut table);
    if wants("clusters") {
        many_clusters(&registry, &tmp, &cache, &mut table).await;
    }
    if wants("headroom") {
        headroom(&registry, &tmp, &cache, scale, &mut table).await;
    }
    if wants("ha") {
        ha_share(&registry, &tmp, &cache, n, &mut table).await;
    }
    if wants("pool") {
        worker_pool(&registry, &tmp, &cache, &mut table).await;
    }
    if wants("apply") {
        apply_under_latency(&tmp, &cache, &mut table).await;
    }
    if wants("apply-floor") {
        apply_floor(&tmp, &cache, &mut table).await;
    }
    if wants("langs") {
        langs::langs(tmp.path(), &mut table);
    }
    if wants("inputs") {
        hostile_yaml(&mut table);
    }
    if wants("rollout") {
        rollout::rollout_schedule(&registry, &tmp, &mut table).await;
    }
    if wants("ui") {
        eprintln!(
            "[ui] watch with its status page under {} clients",
            ui::CLIENTS
        );
        let nodes = fixture::nodes(UI_NODES);
        let (sim, repo) = converged(&registry, &tmp.path().join("ui"), UI_VMS, &nodes).await;
        ui::ui_load(&Endpoint::of(&sim), &repo, &cache, UI_VMS, &mut table);
    }

    println!();
    println!(
        "proxops-bench — commit {} — CPU {} — {} threads",
        commit(),
        cpu_model(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    table.print();
}
