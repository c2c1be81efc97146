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
use serde_json::Value;

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;

mod aliases;
mod groups;
mod ipsets;
mod options;
mod rules;

use aliases::*;
use groups::*;
use ipsets::*;
use options::*;
use rules::*;

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
