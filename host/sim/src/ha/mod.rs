//! PVE's HA manager, modelled: the resources and rules configs (`/etc/pve/ha/resources.cfg`, `rules.cfg`), the
//! CRM's manager status (service and node states), the `/cluster/ha/...` endpoints and the CRM loop that carries
//! requests out (start, stop, migrate, relocate, recovery of a failed node's guests, maintenance and failback).
//!
//! Sources: proxmox/pve-ha-manager `src/PVE/HA/Config.pm` (`parse_sid`, `vm_is_ha_managed`,
//! `read_and_check_resources_config`), `src/PVE/API2/HA/{Resources,Rules,Status}.pm`, `src/PVE/HA/Manager.pm`
//! (`next_state_*`, `select_service_node`) and `src/PVE/HA/Rules/*.pm`.
//!
//! Node maintenance has no API endpoint in PVE 9 (apidata.js holds none: it is the CLI
//! `ha-manager crm-command node-maintenance enable|disable <node>`, a CRM command); the simulator models it
//! through its control surface instead ([`crate::Simulator::set_node_maintenance`], `PUT /_sim/nodes/<node>`).

pub(crate) mod crm;
pub(crate) mod resources;
pub(crate) mod rules;
pub(crate) mod status;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::state::State;

/// One entry of the CRM's `service_status` (`manager_status`): where the service is and what the CRM does with it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Service {
    pub node: String,
    /// `request_start`, `started`, `request_stop`, `stopped`, `migrate`, `relocate`, `fence`, `recovery`, `error`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Set once the LRM started the service (only while `started`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub running: bool,
    /// The node the service left for maintenance, to return to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_node: Option<String>,
    /// A queued CRM command (`migrate <node>`, `relocate <node>`, `stop <timeout>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<String>,
    /// When the current state was entered (the CRM delay counts from it); `None` after a reload.
    #[serde(skip)]
    pub since: Option<Instant>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The HA part of the simulated cluster: the two config files, the CRM's status and the nodes' HA state.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct HaState {
    /// `resources.cfg`: sid (`vm:100`) to its options as written (`state`, `max_restart`, `comment`, ...).
    #[serde(default)]
    pub resources: BTreeMap<String, BTreeMap<String, String>>,
    /// `rules.cfg` in file order: rule id, then its options as written (`type`, `resources`, `nodes`, ...).
    #[serde(default)]
    pub rules: Vec<(String, BTreeMap<String, String>)>,
    /// The manager status' `service_status`.
    #[serde(default)]
    pub services: BTreeMap<String, Service>,
    /// Nodes in maintenance mode.
    #[serde(default)]
    pub maintenance: BTreeSet<String>,
    /// Offline nodes whose guests were fenced (node state `fence` until they come back).
    #[serde(default)]
    pub fenced: BTreeSet<String>,
    /// CRM commands queued for services the CRM has not taken up yet.
    #[serde(default)]
    pub pending_cmds: BTreeMap<String, String>,
    /// When each offline node went offline (the fencing delay counts from it).
    #[serde(skip)]
    pub offline_since: HashMap<String, Instant>,
    /// Seconds since the epoch of the CRM's last round (`timestamp` in the manager status).
    #[serde(default)]
    pub timestamp: u64,
}

impl HaState {
    /// True while the CRM has work: some resource is configured (PVE's CRM goes idle without one).
    pub(crate) fn active(&self) -> bool {
        !self.resources.is_empty() || !self.services.is_empty()
    }
}

/// The HA type of a guest kind (`PVE::HA::Tools::get_ha_resource_type`).
pub(crate) fn sid_for(st: &State, vmid: u32) -> Option<String> {
    if st.vms.contains_key(&vmid) {
        Some(format!("vm:{vmid}"))
    } else if st.lxc.contains_key(&vmid) {
        Some(format!("ct:{vmid}"))
    } else {
        None
    }
}

/// `PVE::HA::Config::parse_sid`: `vm:100`, `ct:100`, or a bare VMID resolved by the guest's kind.
pub(crate) fn parse_sid(st: &State, sid: &str) -> Result<(String, String, String), String> {
    if !sid.is_empty() && sid.bytes().all(|b| b.is_ascii_digit()) {
        let vmid: u32 = sid.parse().unwrap_or(0);
        return match sid_for(st, vmid) {
            Some(full) => {
                let (t, n) = full.split_once(':').unwrap_or(("vm", sid));
                Ok((full.clone(), t.to_string(), n.to_string()))
            }
            None => Err(format!(
                "unable to detect SID from VMID - VM/CT {sid} does not exist"
            )),
        };
    }
    match sid.split_once(':') {
        Some((t, n))
            if !t.is_empty()
                && !n.is_empty()
                && !t.contains(char::is_whitespace)
                && !n.contains(char::is_whitespace) =>
        {
            Ok((sid.to_string(), t.to_string(), n.to_string()))
        }
        _ => Err(format!("unable to parse service id '{sid}'")),
    }
}

/// The guest a sid names, when it exists: `vm:N` a VM, `ct:N` a container.
pub(crate) fn guest_of<'a>(st: &'a State, sid: &str) -> Option<&'a crate::state::Vm> {
    let (t, n) = sid.split_once(':')?;
    let vmid: u32 = n.parse().ok()?;
    match t {
        "vm" => st.vms.get(&vmid),
        "ct" => st.lxc.get(&vmid),
        _ => None,
    }
}

/// [`guest_of`], mutable.
pub(crate) fn guest_of_mut<'a>(st: &'a mut State, sid: &str) -> Option<&'a mut crate::state::Vm> {
    let (t, n) = sid.split_once(':')?;
    let vmid: u32 = n.parse().ok()?;
    match t {
        "vm" => st.vms.get_mut(&vmid),
        "ct" => st.lxc.get_mut(&vmid),
        _ => None,
    }
}

/// The requested state of a resource, `enabled` read as `started` and `started` when unset
/// (`read_and_check_resources_config`).
pub(crate) fn requested_state(opts: &BTreeMap<String, String>) -> &str {
    match opts.get("state").map(String::as_str) {
        None | Some("enabled") => "started",
        Some(s) => s,
    }
}

/// `PVE::HA::Config::vm_is_ha_managed`: the guest has an HA resource whose state is not `ignored`.
pub(crate) fn vm_is_ha_managed(st: &State, vmid: u32) -> bool {
    ["vm", "ct"].iter().any(|t| {
        st.ha
            .resources
            .get(&format!("{t}:{vmid}"))
            .is_some_and(|opts| requested_state(opts) != "ignored")
    })
}

/// The `hastate` `/cluster/resources` shows for a guest (pve-manager `PVE::API2::Cluster` `resources`): the
/// CRM's service state, else the configured state (PVE's default `started` when none was
/// written); `None` for a guest without an HA resource.
pub(crate) fn hastate(st: &State, sid: &str) -> Option<String> {
    if let Some(s) = st.ha.services.get(sid) {
        return Some(s.state.clone());
    }
    st.ha
        .resources
        .get(sid)
        .map(|opts| requested_state(opts).to_string())
}

/// The HA state of a node (`PVE::HA::NodeStatus`): `online`, `maintenance`, `unknown` (offline, not yet fenced)
/// or `fence`.
pub(crate) fn node_state(st: &State, node: &str) -> &'static str {
    if st.offline_nodes.contains(node) {
        if st.ha.fenced.contains(node) {
            "fence"
        } else {
            "unknown"
        }
    } else if st.ha.maintenance.contains(node) {
        "maintenance"
    } else {
        "online"
    }
}

/// A SectionConfig file's text: `type: id` headers, tab-indented `key value` lines, blank lines between.
fn section_text<'a>(
    sections: impl Iterator<Item = (String, &'a BTreeMap<String, String>)>,
) -> String {
    let mut text = String::new();
    for (header, opts) in sections {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&header);
        text.push('\n');
        for (k, v) in opts {
            if k != "type" {
                text.push_str(&format!("\t{k} {v}\n"));
            }
        }
    }
    text
}

/// SHA-1 of `resources.cfg` as the simulator writes it, the `digest` of the resource endpoints.
pub(crate) fn resources_digest(ha: &HaState) -> String {
    let text = section_text(ha.resources.iter().map(|(sid, opts)| {
        let (t, n) = sid.split_once(':').unwrap_or(("vm", sid));
        (format!("{t}: {n}"), opts)
    }));
    crate::hashes::sha1_hex(text.as_bytes())
}

/// SHA-1 of `rules.cfg` as the simulator writes it, the `digest` of the rule endpoints.
pub(crate) fn rules_digest(ha: &HaState) -> String {
    let text = section_text(ha.rules.iter().map(|(id, opts)| {
        let t = opts.get("type").map(String::as_str).unwrap_or("");
        (format!("{t}: {id}"), opts)
    }));
    crate::hashes::sha1_hex(text.as_bytes())
}

/// `PVE::SectionConfig::assert_if_modified`.
pub(crate) fn assert_digest(current: &str, given: Option<&str>) -> Result<(), String> {
    match given {
        Some(d) if d != current => {
            Err("detected modified configuration - file changed by other user? Try again.".into())
        }
        _ => Ok(()),
    }
}
