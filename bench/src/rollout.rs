//! Section 11: a disruption budget's schedule (issue #42). 60 running VMs in six budgets of 10
//! (`max-unavailable: 2`, the gate `running`, which answers at once), 10 more in no budget, a
//! change that needs a stop (the machine type), instant tasks, 20 ms per request, 8 write
//! slots per node (more than the budgets' 12 places and the 10 free guests use together, so
//! the node slots are not what is measured). From the simulator's request log: each member's
//! time (its shutdown to its gate's read), the schedule's lower bound (waves × the median
//! member time) against the rollout's wall time, and when the guests in no budget were done.

use super::*;
use proxops_reconcile::rollout::Rollout;

const MEMBERS: usize = 60;
const OUTSIDE: usize = 10;
const PER_BUDGET: usize = 10;
const PLACES: usize = 2;
const WRITE_SLOTS: usize = 8;

pub(super) async fn rollout_schedule(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    table: &mut Table,
) {
    eprintln!(
        "[11] rollout: {MEMBERS} VMs in budgets of {PER_BUDGET} (max-unavailable {PLACES}), {OUTSIDE} in none, {APPLY_LATENCY_MS} ms per request, instant tasks"
    );
    let nodes = fixture::nodes(APPLY_NODES);
    let sim = proxops_sim::start(fixture::sim_config(
        &nodes,
        Duration::ZERO,
        latency_on_every_request(),
        None,
    ))
    .await
    .expect("start the simulator");
    let endpoint = Endpoint::of(&sim);
    let client = endpoint.client();
    let repo = tmp.path().join("rollout");
    let count = MEMBERS + OUTSIDE;
    fixture::write_repo(&repo, count, &nodes, "started", &endpoint);
    let first = apply(registry, &client, &repo, None).await;
    assert!(first.converged, "the fixture converges");

    let vms = repo.join("vm").join(fixture::CLUSTER);
    for i in 0..count {
        let text = fixture::manifest(i, &nodes, "started");
        std::fs::write(
            vms.join(format!("{}.yaml", fixture::vm_name(i))),
            format!("{text}  hardware: {{machine: q35}}\n"),
        )
        .expect("write a manifest");
    }
    let mut yaml = String::from("budgets:\n");
    for b in 0..MEMBERS / PER_BUDGET {
        let members: Vec<String> = (b * PER_BUDGET..(b + 1) * PER_BUDGET)
            .map(fixture::vm_name)
            .collect();
        yaml.push_str(&format!(
            "  - {{name: b{b}, select: {{members: [{}]}}, max-unavailable: {PLACES}}}\n",
            members.join(", ")
        ));
    }
    let settings = proxops_core::settings::parse_text("proxops.yaml", &yaml).expect("budgets");
    let (objects, _) = cycle::validated(registry, &repo);
    let (rollout, diags) = Rollout::resolve(
        &settings.budgets,
        fixture::CLUSTER,
        &objects,
        "proxops.yaml",
    );
    assert!(diags.is_empty(), "{diags:?}");
    sim.clear_requests();
    let report = apply(registry, &client, &repo, Some(Arc::new(rollout))).await;
    assert!(
        report.converged && report.halted.is_empty(),
        "the rollout completes: {:?}",
        report.halted
    );
    let log = sim.requests();
    let latency = Duration::from_millis(APPLY_LATENCY_MS).as_micros() as u64;
    let member_spans: Vec<(u64, u64)> = (0..MEMBERS)
        .map(|i| member_span(&log, fixture::vmid(i), latency))
        .collect();
    let mut times: Vec<f64> = member_spans
        .iter()
        .map(|(s, e)| (e - s) as f64 / 1000.0)
        .collect();
    times.sort_by(f64::total_cmp);
    let per_guest = times[times.len() / 2];
    let waves = PER_BUDGET.div_ceil(PLACES);
    let bound = waves as f64 * per_guest;
    let start = member_spans.iter().map(|s| s.0).min().unwrap_or(0);
    let end = member_spans.iter().map(|s| s.1).max().unwrap_or(0);
    let wall = (end - start) as f64 / 1000.0;
    let ratio = wall / bound;
    table.add(
        "11 rollout",
        format!(
            "{MEMBERS} VMs, budgets of {PER_BUDGET}, max-unavailable {PLACES}, gate running: wall / (waves {waves} x median member time {per_guest:.0} ms)"
        ),
        format!("{wall:.0} / {bound:.0} ms, {ratio:.2}x"),
        "<= 1.2x",
        Some(ratio <= 1.2),
    );
    // The guests in no budget: done (their start answered) after the first member started,
    // in member times; not slowed means within one member's time.
    let outside_done = (MEMBERS..count)
        .map(|i| outside_end(&log, fixture::vmid(i), latency))
        .max()
        .unwrap_or(start);
    let outside = outside_done.saturating_sub(start) as f64 / 1000.0 / per_guest;
    table.add(
        "11 rollout",
        format!("  {OUTSIDE} VMs in no budget, same apply: done after / one member's time"),
        format!("{outside:.2}x"),
        "<= 1.2x",
        Some(outside <= 1.2),
    );
}

/// Apply the fixture at `repo`, with `rollout` when given.
async fn apply(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    repo: &Path,
    rollout: Option<Arc<Rollout>>,
) -> proxops_reconcile::ApplyReport {
    let (objects, _) = cycle::validated(registry, repo);
    let mut first = cycle::plan_all(registry, client, &objects, READ_CONCURRENCY)
        .await
        .expect("plan");
    if let Some(r) = &rollout {
        r.hold_back(&mut first, &[]);
    }
    let options = ApplyOptions {
        gate: None,
        limits: Limits {
            write_concurrency: WRITE_SLOTS,
            task_timeout: Duration::from_secs(120),
        },
        secrets: None,
        read_concurrency: Some(READ_CONCURRENCY),
        max_passes: 8,
        memory: Arc::new(proxops_reconcile::memory::StopMemory::in_memory()),
        cancel: None,
        rollout,
    };
    proxops_reconcile::apply(registry, client, &objects, first, options, Arc::new(Silent))
        .await
        .expect("apply")
}

/// A member's disturbance in `log` (microseconds): its shutdown's arrival to the answer of
/// its gate's read (the first `status/current` after its start, which passes at once).
fn member_span(log: &[proxops_sim::RequestRecord], vmid: u32, latency: u64) -> (u64, u64) {
    let mine = format!("/qemu/{vmid}/status/");
    let arrival = |what: &str, after: u64| {
        log.iter()
            .find(|r| {
                r.received_us >= after
                    && r.path.starts_with("/nodes/")
                    && r.path.ends_with(&format!("{mine}{what}"))
            })
            .map(|r| r.received_us)
    };
    let start = arrival("shutdown", 0).expect("the member was shut down");
    let started = arrival("start", start).expect("the member was started");
    let end = arrival("current", started).expect("the member's gate read its status");
    (start, end + latency)
}

/// When a guest in no budget was back: its start's arrival, plus the start and its task poll.
fn outside_end(log: &[proxops_sim::RequestRecord], vmid: u32, latency: u64) -> u64 {
    let start = format!("/qemu/{vmid}/status/start");
    log.iter()
        .filter(|r| r.method == "POST" && r.path.ends_with(&start))
        .map(|r| r.received_us)
        .max()
        .expect("the guest was started")
        + 2 * latency
}
