//! `proxops audit`: which running guests break the site's policies right now. Each cluster's
//! live guests are read as `adopt` reads them, in memory, and given to the policies; the
//! violations are printed per guest and rule as text, `--json` or markdown. Nothing is
//! written: not to PVE, not to the repository.

use std::path::Path;
use std::sync::Arc;

use proxops_reconcile::audit::{Audit, Violation, audit_cluster};
use proxops_runtime::SecretSource;

use crate::context::Context;
use crate::exit;
use crate::markdown;
use crate::output::{self, errln, outln};
use crate::prepared::{prepare_config, report_unprepared};
use crate::reconcile::{PlanFormat, clusters_to_run};

pub const HELP: &str = "Reads every guest of each cluster as adopt does (GETs only) and asks the site policies of\n\
proxops.yaml about it, as if its manifest were in git. Nothing is written anywhere.\n\n\
A guest no kind can write a manifest for (as adopt would report it) is listed as not audited.\n\n\
Exit status: 0 when every guest was audited and none breaks an enforced rule (warnings do not\n\
count), 3 when some does or some guest could not be audited (a human must look), 1 when a\n\
cluster could not be audited (unreachable, no cluster file, a policy that failed).\n\n\
Example:\n  proxops audit examples/showcase --cluster lab --format markdown";

/// `proxops audit REPO [--cluster X] [--format F]`.
pub async fn audit(
    ctx: &Context,
    repo: &Path,
    only: Option<&str>,
    format: PlanFormat,
) -> anyhow::Result<u8> {
    let Some(p) = prepare_config(ctx, repo).map_err(report_unprepared).ok() else {
        return Ok(exit::ERROR);
    };
    if p.policies.is_empty() {
        errln!(
            "warning: proxops.yaml lists no site policies: every guest passes; add some under `policies:`"
        );
    }
    let names = match clusters_to_run(repo, &p, only) {
        Ok(n) => n,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ERROR);
        }
    };
    let mut code = exit::OK;
    let mut audits = Vec::new();
    for name in &names {
        let Some(cluster) = p.clusters().get(name) else {
            errln!(
                "error: cluster {name}: no valid cluster file clusters/{name}.yaml; not audited"
            );
            code = exit::ERROR;
            continue;
        };
        let sops = p.sops.get(name).cloned();
        let conn =
            match crate::connect::connect(repo, ctx.config_root(repo), cluster, sops.as_deref())
                .await
            {
                Ok(c) => c,
                Err(e) => {
                    errln!("error: cluster {name}: cannot connect: {e:#}; not audited");
                    code = exit::ERROR;
                    continue;
                }
            };
        let secrets = sops.map(|s| s as Arc<dyn SecretSource>);
        let kinds = ctx.kinds.for_run(p.kind_budget);
        match audit_cluster(&kinds, &conn.client, &p.policies, name, secrets).await {
            Ok(a) => {
                if a.failed() {
                    code = exit::ERROR;
                } else if (a.denies() || !a.unread.is_empty()) && code == exit::OK {
                    code = exit::ATTENTION;
                }
                audits.push(a);
            }
            Err(e) => {
                errln!("error: cluster {name}: {e}; not audited");
                code = exit::ERROR;
            }
        }
    }
    match format {
        PlanFormat::Text => {
            for a in &audits {
                outln!("{}", text(a).trim_end());
            }
        }
        PlanFormat::Json => output::json(&serde_json::json!({"clusters": audits}))?,
        PlanFormat::Markdown => outln!("{}", markdown_report(&audits).trim_end()),
    }
    Ok(code)
}

/// `deny`/`warn` and the policy's mode, as one word for a line.
fn verdict(v: &Violation) -> &'static str {
    use proxops_core::settings::Mode;
    use proxops_reconcile::policy::Severity;
    match (v.finding.severity, v.finding.mode) {
        (_, _) if v.finding.failed => "failed",
        (Severity::Deny, Mode::Enforce) => "denied",
        (Severity::Deny, _) => "would deny (not enforced)",
        (Severity::Warn, _) => "warns",
    }
}

/// The guest as one line: `VM web01 (qemu/100 on pve01)`.
fn guest(v: &Violation) -> String {
    let g = &v.guest;
    let mut s = format!("{} {} ({}", g.kind, g.manifest, g.resource);
    if let Some(node) = &g.node {
        s.push_str(" on ");
        s.push_str(node);
    }
    s.push(')');
    s
}

fn line(v: &Violation) -> String {
    let mark = if v.finding.blocks() { "✗" } else { "!" };
    let mut s = format!(
        "{mark} {}: policy {} {}",
        guest(v),
        v.finding.policy,
        verdict(v)
    );
    if !v.finding.path.is_empty() {
        s.push_str(" at ");
        s.push_str(&v.finding.path);
    }
    s.push_str(": ");
    s.push_str(&v.finding.message);
    output::inline(&s).into_owned()
}

fn counts(a: &Audit) -> (usize, usize) {
    let shown = a.shown();
    let denied = shown.iter().filter(|v| v.finding.blocks()).count();
    (denied, shown.len() - denied)
}

/// One cluster's findings as lines (what `watch --audit` reports when they change).
pub(crate) fn lines(a: &Audit) -> Vec<String> {
    let mut out: Vec<String> = a.shown().into_iter().map(line).collect();
    out.extend(
        a.failures
            .iter()
            .map(|f| format!("✗ {}", output::inline(&f.to_string()))),
    );
    out.extend(a.unread.iter().map(|u| {
        format!(
            "! {}: not audited (no kind could write a manifest for it): {}",
            output::inline(&u.resource),
            output::inline(&u.reasons.join("; "))
        )
    }));
    out
}

/// Per policy of `policies` (name, mode): how many running guests it finds in violation
/// (monitor-mode findings count too: metrics record them). Every policy is listed, so a
/// gauge goes back to 0 when its last violation is repaired.
pub(crate) fn per_policy(
    a: &Audit,
    policies: &[proxops_reconcile::policy::LoadedPolicy],
) -> Vec<(String, proxops_core::settings::Mode, usize)> {
    policies
        .iter()
        .map(|p| {
            let guests: std::collections::BTreeSet<&str> = a
                .violations
                .iter()
                .filter(|v| v.finding.policy == p.name && !v.finding.failed)
                .map(|v| v.guest.resource.as_str())
                .collect();
            (p.name.clone(), p.mode, guests.len())
        })
        .collect()
}

/// One cluster's audit for a terminal.
fn text(a: &Audit) -> String {
    let (denied, other) = counts(a);
    let mut out = format!(
        "Cluster {}: {} guests audited, {} break an enforced rule, {} other findings.\n",
        output::inline(&a.cluster),
        a.audited,
        denied,
        other
    );
    for l in lines(a) {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// Every cluster's audit for a pull-request or issue comment: foreign values escaped.
fn markdown_report(audits: &[Audit]) -> String {
    let mut out = String::from("## proxops audit\n\n");
    for a in audits {
        let (denied, other) = counts(a);
        out.push_str(&format!(
            "### Cluster {}\n\n{} guests audited, **{} break an enforced rule**, {} other findings.\n\n",
            markdown::text(&a.cluster),
            a.audited,
            denied,
            other
        ));
        if !a.shown().is_empty() {
            out.push_str("| guest | policy | verdict | field | message |\n|---|---|---|---|---|\n");
            for v in a.shown() {
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} |\n",
                    markdown::text(&guest(v)),
                    markdown::text(&v.finding.policy),
                    verdict(v),
                    markdown::text(&v.finding.path),
                    markdown::text(&v.finding.message)
                ));
            }
            out.push('\n');
        }
        for f in &a.failures {
            out.push_str(&format!("- ✗ {}\n", markdown::text(&f.to_string())));
        }
        for u in &a.unread {
            out.push_str(&format!(
                "- not audited: {}: {}\n",
                markdown::text(&u.resource),
                markdown::text(&u.reasons.join("; "))
            ));
        }
    }
    out
}
