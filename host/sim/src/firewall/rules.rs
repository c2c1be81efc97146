//! Rule lists, a guest's and a security group's: read, create, update (with `moveto`), delete, and
//! `verify_rule`'s checks of what a rule may name, as pve-firewall's Rules.pm and Firewall.pm do them.

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use serde_json::{Map, Value, json};
use std::sync::Arc;

use proxops_names::firewall::MACROS;

use super::*;

pub(super) fn rules_of<'a>(st: &'a State, scope: &Scope) -> Option<&'a Vec<Rule>> {
    match scope {
        Scope::Guest { vmid, .. } => Some(
            st.firewall
                .guests
                .get(vmid)
                .map(|g| &g.rules)
                .unwrap_or(empty_rules()),
        ),
        Scope::Group(g) => st.firewall.groups.get(g).map(|g| &g.rules),
        Scope::Cluster => None,
    }
}

pub(super) fn empty_rules() -> &'static Vec<Rule> {
    static EMPTY: Vec<Rule> = Vec::new();
    &EMPTY
}

pub(super) fn rules_mut<'a>(
    st: &'a mut State,
    scope: &Scope,
) -> Result<&'a mut Vec<Rule>, ApiError> {
    match scope {
        Scope::Guest { vmid, .. } => Ok(&mut st.firewall.guests.entry(*vmid).or_default().rules),
        Scope::Group(g) => st
            .firewall
            .groups
            .get_mut(g)
            .map(|g| &mut g.rules)
            .ok_or_else(|| no_group(g)),
        Scope::Cluster => Err(ApiError::die("no rules here")),
    }
}

/// `load_clusterfw_conf` finds no `[group <name>]` section (Groups.pm `GroupRules::load_config`).
pub(super) fn no_group(g: &str) -> ApiError {
    ApiError::die(format!("no such security group '{g}'"))
}

pub(super) fn rules_answer(rules: &[Rule]) -> Vec<Value> {
    let d = digest(rules);
    rules
        .iter()
        .enumerate()
        .map(|(pos, r)| {
            let mut o = Map::new();
            for (k, v) in r {
                let value = match k.as_str() {
                    "enable" | "ipversion" => json!(v.parse::<i64>().unwrap_or(0)),
                    _ => json!(v),
                };
                o.insert(k.clone(), value);
            }
            o.insert("pos".into(), json!(pos));
            o.insert("digest".into(), json!(d));
            Value::Object(o)
        })
        .collect()
}

pub(super) fn rules_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    let Some(rules) = rules_of(&st, scope) else {
        return Err(no_group(match scope {
            Scope::Group(g) => g,
            _ => "",
        }));
    };
    Ok(Reply::data(Value::Array(rules_answer(rules))))
}

pub(super) fn pos_of(req: &Req) -> usize {
    req.get("pos").and_then(|p| p.parse().ok()).unwrap_or(0)
}

pub(super) fn rule_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let rules = match rules_of(&st, scope) {
        Some(r) => r,
        None => return Err(no_group(req.get("group").unwrap_or_default())),
    };
    let pos = pos_of(req);
    let answer = rules_answer(rules);
    match answer.into_iter().nth(pos) {
        Some(r) => Ok(Reply::data(r)),
        None => Err(ApiError::die(format!("no rule at position {pos}"))),
    }
}

/// The fields a rule keeps through PVE's writer and parser (`$format_rules`, `parse_fw_rule`):
/// a `group` rule keeps only its group, interface, comment and state.
const RULE_FIELDS: &[&str] = &[
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

/// `copy_rule_data`: each rule property given is set, or removed when it is `''` or `-`.
pub(super) fn copy_rule_data(rule: &mut Rule, req: &Req) {
    for k in RULE_FIELDS {
        if let Some(v) = req.get(k) {
            if v.is_empty() || v == "-" {
                rule.remove(*k);
            } else {
                rule.insert(k.to_string(), v.to_string());
            }
        }
    }
}

/// Protocols whose rules may name ports (`$PROTOCOLS_WITH_PORTS`).
pub(super) fn has_ports(proto: &str) -> bool {
    matches!(
        proto,
        "udp" | "17" | "udplite" | "136" | "tcp" | "6" | "dccp" | "33" | "sctp" | "132"
    )
}

pub(super) fn is_icmp(proto: &str) -> bool {
    matches!(proto, "icmp" | "1" | "icmpv6" | "ipv6-icmp" | "58")
}

/// PVE's `security_group_name_pattern` / `ip_alias_pattern` / `ipset_name_pattern`.
pub(super) fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The IP version of an address list (`parse_address_list`), when it names addresses.
pub(super) fn address_version(value: &str) -> Option<u8> {
    let first = value.split([',', '-']).next()?;
    let host = first.split('/').next()?;
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => Some(4),
        Ok(std::net::IpAddr::V6(_)) => Some(6),
        Err(_) => None,
    }
}

/// `verify_rule` as the API runs it: the first problem is a parameter error.
pub(super) fn verify_rule(st: &State, scope: &Scope, rule: &mut Rule) -> Result<(), ApiError> {
    let env = scope.env();
    let get = |r: &Rule, k: &str| r.get(k).cloned().unwrap_or_default();
    let (ty, action) = (get(rule, "type"), get(rule, "action"));
    if ty.is_empty() {
        return Err(ApiError::param("type", "missing property"));
    }
    if action.is_empty() {
        return Err(ApiError::param("action", "missing property"));
    }
    let valid: &[&str] = match env {
        "group" => &["in", "out", "forward"],
        _ => &["in", "out", "group"],
    };
    if !valid.contains(&ty.as_str()) {
        return Err(ApiError::param(
            "type",
            format!("invalid rule type '{ty}' for rule_env '{env}'"),
        ));
    }
    if ty == "group" {
        if !is_name(&action) {
            return Err(ApiError::param(
                "action",
                "invalid characters in security group name",
            ));
        }
    } else {
        if ty == "forward" && action == "REJECT" {
            return Err(ApiError::param(
                "action",
                "cannot define REJECT rules on forward chain",
            ));
        }
        if !matches!(action.as_str(), "ACCEPT" | "DROP" | "REJECT") {
            return Err(ApiError::param(
                "action",
                format!("unknown action '{action}'"),
            ));
        }
    }
    if let Some(iface) = rule.get("iface") {
        if env == "group" {
            return Err(ApiError::param(
                "type",
                "parameter -i not allowed for this rule type",
            ));
        }
        let ok = iface
            .strip_prefix("net")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            return Err(ApiError::param(
                "iface",
                "value does not match the regex pattern 'net\\d+'",
            ));
        }
    }
    if let Some(m) = rule.get("macro").cloned() {
        match MACROS.iter().find(|n| n.eq_ignore_ascii_case(&m)) {
            Some(name) => {
                rule.insert("macro".into(), name.to_string());
            }
            None => return Err(ApiError::param("macro", format!("unknown macro '{m}'"))),
        }
    }
    let proto = get(rule, "proto");
    let mut version: Option<u8> = match proto.as_str() {
        "icmp" => Some(4),
        "icmpv6" | "ipv6-icmp" => Some(6),
        _ => None,
    };
    for port in ["dport", "sport"] {
        if rule.contains_key(port) {
            if proto.is_empty() {
                return Err(ApiError::param(
                    "proto",
                    format!("missing property - '{port}' requires this property"),
                ));
            }
            if !(has_ports(&proto) || port == "dport" && is_icmp(&proto)) {
                return Err(ApiError::param(
                    port,
                    format!("protocol '{proto}' does not support ports"),
                ));
            }
        }
    }
    if rule.contains_key("icmp-type") {
        if !is_icmp(&proto) {
            return Err(ApiError::param(
                "proto",
                "missing property - 'icmp-type' requires this property",
            ));
        }
        if rule.contains_key("dport") {
            return Err(ApiError::param(
                "icmp-type",
                "'icmp-type' cannot be specified together with 'dport'",
            ));
        }
    }
    for side in ["source", "dest"] {
        let Some(value) = rule.get(side) else {
            continue;
        };
        if let Some(v) = address_version(value) {
            if version.is_some_and(|have| have != v) {
                return Err(ApiError::die("detected mixed ipv4/ipv6 addresses in rule"));
            }
            version = Some(v);
            continue;
        }
        if let Some(set) = value.strip_prefix('+') {
            let name = set
                .strip_prefix("guest/")
                .or_else(|| set.strip_prefix("dc/"))
                .unwrap_or(set);
            if !is_name(name) {
                return Err(ApiError::param(
                    side,
                    format!("invalid ipset name '{value}'"),
                ));
            }
            if !ipsets_visible(st, scope).any(|n| n == name) {
                return Err(ApiError::param(side, format!("no such ipset '{name}'")));
            }
            continue;
        }
        let name = value
            .strip_prefix("guest/")
            .or_else(|| value.strip_prefix("dc/"))
            .unwrap_or(value);
        if is_name(name) {
            let lc = name.to_lowercase();
            match alias_visible(st, scope, &lc) {
                Some(a) => {
                    let v = address_version(&a.cidr);
                    if let (Some(have), Some(v)) = (version, v)
                        && have != v
                    {
                        return Err(ApiError::die("detected mixed ipv4/ipv6 addresses in rule"));
                    }
                    version = version.or(v);
                }
                None => return Err(ApiError::param(side, format!("no such alias '{value}'"))),
            }
        }
    }
    match version {
        Some(v) if ty != "group" => {
            rule.insert("ipversion".into(), v.to_string());
        }
        _ => {
            rule.remove("ipversion");
        }
    }
    if ty == "group" {
        // PVE's writer keeps only `-i` and the comment of a group rule.
        for k in [
            "macro",
            "source",
            "dest",
            "proto",
            "dport",
            "sport",
            "log",
            "icmp-type",
        ] {
            rule.remove(k);
        }
    }
    Ok(())
}

/// The ipset names a rule in `scope` may name: the guest's own and the cluster's.
pub(super) fn ipsets_visible<'a>(st: &'a State, scope: &Scope) -> impl Iterator<Item = &'a str> {
    let own = match scope {
        Scope::Guest { vmid, .. } => st.firewall.guests.get(vmid).map(|g| &g.ipsets),
        _ => None,
    };
    own.into_iter()
        .flat_map(|m| m.keys())
        .chain(st.firewall.ipsets.keys())
        .map(String::as_str)
}

pub(super) fn alias_visible<'a>(st: &'a State, scope: &Scope, lc: &str) -> Option<&'a Alias> {
    let own = match scope {
        Scope::Guest { vmid, .. } => st.firewall.guests.get(vmid).and_then(|g| g.aliases.get(lc)),
        _ => None,
    };
    own.or_else(|| st.firewall.aliases.get(lc))
}

pub(super) fn rule_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    if let Scope::Group(g) = scope
        && !st.firewall.groups.contains_key(g)
    {
        return Err(no_group(g));
    }
    let mut rule = Rule::new();
    copy_rule_data(&mut rule, req);
    verify_rule(&st, scope, &mut rule)?;
    // `$rule->{enable} = 0 if !defined($param->{enable})`; the parser reads any other as 1.
    let enabled = req.get("enable").is_some_and(|e| e != "0" && !e.is_empty());
    rule.insert("enable".into(), if enabled { "1" } else { "0" }.into());
    rules_mut(&mut st, scope)?.insert(0, rule);
    finish(sim, st)
}

pub(super) fn rule_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    let Some(rules) = rules_of(&st, scope).cloned() else {
        return Err(no_group(req.get("group").unwrap_or_default()));
    };
    assert_digest(&digest(&rules), req.get("digest"))?;
    let pos = pos_of(req);
    if pos >= rules.len() {
        return Err(ApiError::die(format!("no rule at position {pos}")));
    }
    let moveto = req.get("moveto").and_then(|m| m.parse::<usize>().ok());
    let new_rules = match moveto {
        Some(to) if to != pos => move_rule(rules, pos, to),
        _ => {
            let mut rules = rules;
            let mut rule = rules[pos].clone();
            copy_rule_data(&mut rule, req);
            if let Some(delete) = req.get("delete") {
                for opt in crate::formats::split_list(delete) {
                    if !RULE_FIELDS.contains(&opt) && opt != "pos" && opt != "digest" {
                        return Err(ApiError::param(
                            "delete",
                            format!("no such property ('{opt}')"),
                        ));
                    }
                    if opt == "type" || opt == "action" {
                        return Err(ApiError::param(
                            "delete",
                            format!("unable to delete required property '{opt}'"),
                        ));
                    }
                    rule.remove(opt);
                }
            }
            verify_rule(&st, scope, &mut rule)?;
            // The parser reads a rule without `|` as enabled.
            let enabled = rule.get("enable").is_none_or(|e| e != "0");
            rule.insert("enable".into(), if enabled { "1" } else { "0" }.into());
            rules[pos] = rule;
            rules
        }
    };
    *rules_mut(&mut st, scope)? = new_rules;
    finish(sim, st)
}

/// Rules.pm `update_rule` with `moveto`: the rule at `pos` goes before the rule that was at `to`,
/// or last when `to` is past the end.
pub(crate) fn move_rule<T: Clone>(rules: Vec<T>, pos: usize, to: usize) -> Vec<T> {
    let rule = rules[pos].clone();
    let mut out = Vec::with_capacity(rules.len());
    for (i, r) in rules.iter().enumerate() {
        if i == pos {
            continue;
        }
        if i == to {
            out.push(rule.clone());
        }
        out.push(r.clone());
    }
    if to >= rules.len() {
        out.push(rule);
    }
    out
}

pub(super) fn rule_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    let Some(rules) = rules_of(&st, scope).cloned() else {
        return Err(no_group(req.get("group").unwrap_or_default()));
    };
    assert_digest(&digest(&rules), req.get("digest"))?;
    let pos = pos_of(req);
    if pos >= rules.len() {
        return Err(ApiError::die(format!("no rule at position {pos}")));
    }
    rules_mut(&mut st, scope)?.remove(pos);
    finish(sim, st)
}
