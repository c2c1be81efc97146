//! `validate`: a Firewall manifest into its [`Desired`] state, every value in the form PVE
//! keeps it (options as `key: value`, rules as the fields PVE's config writer keeps, aliases by
//! lower-cased name, ipset entries by cidr), so that plan compares like with like.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, Diag, index, join};
use proxops_kind_sdk::manifest::envelope;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use proxops_firewall_rules::rules::{
    LOG_LEVELS, MACROS, RULE_KEYS, Rule, has_ports, is_address, is_address_item, is_icmp, is_name,
    one_line,
};

type Obj = Map<String, Value>;

/// The kind's `kind:`.
pub const KIND: &str = "Firewall";
/// The folder of its manifests.
pub const FOLDER: &str = "firewall";

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &[
    "vmid", "type", "vm", "options", "rules", "aliases", "ipsets",
];
/// The options PVE keeps for a guest (`$vm_option_properties`), by PVE's names.
pub const BOOL_OPTIONS: &[&str] = &["enable", "dhcp", "ipfilter", "macfilter", "ndp", "radv"];
pub const POLICY_OPTIONS: &[&str] = &["policy_in", "policy_out"];
pub const LOG_OPTIONS: &[&str] = &["log_level_in", "log_level_out"];
const ALIAS_KEYS: &[&str] = &["name", "cidr", "comment"];
const IPSET_KEYS: &[&str] = &["name", "comment", "entries"];
const ENTRY_KEYS: &[&str] = &["cidr", "nomatch", "comment"];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alias {
    pub name: String,
    pub cidr: String,
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub nomatch: bool,
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpSet {
    pub comment: Option<String>,
    /// By cidr.
    pub entries: BTreeMap<String, Entry>,
}

/// A guest's whole firewall, as the manifest declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    pub name: String,
    pub vmid: u64,
    /// `qemu` or `lxc`.
    pub guest_type: String,
    /// The VM manifest that declares the guest, if named.
    pub vm: Option<String>,
    pub options: BTreeMap<String, String>,
    pub rules: Vec<Rule>,
    /// By lower-cased name (PVE's key).
    pub aliases: BTreeMap<String, Alias>,
    pub ipsets: BTreeMap<String, IpSet>,
}

impl Desired {
    /// `/nodes/{node}/{qemu|lxc}/{vmid}/firewall` on `node`.
    pub fn base(&self, node: &str) -> String {
        format!("/nodes/{node}/{}/{}/firewall", self.guest_type, self.vmid)
    }

    /// The `/cluster/resources` id of the guest (`qemu/100`).
    pub fn resource_id(&self) -> String {
        format!("{}/{}", self.guest_type, self.vmid)
    }
}

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let vmid = c.int(spec, "spec", "vmid", true, 100, 999_999_999);
    let guest_type = c
        .enumeration(spec, "spec", "type", false, &["qemu", "lxc"])
        .unwrap_or_else(|| "qemu".into());
    let vm = c.string(spec, "spec", "vm", false);
    if vm.is_some() && guest_type != "qemu" {
        c.error(
            "spec.vm",
            "names a VM manifest, but spec.type is lxc; a container's firewall names its vmid only",
        );
    }
    let options = options(&mut c, spec);
    let aliases = aliases(&mut c, spec);
    let ipsets = ipsets(&mut c, spec, &aliases);
    let rules = rules(&mut c, spec, &aliases, &ipsets);
    c.finish()?;
    Ok(Desired {
        name: name.unwrap_or_default(),
        vmid: vmid.unwrap_or_default() as u64,
        guest_type,
        vm,
        options,
        rules,
        aliases,
        ipsets,
    })
}

fn options(c: &mut Checker, spec: &Obj) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let known: Vec<&str> = BOOL_OPTIONS
        .iter()
        .chain(POLICY_OPTIONS)
        .chain(LOG_OPTIONS)
        .copied()
        .collect();
    let Some(o) = c.object_field(spec, "spec", "options", false, &known) else {
        return out;
    };
    for k in BOOL_OPTIONS {
        if let Some(b) = c.boolean(o, "spec.options", k, false) {
            out.insert(k.to_string(), if b { "1" } else { "0" }.to_string());
        }
    }
    for k in POLICY_OPTIONS {
        if let Some(v) = c.enumeration(o, "spec.options", k, false, &["ACCEPT", "REJECT", "DROP"]) {
            out.insert(k.to_string(), v);
        }
    }
    for k in LOG_OPTIONS {
        if let Some(v) = c.enumeration(o, "spec.options", k, false, LOG_LEVELS) {
            out.insert(k.to_string(), v);
        }
    }
    out
}

fn aliases(c: &mut Checker, spec: &Obj) -> BTreeMap<String, Alias> {
    let mut out = BTreeMap::new();
    let Some(items) = c.array(spec, "spec", "aliases", false) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.aliases", i);
        let Some(o) = c.object(item, &path, ALIAS_KEYS) else {
            continue;
        };
        let name = c.string(o, &path, "name", true);
        let cidr = c.string(o, &path, "cidr", true);
        let comment = c.string(o, &path, "comment", false);
        if let Some(cm) = &comment {
            one_line(c, &join(&path, "comment"), cm);
        }
        let (Some(name), Some(cidr)) = (name, cidr) else {
            continue;
        };
        if !is_name(&name) {
            c.error(
                join(&path, "name"),
                format!("`{name}` is not an alias name PVE takes: a letter, then letters, digits, `-` or `_` (2 to 64 characters)"),
            );
            continue;
        }
        if !is_address(&cidr) {
            c.error(
                join(&path, "cidr"),
                format!("`{cidr}` is not an IP address or network (CIDR)"),
            );
            continue;
        }
        let key = name.to_lowercase();
        if out.contains_key(&key) {
            c.error(
                join(&path, "name"),
                format!("alias `{name}` is declared twice (PVE's alias names ignore case)"),
            );
            continue;
        }
        out.insert(
            key,
            Alias {
                name,
                cidr,
                comment: comment.filter(|c| !c.is_empty()),
            },
        );
    }
    out
}

fn ipsets(
    c: &mut Checker,
    spec: &Obj,
    aliases: &BTreeMap<String, Alias>,
) -> BTreeMap<String, IpSet> {
    let mut out = BTreeMap::new();
    let Some(items) = c.array(spec, "spec", "ipsets", false) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.ipsets", i);
        let Some(o) = c.object(item, &path, IPSET_KEYS) else {
            continue;
        };
        let name = c.string(o, &path, "name", true);
        let comment = c.string(o, &path, "comment", false);
        if let Some(cm) = &comment {
            one_line(c, &join(&path, "comment"), cm);
        }
        let mut entries = BTreeMap::new();
        if let Some(list) = c.array(o, &path, "entries", false) {
            for (j, e) in list.iter().enumerate() {
                let epath = index(&join(&path, "entries"), j);
                let (cidr, nomatch, comment) = match e {
                    Value::String(s) => (Some(s.clone()), false, None),
                    _ => {
                        let Some(eo) = c.object(e, &epath, ENTRY_KEYS) else {
                            continue;
                        };
                        (
                            c.string(eo, &epath, "cidr", true),
                            c.boolean(eo, &epath, "nomatch", false).unwrap_or(false),
                            c.string(eo, &epath, "comment", false),
                        )
                    }
                };
                let Some(cidr) = cidr else { continue };
                let alias_ok = is_name(&cidr) && aliases.contains_key(&cidr.to_lowercase());
                if !is_address(&cidr) && !alias_ok {
                    let why = if is_name(&cidr) {
                        format!("names the alias `{cidr}`, which spec.aliases does not declare")
                    } else {
                        format!(
                            "`{cidr}` is not an IP address, a network (CIDR) or an alias of spec.aliases"
                        )
                    };
                    c.error(epath, why);
                    continue;
                }
                if cidr
                    .rsplit_once('/')
                    .is_some_and(|(_, p)| p.bytes().all(|b| b == b'0'))
                {
                    c.error(epath, "a zero prefix is not allowed in ipset entries (PVE)");
                    continue;
                }
                if entries
                    .insert(
                        cidr.clone(),
                        Entry {
                            nomatch,
                            comment: comment.filter(|c| !c.is_empty()),
                        },
                    )
                    .is_some()
                {
                    c.error(epath, format!("`{cidr}` is listed twice"));
                }
            }
        }
        let Some(name) = name else { continue };
        if !is_name(&name) {
            c.error(
                join(&path, "name"),
                format!("`{name}` is not an ipset name PVE takes: a letter, then letters, digits, `-` or `_`"),
            );
            continue;
        }
        if out
            .insert(
                name.clone(),
                IpSet {
                    comment: comment.filter(|c| !c.is_empty()),
                    entries,
                },
            )
            .is_some()
        {
            c.error(
                join(&path, "name"),
                format!("ipset `{name}` is declared twice"),
            );
        }
    }
    out
}

/// Where an address field points: an address list, one of the manifest's aliases or ipsets, or
/// the cluster's (`dc/<alias>`, `+dc/<ipset>`: not checked here, PVE refuses a missing one).
fn check_address(
    c: &mut Checker,
    path: &str,
    value: &str,
    aliases: &BTreeMap<String, Alias>,
    ipsets: &BTreeMap<String, IpSet>,
) {
    if let Some(set) = value.strip_prefix('+') {
        if let Some(dc) = set.strip_prefix("dc/") {
            if !is_name(dc) {
                c.error(path, format!("`{value}` is not an ipset name"));
            }
            return;
        }
        let own = set.strip_prefix("guest/").unwrap_or(set);
        if !ipsets.contains_key(own) {
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
    let own = value.strip_prefix("guest/").unwrap_or(value);
    if is_name(own) {
        if !aliases.contains_key(&own.to_lowercase()) {
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

fn rules(
    c: &mut Checker,
    spec: &Obj,
    aliases: &BTreeMap<String, Alias>,
    ipsets: &BTreeMap<String, IpSet>,
) -> Vec<Rule> {
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
        let ty = c.enumeration(o, &path, "type", true, &["in", "out", "group"]);
        let enable = c.boolean(o, &path, "enable", false).unwrap_or(true);
        rule.insert("enable".into(), if enable { "1" } else { "0" }.into());
        let field =
            |c: &mut Checker, k: &str| c.string(o, &path, k, false).filter(|v| !v.is_empty());
        if let Some(cm) = field(c, "comment") {
            one_line(c, &join(&path, "comment"), &cm);
            rule.insert("comment".into(), cm);
        }
        if let Some(iface) = field(c, "iface") {
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
                Some(g) if is_name(&g) => {
                    rule.insert("action".into(), g);
                }
                Some(g) => c.error(
                    join(&path, "group"),
                    format!("`{g}` is not a security group name"),
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
                check_address(c, &join(&path, k), &v, aliases, ipsets);
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
