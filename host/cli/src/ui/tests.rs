//! The pages on a fixed fleet (snapshots, fixed times), and hostile values in every field
//! of it: no markup, attribute, link or terminal escape of theirs survives.

use proxops_core::ObjectId;
use proxops_reconcile::plan::PlanView;

use super::pages::{self, Show};
use super::*;

/// 2026-12-05 07:00:00 UTC.
const T0: u64 = 1_796_454_000;

/// A plan of cluster `c` whose every foreign value is `x` (or built from it).
fn plan(c: &str, x: &str) -> PlanView {
    let x = serde_json::Value::from(x);
    let json = serde_json::json!({
        "cluster": c,
        "objects": [
            {"cluster": c, "kind": "VM", "name": "web", "file": "vm/lab/web.yaml", "node": "pve01",
             "resource": "qemu/150", "running": true,
             "actions": [{"operation": "update", "summary": "update config (memory)",
                          "changes": [{"key": "memory", "old": "1024", "new": "2048"},
                                      {"key": "description", "old": x, "new": "web server"}],
                          "calls": [{"method": "PUT", "path": "/nodes/pve01/qemu/150/config",
                                     "params": [["memory", "2048"], ["description", "web server"]]}]}],
             "drift": [], "pending": [{"path": "spec.cpu.cores", "live": "2", "desired": "4"}],
             "anomalies": []},
            {"cluster": c, "kind": "TemplateVM", "name": "tpl", "file": "templatevm/lab/tpl.yaml",
             "node": "pve01", "resource": "qemu/900", "running": false,
             "actions": [], "drift": [{"path": "spec.tags", "live": x, "desired": "base"}],
             "pending": [], "anomalies": []},
            {"cluster": c, "kind": "VM", "name": x, "file": "vm/lab/odd.yaml", "node": x,
             "resource": "qemu/151", "running": false, "actions": [], "drift": [], "pending": [],
             "anomalies": [{"path": "spec.hardware.pci-devices", "message": x}]},
            {"cluster": c, "kind": "VM", "name": "db", "file": "vm/lab/db.yaml", "node": "pve02",
             "resource": "qemu/152", "running": true, "actions": [], "drift": [], "pending": [],
             "anomalies": []},
        ]
    });
    serde_json::from_value(json).expect("a plan view")
}

/// A fleet of one cluster named `c`, two cycles of history and an apply, with `x` as every
/// foreign value the pages show.
fn fleet_with(c: &str, x: &str) -> Fleet {
    let mut fleet = Fleet::new(HISTORY as usize);
    let id = |kind: &str, name: &str| ObjectId::new(c, kind, name);
    let graph = ClusterGraph {
        nodes: vec![
            id("TemplateVM", "tpl"),
            id("VM", "web"),
            id("VM", x),
            id("VM", "db"),
        ],
        edges: vec![(0, 1, "spec.clone".into()), (0, 2, x.into())],
    };
    let first = CycleRecord {
        number: 1,
        ended: T0,
        took_ms: 420,
        outcome: "clean",
        summary: "No changes: the cluster matches the manifests".into(),
        objects: Some(4),
        violations: Some(vec![(x.to_string(), "warn", 0)]),
        diff: String::new(),
        ..CycleRecord::default()
    };
    fleet.record(c, first, Some(plan(c, "same")), Some(graph.clone()));
    let ui = Ui {
        fleet: Arc::new(RwLock::new(fleet)),
    };
    let live = ui.live(c, 2);
    live.line(&format!("… VM web: {x}"));
    live.line("✓ VM web: update config (memory)");
    // A fixed start, for the snapshots.
    if let Some(l) = ui.write().clusters.get_mut(c).and_then(|v| v.live.as_mut()) {
        l.started = T0 + 30;
    }
    let second = CycleRecord {
        number: 2,
        ended: T0 + 60,
        took_ms: 1350,
        outcome: "attention",
        summary: format!("Plan: 0 to create, 1 to update, 0 to delete, 0 power changes. {x}"),
        objects: Some(4),
        drift: 2,
        anomalies: 1,
        pending: 1,
        violations: Some(vec![(x.to_string(), "warn", 1)]),
        rollout: vec![Rollout {
            budget: x.into(),
            done: 1,
            left: 1,
            halted: true,
        }],
        applied: 1,
        failed: 0,
        found: vec![format!(
            "~ VM web: update config (memory)\n      ~ description: {x}"
        )],
        resolved: vec![format!("! VM {x}: gone")],
        apply_lines: vec![format!("Applied: 1 updated; {x}")],
        diff: format!(
            "  ~ VM web: update config (memory)\n      ~ description: {x:?} -> \"web server\"\n"
        ),
        findings: vec![format!(
            "policy {x} would deny (not enforced) [warn mode] VM web"
        )],
        ..CycleRecord::default()
    };
    let mut fleet = ui.write().clone();
    fleet.record(c, second, Some(plan(c, x)), None);
    fleet
}

/// Every page of the fleet, by name.
fn pages_of(fleet: &Fleet) -> Vec<(String, String)> {
    let mut out = vec![("fleet".to_string(), pages::fleet(fleet).into_string())];
    for (name, c) in &fleet.clusters {
        for (show, label) in [(Show::All, "cluster"), (Show::Drift, "cluster-drift")] {
            out.push((label.into(), pages::cluster(name, c, show).into_string()));
        }
        out.push((
            "history".into(),
            pages::history(name, c, fleet.keep).into_string(),
        ));
        out.push(("live".into(), pages::live(name, c).into_string()));
        out.push(("graph".into(), pages::graph(name, c).into_string()));
        for o in &c.plan.as_ref().unwrap().objects {
            out.push((
                format!("object-{}", o.object.id.name),
                pages::object(c, o, c.last()).into_string(),
            ));
        }
    }
    out
}

#[test]
fn every_page_of_a_fixed_fleet() {
    let fleet = fleet_with("lab", "<b>prod</b>");
    for (name, html) in pages_of(&fleet) {
        let name = name.replace(['<', '>', '/'], "_");
        // One tag a line, to review.
        insta::assert_snapshot!(name, html.replace("><", ">\n<"));
    }
}

#[test]
fn cycles_beyond_the_history_are_dropped() {
    let mut fleet = Fleet::new(2);
    for n in 1..=5 {
        let record = CycleRecord {
            number: n,
            outcome: "clean",
            ..CycleRecord::default()
        };
        fleet.record("lab", record, None, None);
    }
    let kept: Vec<u64> = fleet.clusters["lab"]
        .history
        .iter()
        .map(|c| c.number)
        .collect();
    assert_eq!(kept, [4, 5]);
}

#[test]
fn times_are_shown_in_utc() {
    for (secs, shown) in [
        (0, "1970-01-01 00:00:00 UTC"),
        (T0, "2026-12-05 07:00:00 UTC"),
        (951_782_400, "2000-02-29 00:00:00 UTC"),
        (4_107_542_399, "2100-02-28 23:59:59 UTC"),
    ] {
        assert_eq!(utc(secs), shown, "{secs}");
    }
}

/// A secret the redactor knows; it must never reach a page.
const SECRET: &str = "ui-test-secret-V4lue";

/// What must hold of a page rendered with `hostile` in every field.
fn check(page: &str, html: &str, hostile: &str) {
    let context = format!("{page} with {hostile:?}");
    for bad in [
        "<script",
        "<b>",
        "<img",
        "\u{1b}",
        "\u{202e}",
        SECRET,
        "\"onmouseover",
        "]]>",
    ] {
        assert!(!html.contains(bad), "{context}: {bad:?} in\n{html}");
    }
    // Every link and source is one of ours: a path, never a scheme from a value.
    for attr in ["href=\"", "src=\"", "action=\""] {
        for (i, _) in html.match_indices(attr) {
            let value = &html[i + attr.len()..];
            assert!(
                value.starts_with('/') || value.starts_with('#'),
                "{context}: {attr}{}",
                &value[..value.len().min(40)]
            );
        }
    }
    // Only our own elements: the page has as many tags as the same page of tame values.
    assert!(!html.contains("onmouseover=\""), "{context}");
}

#[test]
fn hostile_values_are_escaped_on_every_page() {
    proxops_core::text::register(SECRET).unwrap();
    for hostile in [
        "<script>alert(1)</script>",
        "\"onmouseover=\"alert(1)",
        "x\" onmouseover=\"alert(1)\" y=\"",
        "javascript:alert(1)",
        "\u{1b}[31mred\u{1b}[0m",
        "\u{202e}evil",
        "<img src=x onerror=alert(1)>",
        "]]><script>alert(1)</script>",
        "</style><b>bold</b>",
        &format!("token {SECRET} here"),
    ] {
        // In a cluster's name, too: it is in every link and title.
        for cluster in ["lab", hostile] {
            let fleet = fleet_with(cluster, hostile);
            for (page, html) in pages_of(&fleet) {
                check(&page, &html, hostile);
            }
        }
    }
}

#[test]
fn names_in_links_are_percent_encoded() {
    for (name, segment) in [
        ("web", "web"),
        ("a b", "a%20b"),
        ("javascript:alert(1)", "javascript%3Aalert%281%29"),
        ("../x", "..%2Fx"),
        ("ü", "%C3%BC"),
    ] {
        assert_eq!(pages::seg(name), segment, "{name}");
    }
    let id = ObjectId::new("lab", "VM", "a/b");
    assert_eq!(pages::object_href(&id), "/c/lab/o/VM/a%2Fb");
}
