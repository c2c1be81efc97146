//! The PVE firewall's guest and cluster configuration: a guest's `<vmid>.fw` (options, the ordered
//! rule list, aliases, ipsets) under `/nodes/{node}/{qemu,lxc}/{vmid}/firewall`, and `cluster.fw`'s
//! security groups, aliases and ipsets under `/cluster/firewall`.
//!
//! Sources: proxmox/pve-firewall `src/PVE/API2/Firewall/{Rules,VM,Groups,Aliases,IPSet}.pm` (the
//! endpoints, their checks and messages) and `src/PVE/Firewall.pm` (`verify_rule`,
//! `copy_rule_data`, `copy_list_with_digest`, `copy_opject_with_digest`, the config writers whose
//! round trip decides what a rule keeps). What PVE does and the simulator follows:
//!
//! * A rule create always inserts at position 0 (`unshift`; the `pos` parameter is accepted and
//!   dropped). `PUT …/rules/{pos}` with a `moveto` other than `pos` only moves the rule: it goes
//!   before the rule that was at `moveto` (so a move down lands at `moveto - 1`), or last when
//!   `moveto` is past the end; the other parameters are ignored then.
//! * Updates and deletes of rules, aliases and ipset entries check the list's `digest` (SHA-1 of
//!   its entries' sorted `key:value` lines); options check the options' digest. A stale one is
//!   PVE's "detected modified configuration - file changed by other user? Try again.".
//! * A rule's `source`/`dest` naming an alias or `+ipset` that neither the guest nor the cluster
//!   defines is refused (400, "no such alias 'x'" / "no such ipset 'x'"). A `group` rule naming a
//!   missing security group is accepted, as PVE does (its compiler warns and skips it).
//! * Aliases are keyed by their lower-cased name and listed sorted; ipset entries are written
//!   sorted by cidr, so neither has positions.
//! * The guest's file is removed with the guest and copied on a QEMU clone (qemu-server's
//!   `destroy_vm` and `clone_vm` call `remove_vmfw_conf` / `clone_vmfw_conf`). PVE does not check
//!   that the guest exists before writing its firewall; neither does the simulator.
//!
//! Not modelled: the compiled ruleset (nothing filters traffic), `/firewall/log`, `/refs`, the
//! host firewall, cluster options and rules, SDN ipsets, macro expansion, permissions.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;

/// PVE's answer to a stale `digest`.
const MODIFIED: &str = "detected modified configuration - file changed by other user? Try again.";

/// One rule as PVE's config writer keeps it (`type`, `action`, `enable`, and the optional
/// fields that were set).
pub(crate) type Rule = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Alias {
    pub name: String,
    pub cidr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct IpEntry {
    #[serde(default)]
    pub nomatch: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct IpSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// By cidr (PVE writes them sorted).
    #[serde(default)]
    pub entries: BTreeMap<String, IpEntry>,
}

/// A guest's `<vmid>.fw`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct GuestFw {
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// By lower-cased name.
    #[serde(default)]
    pub aliases: BTreeMap<String, Alias>,
    #[serde(default)]
    pub ipsets: BTreeMap<String, IpSet>,
}

impl GuestFw {
    fn is_empty(&self) -> bool {
        self.options.is_empty()
            && self.rules.is_empty()
            && self.aliases.is_empty()
            && self.ipsets.is_empty()
    }
}

/// A security group of `cluster.fw`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Group {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// Every firewall file the simulator keeps.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Firewall {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub guests: BTreeMap<u32, GuestFw>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Group>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aliases: BTreeMap<String, Alias>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ipsets: BTreeMap<String, IpSet>,
}

impl Firewall {
    pub(crate) fn is_empty(&self) -> bool {
        self.guests.is_empty()
            && self.groups.is_empty()
            && self.aliases.is_empty()
            && self.ipsets.is_empty()
    }
}

/// `remove_vmfw_conf`: the guest's file goes with it.
pub(crate) fn remove_guest(st: &mut State, vmid: u32) {
    st.firewall.guests.remove(&vmid);
}

/// `clone_vmfw_conf`: a clone gets a copy of its source's file.
pub(crate) fn clone_guest(st: &mut State, from: u32, to: u32) {
    match st.firewall.guests.get(&from).cloned() {
        Some(fw) => {
            st.firewall.guests.insert(to, fw);
        }
        None => {
            st.firewall.guests.remove(&to);
        }
    }
}

/// Where a request's rules, aliases and ipsets live.
#[derive(Debug, Clone, PartialEq)]
enum Scope {
    /// A guest's file; `ct` for a container (PVE's `rule_env`).
    Guest { vmid: u32, ct: bool },
    /// A security group of the cluster file.
    Group(String),
    /// The cluster file's own aliases and ipsets.
    Cluster,
}

impl Scope {
    fn of(template: &str, req: &Req) -> Scope {
        if template.starts_with("/nodes/") {
            Scope::Guest {
                vmid: req.vmid(),
                ct: template.starts_with("/nodes/{node}/lxc/"),
            }
        } else if template.starts_with("/cluster/firewall/groups/") {
            Scope::Group(req.get("group").unwrap_or_default().to_string())
        } else {
            Scope::Cluster
        }
    }

    /// PVE's `rule_env`.
    fn env(&self) -> &'static str {
        match self {
            Scope::Guest { ct: true, .. } => "ct",
            Scope::Guest { ct: false, .. } => "vm",
            Scope::Group(_) => "group",
            Scope::Cluster => "cluster",
        }
    }
}

/// The path templates below `prefix` (`/nodes/{node}/qemu/{vmid}` and so on) this module serves,
/// for [`route`].
pub(crate) fn route(segments: &[&str]) -> Option<(&'static str, Vec<(String, String)>)> {
    let p = |k: &str, v: &str| (k.to_string(), v.to_string());
    Some(match segments {
        ["cluster", "firewall"] => ("/cluster/firewall", vec![]),
        ["cluster", "firewall", "groups"] => ("/cluster/firewall/groups", vec![]),
        ["cluster", "firewall", "groups", g] => {
            ("/cluster/firewall/groups/{group}", vec![p("group", g)])
        }
        ["cluster", "firewall", "groups", g, pos] => (
            "/cluster/firewall/groups/{group}/{pos}",
            vec![p("group", g), p("pos", pos)],
        ),
        ["cluster", "firewall", "aliases"] => ("/cluster/firewall/aliases", vec![]),
        ["cluster", "firewall", "aliases", n] => {
            ("/cluster/firewall/aliases/{name}", vec![p("name", n)])
        }
        ["cluster", "firewall", "ipset"] => ("/cluster/firewall/ipset", vec![]),
        ["cluster", "firewall", "ipset", n] => {
            ("/cluster/firewall/ipset/{name}", vec![p("name", n)])
        }
        ["cluster", "firewall", "ipset", n, c] => (
            "/cluster/firewall/ipset/{name}/{cidr}",
            vec![p("name", n), p("cidr", c)],
        ),
        [
            "nodes",
            n,
            kind @ ("qemu" | "lxc"),
            v,
            "firewall",
            rest @ ..,
        ] => {
            let qemu = *kind == "qemu";
            let t = |q: &'static str, l: &'static str| if qemu { q } else { l };
            let mut params = vec![p("node", n), p("vmid", v)];
            let template = match rest {
                [] => t(
                    "/nodes/{node}/qemu/{vmid}/firewall",
                    "/nodes/{node}/lxc/{vmid}/firewall",
                ),
                ["options"] => t(
                    "/nodes/{node}/qemu/{vmid}/firewall/options",
                    "/nodes/{node}/lxc/{vmid}/firewall/options",
                ),
                ["rules"] => t(
                    "/nodes/{node}/qemu/{vmid}/firewall/rules",
                    "/nodes/{node}/lxc/{vmid}/firewall/rules",
                ),
                ["rules", pos] => {
                    params.push(p("pos", pos));
                    t(
                        "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
                        "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}",
                    )
                }
                ["aliases"] => t(
                    "/nodes/{node}/qemu/{vmid}/firewall/aliases",
                    "/nodes/{node}/lxc/{vmid}/firewall/aliases",
                ),
                ["aliases", name] => {
                    params.push(p("name", name));
                    t(
                        "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}",
                        "/nodes/{node}/lxc/{vmid}/firewall/aliases/{name}",
                    )
                }
                ["ipset"] => t(
                    "/nodes/{node}/qemu/{vmid}/firewall/ipset",
                    "/nodes/{node}/lxc/{vmid}/firewall/ipset",
                ),
                ["ipset", name] => {
                    params.push(p("name", name));
                    t(
                        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}",
                        "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}",
                    )
                }
                ["ipset", name, cidr] => {
                    params.push(p("name", name));
                    params.push(p("cidr", cidr));
                    t(
                        "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}",
                        "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}",
                    )
                }
                _ => return None,
            };
            (template, params)
        }
        _ => return None,
    })
}

/// Whether `template` is one of this module's.
pub(crate) fn serves(template: &str) -> bool {
    template.starts_with("/cluster/firewall")
        || (template.starts_with("/nodes/{node}/") && template.contains("/{vmid}/firewall"))
}

/// The handler for `method` on one of this module's templates.
pub(crate) fn call(sim: &Arc<Sim>, method: &str, template: &str, req: &Req) -> ApiResult {
    let scope = Scope::of(template, req);
    let tail = template
        .rsplit_once("/firewall")
        .map(|(_, t)| t)
        .unwrap_or_default();
    let tail = tail.strip_prefix('/').unwrap_or(tail);
    match (method, tail) {
        ("GET", "") => Ok(crate::server::routes::index(template, "name")),
        ("GET", "options") => options_get(sim, &scope),
        ("PUT", "options") => options_set(sim, &scope, req),
        ("GET", "rules") | ("GET", "groups/{group}") => rules_list(sim, &scope),
        ("POST", "rules") | ("POST", "groups/{group}") => rule_create(sim, &scope, req),
        ("GET", "rules/{pos}") | ("GET", "groups/{group}/{pos}") => rule_get(sim, &scope, req),
        ("PUT", "rules/{pos}") | ("PUT", "groups/{group}/{pos}") => rule_update(sim, &scope, req),
        ("DELETE", "rules/{pos}") | ("DELETE", "groups/{group}/{pos}") => {
            rule_delete(sim, &scope, req)
        }
        ("GET", "groups") => groups_list(sim),
        ("POST", "groups") => group_create(sim, req),
        ("DELETE", "groups/{group}") => group_delete(sim, req),
        ("GET", "aliases") => aliases_list(sim, &scope),
        ("POST", "aliases") => alias_create(sim, &scope, req),
        ("GET", "aliases/{name}") => alias_get(sim, &scope, req),
        ("PUT", "aliases/{name}") => alias_update(sim, &scope, req),
        ("DELETE", "aliases/{name}") => alias_delete(sim, &scope, req),
        ("GET", "ipset") => ipsets_list(sim, &scope),
        ("POST", "ipset") => ipset_create(sim, &scope, req),
        ("GET", "ipset/{name}") => ipset_get(sim, &scope, req),
        ("POST", "ipset/{name}") => ip_create(sim, &scope, req),
        ("DELETE", "ipset/{name}") => ipset_delete(sim, &scope, req),
        ("GET", "ipset/{name}/{cidr}") => ip_get(sim, &scope, req),
        ("PUT", "ipset/{name}/{cidr}") => ip_update(sim, &scope, req),
        ("DELETE", "ipset/{name}/{cidr}") => ip_delete(sim, &scope, req),
        _ => Err(ApiError::not_implemented(method, template)),
    }
}

/// The SHA-1 PVE computes over a list (`copy_list_with_digest`) or an object
/// (`copy_opject_with_digest`): each entry's keys sorted, `key:value\n`.
fn digest<'a>(entries: impl IntoIterator<Item = &'a BTreeMap<String, String>>) -> String {
    let mut text = String::new();
    for e in entries {
        for (k, v) in e {
            text.push_str(k);
            text.push(':');
            text.push_str(v);
            text.push('\n');
        }
    }
    crate::hashes::sha1_hex(text.as_bytes())
}

/// `PVE::Tools::assert_if_modified`.
fn assert_digest(current: &str, given: Option<&str>) -> Result<(), ApiError> {
    match given {
        Some(d) if !d.is_empty() && d != current => Err(ApiError::die(MODIFIED)),
        _ => Ok(()),
    }
}

fn finish(sim: &Arc<Sim>, mut st: std::sync::RwLockWriteGuard<'_, State>) -> ApiResult {
    st.firewall.guests.retain(|_, fw| !fw.is_empty());
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

fn rules_of<'a>(st: &'a State, scope: &Scope) -> Option<&'a Vec<Rule>> {
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

fn empty_rules() -> &'static Vec<Rule> {
    static EMPTY: Vec<Rule> = Vec::new();
    &EMPTY
}

fn rules_mut<'a>(st: &'a mut State, scope: &Scope) -> Result<&'a mut Vec<Rule>, ApiError> {
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
fn no_group(g: &str) -> ApiError {
    ApiError::die(format!("no such security group '{g}'"))
}

fn rules_answer(rules: &[Rule]) -> Vec<Value> {
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

fn rules_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    let Some(rules) = rules_of(&st, scope) else {
        return Err(no_group(match scope {
            Scope::Group(g) => g,
            _ => "",
        }));
    };
    Ok(Reply::data(Value::Array(rules_answer(rules))))
}

fn pos_of(req: &Req) -> usize {
    req.get("pos").and_then(|p| p.parse().ok()).unwrap_or(0)
}

fn rule_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
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
fn copy_rule_data(rule: &mut Rule, req: &Req) {
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

const MACROS: &[&str] = &[
    "Amanda",
    "Auth",
    "BGP",
    "BitTorrent",
    "BitTorrent32",
    "Ceph",
    "CVS",
    "Citrix",
    "DAAP",
    "DCC",
    "DHCPfwd",
    "DNS",
    "Distcc",
    "FTP",
    "Finger",
    "GNUnet",
    "GRE",
    "Git",
    "HKP",
    "HTTP",
    "HTTPS",
    "ICPV2",
    "ICQ",
    "IMAP",
    "IMAPS",
    "IPIP",
    "IPsec",
    "IPsecah",
    "IPsecnat",
    "IRC",
    "Jetdirect",
    "L2TP",
    "LDAP",
    "LDAPS",
    "MSNP",
    "MSSQL",
    "Mail",
    "MDNS",
    "Munin",
    "MySQL",
    "NNTP",
    "NNTPS",
    "NTP",
    "OSPF",
    "OpenVPN",
    "PCA",
    "PMG",
    "POP3",
    "POP3S",
    "PPtP",
    "Ping",
    "PostgreSQL",
    "Printer",
    "RDP",
    "RIP",
    "RNDC",
    "Razor",
    "Rdate",
    "Rsync",
    "SANE",
    "SMB",
    "SMBswat",
    "SMTP",
    "SMTPS",
    "SNMP",
    "SPAMD",
    "SSH",
    "SVN",
    "SixXS",
    "SPICEproxy",
    "Squid",
    "Submission",
    "Syslog",
    "TFTP",
    "Telnet",
    "Telnets",
    "Time",
    "Trcrt",
    "VNC",
    "VNCL",
    "Web",
    "Webcache",
    "Webmin",
    "Whois",
];

/// Protocols whose rules may name ports (`$PROTOCOLS_WITH_PORTS`).
fn has_ports(proto: &str) -> bool {
    matches!(
        proto,
        "udp" | "17" | "udplite" | "136" | "tcp" | "6" | "dccp" | "33" | "sctp" | "132"
    )
}

fn is_icmp(proto: &str) -> bool {
    matches!(proto, "icmp" | "1" | "icmpv6" | "ipv6-icmp" | "58")
}

/// PVE's `security_group_name_pattern` / `ip_alias_pattern` / `ipset_name_pattern`.
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The IP version of an address list (`parse_address_list`), when it names addresses.
fn address_version(value: &str) -> Option<u8> {
    let first = value.split([',', '-']).next()?;
    let host = first.split('/').next()?;
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => Some(4),
        Ok(std::net::IpAddr::V6(_)) => Some(6),
        Err(_) => None,
    }
}

/// `verify_rule` as the API runs it: the first problem is a parameter error.
fn verify_rule(st: &State, scope: &Scope, rule: &mut Rule) -> Result<(), ApiError> {
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
fn ipsets_visible<'a>(st: &'a State, scope: &Scope) -> impl Iterator<Item = &'a str> {
    let own = match scope {
        Scope::Guest { vmid, .. } => st.firewall.guests.get(vmid).map(|g| &g.ipsets),
        _ => None,
    };
    own.into_iter()
        .flat_map(|m| m.keys())
        .chain(st.firewall.ipsets.keys())
        .map(String::as_str)
}

fn alias_visible<'a>(st: &'a State, scope: &Scope, lc: &str) -> Option<&'a Alias> {
    let own = match scope {
        Scope::Guest { vmid, .. } => st.firewall.guests.get(vmid).and_then(|g| g.aliases.get(lc)),
        _ => None,
    };
    own.or_else(|| st.firewall.aliases.get(lc))
}

fn rule_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
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

fn rule_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
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

fn rule_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
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

/// The options as `GET …/options` answers them (booleans as integers), with their digest.
fn options_get(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let Scope::Guest { vmid, .. } = scope else {
        return Err(ApiError::die("no options here"));
    };
    let st = sim.read();
    let options = st
        .firewall
        .guests
        .get(vmid)
        .map(|g| g.options.clone())
        .unwrap_or_default();
    let mut o = Map::new();
    for (k, v) in &options {
        let value = if BOOL_OPTIONS.contains(&k.as_str()) {
            json!(v.parse::<i64>().unwrap_or(0))
        } else {
            json!(v)
        };
        o.insert(k.clone(), value);
    }
    o.insert("digest".into(), json!(digest([&options])));
    Ok(Reply::data(Value::Object(o)))
}

const BOOL_OPTIONS: &[&str] = &["enable", "dhcp", "ipfilter", "macfilter", "ndp", "radv"];
const OPTIONS: &[&str] = &[
    "enable",
    "dhcp",
    "ipfilter",
    "macfilter",
    "ndp",
    "radv",
    "policy_in",
    "policy_out",
    "log_level_in",
    "log_level_out",
];

/// PVE's JSONSchema booleans, as `1`/`0`.
fn bool_value(v: &str) -> &'static str {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => "1",
        _ => "0",
    }
}

fn options_set(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let Scope::Guest { vmid, .. } = scope else {
        return Err(ApiError::die("no options here"));
    };
    let mut st = sim.write();
    let fw = st.firewall.guests.entry(*vmid).or_default();
    assert_digest(&digest([&fw.options]), req.get("digest"))?;
    let mut options = fw.options.clone();
    if let Some(delete) = req.get("delete") {
        for opt in crate::formats::split_list(delete) {
            if !OPTIONS.contains(&opt) {
                return Err(ApiError::param("delete", format!("no such option '{opt}'")));
            }
            options.remove(opt);
        }
    }
    for k in OPTIONS {
        if let Some(v) = req.get(k) {
            let v = if BOOL_OPTIONS.contains(k) {
                bool_value(v).to_string()
            } else {
                v.to_string()
            };
            options.insert(k.to_string(), v);
        }
    }
    fw.options = options;
    finish(sim, st)
}

fn groups_list(sim: &Arc<Sim>) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(groups_answer(&st))))
}

fn groups_answer(st: &State) -> Vec<Value> {
    let entries: Vec<BTreeMap<String, String>> = st
        .firewall
        .groups
        .iter()
        .map(|(name, g)| {
            let mut e = BTreeMap::new();
            e.insert("group".to_string(), name.clone());
            if let Some(c) = &g.comment {
                e.insert("comment".to_string(), c.clone());
            }
            e
        })
        .collect();
    let d = digest(&entries);
    entries
        .into_iter()
        .map(|e| {
            let mut o: Map<String, Value> = e.into_iter().map(|(k, v)| (k, json!(v))).collect();
            o.insert("digest".into(), json!(d));
            Value::Object(o)
        })
        .collect()
}

/// Groups.pm `create_security_group`: a new group, or with `rename` the group renamed (or, with
/// `rename` equal to `group`, its comment changed).
fn group_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let group = req.get("group").unwrap_or_default().to_string();
    let comment = req.get("comment").map(str::to_string);
    let mut st = sim.write();
    if let Some(rename) = req.get("rename") {
        let entries: Vec<BTreeMap<String, String>> = st
            .firewall
            .groups
            .iter()
            .map(|(name, g)| {
                let mut e = BTreeMap::from([("group".to_string(), name.clone())]);
                if let Some(c) = &g.comment {
                    e.insert("comment".to_string(), c.clone());
                }
                e
            })
            .collect();
        assert_digest(&digest(&entries), req.get("digest"))?;
        let Some(mut old) = st.firewall.groups.get(rename).cloned() else {
            return Err(ApiError::param(
                "group",
                format!("Security group '{rename}' does not exist"),
            ));
        };
        if group != rename && st.firewall.groups.contains_key(&group) {
            return Err(ApiError::param(
                "group",
                format!("Security group '{group}' does already exist"),
            ));
        }
        if let Some(c) = comment {
            old.comment = (!c.is_empty()).then_some(c);
        }
        st.firewall.groups.remove(rename);
        if group != rename {
            // Every rule naming the old group now names the new one.
            let renamed = |rules: &mut Vec<Rule>| {
                for r in rules.iter_mut() {
                    if r.get("type").is_some_and(|t| t == "group")
                        && r.get("action").is_some_and(|a| a == rename)
                    {
                        r.insert("action".into(), group.clone());
                    }
                }
            };
            for fw in st.firewall.guests.values_mut() {
                renamed(&mut fw.rules);
            }
        }
        st.firewall.groups.insert(group, old);
        return finish(sim, st);
    }
    if st.firewall.groups.contains_key(&group) {
        return Err(ApiError::param(
            "group",
            format!("Security group '{group}' already exists"),
        ));
    }
    st.firewall.groups.insert(
        group,
        Group {
            comment: comment.filter(|c| !c.is_empty()),
            rules: Vec::new(),
        },
    );
    finish(sim, st)
}

/// Groups.pm `delete_security_group`: only an empty group that no rule references goes.
fn group_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let group = req.get("group").unwrap_or_default().to_string();
    let mut st = sim.write();
    let Some(g) = st.firewall.groups.get(&group) else {
        return Err(ApiError::die(format!("no such security group '{group}'")));
    };
    if !g.rules.is_empty() {
        return Err(ApiError::die("Security group is not empty"));
    }
    st.firewall.groups.remove(&group);
    finish(sim, st)
}

fn aliases_of<'a>(st: &'a State, scope: &Scope) -> Option<&'a BTreeMap<String, Alias>> {
    match scope {
        Scope::Guest { vmid, .. } => Some(
            st.firewall
                .guests
                .get(vmid)
                .map(|g| &g.aliases)
                .unwrap_or(empty_aliases()),
        ),
        Scope::Cluster => Some(&st.firewall.aliases),
        Scope::Group(_) => None,
    }
}

fn empty_aliases() -> &'static BTreeMap<String, Alias> {
    static EMPTY: BTreeMap<String, Alias> = BTreeMap::new();
    &EMPTY
}

fn aliases_mut<'a>(st: &'a mut State, scope: &Scope) -> &'a mut BTreeMap<String, Alias> {
    match scope {
        Scope::Guest { vmid, .. } => &mut st.firewall.guests.entry(*vmid).or_default().aliases,
        _ => &mut st.firewall.aliases,
    }
}

fn alias_entry(a: &Alias) -> BTreeMap<String, String> {
    let mut e = BTreeMap::from([
        ("name".to_string(), a.name.clone()),
        ("cidr".to_string(), a.cidr.clone()),
    ]);
    if let Some(c) = &a.comment {
        e.insert("comment".into(), c.clone());
    }
    if let Some(v) = address_version(&a.cidr) {
        e.insert("ipversion".into(), v.to_string());
    }
    e
}

fn entries_answer(entries: Vec<BTreeMap<String, String>>) -> Vec<Value> {
    let d = digest(&entries);
    entries
        .into_iter()
        .map(|e| {
            let mut o: Map<String, Value> = e
                .into_iter()
                .map(|(k, v)| {
                    let value = match k.as_str() {
                        "ipversion" | "nomatch" => json!(v.parse::<i64>().unwrap_or(0)),
                        _ => json!(v),
                    };
                    (k, value)
                })
                .collect();
            o.insert("digest".into(), json!(d));
            Value::Object(o)
        })
        .collect()
}

fn alias_list_entries(st: &State, scope: &Scope) -> Vec<BTreeMap<String, String>> {
    aliases_of(st, scope)
        .map(|m| m.values().map(alias_entry).collect())
        .unwrap_or_default()
}

fn aliases_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(entries_answer(
        alias_list_entries(&st, scope),
    ))))
}

/// `clean_cidr` and `parse_ip_or_cidr` in short: an address or network, as PVE writes it.
fn check_cidr(key: &str, cidr: &str) -> Result<String, ApiError> {
    let (host, prefix) = match cidr.split_once('/') {
        Some((h, p)) => (h, Some(p)),
        None => (cidr, None),
    };
    let ip: std::net::IpAddr = host.parse().map_err(|_| {
        ApiError::param(
            key,
            format!("value does not look like a valid CIDR network: {cidr}"),
        )
    })?;
    if let Some(p) = prefix {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if !p.parse::<u8>().is_ok_and(|n| n <= max) {
            return Err(ApiError::param(
                key,
                format!("value does not look like a valid CIDR network: {cidr}"),
            ));
        }
    }
    Ok(cidr.to_string())
}

fn alias_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = check_cidr("cidr", req.get("cidr").unwrap_or_default())?;
    let mut st = sim.write();
    let aliases = aliases_mut(&mut st, scope);
    if aliases.contains_key(&name.to_lowercase()) {
        return Err(ApiError::param(
            "name",
            format!("alias '{name}' already exists"),
        ));
    }
    aliases.insert(
        name.to_lowercase(),
        Alias {
            name,
            cidr,
            comment: req
                .get("comment")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
        },
    );
    finish(sim, st)
}

fn alias_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default().to_lowercase();
    let all = alias_list_entries(&st, scope);
    let d = digest(&all);
    match aliases_of(&st, scope).and_then(|m| m.get(&name)) {
        Some(a) => {
            let mut o = entries_answer(vec![alias_entry(a)]).remove(0);
            o["digest"] = json!(d);
            Ok(Reply::data(o))
        }
        None => Err(ApiError::param("name", "no such alias")),
    }
}

fn alias_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    assert_digest(&digest(&alias_list_entries(&st, scope)), req.get("digest"))?;
    let name = req.get("name").unwrap_or_default().to_lowercase();
    let cidr = check_cidr("cidr", req.get("cidr").unwrap_or_default())?;
    let aliases = aliases_mut(&mut st, scope);
    let Some(mut alias) = aliases.get(&name).cloned() else {
        return Err(ApiError::param("name", "no such alias"));
    };
    alias.cidr = cidr;
    alias.comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    if let Some(rename) = req.get("rename").filter(|r| !r.is_empty()) {
        let lc = rename.to_lowercase();
        if lc != name && aliases.contains_key(&lc) {
            return Err(ApiError::param(
                "name",
                format!("alias '{rename}' already exists"),
            ));
        }
        aliases.remove(&name);
        alias.name = rename.to_string();
        aliases.insert(lc, alias);
    } else {
        aliases.insert(name, alias);
    }
    finish(sim, st)
}

fn alias_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    assert_digest(&digest(&alias_list_entries(&st, scope)), req.get("digest"))?;
    let name = req.get("name").unwrap_or_default().to_lowercase();
    aliases_mut(&mut st, scope).remove(&name);
    finish(sim, st)
}

fn ipsets_of<'a>(st: &'a State, scope: &Scope) -> &'a BTreeMap<String, IpSet> {
    static EMPTY: BTreeMap<String, IpSet> = BTreeMap::new();
    match scope {
        Scope::Guest { vmid, .. } => st
            .firewall
            .guests
            .get(vmid)
            .map(|g| &g.ipsets)
            .unwrap_or(&EMPTY),
        _ => &st.firewall.ipsets,
    }
}

fn ipsets_mut<'a>(st: &'a mut State, scope: &Scope) -> &'a mut BTreeMap<String, IpSet> {
    match scope {
        Scope::Guest { vmid, .. } => &mut st.firewall.guests.entry(*vmid).or_default().ipsets,
        _ => &mut st.firewall.ipsets,
    }
}

fn ipset_list_entries(st: &State, scope: &Scope) -> Vec<BTreeMap<String, String>> {
    ipsets_of(st, scope)
        .iter()
        .map(|(name, s)| {
            let mut e = BTreeMap::from([("name".to_string(), name.clone())]);
            if let Some(c) = &s.comment {
                e.insert("comment".into(), c.clone());
            }
            e
        })
        .collect()
}

fn ipsets_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(entries_answer(
        ipset_list_entries(&st, scope),
    ))))
}

/// IPSet.pm `create_ipset`: a new ipset, or with `rename` the ipset renamed (or, with `rename`
/// equal to `name`, its comment changed).
fn ipset_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let mut st = sim.write();
    if let Some(rename) = req.get("rename") {
        assert_digest(&digest(&ipset_list_entries(&st, scope)), req.get("digest"))?;
        let sets = ipsets_mut(&mut st, scope);
        let Some(mut set) = sets.get(rename).cloned() else {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{rename}' does not exist"),
            ));
        };
        if name != rename && sets.contains_key(&name) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{name}' does already exist"),
            ));
        }
        set.comment = comment;
        sets.remove(rename);
        sets.insert(name, set);
        return finish(sim, st);
    }
    let sets = ipsets_mut(&mut st, scope);
    if sets.contains_key(&name) {
        return Err(ApiError::param(
            "name",
            format!("IPSet '{name}' already exists"),
        ));
    }
    sets.insert(
        name,
        IpSet {
            comment,
            entries: BTreeMap::new(),
        },
    );
    finish(sim, st)
}

fn no_ipset(name: &str) -> ApiError {
    ApiError::die(format!("no such IPSet '{name}'"))
}

fn ip_entries(set: &IpSet) -> Vec<BTreeMap<String, String>> {
    set.entries
        .iter()
        .map(|(cidr, e)| {
            let mut m = BTreeMap::from([("cidr".to_string(), cidr.clone())]);
            if e.nomatch {
                m.insert("nomatch".into(), "1".into());
            }
            if let Some(c) = &e.comment {
                m.insert("comment".into(), c.clone());
            }
            m
        })
        .collect()
}

fn ipset_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default();
    let set = ipsets_of(&st, scope)
        .get(name)
        .ok_or_else(|| no_ipset(name))?;
    Ok(Reply::data(Value::Array(entries_answer(ip_entries(set)))))
}

fn ipset_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get(&name) else {
        return Err(no_ipset(&name));
    };
    if !set.entries.is_empty() && !req.flag("force") {
        return Err(ApiError::die(format!("IPSet '{name}' is not empty")));
    }
    sets.remove(&name);
    finish(sim, st)
}

fn ip_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let given = req.get("cidr").unwrap_or_default();
    let mut st = sim.write();
    let alias = given
        .strip_prefix("guest/")
        .or_else(|| given.strip_prefix("dc/"))
        .unwrap_or(given);
    let cidr = if address_version(given).is_none() && is_name(alias) {
        if alias_visible(&st, scope, &alias.to_lowercase()).is_none() {
            return Err(ApiError::die(format!("no such alias '{given}'")));
        }
        given.to_string()
    } else {
        check_cidr("cidr", given)?
    };
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    if set.entries.contains_key(&cidr) {
        return Err(ApiError::param(
            "cidr",
            format!("address '{cidr}' already exists"),
        ));
    }
    if cidr
        .rsplit_once('/')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b == b'0'))
    {
        return Err(ApiError::param(
            "cidr",
            "a zero prefix is not allowed in ipset entries",
        ));
    }
    set.entries.insert(
        cidr,
        IpEntry {
            nomatch: req.flag("nomatch"),
            comment: req
                .get("comment")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
        },
    );
    finish(sim, st)
}

fn ip_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default();
    let cidr = req.get("cidr").unwrap_or_default();
    let set = ipsets_of(&st, scope)
        .get(name)
        .ok_or_else(|| no_ipset(name))?;
    let all = ip_entries(set);
    let d = digest(&all);
    match all.into_iter().find(|e| e["cidr"] == cidr) {
        Some(e) => {
            let mut o = entries_answer(vec![e]).remove(0);
            o["digest"] = json!(d);
            Ok(Reply::data(o))
        }
        None => Err(ApiError::param("cidr", "no such IP/Network")),
    }
}

fn ip_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = req.get("cidr").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    assert_digest(&digest(&ip_entries(set)), req.get("digest"))?;
    let Some(entry) = set.entries.get_mut(&cidr) else {
        return Err(ApiError::param("cidr", "no such IP/Network"));
    };
    entry.nomatch = req.flag("nomatch");
    entry.comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    finish(sim, st)
}

fn ip_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = req.get("cidr").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    assert_digest(&digest(&ip_entries(set)), req.get("digest"))?;
    set.entries.remove(&cidr);
    finish(sim, st)
}
