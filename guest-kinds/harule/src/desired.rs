//! The normalised desired state of an HA rule, and the values PVE writes for it.

use std::collections::BTreeMap;

use proxops_kind_sdk::named::Named;
use serde::{Deserialize, Serialize};

/// PVE's listing of HA rules, and the collection a create posts to.
pub const RULES: &str = "/cluster/ha/rules";

/// The HA rule as a named object: its listing, identity and the words of its messages.
pub const NAMED: Named = Named {
    kind: crate::validate::KIND,
    space: "ha-rule",
    listing: RULES,
    id_field: "rule",
    noun: "HA rule",
    short: "rule",
};

/// Longest `comment` PVE takes (`maxLength` of the API schema).
pub const COMMENT_MAX: usize = 4096;

/// A rule's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleType {
    /// Keeps resources on (strict) or prefers (non-strict) a set of nodes.
    NodeAffinity,
    /// Keeps resources together (positive) or apart (negative).
    ResourceAffinity,
}

impl RuleType {
    /// As PVE spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleType::NodeAffinity => "node-affinity",
            RuleType::ResourceAffinity => "resource-affinity",
        }
    }

    /// From PVE's spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "node-affinity" => Some(RuleType::NodeAffinity),
            "resource-affinity" => Some(RuleType::ResourceAffinity),
            _ => None,
        }
    }
}

/// A resource-affinity rule's `affinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Affinity {
    /// On the same node.
    Positive,
    /// On separate nodes.
    Negative,
}

impl Affinity {
    /// As PVE spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Affinity::Positive => "positive",
            Affinity::Negative => "negative",
        }
    }
}

/// One entry of `spec.resources`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Member {
    /// A proxops VM by manifest name (`VM/web-01` or `web-01`): a reference, resolved to
    /// `vm:<vmid>` at plan time.
    Vm(String),
    /// A raw HA resource id (`vm:100`, `ct:200`) of a guest proxops does not manage.
    Sid(String),
}

impl Member {
    /// How a manifest writes it.
    pub fn display(&self) -> String {
        match self {
            Member::Vm(name) => format!("VM/{name}"),
            Member::Sid(sid) => sid.clone(),
        }
    }
}

/// One node of a node-affinity rule, with its priority (PVE: none is 0).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodePriority {
    pub node: String,
    pub priority: u32,
}

/// The desired state of one HA rule (`validate`'s output; what plan compares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Desired {
    /// The rule id: `metadata.name`.
    pub rule: String,
    #[serde(rename = "type")]
    pub rule_type: RuleType,
    /// `spec.resources` in manifest order (the index is the reference path's).
    pub resources: Vec<Member>,
    /// Node-affinity only: sorted by node name, as PVE writes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodePriority>,
    /// Node-affinity only.
    #[serde(default)]
    pub strict: bool,
    /// Resource-affinity only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// PVE's `disable`.
    #[serde(default)]
    pub disabled: bool,
    /// `spec.comment` as written (without the mark, unless the manifest wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl Desired {
    /// The `comment` PVE gets: the manifest's comment with proxops's mark appended (` (proxops:<id>)`),
    /// or the mark alone; a comment that already carries the mark is taken as it is.
    pub fn pve_comment(&self) -> String {
        pve_comment(&self.rule, self.comment.as_deref())
    }

    /// The `nodes` value PVE writes: `node[:priority]`, sorted by node, no priority when 0.
    pub fn pve_nodes(&self) -> String {
        encode_nodes(
            &self
                .nodes
                .iter()
                .map(|n| (n.node.clone(), n.priority))
                .collect(),
        )
    }
}

/// The `comment` PVE gets: the mark shared by every named kind (`<comment> (proxops:<id>)`, or
/// the mark alone); adopt reads it back with [`proxops_kind_sdk::named::adopt_comment`].
pub use proxops_names::marked_comment as pve_comment;

/// PVE's `encode_value` of `nodes`: sorted by node, a priority only when it is not 0.
pub fn encode_nodes(nodes: &BTreeMap<String, u32>) -> String {
    nodes
        .iter()
        .map(|(n, p)| {
            if *p == 0 {
                n.clone()
            } else {
                format!("{n}:{p}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `s` is an HA resource id proxops writes: `vm:<vmid>` or `ct:<vmid>`, the vmid in
/// canonical decimal from 100 to 999999999 (PVE's vmid range).
pub fn is_sid(s: &str) -> bool {
    let Some((t, id)) = s.split_once(':') else {
        return false;
    };
    matches!(t, "vm" | "ct")
        && !id.is_empty()
        && !id.starts_with('0')
        && id.bytes().all(|b| b.is_ascii_digit())
        && id
            .parse::<u64>()
            .is_ok_and(|n| (100..=999_999_999).contains(&n))
}

/// PVE's `pve-configid` (`[a-z][a-z0-9_-]+`, case-insensitive): why `id` is not one.
pub fn configid_problem(id: &str) -> Option<String> {
    let b = id.as_bytes();
    if b.len() < 2 {
        return Some(format!(
            "`{id}` is too short for a PVE HA rule id (at least 2 characters)"
        ));
    }
    if !b[0].is_ascii_alphabetic() {
        return Some(format!(
            "`{id}` must start with a letter to be a PVE HA rule id (pve-configid)"
        ));
    }
    None
}
