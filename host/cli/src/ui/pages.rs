//! The status pages as HTML, from a [`Fleet`]: pure functions of it, so each page is a
//! snapshot test. Every value from a manifest, a kind or PVE goes through [`v`] (redacted,
//! control characters escaped) and then maud's HTML escaping; links are built from our own
//! routes with each name percent-encoded ([`seg`]), never from a value.

use maud::{DOCTYPE, Markup, html};

use proxops_core::ObjectId;
use proxops_reconcile::plan::{ObjectView, PlanView};

use super::{ClusterView, CycleRecord, Fleet, utc};
use crate::output;

/// A foreign value as a page may show it: secrets redacted, every control character escaped
/// (maud escapes it for HTML where it is put).
pub(crate) fn v(text: &str) -> String {
    output::inline(text).into_owned()
}

/// Foreign text of several lines: as [`v`], newlines and tabs kept.
fn lines(text: &str) -> String {
    output::clean(text)
}

/// One path segment: the name redacted (a name holding a secret links nowhere rather than
/// show it), then everything but RFC 3986's unreserved characters percent-encoded.
pub(crate) fn seg(name: &str) -> String {
    proxops_pve::encode_segment(&v(name))
}

pub(crate) fn cluster_href(cluster: &str) -> String {
    format!("/c/{}", seg(cluster))
}

pub(crate) fn object_href(id: &ObjectId) -> String {
    format!(
        "/c/{}/o/{}/{}",
        seg(&id.cluster),
        seg(&id.kind),
        seg(&id.name)
    )
}

/// The frame of every page: its title, the way back, and the body. `refresh` reloads the
/// page every so many seconds (the live page, without JavaScript).
fn page(title: &str, crumbs: &[(String, String)], refresh: Option<u32>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(s) = refresh {
                    meta http-equiv="refresh" content=(s);
                }
                title { (v(title)) " · proxops" }
                link rel="stylesheet" href="/style.css";
            }
            body {
                nav {
                    a href="/" { "proxops" }
                    @for (href, text) in crumbs {
                        " / " a href=(href) { (v(text)) }
                    }
                }
                main { (body) }
                footer { "Read-only: proxops changes clusters only from git (watch --apply, apply)." }
            }
        }
    }
}

/// How long a cycle took: `420 ms`, `1.4 s`.
fn took(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn outcome_badge(outcome: &str) -> Markup {
    html! { span class={ "badge " (outcome) } { (outcome) } }
}

/// Whether an object differs from its manifest: actions planned or drift reported (what
/// `proxops_watch_objects_in_drift` counts).
fn drifted(o: &ObjectView) -> bool {
    !o.actions.is_empty() || !o.drift.is_empty()
}

/// An object's state in one word.
fn status(o: &ObjectView) -> &'static str {
    if o.error.is_some() {
        "error"
    } else if !o.anomalies.is_empty() {
        "attention"
    } else if !o.actions.is_empty() {
        "changes"
    } else if !o.drift.is_empty() {
        "drift"
    } else if !o.pending.is_empty() {
        "pending"
    } else {
        "in-sync"
    }
}

fn count_link(cluster: &str, show: &str, n: usize) -> Markup {
    html! {
        td data-count=(show) class=(if n > 0 { "some" } else { "none" }) {
            a href={ (cluster_href(cluster)) "?show=" (show) } { (n) }
        }
    }
}

/// `/`: per cluster, its last cycle and what is left, each count linking to its objects.
pub(crate) fn fleet(fleet: &Fleet) -> Markup {
    let body = html! {
        h1 { "Fleet" }
        @if fleet.clusters.is_empty() {
            p { "No cycle has ended yet." }
        } @else {
            table.fleet {
                thead { tr {
                    th { "cluster" } th { "last cycle" } th { "outcome" } th { "objects" }
                    th { "drift" } th { "anomalies" } th { "pending until reboot" }
                    th { "policy violations" } th { "rollout" } th { "see" }
                } }
                tbody {
                    @for (name, c) in &fleet.clusters {
                        (fleet_row(name, c))
                    }
                }
            }
        }
    };
    page("Fleet", &[], None, body)
}

fn fleet_row(name: &str, c: &ClusterView) -> Markup {
    let href = cluster_href(name);
    html! {
        tr data-cluster=(v(name)) {
            th { a href=(href) { (v(name)) } }
            @match c.last() {
                None => { td colspan="8" { "no cycle yet" } }
                Some(last) => {
                    td {
                        a href={ (href) "/history" } { (utc(last.ended)) }
                        " (#" (last.number) ", " (took(last.took_ms)) ")"
                    }
                    td data-outcome=(last.outcome) {
                        (outcome_badge(last.outcome))
                        @if last.stale { " " span.badge.stale { "stale desired state" } }
                    }
                    @match last.objects {
                        None => { td colspan="4" { (v(&last.summary)) } }
                        Some(objects) => {
                            (count_link(name, "all", objects))
                            (count_link(name, "drift", last.drift))
                            (count_link(name, "anomalies", last.anomalies))
                            (count_link(name, "pending", last.pending))
                        }
                    }
                    td data-count="violations" {
                        @match &last.violations {
                            None => { span.none { "not audited" } }
                            Some(v) => {
                                a href={ (href) "#findings" } {
                                    (v.iter().map(|(_, _, n)| n).sum::<usize>())
                                }
                            }
                        }
                    }
                    td {
                        @if last.rollout.is_empty() {
                            span.none { "—" }
                        }
                        @for r in &last.rollout {
                            div {
                                a href={ (href) "#rollout" } { (v(&r.budget)) }
                                ": " (r.done) "/" (r.done + r.left) " done"
                                @if r.halted { " " span.badge.error { "halted" } }
                            }
                        }
                    }
                }
            }
            td.see {
                a href={ (href) "/history" } { "history" } " "
                a href={ (href) "/graph" } { "graph" } " "
                a href={ (href) "/live" } { "live" }
            }
        }
    }
}

/// Which objects the cluster page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Show {
    All,
    Drift,
    Anomalies,
    Pending,
}

impl Show {
    pub(crate) fn parse(text: Option<&str>) -> Show {
        match text {
            Some("drift") => Show::Drift,
            Some("anomalies") => Show::Anomalies,
            Some("pending") => Show::Pending,
            _ => Show::All,
        }
    }

    fn admits(self, o: &ObjectView) -> bool {
        match self {
            Show::All => true,
            Show::Drift => drifted(o),
            Show::Anomalies => !o.anomalies.is_empty(),
            Show::Pending => !o.pending.is_empty(),
        }
    }

    fn title(self) -> &'static str {
        match self {
            Show::All => "Objects",
            Show::Drift => "Objects in drift",
            Show::Anomalies => "Objects with anomalies",
            Show::Pending => "Objects with changes pending until reboot",
        }
    }
}

fn crumbs(cluster: &str) -> Vec<(String, String)> {
    vec![(cluster_href(cluster), cluster.to_string())]
}

/// `/c/{cluster}`: its objects (all, or those a fleet count named), its policy findings and
/// rollouts.
pub(crate) fn cluster(name: &str, c: &ClusterView, show: Show) -> Markup {
    let href = cluster_href(name);
    let body = html! {
        h1 { "Cluster " (v(name)) }
        p {
            a href={ (href) "/history" } { "history" } " · "
            a href={ (href) "/graph" } { "dependency graph" } " · "
            a href={ (href) "/live" } { "live apply" }
        }
        @if let Some(last) = c.last() {
            p.summary {
                "Cycle #" (last.number) " ended " (utc(last.ended)) ": "
                (outcome_badge(last.outcome)) " " (v(&last.summary))
            }
        }
        h2 { (show.title()) }
        @match &c.plan {
            None => { p { "Not planned yet." } }
            Some(plan) => { (objects_table(plan, show)) }
        }
        @if let Some(last) = c.last() {
            h2 id="findings" { "Policy findings" }
            @if last.findings.is_empty() {
                p { "None." }
            } @else {
                ul { @for f in &last.findings { li { pre { (lines(f)) } } } }
            }
            @if let Some(violations) = &last.violations {
                table {
                    thead { tr { th { "policy" } th { "mode" } th { "running guests in violation" } } }
                    tbody { @for (policy, mode, n) in violations {
                        tr { td { (v(policy)) } td { (mode) } td { (n) } }
                    } }
                }
            }
            h2 id="rollout" { "Rollout" }
            @if last.rollout.is_empty() {
                p { "No disruption budget was worked on in the last cycle." }
            } @else {
                table {
                    thead { tr { th { "budget" } th { "done" } th { "left" } th { "halted" } } }
                    tbody { @for r in &last.rollout {
                        tr { td { (v(&r.budget)) } td { (r.done) } td { (r.left) }
                             td { @if r.halted { "yes" } @else { "no" } } }
                    } }
                }
            }
        }
    };
    page(&format!("Cluster {name}"), &crumbs(name), None, body)
}

fn objects_table(plan: &PlanView, show: Show) -> Markup {
    let shown: Vec<&ObjectView> = plan.objects.iter().filter(|o| show.admits(o)).collect();
    html! {
        @if shown.is_empty() {
            p { "None." }
        } @else {
            table.objects {
                thead { tr { th { "kind" } th { "name" } th { "node" } th { "state" } th { "what" } } }
                tbody { @for o in shown {
                    tr {
                        td { (v(&o.object.id.kind)) }
                        td { a href=(object_href(&o.object.id)) { (v(&o.object.id.name)) } }
                        td { (v(o.object.node.as_deref().unwrap_or("—"))) }
                        td { span class={ "badge " (status(o)) } { (status(o)) } }
                        td { (what(o)) }
                    }
                } }
            }
        }
    }
}

/// An object's plan in a few words.
fn what(o: &ObjectView) -> String {
    if let Some(e) = &o.error {
        return v(e);
    }
    let mut parts: Vec<String> = o.actions.iter().map(|a| v(&a.summary)).collect();
    for (n, one, many) in [
        (
            o.drift.len(),
            "field drifted (reported)",
            "fields drifted (reported)",
        ),
        (
            o.pending.len(),
            "change pending until reboot",
            "changes pending until reboot",
        ),
        (o.anomalies.len(), "anomaly", "anomalies"),
    ] {
        if n > 0 {
            parts.push(crate::render::count(n, one, many));
        }
    }
    if o.object.file.is_none() && o.actions.is_empty() {
        parts.push("no manifest".into());
    }
    parts.join("; ")
}

/// `/c/{cluster}/o/{kind}/{name}`: desired against live, field by field, the actions and
/// their calls, the anomalies, the dependencies.
pub(crate) fn object(c: &ClusterView, o: &ObjectView, last: Option<&CycleRecord>) -> Markup {
    let id = &o.object.id;
    let (uses, used_by) = c.graph.around(id);
    let body = html! {
        h1 { (v(&id.kind)) " " (v(&id.name)) " " span class={ "badge " (status(o)) } { (status(o)) } }
        dl {
            dt { "manifest" } dd { (v(o.object.file.as_deref().unwrap_or("none (a live object no manifest names)"))) }
            dt { "node" } dd { (v(o.object.node.as_deref().unwrap_or("—"))) }
            dt { "live object" } dd { (v(o.object.resource.as_deref().unwrap_or("none yet"))) }
            dt { "running" } dd { @if o.running { "yes" } @else { "no" } }
            @if let Some(last) = last {
                dt { "as of" } dd { a href={ (cluster_href(&id.cluster)) "/history" } { "cycle #" (last.number) ", " (utc(last.ended)) } }
            }
            @let found = found_in(c, id);
            @if !found.is_empty() {
                dt { "found by" } dd {
                    @for (i, n) in found.iter().enumerate() {
                        @if i > 0 { ", " }
                        a href={ (cluster_href(&id.cluster)) "/history#cycle-" (n) } { "cycle #" (n) }
                    }
                }
            }
            @if let Some(r) = &o.relocated {
                dt { "relocated" } dd { "by HA from " (v(&r.from)) " to " (v(&r.to)) "; planned where it is" }
            }
        }
        @if let Some(e) = &o.error {
            h2 { "Not planned" }
            p.error { (v(e)) }
        }
        h2 { "Desired against live" }
        @if o.actions.iter().all(|a| a.changes.is_empty()) && o.drift.is_empty() && o.pending.is_empty() {
            p { "Every field the kind compares matches its manifest." }
        } @else {
            table.fields {
                thead { tr { th { "field" } th { "live" } th { "desired" } th { "" } } }
                tbody {
                    @for a in &o.actions { @for ch in &a.changes {
                        tr.change { td { (v(&ch.key)) } td { (shown(&ch.old)) } td { (shown(&ch.new)) } td { "changed by: " (v(&a.summary)) } }
                    } }
                    @for d in &o.drift {
                        tr.drift { td { (v(&d.path)) } td { (shown(&d.live)) } td { (shown(&d.desired)) } td { "drift, reported (not changed)" } }
                    }
                    @for p in &o.pending {
                        tr.pending { td { (v(&p.path)) } td { (shown(&p.live)) } td { (shown(&p.desired)) } td { "pending until reboot" } }
                    }
                }
            }
        }
        h2 { "Planned actions" }
        @if o.actions.is_empty() {
            p { "None." }
        } @else {
            ol { @for a in &o.actions {
                li {
                    strong { (v(&a.operation)) } ": " (v(&a.summary))
                    @if a.destructive { " " span.badge.error { "destructive" } }
                    @if a.requires_stop { " " span.badge.attention { "stop required" } }
                    @if !a.calls.is_empty() {
                        ul.calls { @for call in &a.calls {
                            li { code {
                                (v(&call.method)) " " (v(&call.path))
                                @for (k, val) in &call.params { " " (v(k)) "=" (v(val)) }
                            } }
                        } }
                    }
                }
            } }
        }
        h2 { "Anomalies" }
        @if o.anomalies.is_empty() {
            p { "None." }
        } @else {
            ul.anomalies { @for a in &o.anomalies {
                li {
                    @if !a.path.is_empty() { code { (v(&a.path)) } ": " }
                    (v(&a.message))
                }
            } }
        }
        h2 { "Dependencies" }
        (deps("Uses", &uses))
        (deps("Used by", &used_by))
    };
    let mut crumbs = crumbs(&id.cluster);
    crumbs.push((object_href(id), format!("{} {}", id.kind, id.name)));
    page(&format!("{} {}", id.kind, id.name), &crumbs, None, body)
}

/// The kept cycles (newest first) whose new items name the object `id`.
fn found_in(c: &ClusterView, id: &ObjectId) -> Vec<u64> {
    let who = format!(" {} {}:", v(&id.kind), v(&id.name));
    c.history
        .iter()
        .rev()
        .filter(|r| {
            r.found
                .iter()
                .any(|f| f.lines().next().is_some_and(|l| l.contains(&who)))
        })
        .map(|r| r.number)
        .collect()
}

fn shown(value: &Option<String>) -> String {
    match value {
        Some(s) => v(s),
        None => "(none)".into(),
    }
}

fn deps(title: &str, ids: &[&ObjectId]) -> Markup {
    html! {
        h3 { (title) }
        @if ids.is_empty() {
            p { "Nothing." }
        } @else {
            ul { @for id in ids { li { a href=(object_href(id)) { (v(&id.kind)) " " (v(&id.name)) } } } }
        }
    }
}

/// `/c/{cluster}/history`: the last cycles, the newest first, each with what it found,
/// resolved and applied, and its plan.
pub(crate) fn history(name: &str, c: &ClusterView, keep: usize) -> Markup {
    let body = html! {
        h1 { "History of " (v(name)) }
        p { "The last " (keep) " cycles are kept (--ui-history)." }
        @for r in c.history.iter().rev() {
            @let eventful = !r.found.is_empty() || !r.resolved.is_empty() || r.applied + r.failed > 0;
            section.cycle.quiet[!eventful] id={ "cycle-" (r.number) } {
                h2 {
                    "Cycle #" (r.number) " · " (utc(r.ended)) " · "
                    (outcome_badge(r.outcome)) " · " (took(r.took_ms))
                    @if !eventful { " · nothing new" }
                }
                p { (v(&r.summary)) @if r.stale { " (stale desired state: the repository fails validation)" } }
                @if !r.found.is_empty() {
                    h3 { "Found" }
                    ul.found { @for f in &r.found { li { pre { (lines(f)) } } } }
                }
                @if !r.resolved.is_empty() {
                    h3 { "Resolved" }
                    ul.resolved { @for f in &r.resolved { li { pre { (lines(f)) } } } }
                }
                @if r.applied + r.failed > 0 || !r.apply_lines.is_empty() {
                    h3 { "Applied" }
                    p.counts { (r.applied) " actions succeeded, " (r.failed) " failed or blocked" }
                    pre.applied { @for l in &r.apply_lines { (v(l)) "\n" } }
                }
                @if !r.diff.is_empty() {
                    details {
                        summary { "The plan of this cycle" }
                        pre.diff { (lines(&r.diff)) }
                    }
                }
            }
        }
        @if c.history.is_empty() { p { "No cycle yet." } }
    };
    let mut crumbs = crumbs(name);
    crumbs.push((format!("{}/history", cluster_href(name)), "history".into()));
    page(&format!("History of {name}"), &crumbs, None, body)
}

/// `/c/{cluster}/live`: the progress of the apply in flight, or of the last one. Without
/// JavaScript the page reloads itself while an apply runs.
pub(crate) fn live(name: &str, c: &ClusterView) -> Markup {
    let (refresh, body) = match &c.live {
        None => (
            Some(10),
            html! {
                h1 { "Live apply on " (v(name)) }
                p { "No apply has run yet (watch applies only with --apply, and only what a cycle planned)." }
            },
        ),
        Some(live) => (
            Some(if live.done { 10 } else { 2 }),
            html! {
                h1 { "Live apply on " (v(name)) }
                p.status data-done=(live.done) {
                    "Cycle #" (live.cycle) ", started " (utc(live.started)) ": "
                    @if live.done { "finished: " (outcome_badge(live.outcome.unwrap_or("error"))) } @else { span.badge.changes { "in flight" } }
                }
                pre.live { @for l in &live.lines { (v(l)) "\n" } }
            },
        ),
    };
    let mut crumbs = crumbs(name);
    crumbs.push((format!("{}/live", cluster_href(name)), "live".into()));
    page(&format!("Live apply on {name}"), &crumbs, refresh, body)
}

/// `/c/{cluster}/graph`: the dependency graph, as SVG in the page (its boxes link to objects).
pub(crate) fn graph(name: &str, c: &ClusterView) -> Markup {
    let body = html! {
        h1 { "Dependencies in " (v(name)) }
        p { "An arrow goes from an object to those that reference it (as " code { "proxops graph" } " draws it). "
            a href={ (cluster_href(name)) "/graph.svg" } { "The SVG alone" } "." }
        (super::svg::render(&c.graph, c.plan.as_deref()))
    };
    let mut crumbs = crumbs(name);
    crumbs.push((format!("{}/graph", cluster_href(name)), "graph".into()));
    page(&format!("Dependencies in {name}"), &crumbs, None, body)
}

/// A page for what is not there.
pub(crate) fn not_found(what: &str) -> Markup {
    page(
        "Not found",
        &[],
        None,
        html! { h1 { "Not found" } p { (v(what)) } },
    )
}

/// The pages' stylesheet (served as `/style.css`: the CSP allows no inline style).
pub(crate) const STYLE: &str = r#"body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f7f8fa}
nav{background:#1d232a;color:#fff;padding:.6em 1.2em}nav a{color:#fff;text-decoration:none;font-weight:600}
main{padding:1em 1.2em;max-width:80em}footer{color:#667;padding:1em 1.2em;font-size:.85em}
table{border-collapse:collapse;background:#fff;margin:.5em 0 1em}th,td{border:1px solid #d5dae1;padding:.3em .6em;text-align:left;vertical-align:top}
thead th{background:#eef1f5}td.some a{font-weight:700;color:#b45309}td.none a,span.none{color:#8a94a3}
.badge{display:inline-block;border-radius:.7em;padding:0 .6em;font-size:.85em;background:#e5e7eb}
.badge.clean,.badge.in-sync{background:#d1fae5;color:#065f46}.badge.changes,.badge.drift,.badge.pending{background:#fef3c7;color:#92400e}
.badge.attention,.badge.stale{background:#ffedd5;color:#9a3412}.badge.error{background:#fee2e2;color:#991b1b}
pre{white-space:pre-wrap;word-break:break-all;margin:0;font-size:.9em}pre.diff,pre.live,pre.applied{background:#fff;border:1px solid #d5dae1;padding:.6em}
ul.found pre{color:#92400e}ul.resolved pre{color:#065f46}section.cycle{border-top:1px solid #d5dae1;margin-top:1em}
section.quiet h2{font-size:1em;font-weight:400;color:#55606e}section.quiet p{display:none}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
svg text{font:12px system-ui,sans-serif}
"#;
