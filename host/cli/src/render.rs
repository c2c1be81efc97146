//! Human rendering of plans and apply summaries, terraform-like:
//! `+` create, `~` update, `-` delete, `>` power, `!` anomaly, `…` pending, `✗` error.

use std::fmt::Write as _;

use proxops_reconcile::plan::{ClusterPlan, action_view};
use proxops_reconcile::{ApplyReport, Status};
use proxops_runtime::kind::Operation;

fn symbol(op: Operation) -> &'static str {
    match op {
        Operation::Create => "+",
        Operation::Update | Operation::MarkTemplate => "~",
        Operation::Delete => "-",
        Operation::Power => ">",
    }
}

fn value(v: &Option<String>) -> String {
    match v {
        Some(v) => format!("{v:?}"),
        None => "(none)".into(),
    }
}

/// The body of a plan (no header), one object after the other.
pub fn plan(plan: &ClusterPlan) -> String {
    let mut out = String::new();
    for o in &plan.objects {
        let who = format!("{} {}", o.object.kind, o.object.name);
        if let Some(e) = &o.error {
            writeln!(out, "  ✗ {who}: cannot plan: {e}").unwrap();
            continue;
        }
        for a in &o.proposal.actions {
            let view = action_view(a);
            let mut marks = String::new();
            if a.destructive {
                marks.push_str("  [destructive]");
            }
            if a.requires_stop {
                marks.push_str("  [stop required]");
            }
            writeln!(out, "  {} {who}: {}{marks}", symbol(a.operation), a.summary).unwrap();
            for c in &view.changes {
                match (&c.old, &c.new) {
                    (None, Some(_)) => {
                        writeln!(out, "      + {} = {}", c.key, value(&c.new)).unwrap()
                    }
                    (Some(_), None) => {
                        writeln!(out, "      - {} = {}", c.key, value(&c.old)).unwrap()
                    }
                    _ => writeln!(
                        out,
                        "      ~ {}: {} -> {}",
                        c.key,
                        value(&c.old),
                        value(&c.new)
                    )
                    .unwrap(),
                }
            }
        }
        if o.proposal.actions.is_empty() {
            for d in &o.proposal.drift {
                let live = if d.sensitive {
                    "(sensitive)".into()
                } else {
                    value(&d.live)
                };
                let desired = if d.sensitive {
                    "(sensitive)".into()
                } else {
                    value(&d.desired)
                };
                writeln!(
                    out,
                    "  ~ {who}: drift {}: {live} -> {desired} (reported, not changed)",
                    d.path
                )
                .unwrap();
            }
        }
        for p in &o.proposal.pending {
            let live = if p.sensitive {
                "(sensitive)".into()
            } else {
                value(&p.live)
            };
            let desired = if p.sensitive {
                "(sensitive)".into()
            } else {
                value(&p.desired)
            };
            writeln!(
                out,
                "  … {who}: {} pending until reboot: {live} -> {desired}",
                p.path
            )
            .unwrap();
        }
        for a in &o.proposal.anomalies {
            let path = if a.path.is_empty() {
                String::new()
            } else {
                format!("{}: ", a.path)
            };
            writeln!(out, "  ! {who}: {path}{}", a.message).unwrap();
        }
    }
    out
}

/// `Plan: 1 to create, …` or `No changes.`
pub fn plan_summary(plan: &ClusterPlan) -> String {
    let c = plan.counts();
    let mut s = if plan.has_changes() {
        format!(
            "Plan: {} to create, {} to update, {} to delete, {} power changes",
            c.create, c.update, c.delete, c.power
        )
    } else {
        "No changes: the cluster matches the manifests".to_string()
    };
    for (n, what) in [
        (c.anomalies, "anomalies"),
        (c.pending, "pending until reboot"),
        (c.errors, "objects not planned"),
    ] {
        if n > 0 {
            write!(s, "; {n} {what}").unwrap();
        }
    }
    s.push('.');
    s
}

/// What an apply did and what is left.
pub fn apply_summary(report: &ApplyReport) -> String {
    let mut out = String::new();
    let done = report
        .outcomes
        .iter()
        .filter(|(_, s)| *s == Status::Done)
        .count();
    for (o, status) in report.failures() {
        match status {
            Status::Failed(e) => writeln!(out, "  ✗ {} {}: {e}", o.kind, o.name).unwrap(),
            Status::Blocked(e) => {
                writeln!(out, "  ✗ {} {}: not attempted: {e}", o.kind, o.name).unwrap()
            }
            Status::Done => {}
        }
    }
    if let Some(reason) = &report.stopped {
        writeln!(
            out,
            "  ✗ stopped before the next pass, blocked by policy: {reason}"
        )
        .unwrap();
    }
    let left = plan(&report.last);
    let failed = report.failures().count();
    if report.converged {
        let counts = report.last.counts();
        let state = match (counts.pending, counts.anomalies) {
            (0, 0) => "the cluster matches the manifests".to_string(),
            (0, a) => format!("{a} anomalies need a human"),
            (p, 0) => format!("{p} changes are pending until their guests reboot"),
            (p, a) => format!(
                "{p} changes are pending until their guests reboot and {a} anomalies need a human"
            ),
        };
        writeln!(
            out,
            "Apply complete: {done} objects changed in {} passes; {state}.",
            report.passes
        )
        .unwrap();
    } else {
        writeln!(
            out,
            "Apply incomplete: {done} objects changed, {failed} failed, after {} passes.",
            report.passes
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
