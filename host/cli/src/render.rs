//! Human rendering of plans and apply summaries, terraform-like:
//! `+` create, `~` update, `-` delete, `>` power, `!` anomaly, `…` pending, `✗` error, `↻` a
//! disruption budget's rollout (its waves, in order, with its health gate).

use std::fmt::Write as _;

use proxops_reconcile::{ApplyReport, ObjectId};

use crate::output::inline;
use proxops_reconcile::plan::{ClusterPlan, RolloutView, action_view};
use proxops_runtime::kind::Operation;

fn symbol(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "+",
        Operation::Delete => "-",
        op if op.is_power() => ">",
        Operation::Update | Operation::Step(_) => "~",
    }
}

/// A value in quotes, escaped, or `(none)`.
pub fn value(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("{:?}", inline(v)),
        None => "(none)".into(),
    }
}

/// A drift's value: `(sensitive)` or `(secret <ref>)` as it is, any other value as [`value`].
fn secret_or_value(v: &Option<String>, sensitive: bool) -> String {
    match v {
        Some(v) if sensitive || proxops_core::secret_ref::mentions(v) => {
            proxops_reconcile::plan::display_value(v, sensitive)
        }
        _ => value(v),
    }
}

/// An object as the human reads it, `Kind name`, the name escaped (it comes from a manifest
/// or from PVE).
pub fn who(id: &ObjectId) -> String {
    format!("{} {}", inline(&id.kind), inline(&id.name))
}

/// The calls a third-party kind's action sends, one line each, for the reviewer:
/// `call POST /nodes/pve01/lxc/150/config  memory=512 password=(sensitive)`. Values are cut to
/// 60 characters (the changes below show them whole) and escaped.
pub fn call_lines(calls: &[proxops_reconcile::plan::CallView]) -> Vec<String> {
    calls
        .iter()
        .map(|c| {
            let mut line = format!("call {} {}", c.method, inline(&c.path));
            for (name, value) in &c.params {
                let cut: String = value.chars().take(60).collect();
                let more = if value.chars().count() > 60 {
                    "…"
                } else {
                    ""
                };
                line.push_str(&format!(" {}={}{more}", inline(name), inline(&cut)));
            }
            line
        })
        .collect()
}

/// `  [warning: uses node-power]` for each endpoint capability a third-party kind's calls use.
pub fn endpoint_marks(calls: &[proxops_reconcile::plan::CallView]) -> String {
    let mut used = Vec::new();
    for c in calls.iter().filter(|c| c.method != "GET") {
        if let Some(cap) = proxops_reconcile::request::target::endpoint_capability(&c.path)
            && !used.contains(&cap)
        {
            used.push(cap);
        }
    }
    used.iter()
        .map(|c| format!("  [warning: uses {c}, beyond one guest]"))
        .collect()
}

/// The body of a plan (no header), one object after the other.
pub fn plan(plan: &ClusterPlan) -> String {
    let mut out = String::new();
    for o in &plan.objects {
        // Names, summaries, messages and values come from manifests, kinds and PVE: each is
        // escaped on its own, so none can start a line of its own or move the cursor.
        let who = who(&o.object.id);
        if let Some(e) = &o.error {
            writeln!(out, "  ✗ {who}: cannot plan: {}", inline(&e.to_string())).unwrap();
            continue;
        }
        if let Some(r) = &o.relocated {
            writeln!(
                out,
                "  i {who}: relocated by HA from {} to {}; planned where it is",
                inline(&r.from),
                inline(&r.to)
            )
            .unwrap();
        }
        for a in &o.proposal.actions {
            let view = action_view(a);
            let mut marks = String::new();
            if a.destructive {
                marks.push_str("  [destructive]");
            }
            if a.disturbs_availability {
                marks.push_str("  [stop required]");
            }
            if o.sandboxed {
                marks.push_str(&endpoint_marks(&view.calls));
            }
            writeln!(
                out,
                "  {} {who}: {}{marks}",
                symbol(&a.operation),
                inline(&a.summary)
            )
            .unwrap();
            if o.sandboxed {
                for line in call_lines(&view.calls) {
                    writeln!(out, "      {line}").unwrap();
                }
            }
            for c in &view.changes {
                match (&c.old, &c.new) {
                    (None, Some(_)) => {
                        writeln!(out, "      + {} = {}", inline(&c.key), value(&c.new)).unwrap()
                    }
                    (Some(_), None) => {
                        writeln!(out, "      - {} = {}", inline(&c.key), value(&c.old)).unwrap()
                    }
                    _ => writeln!(
                        out,
                        "      ~ {}: {} -> {}",
                        inline(&c.key),
                        value(&c.old),
                        value(&c.new)
                    )
                    .unwrap(),
                }
            }
        }
        if o.proposal.actions.is_empty() {
            for d in &o.proposal.drift {
                let live = secret_or_value(&d.live, d.sensitive);
                let desired = secret_or_value(&d.desired, d.sensitive);
                writeln!(
                    out,
                    "  ~ {who}: drift {}: {live} -> {desired} (reported, not changed)",
                    inline(&d.path)
                )
                .unwrap();
            }
        }
        for p in &o.proposal.pending {
            let live = secret_or_value(&p.live, p.sensitive);
            let desired = secret_or_value(&p.desired, p.sensitive);
            writeln!(
                out,
                "  … {who}: {} pending until reboot: {live} -> {desired}",
                inline(&p.path)
            )
            .unwrap();
        }
        for a in &o.proposal.anomalies {
            let path = if a.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", inline(&a.path))
            };
            writeln!(out, "  ! {who}: {path}{}", inline(&a.message)).unwrap();
        }
    }
    for line in rollout_lines(&plan.rollout) {
        writeln!(out, "  {line}").unwrap();
    }
    out
}

/// The disruption budgets' rollouts of a plan, one line per budget, then one per wave (the
/// members that take the budget's places together, in order), each name escaped.
pub fn rollout_lines(rollout: &[RolloutView]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rollout {
        let head = format!(
            "↻ rollout of budget {} (max-unavailable {}",
            inline(&r.budget),
            inline(&r.max_unavailable)
        );
        if !r.waves.is_empty() {
            out.push(format!(
                "{head}: {} at a time; gate: {})",
                r.places,
                inline(&r.gate)
            ));
            for (i, wave) in r.waves.iter().enumerate() {
                let names: Vec<String> = wave.iter().map(|n| inline(n).into_owned()).collect();
                out.push(format!("    wave {}: {}", i + 1, names.join(", ")));
            }
        }
        if !r.blocked.is_empty() {
            let names: Vec<String> = r.blocked.iter().map(|n| inline(n).into_owned()).collect();
            out.push(format!(
                "{head}): blocked, no member may be disturbed: {}",
                names.join(", ")
            ));
        }
    }
    out
}

/// `1 anomaly`, `2 anomalies`: a count and its noun, singular or plural.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `Plan: 1 to create, …` or `No changes.`; anomalies, pending changes and objects not
/// planned follow, and "matches the manifests" is said only when nothing is left at all.
pub fn plan_summary(plan: &ClusterPlan) -> String {
    let c = plan.counts();
    let mut s = if plan.has_changes() {
        format!(
            "Plan: {} to create, {} to update, {} to delete, {}",
            c.create,
            c.update,
            c.delete,
            count(c.power, "power change", "power changes")
        )
    } else if c.anomalies + c.pending + c.errors == 0 {
        "No changes: the cluster matches the manifests".to_string()
    } else {
        "Nothing to apply, but the cluster does not match the manifests".to_string()
    };
    for (n, one, many) in [
        (
            c.anomalies,
            "anomaly needs a human",
            "anomalies need a human",
        ),
        (
            c.pending,
            "change pending until reboot",
            "changes pending until reboot",
        ),
        (c.errors, "object not planned", "objects not planned"),
    ] {
        if n > 0 {
            write!(s, "; {}", count(n, one, many)).unwrap();
        }
    }
    s.push('.');
    s
}

/// What an apply did and what is left. Failures were printed as they happened (one line each);
/// the summary counts them and does not repeat them.
pub fn apply_summary(report: &ApplyReport) -> String {
    let mut out = String::new();
    if let Some(reason) = &report.stopped {
        writeln!(out, "  ✗ stopped before the next pass: {}", inline(reason)).unwrap();
    }
    for halt in &report.halted {
        writeln!(
            out,
            "  ✗ rollout halted: budget {}, guest {}, {} check failed ({}); its remaining members were not disturbed",
            inline(&halt.budget),
            inline(&halt.guest),
            inline(&halt.check),
            inline(&halt.detail)
        )
        .unwrap();
    }
    let c = report.counts();
    let mut did: Vec<String> = [
        (c.created, "created"),
        (c.updated, "updated"),
        (c.deleted, "deleted"),
        (c.started, "started"),
        (c.stopped, "stopped"),
        (c.failed, "failed"),
        (c.blocked, "blocked"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if did.is_empty() {
        did.push("nothing changed".into());
    }
    let passes = count(report.passes as usize, "pass", "passes");
    let left = plan(&report.last);
    let counts = report.last.counts();
    if report.converged && report.clean() {
        writeln!(
            out,
            "Apply complete: {} in {passes}; the cluster matches the manifests.",
            did.join(", ")
        )
        .unwrap();
    } else if report.converged {
        let mut open = Vec::new();
        if counts.anomalies > 0 {
            open.push(count(
                counts.anomalies,
                "anomaly needs a human",
                "anomalies need a human",
            ));
        }
        if counts.pending > 0 {
            open.push(format!(
                "{} until their guests reboot",
                count(counts.pending, "change is pending", "changes are pending")
            ));
        }
        if counts.errors > 0 {
            open.push(count(
                counts.errors,
                "object could not be planned",
                "objects could not be planned",
            ));
        }
        if !report.halted.is_empty() {
            open.push(count(
                report.halted.len(),
                "disruption budget halted",
                "disruption budgets halted",
            ));
        }
        writeln!(
            out,
            "Apply finished: {} in {passes}; the cluster does not match the manifests yet: {}.",
            did.join(", "),
            open.join(", ")
        )
        .unwrap();
    } else if c.failed + c.blocked > 0 || report.stopped.is_some() {
        writeln!(
            out,
            "Apply incomplete: {} in {passes}; the failures are listed above.",
            did.join(", ")
        )
        .unwrap();
    } else {
        writeln!(
            out,
            "Apply incomplete: {} in {passes}; actions are still left after the pass limit (max-passes in the cluster file).",
            did.join(", ")
        )
        .unwrap();
    }
    if !left.is_empty() {
        out.push_str(if report.converged {
            "Still to look at:\n"
        } else {
            "Still to do:\n"
        });
        out.push_str(&left);
    }
    out
}
