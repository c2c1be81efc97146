//! The rule model (a rule as PVE keeps it, the fields a manifest and a call may carry, PVE's
//! grammars for names, addresses, ports and protocols) and the calls that turn a live rule list
//! into a desired one.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::{Checker, index, join};
use proxops_kind_sdk::model::{Call, Drift, Method};
use serde_json::{Map, Value, json};

type Obj = Map<String, Value>;

use crate::order;

/// PVE's log levels (`pve-fw-loglevel`).
pub const LOG_LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "nolog",
];
/// Keys of a rule in a manifest.
pub const RULE_KEYS: &[&str] = &[
    "type",
    "action",
    "group",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "dport",
    "sport",
    "log",
    "icmp-type",
    "comment",
    "enable",
];
/// PVE's firewall macros, shared with the simulator.
pub use proxops_names::firewall::MACROS;

/// One rule as PVE keeps it: `type`, `action` (a group's name for a `group` rule), `enable`
/// (`1`/`0`) and the optional fields that are set.
pub type Rule = BTreeMap<String, String>;

/// PVE's name grammar for aliases, ipsets and security groups: a letter, then letters, digits,
/// `-` and `_` (at least two characters).
pub fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && s.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// An address, a network, or a range of addresses (`a-b`), IPv4 or IPv6.
pub fn is_address(s: &str) -> bool {
    let (host, prefix) = match s.split_once('/') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    let Ok(ip) = host.parse::<std::net::IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    prefix.is_none_or(|p| p.parse::<u8>().is_ok_and(|n| n <= max))
}

/// One item of an address list: an address, a network, or a range `a-b`.
pub fn is_address_item(s: &str) -> bool {
    match s.split_once('-') {
        Some((a, b)) if !a.contains('/') => is_address(a) && is_address(b),
        _ => is_address(s),
    }
}

/// Protocols whose rules name ports (`$PROTOCOLS_WITH_PORTS`).
pub fn has_ports(proto: &str) -> bool {
    matches!(
        proto,
        "udp" | "17" | "udplite" | "136" | "tcp" | "6" | "dccp" | "33" | "sctp" | "132"
    )
}

/// The ICMP protocols (whose rules may name a type, or a type as `dport`).
pub fn is_icmp(proto: &str) -> bool {
    matches!(proto, "icmp" | "1" | "icmpv6" | "ipv6-icmp" | "58")
}

/// A comment must be one line: PVE keeps the firewall one entry per line.
pub fn one_line(c: &mut Checker, path: &str, v: &str) {
    if v.chars().any(char::is_control) {
        c.error(
            path,
            "must be one line without control characters (PVE keeps the firewall one entry per line)",
        );
    }
}

/// A JSON value as PVE's config text keeps it (`1`/`0` for a boolean).
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

/// A live rule as the desired state writes one: PVE's fields without `pos`, `digest`,
/// `ipversion` and `errors`.
pub fn live_rule(o: &serde_json::Map<String, Value>) -> Rule {
    o.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "pos" | "digest" | "ipversion" | "errors"))
        .filter_map(|(k, v)| text(v).map(|t| (k.clone(), t)))
        .collect()
}

/// A rule as PVE's config file shows it: `IN ACCEPT -p tcp -dport 22 # ssh` (`|` when
/// disabled).
pub fn rule_text(r: &Rule) -> String {
    let get = |k: &str| r.get(k).map(String::as_str);
    let mut s = String::new();
    if get("enable") == Some("0") {
        s.push('|');
    }
    s.push_str(&get("type").unwrap_or("?").to_uppercase());
    match (get("macro"), get("action")) {
        (Some(m), Some(a)) => s.push_str(&format!(" {m}({a})")),
        (_, Some(a)) => s.push_str(&format!(" {a}")),
        _ => {}
    }
    for (k, flag) in [
        ("iface", "-i"),
        ("source", "-source"),
        ("dest", "-dest"),
        ("proto", "-p"),
        ("dport", "-dport"),
        ("sport", "-sport"),
        ("log", "-log"),
        ("icmp-type", "-icmp-type"),
    ] {
        if let Some(v) = get(k) {
            s.push_str(&format!(" {flag} {v}"));
        }
    }
    if let Some(c) = get("comment") {
        s.push_str(&format!(" # {c}"));
    }
    s
}

/// The fields a rule may carry in a call, in PVE's names.
pub const RULE_FIELDS: &[&str] = &[
    "type",
    "action",
    "macro",
    "iface",
    "source",
    "dest",
    "proto",
    "dport",
    "sport",
    "log",
    "icmp-type",
    "comment",
    "enable",
];

/// What turning one rule list into another takes: the calls ([`rule_calls`]), the drift of
/// each position that differs (`spec.rules[i]`, as [`rule_text`]), and how many calls are
/// moves, for the action's summary.
pub struct RuleUpdate {
    pub calls: Vec<Call>,
    pub drift: Vec<Drift>,
    pub moves: usize,
}

/// [`RuleUpdate`] from the live list to the desired one; `rules` and `digest` as for
/// [`rule_calls`].
pub fn rule_update(
    live: &[Rule],
    desired: &[Rule],
    rules: &str,
    digest: Option<&str>,
) -> RuleUpdate {
    let calls = rule_calls(live, desired, rules, digest);
    let (old, new): (Vec<String>, Vec<String>) = (
        live.iter().map(rule_text).collect(),
        desired.iter().map(rule_text).collect(),
    );
    let drift = (0..old.len().max(new.len()))
        .filter_map(|i| {
            let (o, n) = (old.get(i).cloned(), new.get(i).cloned());
            (o != n).then(|| Drift::new(format!("spec.rules[{i}]"), o, n))
        })
        .collect();
    let moves = calls
        .iter()
        .filter(|c| c.params.iter().any(|p| p.name == "moveto"))
        .count();
    RuleUpdate {
        calls,
        drift,
        moves,
    }
}

/// The calls that turn the live rule list into the desired one, with `digest` on the first.
/// `rules` is the collection path.
///
/// Live rules equal to a desired one are kept and only moved; other live rules are updated in
/// place into the remaining desired ones, in order (one `PUT` instead of a delete and a
/// create); what is left is deleted (highest position first) or created (PVE puts a new rule at
/// position 0, so they are created last one first); then the fewest `moveto`s put the list in
/// order ([`order`]). A rule is never deleted and re-added to move it.
pub fn rule_calls(live: &[Rule], desired: &[Rule], rules: &str, digest: Option<&str>) -> Vec<Call> {
    // 1. Live rules equal to a desired one keep their content.
    let mut target: Vec<Option<usize>> = vec![None; live.len()];
    let mut taken = vec![false; desired.len()];
    for (j, d) in desired.iter().enumerate() {
        if let Some(i) = (0..live.len()).find(|&i| target[i].is_none() && live[i] == *d) {
            target[i] = Some(j);
            taken[j] = true;
        }
    }
    // 2. The other live rules become the remaining desired ones, in order.
    let mut rest = (0..desired.len()).filter(|&j| !taken[j]);
    let mut updates: Vec<(usize, usize)> = Vec::new();
    for (i, t) in target.iter_mut().enumerate() {
        if t.is_none()
            && let Some(j) = rest.next()
        {
            *t = Some(j);
            updates.push((i, j));
        }
    }
    let created: Vec<usize> = rest.collect();
    let mut calls: Vec<Call> = Vec::new();
    // The list as the calls leave it: each slot holds its rule's target index (None: deleted).
    let mut slots: Vec<Option<usize>> = target.clone();
    // 3. Deletes, highest position first so the lower positions hold.
    for i in (0..slots.len()).rev() {
        if slots[i].is_none() {
            calls.push(Call::new(Method::Delete, format!("{rules}/{i}")));
            slots.remove(i);
        }
    }
    // 4. Updates in place.
    for (i, j) in updates {
        let pos = slots.iter().position(|s| *s == Some(j)).unwrap_or_default();
        let (old, new) = (&live[i], &desired[j]);
        let mut call = Call::new(Method::Put, format!("{rules}/{pos}"));
        let mut cleared = Vec::new();
        for k in RULE_FIELDS {
            match (old.get(*k), new.get(*k)) {
                (o, Some(n)) if o != Some(n) => call = call.param(*k, n.clone()),
                (Some(_), None) => cleared.push(*k),
                _ => {}
            }
        }
        if !cleared.is_empty() {
            call = call.param("delete", cleared.join(","));
        }
        calls.push(call);
    }
    // 5. Creates, last first: each lands at position 0.
    for &j in created.iter().rev() {
        let mut call = Call::new(Method::Post, rules.to_string());
        for k in RULE_FIELDS {
            if let Some(v) = desired[j].get(*k) {
                call = call.param(*k, v.clone());
            }
        }
        calls.push(call);
        slots.insert(0, Some(j));
    }
    // 6. The fewest moves.
    let targets: Vec<usize> = slots.iter().map(|s| s.unwrap_or_default()).collect();
    for m in order::plan(&targets) {
        calls.push(
            Call::new(Method::Put, format!("{rules}/{}", m.pos)).param("moveto", m.to.to_string()),
        );
    }
    if let (Some(first), Some(d)) = (calls.first_mut(), digest)
        && first.method != Method::Post
    {
        first
            .params
            .push(proxops_kind_sdk::model::Param::new("digest", d));
    }
    calls
}

/// Where a rule list stands, which decides what its rules may hold and name (PVE's
/// `rule_env`, `verify_rule`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Env {
    /// A guest's rules: `in`, `out` and `group`; `iface` a guest NIC; an alias or ipset is the
    /// manifest's own (aliases by lower-cased name) or the cluster's (`dc/<name>`,
    /// `+dc/<name>`, not checked here: PVE refuses a missing one).
    Guest {
        aliases: BTreeSet<String>,
        ipsets: BTreeSet<String>,
    },
    /// A security group's rules: `in`, `out` and `forward`; no `iface` and no `group` (PVE:
    /// "security groups not allowed"); an alias or ipset is the cluster's, not checked here.
    Group,
}

impl Env {
    /// The rule types PVE takes in this list (`$rule_env_direction_lookup`).
    pub fn types(&self) -> &'static [&'static str] {
        match self {
            Env::Guest { .. } => &["in", "out", "group"],
            Env::Group => &["in", "out", "forward"],
        }
    }
}

/// PVE's `pve-security-group-name`: a letter, then letters, digits, `-` and `_`, 2 to 18
/// characters (pve-firewall's `$security_group_name_pattern`, `$max_group_name_length`).
pub fn is_group_name(s: &str) -> bool {
    is_name(s) && s.len() <= MAX_GROUP_NAME
}

/// The longest security group name PVE takes.
pub const MAX_GROUP_NAME: usize = 18;

/// Where an address field points: an address list, an alias or an ipset. In a guest's list a
/// bare name must be one of the manifest's own (a cluster one is written `dc/<name>`); in a
/// security group every name is the cluster's.
fn check_address(c: &mut Checker, path: &str, value: &str, env: &Env) {
    let (aliases, ipsets) = match env {
        Env::Guest { aliases, ipsets } => (Some(aliases), Some(ipsets)),
        Env::Group => (None, None),
    };
    if let Some(set) = value.strip_prefix('+') {
        if let Some(dc) = set.strip_prefix("dc/") {
            if !is_name(dc) {
                c.error(path, format!("`{value}` is not an ipset name"));
            }
            return;
        }
        let Some(ipsets) = ipsets else {
            if !is_name(set) {
                c.error(path, format!("`{value}` is not an ipset name"));
            }
            return;
        };
        let own = set.strip_prefix("guest/").unwrap_or(set);
        if !ipsets.contains(own) {
            c.error(
                path,
                format!("names the ipset `{own}`, which spec.ipsets does not declare (a cluster ipset is written `+dc/<name>`)"),
            );
        }
        return;
    }
    if let Some(dc) = value.strip_prefix("dc/") {
        if !is_name(dc) {
            c.error(path, format!("`{value}` is not an alias name"));
        }
        return;
    }
    let Some(aliases) = aliases else {
        if value.starts_with("guest/") {
            c.error(
                path,
                "a security group has no guest of its own: name a cluster alias (`dc/<name>`) or addresses",
            );
        } else if !is_name(value) && !value.split(',').all(is_address_item) {
            c.error(
                path,
                format!("`{value}` is not an address list, an alias or an ipset (`+name`)"),
            );
        }
        return;
    };
    let own = value.strip_prefix("guest/").unwrap_or(value);
    if is_name(own) {
        if !aliases.contains(&own.to_lowercase()) {
            c.error(
                path,
                format!("names the alias `{own}`, which spec.aliases does not declare (a cluster alias is written `dc/<name>`)"),
            );
        }
        return;
    }
    if !value.split(',').all(is_address_item) {
        c.error(
            path,
            format!("`{value}` is not an address list, an alias or an ipset (`+name`)"),
        );
    }
}

/// `spec.rules` of a manifest, checked rule by rule for the list `env` says, in the form PVE
/// keeps them (a `group` rule's group is its `action`, `enable` is `1` or `0`).
pub fn validate_rules(c: &mut Checker, spec: &Obj, env: &Env) -> Vec<Rule> {
    let mut out = Vec::new();
    let Some(items) = c.array(spec, "spec", "rules", false) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.rules", i);
        let Some(o) = c.object(item, &path, RULE_KEYS) else {
            continue;
        };
        let mut rule = Rule::new();
        let ty = match o.get("type").and_then(Value::as_str) {
            Some("group") if *env == Env::Group => {
                c.error(
                    join(&path, "type"),
                    "a security group cannot contain a `group` rule (PVE: security groups not allowed)",
                );
                None
            }
            _ => c.enumeration(o, &path, "type", true, env.types()),
        };
        let enable = c.boolean(o, &path, "enable", false).unwrap_or(true);
        rule.insert("enable".into(), if enable { "1" } else { "0" }.into());
        let field =
            |c: &mut Checker, k: &str| c.string(o, &path, k, false).filter(|v| !v.is_empty());
        if let Some(cm) = field(c, "comment") {
            one_line(c, &join(&path, "comment"), &cm);
            rule.insert("comment".into(), cm);
        }
        if let Some(iface) = field(c, "iface") {
            if *env == Env::Group {
                c.error(
                    join(&path, "iface"),
                    "a security group's rules take no interface (PVE: parameter -i not allowed); set `iface` on the guest's `group` rule that applies it",
                );
            }
            let ok = iface.strip_prefix("net").is_some_and(|n| {
                !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit())
            });
            if !ok {
                c.error(
                    join(&path, "iface"),
                    format!("`{iface}` is not a guest NIC (`net0`, `net1`, …)"),
                );
            }
            rule.insert("iface".into(), iface);
        }
        let Some(ty) = ty else { continue };
        rule.insert("type".into(), ty.clone());
        if ty == "group" {
            for k in [
                "action",
                "macro",
                "source",
                "dest",
                "proto",
                "dport",
                "sport",
                "log",
                "icmp-type",
            ] {
                if o.get(k).is_some_and(|v| !v.is_null()) {
                    c.error(
                        join(&path, k),
                        "does not apply to a `group` rule: it takes `group`, and optionally `iface`, `comment` and `enable`",
                    );
                }
            }
            match field(c, "group") {
                Some(g) if is_group_name(&g) => {
                    rule.insert("action".into(), g);
                }
                Some(g) => c.error(
                    join(&path, "group"),
                    format!("`{g}` is not a security group name (a letter, then letters, digits, `-` or `_`; 2 to {MAX_GROUP_NAME} characters)"),
                ),
                None => c.error(
                    join(&path, "group"),
                    "is required for a `group` rule: the security group it applies",
                ),
            }
            out.push(rule);
            continue;
        }
        if o.get("group").is_some_and(|v| !v.is_null()) {
            c.error(join(&path, "group"), "applies to `type: group` rules only");
        }
        if let Some(a) = c.enumeration(o, &path, "action", true, &["ACCEPT", "DROP", "REJECT"]) {
            if ty == "forward" && a == "REJECT" {
                c.error(
                    join(&path, "action"),
                    "a `forward` rule cannot REJECT (PVE: cannot define REJECT rules on forward chain)",
                );
            }
            rule.insert("action".into(), a);
        }
        if let Some(m) = field(c, "macro") {
            match MACROS.iter().find(|n| n.eq_ignore_ascii_case(&m)) {
                Some(n) => {
                    rule.insert("macro".into(), n.to_string());
                }
                None => c.error(
                    join(&path, "macro"),
                    format!("`{m}` is not one of PVE's firewall macros"),
                ),
            }
        }
        let proto = field(c, "proto");
        if let Some(p) = &proto {
            rule.insert("proto".into(), p.clone());
        }
        for k in ["dport", "sport"] {
            if let Some(v) = field(c, k) {
                match &proto {
                    None => c.error(
                        join(&path, k),
                        "needs `proto` (PVE: `proto` is required with ports)",
                    ),
                    Some(p) if !(has_ports(p) || k == "dport" && is_icmp(p)) => c.error(
                        join(&path, k),
                        format!("protocol `{p}` does not support ports"),
                    ),
                    _ => {}
                }
                rule.insert(k.into(), v);
            }
        }
        if let Some(v) = field(c, "icmp-type") {
            if !proto.as_deref().is_some_and(is_icmp) {
                c.error(join(&path, "icmp-type"), "needs `proto: icmp` or `icmpv6`");
            }
            rule.insert("icmp-type".into(), v);
        }
        for k in ["source", "dest"] {
            if let Some(v) = field(c, k) {
                check_address(c, &join(&path, k), &v, env);
                rule.insert(k.into(), v);
            }
        }
        if let Some(l) = c.enumeration(o, &path, "log", false, LOG_LEVELS) {
            rule.insert("log".into(), l);
        }
        out.push(rule);
    }
    out
}

/// The JSON Schema of one rule of a list in `env`.
pub fn rule_schema(env: &Env) -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let mut properties = json!({
        "type": {"enum": env.types()},
        "action": {"enum": ["ACCEPT", "DROP", "REJECT"]},
        "macro": s("one of PVE's firewall macros (SSH, HTTP, …)"),
        "source": s("addresses, an alias, or an ipset (`+name`)"),
        "dest": s("addresses, an alias, or an ipset (`+name`)"),
        "proto": s("tcp, udp, icmp, … or a protocol number"),
        "dport": s("port(s)"),
        "sport": s("port(s)"),
        "log": {"enum": LOG_LEVELS},
        "icmp-type": s("an ICMP type (proto icmp/icmpv6)"),
        "comment": s("one line"),
        "enable": {"type": "boolean", "description": "default true"}
    });
    if let (Env::Guest { .. }, Value::Object(p)) = (env, &mut properties) {
        p.insert(
            "group".into(),
            s("the security group a `group` rule applies"),
        );
        p.insert("iface".into(), s("the guest NIC (`net0`)"));
    }
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["type"],
        "properties": properties
    })
}
