//! `validate`: an HARule manifest into its [`Desired`] state, with PVE's own rules checked up
//! front (pve-ha-manager's `Rules.pm`, `Rules/NodeAffinity.pm`, `Rules/ResourceAffinity.pm`:
//! required options per type, no option of the other type, at least two resources for a
//! resource-affinity rule) so that an apply does not fail on what a manifest already shows.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, Diag, index, join, type_name};
use proxops_kind_sdk::manifest::{dns_label_problem, envelope, manifest_schema};
use proxops_kind_sdk::named::check_comment;
use serde_json::{Map, Value, json};

use crate::desired::{
    Affinity, COMMENT_MAX, Desired, Member, NodePriority, RuleType, configid_problem, is_sid,
};

/// The kind's `kind:`.
pub const KIND: &str = "HARule";

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &[
    "type",
    "resources",
    "nodes",
    "strict",
    "affinity",
    "disabled",
    "comment",
];

const NODE_KEYS: &[&str] = &["node", "priority"];

/// Highest node priority accepted (PVE takes any decimal; this keeps it a plain integer).
pub const PRIORITY_MAX: i64 = 1_000_000;

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    if let Some(n) = &name
        && let Some(p) = configid_problem(n)
    {
        c.error("metadata.name", p);
    }
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let rule_type = c
        .enumeration(
            spec,
            "spec",
            "type",
            true,
            &["node-affinity", "resource-affinity"],
        )
        .and_then(|t| RuleType::parse(&t));
    let resources = resources(&mut c, spec);
    let nodes = nodes(&mut c, spec);
    let strict = c.boolean(spec, "spec", "strict", false);
    let affinity = c
        .enumeration(spec, "spec", "affinity", false, &["positive", "negative"])
        .map(|a| {
            if a == "positive" {
                Affinity::Positive
            } else {
                Affinity::Negative
            }
        });
    let disabled = c.boolean(spec, "spec", "disabled", false).unwrap_or(false);
    let comment = c.string(spec, "spec", "comment", false);
    if let Some(t) = rule_type {
        let present = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
        match t {
            RuleType::NodeAffinity => {
                if !present("nodes") {
                    c.error(
                        "spec.nodes",
                        "is required for a node-affinity rule (the nodes its resources run on)",
                    );
                }
                if present("affinity") {
                    c.error(
                        "spec.affinity",
                        "applies to resource-affinity rules only; a node-affinity rule takes `nodes` and `strict`",
                    );
                }
            }
            RuleType::ResourceAffinity => {
                if !present("affinity") {
                    c.error(
                        "spec.affinity",
                        "is required for a resource-affinity rule: `positive` (keep the resources together) or `negative` (keep them apart)",
                    );
                }
                for k in ["nodes", "strict"] {
                    if present(k) {
                        c.error(
                            join("spec", k),
                            "applies to node-affinity rules only; a resource-affinity rule takes `affinity`",
                        );
                    }
                }
                if let Some(r) = &resources
                    && r.len() == 1
                {
                    c.error(
                        "spec.resources",
                        "a resource-affinity rule needs at least two resources (PVE: rule is ineffective as there are less than two resources)",
                    );
                }
            }
        }
    }
    if let (Some(name), Some(comment)) = (&name, &comment) {
        let why = "PVE keeps rules one option per line";
        check_comment(&mut c, name, comment, Some(COMMENT_MAX), why);
    }
    if c.has_errors() {
        return Err(c.diags);
    }
    match (name, rule_type, resources) {
        (Some(rule), Some(rule_type), Some(resources)) => Ok(Desired {
            rule,
            rule_type,
            resources,
            nodes: nodes.unwrap_or_default(),
            strict: strict.unwrap_or(false),
            affinity,
            disabled,
            comment,
        }),
        _ => Err(vec![Diag::error("spec", "internal: incomplete HA rule")]),
    }
}

/// `spec.resources`: VM names (`VM/<name>` or `<name>`) and raw sids (`vm:N`, `ct:N`), at
/// least one, no two naming the same guest.
fn resources(c: &mut Checker, spec: &Map<String, Value>) -> Option<Vec<Member>> {
    let items = c.array(spec, "spec", "resources", true)?;
    if items.is_empty() {
        c.error(
            "spec.resources",
            "must name at least one resource (PVE: no resources were specified)",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut seen: BTreeMap<Member, usize> = BTreeMap::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.resources", i);
        let Some(text) = item.as_str() else {
            c.error(
                &path,
                format!(
                    "expected a VM name or an HA resource id such as `vm:100`, got {}",
                    type_name(item)
                ),
            );
            ok = false;
            continue;
        };
        let Some(member) = member(c, &path, text) else {
            ok = false;
            continue;
        };
        if let Some(first) = seen.get(&member) {
            c.error(
                &path,
                format!("`{text}` is already spec.resources[{first}]; name each resource once"),
            );
            ok = false;
            continue;
        }
        seen.insert(member.clone(), i);
        out.push(member);
    }
    ok.then_some(out)
}

fn member(c: &mut Checker, path: &str, text: &str) -> Option<Member> {
    if text.contains(':') {
        if is_sid(text) {
            return Some(Member::Sid(text.to_string()));
        }
        c.error(
            path,
            format!(
                "`{text}` is not an HA resource id proxops writes: `vm:<vmid>` or `ct:<vmid>` (vmid 100 to 999999999), or name a proxops VM (`web-01`, `VM/web-01`)"
            ),
        );
        return None;
    }
    let name = match text.split_once('/') {
        Some(("VM", name)) => name,
        Some((kind, _)) => {
            c.error(
                path,
                format!(
                    "`{text}` names a {kind}; an HA rule names VMs (`VM/<name>` or `<name>`) or raw HA resource ids (`vm:100`, `ct:200`)"
                ),
            );
            return None;
        }
        None => text,
    };
    if let Some(p) = dns_label_problem(name) {
        c.error(path, format!("VM name {p}"));
        return None;
    }
    Some(Member::Vm(name.to_string()))
}

/// `spec.nodes`: node names, or `{node, priority}`; sorted by node, no node twice.
fn nodes(c: &mut Checker, spec: &Map<String, Value>) -> Option<Vec<NodePriority>> {
    let items = c.array(spec, "spec", "nodes", false)?;
    if items.is_empty() {
        c.error(
            "spec.nodes",
            "must name at least one node (PVE: no nodes were specified)",
        );
        return None;
    }
    let mut out: Vec<NodePriority> = Vec::new();
    let mut first: BTreeMap<String, usize> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.nodes", i);
        let (node, priority) = match item {
            Value::String(s) => (Some(s.clone()), 0),
            Value::Object(_) => {
                let Some(obj) = c.object(item, &path, NODE_KEYS) else {
                    continue;
                };
                let node = c.string(obj, &path, "node", true);
                let priority = c.int(obj, &path, "priority", false, 0, PRIORITY_MAX);
                (node, priority.unwrap_or(0) as u32)
            }
            other => {
                c.error(
                    &path,
                    format!(
                        "expected a node name or a mapping `{{node: <name>, priority: <n>}}`, got {}",
                        type_name(other)
                    ),
                );
                continue;
            }
        };
        let Some(node) = node else { continue };
        let node_path = if item.is_object() {
            join(&path, "node")
        } else {
            path.clone()
        };
        if !proxops_names::is_node_name(&node) {
            let hint = if node.contains(':') {
                "; give a priority as `{node: <name>, priority: <n>}`"
            } else {
                ""
            };
            c.error(node_path, format!("`{node}` is not a PVE node name{hint}"));
            continue;
        }
        if let Some(f) = first.get(&node) {
            c.error(
                node_path,
                format!("node `{node}` is already spec.nodes[{f}]; name each node once"),
            );
            continue;
        }
        first.insert(node.clone(), i);
        out.push(NodePriority { node, priority });
    }
    out.sort();
    Some(out)
}

/// JSON Schema of an HARule manifest.
pub fn schema() -> Value {
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["type", "resources"],
        "properties": {
            "type": {
                "enum": ["node-affinity", "resource-affinity"],
                "description": "PVE's rule type: node-affinity keeps resources on (strict) or prefers a set of nodes; resource-affinity keeps resources together (positive) or apart (negative). PVE cannot change a rule's type."
            },
            "resources": {
                "type": "array",
                "minItems": 1,
                "uniqueItems": true,
                "description": "The guests the rule applies to: proxops VMs by manifest name (`web-01` or `VM/web-01`; each must declare spec.ha), or raw HA resource ids (`vm:100`, `ct:200`) of guests proxops does not manage.",
                "items": {
                    "type": "string",
                    "anyOf": [
                        {"pattern": "^(VM/)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"},
                        {"pattern": "^(vm|ct):[1-9][0-9]{2,8}$"}
                    ]
                }
            },
            "nodes": {
                "type": "array",
                "minItems": 1,
                "description": "Node-affinity: the nodes, each a name or `{node, priority}` (higher runs first; none is 0).",
                "items": {
                    "anyOf": [
                        {"type": "string", "pattern": "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"},
                        {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["node"],
                            "properties": {
                                "node": {"type": "string", "pattern": "^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$"},
                                "priority": {"type": "integer", "minimum": 0, "maximum": PRIORITY_MAX}
                            }
                        }
                    ]
                }
            },
            "strict": {
                "type": "boolean",
                "default": false,
                "description": "Node-affinity: true restricts the resources to the nodes (stopped if none is available); false only prefers them."
            },
            "affinity": {
                "enum": ["positive", "negative"],
                "description": "Resource-affinity: positive keeps the resources on one node, negative on separate nodes."
            },
            "disabled": {
                "type": "boolean",
                "default": false,
                "description": "PVE's `disable`: the rule is kept but the HA manager ignores it."
            },
            "comment": {
                "type": "string",
                "description": "PVE's rule comment; proxops appends its ownership mark ` (proxops:<name>)` unless the comment carries it."
            }
        },
        "allOf": [
            {
                "if": {"properties": {"type": {"const": "node-affinity"}}},
                "then": {"required": ["nodes"], "not": {"required": ["affinity"]}}
            },
            {
                "if": {"properties": {"type": {"const": "resource-affinity"}}},
                "then": {
                    "required": ["affinity"],
                    "properties": {"resources": {"minItems": 2}},
                    "allOf": [{"not": {"required": ["nodes"]}}, {"not": {"required": ["strict"]}}]
                }
            }
        ]
    });
    let mut s = manifest_schema(KIND, "proxops HARule (PVE HA rule)", spec);
    s["properties"]["metadata"]["properties"]["name"]["description"] =
        json!("The PVE HA rule id: a DNS label that starts with a letter, at least 2 characters.");
    s["properties"]["metadata"]["properties"]["name"]["pattern"] =
        json!("^[a-z]([a-z0-9-]{0,61}[a-z0-9])$");
    s
}
