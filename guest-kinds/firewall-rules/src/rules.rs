//! The rule model (a rule as PVE keeps it, the fields a manifest and a call may carry, PVE's
//! grammars for names, addresses, ports and protocols) and the calls that turn a live rule list
//! into a desired one.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::Checker;
use proxops_kind_sdk::model::{Call, Method};
use serde_json::Value;

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
