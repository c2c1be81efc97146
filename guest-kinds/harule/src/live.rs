//! A rule as `GET /cluster/ha/rules` lists it, normalised for comparison: PVE sorts
//! `resources` and `nodes` when it writes them (`encode_value`), writes a node's priority
//! only when it is not 0, and may list `strict`/`disable` as numbers, booleans or strings
//! (absent is 0). Every entry carries the rules file's `digest` and, for an infeasible rule,
//! the HA manager's `errors` per option; so no per-rule read is needed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One live rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRule {
    pub rule: String,
    /// `type` as PVE wrote it.
    pub rule_type: String,
    /// The sids, sorted.
    pub resources: BTreeSet<String>,
    /// Node to priority (0 when none).
    pub nodes: BTreeMap<String, u32>,
    pub strict: bool,
    pub affinity: Option<String>,
    pub disabled: bool,
    pub comment: Option<String>,
    pub digest: Option<String>,
    /// Feasibility errors PVE reports for the rule (`errors`), as `option: message` lines.
    pub errors: Vec<String>,
}

/// PVE's `split_list`: `,`, `;`, whitespace and NUL separate; empty parts are dropped.
pub fn split_list(s: &str) -> Vec<&str> {
    s.split(|c: char| c == ',' || c == ';' || c.is_whitespace() || c == '\0')
        .filter(|p| !p.is_empty())
        .collect()
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.into()),
        _ => None,
    }
}

/// A PVE boolean option as listed (absent: false).
fn flag(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        ),
        _ => false,
    }
}

/// `nodes` as PVE's `parse_node_priority` reads it (a priority that does not read is 0).
pub fn parse_nodes(s: &str) -> BTreeMap<String, u32> {
    split_list(s)
        .into_iter()
        .map(|n| match n.split_once(':') {
            Some((node, pri)) => (node.to_string(), pri.parse().unwrap_or(0)),
            None => (n.to_string(), 0),
        })
        .collect()
}

impl LiveRule {
    /// Read a listing entry; `None` when it has no `rule` id.
    pub fn from_entry(e: &Value) -> Option<Self> {
        let rule = e.get("rule")?.as_str()?.to_string();
        let errors = match e.get("errors") {
            Some(Value::Object(m)) => m
                .iter()
                .flat_map(|(opt, msgs)| {
                    let msgs: Vec<String> = match msgs {
                        Value::Array(a) => a.iter().filter_map(|m| text(Some(m))).collect(),
                        other => text(Some(other)).into_iter().collect(),
                    };
                    msgs.into_iter().map(move |m| format!("{opt}: {m}"))
                })
                .collect(),
            _ => Vec::new(),
        };
        Some(LiveRule {
            rule,
            rule_type: text(e.get("type")).unwrap_or_default(),
            resources: split_list(&text(e.get("resources")).unwrap_or_default())
                .into_iter()
                .map(str::to_string)
                .collect(),
            nodes: parse_nodes(&text(e.get("nodes")).unwrap_or_default()),
            strict: flag(e.get("strict")),
            affinity: text(e.get("affinity")).filter(|s| !s.is_empty()),
            disabled: flag(e.get("disable")),
            comment: text(e.get("comment")).filter(|s| !s.is_empty()),
            digest: text(e.get("digest")).filter(|s| !s.is_empty()),
            errors,
        })
    }

    /// Whether the rule's comment carries proxops's mark for its own id.
    pub fn is_marked(&self) -> bool {
        proxops_kind_sdk::named::is_marked(self.comment.as_deref(), &self.rule)
    }
}
