//! `validate`: a Firewall manifest into its [`Desired`] state, every value in the form PVE
//! keeps it (options as `key: value`, rules as the fields PVE's config writer keeps, aliases by
//! lower-cased name, ipset entries by cidr), so that plan compares like with like.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, Diag, index, join};
use proxops_kind_sdk::manifest::envelope;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use proxops_firewall_rules::rules::{Env, validate_rules};
pub use proxops_firewall_rules::rules::{LOG_LEVELS, Rule, is_address, is_name, one_line};

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
    let env = Env::Guest {
        aliases: aliases.keys().cloned().collect(),
        ipsets: ipsets.keys().cloned().collect(),
    };
    let rules = validate_rules(&mut c, spec, &env);
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
