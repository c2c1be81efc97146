//! `proxops.yaml` at the repository root: repository-wide settings: the site policies every
//! plan is checked by, the third-party kinds and their grants, guest budgets.
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1                  # optional
//! policies:
//!   - file: policies/require-protection-prod.wasm   # relative to the repository root
//!     sha256: 9f86d081884c7d65…                     # of the .wasm; a mismatch refuses to run
//!     name: prod-protection                         # optional display name (default: the policy's own)
//!     mode: enforce                                 # enforce (default) | warn | monitor
//!     settings: {tags: [prod]}                      # passed to the policy as JSON
//!     scope: {clusters: [lab], kinds: [VM]}         # empty or absent = all
//! guest-budget:                                   # optional: time per guest per run
//!   policy: 30s                                   # each policy, each cluster (default 30s)
//!   kind: 10m                                     # each kind, each cluster (default: none)
//! allow-token-env: [CI_PVE_TOKEN]                   # token variables beyond PROXOPS_*/PVE_*
//! clusters-at-once: 4                             # clusters plan/apply/watch work on at once (default 8)
//! kinds:                                          # third-party kinds (see `grant`)
//!   - file: kinds/container.wasm
//!     sha256: 3b1f…
//!     grant: {calls: [GET /cluster/resources, POST /nodes/{node}/lxc]}
//! budgets:                                        # disruption budgets (see `budget`)
//!   - name: db                                    # unique
//!     clusters: [prod]                            # optional: default every cluster
//!     select: {members: [db-1, db-2, db-3]}       # exactly one of: tags: [..], names: [glob, ..],
//!                                                 #   members: [manifest name, ..]; left out: only
//!                                                 #   manifests that name it (metadata.budget: db)
//!     max-unavailable: 1                          # a count, or a percentage "25%" (floor, at least 1)
//!     order: declared                             # declared (members order, else name) | name
//!     health:                                     # what a disturbed guest must show before the next
//!       agent: true                               #   its QEMU guest agent answers (default false)
//!       uptime: 30s                               #   up at least this long (default 0s)
//!       timeout: 10m                              #   the gate's bound; past it the budget halts (default 10m)
//!       tcp: {port: 22, address: 192.0.2.10}      #   optional, off by default: a port accepts a connection
//!                                                 #   from here (address: default the guest's ipconfig0/net0)
//!     reboot-pending: false                       # reboot members with changes pending until reboot,
//!                                                 #   in every apply (as `apply --reboot-pending`)
//! ```
//!
//! A guest (any object with a vmid) in a budget is disturbed (stopped, shut down, rebooted,
//! or any action that disturbs its availability) only while it holds one of its budget's
//! `max-unavailable` places, one member after the other in the budget's order; it gives its
//! place back once its health gate passes. A gate that runs out halts its budget for the run
//! (exit 3). A guest in two budgets, or a `members` name no manifest declares, is a
//! validation error of its cluster.
//!
//! A repository without `proxops.yaml` has no policies. Files are read through
//! [`RepoDir`] (a cap-std `Dir` rooted at the repository), so neither `..` nor a symlink can
//! lead outside it.

use std::path::Path;

use serde_json::{Map, Value};

use crate::API_VERSION;
use crate::diag::Diagnostic;
use crate::rooted::{ReadError, RepoDir};

mod policies;

use policies::parse_entry;
pub use policies::{
    MAX_POLICY_BYTES, Mode, PolicyEntry, Scope, read_pinned_file, read_repo_file, sha256_hex,
};

/// The settings file, relative to the repository root.
pub const FILE: &str = "proxops.yaml";

/// A parsed `proxops.yaml`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct RepoSettings {
    /// `Some("proxops.yaml")` when the file exists.
    pub file: Option<String>,
    pub policies: Vec<PolicyEntry>,
    /// Third-party kinds (`kinds:`), in file order.
    pub kinds: Vec<crate::grant::KindEntry>,
    pub guest_budget: GuestBudget,
    /// `allow-token-env`: environment variables a cluster file may take its API token from
    /// besides `PROXOPS_*` and `PVE_*`.
    pub token_env: Vec<String>,
    /// `clusters-at-once`: how many clusters `plan`, `apply` and `watch` work on at the same
    /// time (`--clusters-at-once` overrides it); `None` for the default.
    pub clusters_at_once: Option<usize>,
    /// `budgets:`, disruption budgets, in file order (names unique).
    pub budgets: Vec<crate::budget::Budget>,
}

/// The most clusters worked on at once that `clusters-at-once` (and the flag) accepts: each
/// cluster in flight holds its connections, reads and tasks.
pub const MAX_CLUSTERS_AT_ONCE: usize = 64;

/// `guest-budget:`, the time all calls of one guest may take in one run (one cycle of one
/// cluster), on top of each call's own deadline. A guest that uses up its budget is stopped
/// like one that timed out: not called again in that run, its cluster blocked (a policy) or
/// its objects failed (a kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GuestBudget {
    /// Each policy, per cluster; `None` for no budget.
    pub policy: Option<std::time::Duration>,
    /// Each kind, per cluster; `None` for no budget.
    pub kind: Option<std::time::Duration>,
}

impl GuestBudget {
    /// The policy budget when `proxops.yaml` does not set one: 15 deadlines of a policy
    /// call, far more than a policy needs for thousands of manifests.
    pub const DEFAULT_POLICY: std::time::Duration = std::time::Duration::from_secs(30);
}

impl Default for GuestBudget {
    fn default() -> Self {
        GuestBudget {
            policy: Some(GuestBudget::DEFAULT_POLICY),
            kind: None,
        }
    }
}

/// Parse `guest-budget:`, reporting each bad field through `err`.
fn parse_guest_budget(v: &Value, err: &mut impl FnMut(String, String)) -> GuestBudget {
    let mut budget = GuestBudget::default();
    let Some(map) = v.as_object() else {
        if !v.is_null() {
            err(
                "guest-budget".into(),
                "expected a mapping with policy and kind (durations like 30s)".into(),
            );
        }
        return budget;
    };
    for (key, value) in map {
        let slot = match key.as_str() {
            "policy" => &mut budget.policy,
            "kind" => &mut budget.kind,
            _ => {
                err(
                    format!("guest-budget.{key}"),
                    "unknown field; expected one of: policy, kind".into(),
                );
                continue;
            }
        };
        match value.as_str().map(parse_duration) {
            Some(Some(d)) if !d.is_zero() => *slot = Some(d),
            _ => err(
                format!("guest-budget.{key}"),
                "expected a duration above zero with a unit: 500ms, 30s or 10m".into(),
            ),
        }
    }
    budget
}

/// `500ms`, `30s`, `10m` -> a duration.
pub(crate) fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(std::time::Duration::from_millis(n)),
        "s" => Some(std::time::Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(std::time::Duration::from_secs),
        _ => None,
    }
}

/// Read `proxops.yaml` in `root`; a missing file gives the defaults (no policies).
pub fn load(root: &Path) -> Result<RepoSettings, Vec<Diagnostic>> {
    let dir = RepoDir::open(root).map_err(|e| {
        vec![Diagnostic::error(
            root.display().to_string(),
            "",
            e.to_string(),
        )]
    })?;
    let bytes = match dir.read(FILE, crate::yaml::MAX_BYTES) {
        Ok(b) => b,
        Err(ReadError::NotFound(_)) => return Ok(RepoSettings::default()),
        Err(e) => return Err(vec![Diagnostic::error(FILE, "", e.to_string())]),
    };
    let text = String::from_utf8(bytes)
        .map_err(|_| vec![Diagnostic::error(FILE, "", "the file is not UTF-8 text")])?;
    parse_text(FILE, &text)
}

/// Parse the text of a settings file named `file`.
pub fn parse_text(file: &str, text: &str) -> Result<RepoSettings, Vec<Diagnostic>> {
    let text = crate::yaml::strip_bom(text);
    let docs = crate::yaml::parse(text).map_err(|p| vec![crate::repo::yaml_error(file, p)])?;
    let mut docs = docs.into_iter();
    let doc = match (docs.next(), docs.next()) {
        (_, Some(_)) => {
            return Err(vec![Diagnostic::error(
                file,
                "",
                "the file holds several YAML documents; put all settings in one",
            )]);
        }
        (Some(doc), None) if !doc.is_null() => doc,
        // No document, or an empty one: no settings.
        _ => Value::Object(Map::new()),
    };
    parse(file, &doc)
}

/// Parse a settings document; every problem is reported.
pub fn parse(file: &str, doc: &Value) -> Result<RepoSettings, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    let mut err = |path: String, message: String| {
        diags.push(Diagnostic::error(file, path, message));
    };
    let Some(top) = doc.as_object() else {
        return Err(vec![Diagnostic::error(
            file,
            "",
            "expected a mapping with `policies:`",
        )]);
    };
    for key in top.keys() {
        if ![
            "apiVersion",
            "kind",
            "policies",
            "kinds",
            "guest-budget",
            "allow-token-env",
            "clusters-at-once",
            "budgets",
        ]
        .contains(&key.as_str())
        {
            err(
                key.clone(),
                "unknown field; expected one of: apiVersion, kind, policies, kinds, guest-budget, allow-token-env, clusters-at-once, budgets"
                    .into(),
            );
        }
    }
    let clusters_at_once = match top.get("clusters-at-once") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_CLUSTERS_AT_ONCE as u64).contains(&n) => Some(n as usize),
            _ => {
                err(
                    "clusters-at-once".into(),
                    format!(
                        "expected a whole number from 1 (one cluster at a time) to {MAX_CLUSTERS_AT_ONCE}"
                    ),
                );
                None
            }
        },
    };
    let budgets = top
        .get("budgets")
        .map(|v| crate::budget::parse_budgets(v, &mut err))
        .unwrap_or_default();
    let guest_budget = top
        .get("guest-budget")
        .map(|v| parse_guest_budget(v, &mut err))
        .unwrap_or_default();
    if let Some(v) = top.get("apiVersion")
        && v.as_str() != Some(API_VERSION)
    {
        err("apiVersion".into(), format!("expected `{API_VERSION}`"));
    }
    if let Some(v) = top.get("kind")
        && v.as_str() != Some("Settings")
    {
        err(
            "kind".into(),
            "expected `Settings` (or leave `kind` out)".into(),
        );
    }
    let mut policies = Vec::new();
    match top.get("policies") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (index, item) in list.iter().enumerate() {
                if let Some(p) = parse_entry(index, item, &mut err) {
                    policies.push(p);
                }
            }
        }
        Some(_) => err(
            "policies".into(),
            "expected a list of {file, sha256, settings, mode, scope}".into(),
        ),
    }
    let mut kinds = Vec::new();
    match top.get("kinds") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for (index, item) in list.iter().enumerate() {
                if let Some(k) = crate::grant::parse_kind_entry(index, item, &mut err) {
                    kinds.push(k);
                }
            }
        }
        Some(_) => err(
            "kinds".into(),
            "expected a list of {file, sha256, grant}".into(),
        ),
    }
    let mut token_env = Vec::new();
    match top.get("allow-token-env") {
        None | Some(Value::Null) => {}
        Some(Value::Array(names)) => {
            for (i, name) in names.iter().enumerate() {
                match name.as_str() {
                    Some(n)
                        if !n.is_empty()
                            && !n.starts_with(|c: char| c.is_ascii_digit())
                            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
                    {
                        token_env.push(n.to_string())
                    }
                    _ => err(
                        format!("allow-token-env[{i}]"),
                        "expected an environment variable name (letters, digits and `_`)".into(),
                    ),
                }
            }
        }
        Some(_) => err(
            "allow-token-env".into(),
            "expected a list of environment variable names".into(),
        ),
    }
    if diags.is_empty() {
        Ok(RepoSettings {
            file: Some(file.to_string()),
            policies,
            kinds,
            guest_budget,
            token_env,
            clusters_at_once,
            budgets,
        })
    } else {
        Err(diags)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn guest_budget_cases() {
        use std::time::Duration;
        let check = |yaml: &str, expected: Result<(Option<u64>, Option<u64>), &str>| {
            let got = super::parse_text("proxops.yaml", yaml);
            match (got, expected) {
                (Ok(s), Ok((policy, kind))) => {
                    assert_eq!(
                        s.guest_budget.policy,
                        policy.map(Duration::from_millis),
                        "{yaml}"
                    );
                    assert_eq!(
                        s.guest_budget.kind,
                        kind.map(Duration::from_millis),
                        "{yaml}"
                    );
                }
                (Err(d), Err(path)) => {
                    assert_eq!(d.len(), 1, "{yaml}: {d:?}");
                    assert_eq!(d[0].path, path, "{yaml}");
                    assert_eq!(d[0].file, "proxops.yaml");
                }
                (got, want) => panic!("{yaml}: got {got:?}, want {want:?}"),
            }
        };
        check("policies: []\n", Ok((Some(30_000), None)));
        check("guest-budget: {policy: 500ms}\n", Ok((Some(500), None)));
        check(
            "guest-budget: {kind: 10m, policy: 2s}\n",
            Ok((Some(2000), Some(600_000))),
        );
        check("guest-budget: {policy: 5}\n", Err("guest-budget.policy"));
        check("guest-budget: {policy: 0s}\n", Err("guest-budget.policy"));
        check("guest-budget: {kind: 1h}\n", Err("guest-budget.kind"));
        check("guest-budget: {run: 1s}\n", Err("guest-budget.run"));
        check("guest-budget: 30s\n", Err("guest-budget"));
    }

    #[test]
    fn budgets_are_checked_with_file_and_field() {
        use crate::budget::{MaxUnavailable, Order, Selector};
        use std::time::Duration;
        // (budgets: YAML, Ok(a summary of the parsed budgets) or Err(the diagnostics' paths))
        let check = |yaml: &str, expected: Result<&str, &[&str]>| {
            let got = super::parse_text("proxops.yaml", &format!("budgets:\n{yaml}"));
            match (got, expected) {
                (Ok(s), Ok(want)) => {
                    let summary: Vec<String> = s
                        .budgets
                        .iter()
                        .map(|b| {
                            format!(
                                "{} {:?} {} {:?} agent={} uptime={}s timeout={}s clusters={} reboot={}",
                                b.name,
                                b.select,
                                b.max_unavailable,
                                b.order,
                                b.health.agent,
                                b.health.uptime.as_secs(),
                                b.health.timeout.as_secs(),
                                b.clusters.join(","),
                                b.reboot_pending,
                            )
                        })
                        .collect();
                    assert_eq!(summary.join(" | "), want, "{yaml}");
                }
                (Err(d), Err(paths)) => {
                    assert!(d.iter().all(|d| d.file == "proxops.yaml"), "{d:?}");
                    let mut got: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
                    got.sort();
                    assert_eq!(got, paths, "{yaml}: {d:?}");
                }
                (got, want) => panic!("{yaml}: got {got:?}, want {want:?}"),
            }
        };
        check(
            "  - {name: db, select: {members: [db-2, db-1]}, max-unavailable: 1}\n",
            Ok(
                "db Members([\"db-2\", \"db-1\"]) 1 Declared agent=false uptime=0s timeout=600s clusters= reboot=false",
            ),
        );
        check(
            "  - name: web\n    clusters: [prod]\n    select: {tags: [Web]}\n    max-unavailable: \"25%\"\n    order: name\n    health: {agent: true, uptime: 30s, timeout: 2m}\n",
            Ok(
                "web Tags([\"web\"]) 25% Name agent=true uptime=30s timeout=120s clusters=prod reboot=false",
            ),
        );
        check(
            "  - {name: all, select: {names: [\"app-*\"]}, max-unavailable: 0}\n",
            Ok(
                "all Names([\"app-*\"]) 0 Declared agent=false uptime=0s timeout=600s clusters= reboot=false",
            ),
        );
        check(
            "  - {name: r, select: {tags: [r]}, max-unavailable: 1, reboot-pending: true}\n",
            Ok(
                "r Tags([\"r\"]) 1 Declared agent=false uptime=0s timeout=600s clusters= reboot=true",
            ),
        );
        check(
            "  - {name: r, select: {tags: [r]}, max-unavailable: 1, reboot-pending: yes}\n",
            Err(&["budgets[0].reboot-pending"]),
        );
        for (tcp, path) in [
            ("{port: 0}", "budgets[0].health.tcp.port"),
            ("{port: 70000}", "budgets[0].health.tcp.port"),
            ("{address: 127.0.0.1}", "budgets[0].health.tcp.port"),
            (
                "{port: 22, address: db.example}",
                "budgets[0].health.tcp.address",
            ),
            ("{port: 22, host: x}", "budgets[0].health.tcp.host"),
            ("22", "budgets[0].health.tcp"),
        ] {
            check(
                &format!(
                    "  - {{name: t, select: {{tags: [t]}}, max-unavailable: 1, health: {{tcp: {tcp}}}}}\n"
                ),
                Err(&[path]),
            );
        }
        let parsed = super::parse_text(
            "proxops.yaml",
            "budgets:\n  - {name: t, select: {tags: [t]}, max-unavailable: 1, health: {tcp: {port: 22, address: \"::1\"}}}\n  - {name: u, select: {tags: [u]}, max-unavailable: 1, health: {tcp: {port: 5432}}}\n",
        )
        .expect("valid");
        assert_eq!(
            parsed.budgets[0].health.tcp,
            Some(crate::budget::Tcp {
                port: 22,
                address: Some("::1".parse().unwrap())
            })
        );
        assert_eq!(
            parsed.budgets[1].health.tcp,
            Some(crate::budget::Tcp {
                port: 5432,
                address: None
            })
        );
        // The selector: missing, empty, an empty list, two at once, unknown.
        check(
            "  - {name: a, max-unavailable: 1}\n",
            Ok("a Named 1 Declared agent=false uptime=0s timeout=600s clusters= reboot=false"),
        );
        check(
            "  - {name: a, select: null, max-unavailable: 1}\n",
            Err(&["budgets[0].select"]),
        );
        check(
            "  - {name: a, select: {}, max-unavailable: 1}\n",
            Err(&["budgets[0].select"]),
        );
        check(
            "  - {name: a, select: {tags: []}, max-unavailable: 1}\n",
            Err(&["budgets[0].select.tags"]),
        );
        check(
            "  - {name: a, select: {tags: [x], names: [y]}, max-unavailable: 1}\n",
            Err(&["budgets[0].select"]),
        );
        check(
            "  - {name: a, select: {labels: [x]}, max-unavailable: 1}\n",
            Err(&["budgets[0].select.labels"]),
        );
        check(
            "  - {name: a, select: {members: [x, x]}, max-unavailable: 1}\n",
            Err(&["budgets[0].select.members[1]"]),
        );
        check(
            "  - {name: a, select: {members: [x, \"\"]}, max-unavailable: 1}\n",
            Err(&["budgets[0].select.members[1]"]),
        );
        // Names: missing, duplicate.
        check(
            "  - {select: {tags: [x]}, max-unavailable: 1}\n",
            Err(&["budgets[0].name"]),
        );
        check(
            "  - {name: a, select: {tags: [x]}, max-unavailable: 1}\n  - {name: a, select: {tags: [y]}, max-unavailable: 1}\n",
            Err(&["budgets[1].name"]),
        );
        // Counts and percentages.
        for bad in [
            "-1", "\"101%\"", "\"%\"", "\"2.5%\"", "1.5", "\"one\"", "\"25 %\"", "[1]",
        ] {
            check(
                &format!("  - {{name: a, select: {{tags: [x]}}, max-unavailable: {bad}}}\n"),
                Err(&["budgets[0].max-unavailable"]),
            );
        }
        check(
            "  - {name: a, select: {tags: [x]}}\n",
            Err(&["budgets[0].max-unavailable"]),
        );
        // Unknown keys, bad order, bad health.
        check(
            "  - {name: a, select: {tags: [x]}, max-unavailable: 1, wave: 2, order: random}\n",
            Err(&["budgets[0].order", "budgets[0].wave"]),
        );
        check(
            "  - {name: a, select: {tags: [x]}, max-unavailable: 1, health: {agent: yes please, timeout: 0s, port: 22}}\n",
            Err(&[
                "budgets[0].health.agent",
                "budgets[0].health.port",
                "budgets[0].health.timeout",
            ]),
        );
        check("  {name: a}\n", Err(&["budgets"]));
        check("  - x\n", Err(&["budgets[0]"]));
        assert_eq!(MaxUnavailable::Percent(10).of(10), 1);
        assert_eq!(Order::default(), Order::Declared);
        assert_eq!(
            super::parse_text("proxops.yaml", "budgets: []\n").map(|s| s.budgets),
            Ok(Vec::new())
        );
        let _ = (Selector::Tags(vec![]), Duration::ZERO);
    }

    #[test]
    fn clusters_at_once_is_a_bounded_count() {
        let at_once =
            |yaml: &str| super::parse_text("proxops.yaml", yaml).map(|s| s.clusters_at_once);
        assert_eq!(at_once("policies: []\n"), Ok(None));
        assert_eq!(at_once("clusters-at-once: 1\n"), Ok(Some(1)));
        assert_eq!(at_once("clusters-at-once: 64\n"), Ok(Some(64)));
        for bad in ["0", "65", "-1", "2.5", "eight", "[2]"] {
            let d = at_once(&format!("clusters-at-once: {bad}\n")).expect_err(bad);
            assert_eq!(d.len(), 1, "{bad}: {d:?}");
            assert_eq!(d[0].path, "clusters-at-once", "{bad}");
            assert!(d[0].message.contains("from 1"), "{bad}: {}", d[0].message);
        }
    }

    use super::*;
    use serde_json::json;

    /// The SHA-256 of the empty file, a well-formed pin.
    pub(super) const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn parses_a_full_file() {
        let text = format!(
            "apiVersion: proxops/v1alpha1\npolicies:\n  - file: policies/a.wasm\n    sha256: \"sha256:{}\"\n    mode: warn\n    name: a\n    settings: {{tags: [prod]}}\n    scope: {{clusters: [lab], kinds: [VM]}}\n  - file: ./b.wasm\n    sha256: {SHA}\n",
            SHA.to_uppercase()
        );
        let s = parse_text(FILE, &text).expect("valid");
        assert_eq!(s.file.as_deref(), Some(FILE));
        assert_eq!(s.policies.len(), 2);
        let a = &s.policies[0];
        assert_eq!(a.file, "policies/a.wasm");
        assert_eq!(a.sha256, SHA);
        assert_eq!(a.mode, Mode::Warn);
        assert_eq!(a.name.as_deref(), Some("a"));
        assert_eq!(a.settings, json!({"tags": ["prod"]}));
        assert!(a.scope.includes_cluster("lab") && !a.scope.includes_cluster("prod"));
        assert!(a.scope.includes_kind("VM") && !a.scope.includes_kind("ISO"));
        let b = &s.policies[1];
        assert_eq!(b.mode, Mode::Enforce);
        assert_eq!(b.settings, json!({}));
        assert!(b.scope.includes_cluster("any") && b.scope.includes_kind("any"));
        assert_eq!(b.path(), "policies[1]");
    }

    #[test]
    fn reports_every_problem_with_its_path() {
        // (document, expected diagnostic paths)
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({}), vec![]),
            (json!({"policies": null}), vec![]),
            (json!({"policy": []}), vec!["policy"]),
            (
                json!({"apiVersion": "v2", "kind": "X"}),
                vec!["apiVersion", "kind"],
            ),
            (json!({"policies": {}}), vec!["policies"]),
            (json!({"policies": ["x"]}), vec!["policies[0]"]),
            (
                json!({"policies": [{}]}),
                vec!["policies[0].file", "policies[0].sha256"],
            ),
            (
                json!({"policies": [{"file": "../x.wasm", "sha256": "abc"}]}),
                vec!["policies[0].file", "policies[0].sha256"],
            ),
            (
                json!({"policies": [{"file": "/etc/x.wasm", "sha256": SHA}]}),
                vec!["policies[0].file"],
            ),
            (
                json!({"policies": [{"file": "a.wasm", "sha256": SHA, "mode": "block", "settings": [1],
                                      "scope": {"clusters": "lab", "nodes": []}, "extra": 1}]}),
                vec![
                    "policies[0].extra",
                    "policies[0].mode",
                    "policies[0].scope.clusters",
                    "policies[0].scope.nodes",
                    "policies[0].settings",
                ],
            ),
            (
                json!({"policies": [{"file": "a.wasm", "sha256": SHA, "scope": {"kinds": [""]}}]}),
                vec!["policies[0].scope.kinds[0]"],
            ),
        ];
        for (doc, want) in cases {
            let got = match parse(FILE, &doc) {
                Ok(_) => vec![],
                Err(d) => {
                    assert!(d.iter().all(|d| d.file == FILE && d.is_error()));
                    let mut p: Vec<String> = d.into_iter().map(|d| d.path).collect();
                    p.sort();
                    p
                }
            };
            assert_eq!(got, want, "{doc}");
        }
    }

    #[test]
    fn yaml_errors_are_located() {
        let e = parse_text(FILE, "policies:\n  - file: [\n").expect_err("invalid");
        assert!(e[0].line.is_some(), "{:?}", e[0]);
        assert!(parse_text(FILE, "").expect("empty").policies.is_empty());
    }
}
