//! `proxops watch`: plan every interval and on SIGHUP, report what changed since the last
//! cycle, and with `--apply` converge, through the same entry points as `plan` and `apply`
//! (`reconcile::plan_one`, `reconcile::execute`, the apply lock and the signal handling).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use crate::context::Context;
use crate::metrics::{self, Metrics};
use crate::output::{errln, out, outln};
use crate::prepared::{self, Prepared};
use crate::reconcile::{self, Job, RunOptions};
use crate::sink::Sink;
use crate::{exit, render};
use proxops_reconcile::lock::Locks;
use proxops_reconcile::run::{Checked, Outcome};

pub const HELP: &str = "Each cycle reloads the repository, then plans the selected clusters that are due, up to\n\
--clusters-at-once at a time (default 8; one cycle of a cluster at a time, and each cluster's\n\
lines printed together, in name order). It prints what is new and what was resolved since the last\n\
cycle, and one line per cluster and cycle. A cycle that ends in an error (PVE unreachable, a\n\
failed action, a denying policy) backs off: the interval doubles per error in a row, up to 16\n\
times, and never past 30 minutes unless the interval is longer; anomalies and pending\n\
changes are steady states.\n\
While the repository fails validation, watch keeps planning the last version that validated,\n\
applies nothing, and sets proxops_watch_stale_desired_state to 1. --apply takes the same\n\
per-cluster lock as apply.\n\n\
Exit status: 130/143 on SIGINT/SIGTERM, after the cycle in flight (as for apply, allow a grace\n\
period of at least the cluster's task-timeout-seconds times 3); 1 when it cannot start. With --cycles N, watch stops once\n\
every selected cluster ran N cycles of its own (its cycle lines count them) and exits with the worst\n\
of each cluster's last cycle: as plan (0, 1, 2, 3); with --apply as apply (0, 1, 3), and 2 when\n\
changes were left unapplied because the repository failed validation.\n\n\
With --ui-listen ADDR it serves a read-only status page (the fleet, each object's desired\n\
against live state, the last cycles, an apply in flight, the dependency graph; also /metrics).\n\n\
Example:\n  proxops watch examples/homelab --cluster lab --interval 5m --apply --metrics-listen 0.0.0.0:9184\n  \
proxops watch examples/showcase --age-identity examples/showcase/TEST-ONLY-age-key.txt --ui-listen 127.0.0.1:8080";

/// What `watch` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub cluster: Option<String>,
    pub interval: Duration,
    pub apply: bool,
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Audit the running guests after each plan (`proxops audit`), for the metrics and lines.
    pub audit: bool,
    pub cycles: Option<u64>,
    pub run: RunOptions,
    /// `--ui-listen`: the read-only status page.
    pub ui: Option<crate::ui::Settings>,
}

/// `90s`, `5m`, `1h`, `500ms`, or a bare number of seconds.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a number and a unit, e.g. 30s, 5m, 1h"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n * 60),
        "h" => Duration::from_secs(n * 3600),
        _ => {
            return Err(format!(
                "`{text}`: unknown unit `{unit}`; use ms, s, m or h"
            ));
        }
    };
    if d.is_zero() {
        return Err(format!("`{text}`: the interval must be longer than zero"));
    }
    Ok(d)
}

/// Errors back off to this at most, unless the interval itself is longer.
const MAX_BACKOFF: Duration = Duration::from_secs(30 * 60);

/// The delay before the next cycle of a cluster after `errors` errors in a row.
fn delay(interval: Duration, errors: u32) -> Duration {
    if errors == 0 {
        return interval;
    }
    (interval * 2u32.pow(errors.min(4))).min(interval.max(MAX_BACKOFF))
}

/// What a cluster's last cycle left, to report only what changes.
#[derive(Debug)]
struct ClusterState {
    items: BTreeSet<String>,
    errors: u32,
    due: Instant,
    /// This cluster's cycles so far (what its cycle lines count).
    cycles: u64,
    /// How its last cycle ended.
    last: Outcome,
}

/// The `outcome` label (one of [`metrics::OUTCOMES`]) of a cycle's outcome.
fn outcome_label(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Clean => metrics::OUTCOMES[0],
        Outcome::Changes => metrics::OUTCOMES[1],
        Outcome::NeedsHuman => metrics::OUTCOMES[2],
        Outcome::Failed => metrics::OUTCOMES[3],
    }
}

/// A cycle's report of one cluster.
#[derive(Debug)]
struct Cycle {
    outcome: Outcome,
    /// What is left (render::plan's items and the policy findings); `None` when not planned.
    items: Option<BTreeSet<String>>,
    summary: String,
    drift: usize,
    anomalies: usize,
    pending: usize,
    applied: u64,
    failed: u64,
    /// Requests the cycle sent to the cluster, per method (its own client's count, so cycles of
    /// clusters may overlap).
    sent: Vec<(proxops_pve::Method, u64)>,
    /// With `--audit`: per policy (name, mode) the running guests it finds in violation.
    violations: Option<Vec<(String, proxops_core::settings::Mode, usize)>>,
    /// Each budget's progress, when the cycle applied.
    rollout: Vec<proxops_reconcile::RolloutProgress>,
    /// For the status page (only with `--ui-listen`): the redacted plan, the cluster's
    /// dependency graph, the plan as text, what an apply printed, the policies' findings.
    view: Option<proxops_reconcile::plan::PlanView>,
    graph: Option<crate::ui::ClusterGraph>,
    diff: String,
    apply_lines: Vec<String>,
    findings: Vec<String>,
}

impl Cycle {
    fn error(summary: String) -> Cycle {
        Cycle {
            outcome: Outcome::Failed,
            items: None,
            summary,
            drift: 0,
            anomalies: 0,
            pending: 0,
            applied: 0,
            failed: 0,
            sent: Vec::new(),
            violations: None,
            rollout: Vec::new(),
            view: None,
            graph: None,
            diff: String::new(),
            apply_lines: Vec::new(),
            findings: Vec::new(),
        }
    }

    /// The requests `client` sent, as this cycle's.
    fn sent_by(mut self, client: Option<&proxops_pve::Client>) -> Cycle {
        self.sent = client.map(|c| c.sent().to_vec()).unwrap_or_default();
        self
    }
}

/// A rendered plan cut into items: a line of an object and its indented detail lines.
fn items(rendered: &str) -> BTreeSet<String> {
    let mut items = Vec::<String>::new();
    for line in rendered.lines() {
        match items.last_mut() {
            Some(item) if line.starts_with("      ") => {
                item.push('\n');
                item.push_str(line);
            }
            _ => items.push(line.trim_start().to_string()),
        }
    }
    items.into_iter().collect()
}

/// Where a cycle reports to besides its sink: the status page, with the cycle's number.
#[derive(Debug, Clone, Copy)]
struct Page<'a> {
    ui: Option<&'a crate::ui::Ui>,
    number: u64,
}

/// One cycle of one cluster of `job` (its run options are `options.run`); what it prints goes
/// to `sink`.
#[allow(clippy::too_many_arguments)]
async fn cycle(
    job: Job<'_>,
    name: &str,
    options: &Options,
    stale: bool,
    cancel: &tokio::sync::watch::Receiver<bool>,
    locks: &Locks,
    sink: &Sink,
    page: Page<'_>,
) -> Cycle {
    let Job { ctx, repo, p, .. } = job;
    let applying = options.apply && !stale;
    // The apply lock is held over the plan and the apply, as apply holds it.
    let _lock = match (applying, p.clusters().get(name)) {
        (true, Some(c)) => match locks
            .take(reconcile::lock_path(ctx, repo, c, sink), &c.name)
            .await
        {
            Ok(lock) => Some(lock),
            Err(e) => return Cycle::error(e),
        },
        _ => None,
    };
    let kinds = ctx.kinds.for_run(p.kind_budget);
    let mut planned = match reconcile::plan_one(job, &kinds, name, p.inputs(name), true, sink).await
    {
        Ok(planned) => planned,
        Err(unplanned) => {
            return Cycle::error("not planned (the reason is on stderr)".into())
                .sent_by(unplanned.client.as_ref());
        }
    };
    let client = planned.conn.client.clone();
    if applying {
        // As apply does: work a killed run left in flight is waited for, never sent again.
        if let Err(e) = reconcile::settle_inflight(&mut planned, sink).await {
            return Cycle::error(format!("not planned: {e}")).sent_by(Some(&client));
        }
        planned.save_memory(sink);
    }
    let reconcile::Planned {
        plan,
        conn,
        run: cluster_run,
    } = planned;
    let checked = cluster_run.check(plan);
    let (mut applied, mut failed) = (0, 0);
    let mut apply_lines = Vec::new();
    let mut note = String::new();
    let (plan, policies, report) = match checked {
        Checked::Passed { plan, report } if applying && plan.has_changes() => {
            let live = page.ui.map(|ui| ui.live(name, page.number));
            match reconcile::execute(&cluster_run, conn, plan, cancel.clone(), sink, live).await {
                Ok(done) => {
                    let c = done.counts();
                    applied = (c.created + c.updated + c.deleted + c.started + c.stopped) as u64;
                    failed = (c.failed + c.blocked) as u64;
                    let summary = render::apply_summary(&done);
                    if page.ui.is_some() {
                        apply_lines = summary.lines().map(str::to_string).collect();
                    }
                    sink.out(prefixed(name, &summary));
                    (done.last.clone(), report, Some(done))
                }
                Err(e) => {
                    return Cycle::error(format!("apply stopped: {e}")).sent_by(Some(&client));
                }
            }
        }
        Checked::Passed { plan, report } | Checked::Blocked { plan, report } => {
            if options.apply && stale && plan.has_changes() {
                note = "; not applied: the repository fails validation".into();
            }
            (plan, report, None)
        }
    };
    let rollout = report
        .as_ref()
        .map(|r| r.rollout_progress())
        .unwrap_or_default();
    let counts = plan.counts();
    let rendered = render::plan(&plan);
    let mut items = items(&rendered);
    let mut findings = policies.lines();
    items.extend(findings.iter().cloned());
    let mut violations = None;
    if options.audit {
        let secrets = p
            .sops
            .get(name)
            .cloned()
            .map(|s| s as Arc<dyn proxops_runtime::SecretSource>);
        let audited =
            proxops_reconcile::audit::audit_cluster(&kinds, &client, &p.policies, name, secrets)
                .await;
        match audited {
            Ok(a) => {
                let audit: Vec<String> = crate::audit::lines(&a)
                    .into_iter()
                    .map(|l| format!("audit: {l}"))
                    .collect();
                findings.extend(audit.iter().cloned());
                items.extend(audit);
                violations = Some(crate::audit::per_policy(&a, p.policies.policies()));
            }
            Err(e) => {
                return Cycle::error(format!("not audited: {e}")).sent_by(Some(&client));
            }
        }
    }
    // The plan shown is the last one after an apply: its errors count, as do the policies'.
    let outcome = Outcome::of(&plan, &policies, report.as_ref());
    let (view, graph) = match page.ui {
        Some(_) => {
            let inputs = p.inputs(name);
            let objects: Vec<&proxops_reconcile::Object> = inputs.objects.iter().collect();
            let graph = crate::graph::Graph::of(&objects);
            (
                Some(plan.view()),
                Some(crate::ui::ClusterGraph::of(&graph, name)),
            )
        }
        None => (None, None),
    };
    let ui = page.ui.is_some();
    Cycle {
        outcome,
        items: Some(items),
        summary: {
            let summary = render::plan_summary(&plan);
            match note.is_empty() {
                true => summary,
                // `… 0 power changes; not applied: …`, not `changes.; not applied`.
                false => format!("{}{note}", summary.trim_end_matches('.')),
            }
        },
        drift: plan
            .objects
            .iter()
            .filter(|o| o.has_actions() || !o.proposal.drift.is_empty())
            .count(),
        anomalies: counts.anomalies,
        pending: counts.pending,
        applied,
        failed,
        sent: Vec::new(),
        violations,
        rollout,
        view,
        graph,
        diff: if ui { rendered } else { String::new() },
        apply_lines,
        findings: if ui { findings } else { Vec::new() },
    }
    .sent_by(Some(&client))
}

/// `text`'s lines, each after `[cluster] `.
fn prefixed(cluster: &str, text: &str) -> String {
    text.lines()
        .map(|l| format!("[{}] {l}\n", crate::output::inline(cluster)))
        .collect()
}

/// The diagnostics of a load, as lines; `None` when the repository validates.
fn problems(loaded: &Result<Prepared, Vec<proxops_core::Diagnostic>>) -> Option<Vec<String>> {
    match loaded {
        Err(diags) => Some(diags.iter().map(|d| d.to_string()).collect()),
        Ok(p) if p.all_diags().iter().any(|d| d.is_error()) => Some(
            p.all_diags()
                .iter()
                .filter(|d| d.is_error())
                .map(|d| d.to_string())
                .collect(),
        ),
        Ok(_) => None,
    }
}

/// A SIGHUP stream, or one that never fires where there is none.
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    fn new() -> Hangup {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let signal = signal(SignalKind::hangup())
                .map_err(|e| {
                    errln!(
                        "warning: cannot watch for SIGHUP ({e}); cycles run on the interval only"
                    )
                })
                .ok();
            Hangup { signal }
        }
        #[cfg(not(unix))]
        Hangup {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = &mut self.signal {
            s.recv().await;
            return;
        }
        std::future::pending::<()>().await
    }
}

pub async fn run(ctx: &Context, repo: &Path, options: Options) -> anyhow::Result<u8> {
    let (mut cancel, signal) = crate::signals::watch_signals();
    let mut hangup = Hangup::new();
    let (metrics, registry) = Metrics::new();
    let registry = Arc::new(registry);
    if let Some(addr) = options.metrics_listen {
        let bound = metrics::serve(addr, registry.clone()).await?;
        errln!("watch: metrics on http://{bound}/metrics");
    }
    let ui = match &options.ui {
        None => None,
        Some(settings) => {
            let ui = crate::ui::Ui::new(settings.history);
            let bound =
                crate::ui::server::serve(settings, ui.clone(), registry.clone(), metrics.clone())
                    .await?;
            errln!("watch: status page on http://{bound}/");
            if !bound.ip().is_loopback() && settings.token.is_none() {
                errln!(
                    "warning: the status page on {bound} has no login: anyone who reaches it sees the fleet (put it behind your ingress's authentication, or pass --ui-token-file)"
                );
            }
            Some(ui)
        }
    };
    let mut good: Option<Prepared> = None;
    let mut shown_problems: Option<Vec<String>> = None;
    let mut shown_warnings: Vec<String> = Vec::new();
    let mut states: BTreeMap<String, ClusterState> = BTreeMap::new();
    // Errors in a row of the repository itself (no version that validates, no such cluster).
    let mut repo_errors = 0u32;
    let mut cycles = 0u64;
    let mut last = Outcome::Clean;
    let mut forced = true;
    let locks = Locks::default();
    loop {
        if *cancel.borrow() {
            break;
        }
        cycles += 1;
        let loaded = prepared::prepare(ctx, repo);
        let broken = problems(&loaded);
        // Warnings are printed when they change, not every cycle.
        if let Ok(p) = &loaded {
            let warnings: Vec<String> = p
                .all_diags()
                .iter()
                .filter(|d| !d.is_error())
                .map(|d| d.to_string())
                .collect();
            if warnings != shown_warnings {
                for w in warnings.iter().filter(|w| !shown_warnings.contains(w)) {
                    errln!("{}", crate::output::inline(w));
                }
                shown_warnings = warnings;
            }
        }
        if broken != shown_problems {
            match &broken {
                Some(lines) => {
                    errln!(
                        "watch: the repository fails validation; {}:",
                        if good.is_some() {
                            "planning the last version that validated, applying nothing"
                        } else {
                            "no version of it validated yet, nothing is planned"
                        }
                    );
                    for l in lines {
                        errln!("  {}", crate::output::inline(l));
                    }
                }
                None if shown_problems.is_some() => {
                    errln!("watch: the repository validates again")
                }
                None => {}
            }
            shown_problems = broken.clone();
        }
        let stale = broken.is_some();
        if let (None, Ok(p)) = (&broken, loaded) {
            good = Some(p);
        }
        let names = match &good {
            None => Err("no version of the repository validated yet".to_string()),
            Some(p) => {
                reconcile::clusters_to_run(repo, p, options.cluster.as_deref()).map(|n| (p, n))
            }
        };
        let now = Instant::now();
        let mut outcome = Outcome::Clean;
        match names {
            Ok((p, names)) => {
                repo_errors = 0;
                states.retain(|n, _| names.contains(n));
                if let Some(ui) = &ui {
                    ui.write().retain(&names);
                }
                let due: Vec<String> = names
                    .iter()
                    .filter(|name| states.get(*name).is_none_or(|s| forced || s.due <= now))
                    .cloned()
                    .collect();
                // Due clusters are worked on at once, up to `at_once`; each one's lines are
                // printed together, in name order, when it is done.
                let at_once = reconcile::clusters_at_once(options.run, p);
                let clusters = due.len();
                // Each cluster's next cycle number, for the status page's live view.
                let numbers: BTreeMap<String, u64> = due
                    .iter()
                    .map(|n| (n.clone(), states.get(n).map_or(1, |s| s.cycles + 1)))
                    .collect();
                let (options, cancel, locks, numbers, ui_ref) =
                    (&options, &cancel, &locks, &numbers, ui.as_ref());
                let mut ran = futures_util::stream::iter(due)
                    .map(|name| async move {
                        let sink = reconcile::sink_for(at_once, clusters);
                        if *cancel.borrow() {
                            return (name, sink, None);
                        }
                        let started = Instant::now();
                        let job = Job {
                            ctx,
                            repo,
                            p,
                            run: options.run,
                        };
                        let page = Page {
                            ui: ui_ref,
                            number: numbers.get(&name).copied().unwrap_or(1),
                        };
                        let c = cycle(job, &name, options, stale, cancel, locks, &sink, page).await;
                        (name, sink, Some((c, started.elapsed())))
                    })
                    .buffered(at_once);
                while let Some((name, sink, done)) = ran.next().await {
                    sink.flush();
                    let Some((mut c, took)) = done else {
                        continue;
                    };
                    for (method, sent) in &c.sent {
                        metrics
                            .requests
                            .get_or_create(&metrics::RequestLabel {
                                cluster: metrics::Name(name.clone()),
                                method: method.as_str(),
                            })
                            .inc_by(*sent);
                    }
                    let ran = Ran {
                        woke: now,
                        took,
                        stale,
                    };
                    let (found, resolved) = report(&metrics, &mut states, &name, &c, ran, options);
                    if let Some(ui) = &ui {
                        let number = states.get(&name).map_or(0, |s| s.cycles);
                        record(ui, &name, &mut c, (number, took, stale), found, resolved);
                    }
                    outcome = outcome.max(c.outcome);
                }
            }
            Err(e) => {
                repo_errors += 1;
                errln!("watch: cycle {cycles}: {}", crate::output::inline(&e));
                outcome = Outcome::Failed;
            }
        }
        forced = false;
        // `--cycles N`: every selected cluster has run N cycles of its own (a cluster backing
        // off after errors runs fewer wake-ups than the others), and the status is the worst
        // of each cluster's last cycle; without clusters to run, N wake-ups.
        let done = match options.cycles {
            None => false,
            Some(n) if states.is_empty() => cycles >= n,
            Some(n) => states.values().all(|s| s.cycles >= n),
        };
        last = if states.is_empty() {
            outcome
        } else {
            states.values().fold(outcome, |worst, s| worst.max(s.last))
        };
        if done {
            break;
        }
        let next = states
            .values()
            .map(|s| s.due)
            .min()
            .unwrap_or_else(|| Instant::now() + delay(options.interval, repo_errors));
        tokio::select! {
            _ = tokio::time::sleep_until(next.into()) => {}
            _ = hangup.recv() => {
                errln!("watch: SIGHUP; planning every cluster now");
                forced = true;
            }
            _ = cancel.changed() => {}
        }
    }
    let signal = signal.load(std::sync::atomic::Ordering::SeqCst);
    if signal != 0 {
        return Ok(signal);
    }
    Ok(exit::of(last))
}

/// When a cluster's cycle ran: the wake-up that started it, how long it took, and whether
/// the repository failed validation (a stale desired state).
#[derive(Debug, Clone, Copy)]
struct Ran {
    woke: Instant,
    took: Duration,
    stale: bool,
}

/// Give the status page a cluster's cycle (`number`, how long it took, whether the desired
/// state was stale) with what it found and resolved.
fn record(
    ui: &crate::ui::Ui,
    name: &str,
    c: &mut Cycle,
    (number, took, stale): (u64, Duration, bool),
    found: Vec<String>,
    resolved: Vec<String>,
) {
    let record = crate::ui::CycleRecord {
        number,
        ended: crate::ui::now(),
        took_ms: took.as_millis() as u64,
        outcome: outcome_label(c.outcome),
        summary: c.summary.clone(),
        stale,
        objects: c.view.as_ref().map(|v| v.objects.len()),
        drift: c.drift,
        anomalies: c.anomalies,
        pending: c.pending,
        violations: c.violations.as_ref().map(|v| {
            v.iter()
                .map(|(policy, mode, n)| (policy.clone(), mode.as_str(), *n))
                .collect()
        }),
        rollout: c
            .rollout
            .iter()
            .map(|r| crate::ui::Rollout {
                budget: r.budget.clone(),
                done: r.done,
                left: r.left,
                halted: r.halted,
            })
            .collect(),
        applied: c.applied,
        failed: c.failed,
        found,
        resolved,
        apply_lines: std::mem::take(&mut c.apply_lines),
        diff: std::mem::take(&mut c.diff),
        findings: std::mem::take(&mut c.findings),
    };
    ui.write()
        .record(name, record, c.view.take(), c.graph.take());
}

/// Print what changed since the cluster's last cycle and its cycle line; update its state and
/// its metrics. Returns the items found (new) and resolved since the last cycle.
fn report(
    metrics: &Metrics,
    states: &mut BTreeMap<String, ClusterState>,
    name: &str,
    c: &Cycle,
    ran: Ran,
    options: &Options,
) -> (Vec<String>, Vec<String>) {
    let Ran { woke, took, stale } = ran;
    let state = states
        .entry(name.to_string())
        .or_insert_with(|| ClusterState {
            items: BTreeSet::new(),
            errors: 0,
            due: woke,
            cycles: 0,
            last: Outcome::Clean,
        });
    state.cycles += 1;
    state.last = c.outcome;
    let cycles = state.cycles;
    let who = crate::output::inline(name);
    let (mut found, mut resolved) = (Vec::new(), Vec::new());
    if let Some(items) = &c.items {
        for gone in state.items.difference(items) {
            let first = gone.lines().next().unwrap_or_default();
            outln!("[{who}] resolved: {first}");
            resolved.push(first.to_string());
        }
        for new in items.difference(&state.items) {
            out!("{}", prefixed(name, &format!("new: {new}")));
            found.push(new.clone());
        }
        state.items = items.clone();
    }
    state.errors = if c.outcome == Outcome::Failed {
        state.errors + 1
    } else {
        0
    };
    let wait = delay(options.interval, state.errors);
    // From the wake-up that started the cycle, so clusters on one interval stay in step.
    state.due = woke + wait;
    let mut line = format!(
        "[{who}] cycle {cycles}: {}: {} ({:.1}s)",
        outcome_label(c.outcome),
        crate::output::inline(&c.summary),
        took.as_secs_f64()
    );
    if stale {
        line.push_str("; stale desired state: the repository fails validation");
    }
    if state.errors > 0 {
        line.push_str(&format!(
            "; {} in a row, next cycle in {}s",
            render::count(state.errors as usize, "error", "errors"),
            wait.as_secs()
        ));
    }
    outln!("{line}");

    let label = metrics::cluster(name);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    metrics
        .last_cycle
        .get_or_create(&label)
        .set(now.as_secs_f64());
    metrics.set_outcome(name, outcome_label(c.outcome));
    metrics
        .duration
        .get_or_create(&label)
        .set(took.as_secs_f64());
    metrics
        .consecutive_errors
        .get_or_create(&label)
        .set(i64::from(state.errors));
    metrics.stale.get_or_create(&label).set(i64::from(stale));
    metrics.applied.get_or_create(&label).inc_by(c.applied);
    metrics.failed.get_or_create(&label).inc_by(c.failed);
    if c.items.is_some() {
        metrics.drift.get_or_create(&label).set(c.drift as i64);
        metrics
            .anomalies
            .get_or_create(&label)
            .set(c.anomalies as i64);
        metrics.pending.get_or_create(&label).set(c.pending as i64);
    }
    for (policy, mode, count) in c.violations.iter().flatten() {
        metrics
            .policy_violations
            .get_or_create(&metrics::PolicyLabel {
                cluster: metrics::Name(name.to_string()),
                policy: metrics::Name(policy.clone()),
                mode: mode.as_str(),
            })
            .set(*count as i64);
    }
    for r in &c.rollout {
        let label = metrics::budget(name, &r.budget);
        metrics
            .rollout_done
            .get_or_create(&label)
            .set(r.done as i64);
        metrics
            .rollout_left
            .get_or_create(&label)
            .set(r.left as i64);
        metrics
            .rollout_halted
            .get_or_create(&label)
            .set(i64::from(r.halted));
    }
    (found, resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cycle that applied exports each budget's progress: members done and left, halted.
    #[test]
    fn an_applying_cycle_exports_each_budgets_progress() {
        let (metrics, registry) = Metrics::new();
        let mut states = BTreeMap::new();
        let progress = |budget: &str, done, left, halted| proxops_reconcile::RolloutProgress {
            budget: budget.into(),
            done,
            left,
            halted,
        };
        let cycle = Cycle {
            rollout: vec![progress("db", 1, 2, true), progress("web", 2, 0, false)],
            ..Cycle::error("applied".into())
        };
        let options = Options {
            cluster: None,
            interval: Duration::from_secs(60),
            apply: true,
            metrics_listen: None,
            audit: false,
            cycles: Some(1),
            run: RunOptions::default(),
            ui: None,
        };
        let ran = Ran {
            woke: Instant::now(),
            took: Duration::from_millis(5),
            stale: false,
        };
        report(&metrics, &mut states, "lab", &cycle, ran, &options);
        let text = metrics::encode(&registry);
        for line in [
            "proxops_watch_rollout_members_done{cluster=\"lab\",budget=\"db\"} 1",
            "proxops_watch_rollout_members_left{cluster=\"lab\",budget=\"db\"} 2",
            "proxops_watch_rollout_halted{cluster=\"lab\",budget=\"db\"} 1",
            "proxops_watch_rollout_members_done{cluster=\"lab\",budget=\"web\"} 2",
            "proxops_watch_rollout_members_left{cluster=\"lab\",budget=\"web\"} 0",
            "proxops_watch_rollout_halted{cluster=\"lab\",budget=\"web\"} 0",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
    }

    #[test]
    fn intervals_parse_with_units() {
        for (text, expected) in [
            ("5m", Ok(Duration::from_secs(300))),
            ("90s", Ok(Duration::from_secs(90))),
            ("90", Ok(Duration::from_secs(90))),
            ("1h", Ok(Duration::from_secs(3600))),
            ("500ms", Ok(Duration::from_millis(500))),
            ("0s", Err(())),
            ("5 minutes", Err(())),
            ("m", Err(())),
        ] {
            assert_eq!(parse_interval(text).map_err(|_| ()), expected, "{text}");
        }
    }

    #[test]
    fn errors_back_off_and_are_bounded() {
        let s = Duration::from_secs;
        for (interval, errors, expected) in [
            (s(60), 0, s(60)),
            (s(60), 1, s(120)),
            (s(60), 3, s(480)),
            (s(60), 9, s(960)),
            (s(300), 9, s(1800)),
            (s(3600), 2, s(3600)),
            (s(1), 9, s(16)),
        ] {
            assert_eq!(delay(interval, errors), expected, "{interval:?} {errors}");
        }
    }

    #[test]
    fn rendered_plans_split_into_items_with_their_details() {
        let rendered = "  ~ VM web: update\n      ~ memory: \"1\" -> \"2\"\n  ! VM db: odd\n";
        let got: Vec<String> = items(rendered).into_iter().collect();
        assert_eq!(
            got,
            vec![
                "! VM db: odd".to_string(),
                "~ VM web: update\n      ~ memory: \"1\" -> \"2\"".to_string()
            ]
        );
    }
}
