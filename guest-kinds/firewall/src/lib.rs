//! The `Firewall` kind: one guest's PVE firewall (options, the ordered rule list, aliases,
//! ipsets), a third-party kind built from this repository and loaded from its `.wasm` with a
//! grant (never embedded in the binary).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: Firewall
//! metadata:
//!   name: web                   # any name; by convention the VM manifest's
//! spec:
//!   vmid: 100                   # the guest
//!   type: qemu                  # or lxc (default qemu)
//!   vm: web                     # optional: the VM manifest that declares the guest
//!   options: {enable: true, policy_in: DROP, policy_out: ACCEPT, macfilter: true}
//!   aliases:
//!     - {name: office, cidr: 192.0.2.0/24}
//!   ipsets:
//!     - name: admins
//!       entries: [198.51.100.7, {cidr: 10.0.0.0/8, nomatch: true, comment: not these}]
//!   rules:                      # in order: PVE matches the first
//!     - {type: in, action: ACCEPT, macro: SSH, source: +admins, comment: ssh}
//!     - {type: in, action: ACCEPT, proto: tcp, dport: "443", source: office}
//!     - {type: group, group: webtier}     # a security group (kind SecurityGroup)
//! ```
//!
//! Decisions:
//! * Owned through its guest: the identity is `(guest:firewall, <vmid>)`, which the host reads
//!   as "writes only below `/nodes/*/<type>/<vmid>/firewall/`, and only while the guest carries
//!   `proxops` and `proxops-<vmid>`". Two manifests for one guest's firewall collide.
//! * The manifest is the whole firewall (see [`plan`]): what it leaves out is removed or reset.
//!   Removing the manifest removes nothing (the kind claims no live entry): the firewall stays
//!   as it is and goes with its guest.
//! * A `group` rule names a security group as a reference to kind `SecurityGroup`, and an alias
//!   or `+ipset` in `source`/`dest` must be one the manifest declares, so a missing one is a
//!   validation error naming the file and field. The cluster's own aliases and ipsets are
//!   written `dc/<name>` and `+dc/<name>` and are not checked (PVE refuses a missing one).
//! * `spec.vm` orders the firewall after the VM manifest that creates the guest (its vmid must
//!   match), so both can be created in one apply.

pub mod adopt;
pub mod desired;
pub mod plan;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{
    Adopted, KindInfo, Listing, ObjectKey, Reference, Resolved, ResourceKind, Validated,
};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::{Value, json};

pub use desired::Desired;

/// The identity space of a guest's firewall: guest-scoped (`guest:<sub-path>`).
pub const SPACE: &str = "guest:firewall";

/// Every call this kind proposes or asks the host to read (method, path template).
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/cluster/resources"),
    (Method::Get, "/nodes/{node}/{type}/{vmid}/firewall/options"),
    (Method::Put, "/nodes/{node}/{type}/{vmid}/firewall/options"),
    (Method::Get, "/nodes/{node}/{type}/{vmid}/firewall/rules"),
    (Method::Post, "/nodes/{node}/{type}/{vmid}/firewall/rules"),
    (
        Method::Put,
        "/nodes/{node}/{type}/{vmid}/firewall/rules/{pos}",
    ),
    (
        Method::Delete,
        "/nodes/{node}/{type}/{vmid}/firewall/rules/{pos}",
    ),
    (Method::Get, "/nodes/{node}/{type}/{vmid}/firewall/aliases"),
    (Method::Post, "/nodes/{node}/{type}/{vmid}/firewall/aliases"),
    (
        Method::Put,
        "/nodes/{node}/{type}/{vmid}/firewall/aliases/{name}",
    ),
    (
        Method::Delete,
        "/nodes/{node}/{type}/{vmid}/firewall/aliases/{name}",
    ),
    (Method::Get, "/nodes/{node}/{type}/{vmid}/firewall/ipset"),
    (Method::Post, "/nodes/{node}/{type}/{vmid}/firewall/ipset"),
    (
        Method::Get,
        "/nodes/{node}/{type}/{vmid}/firewall/ipset/{name}",
    ),
    (
        Method::Post,
        "/nodes/{node}/{type}/{vmid}/firewall/ipset/{name}",
    ),
    (
        Method::Delete,
        "/nodes/{node}/{type}/{vmid}/firewall/ipset/{name}",
    ),
    (
        Method::Put,
        "/nodes/{node}/{type}/{vmid}/firewall/ipset/{name}/{cidr}",
    ),
    (
        Method::Delete,
        "/nodes/{node}/{type}/{vmid}/firewall/ipset/{name}/{cidr}",
    ),
];

/// The manifest's JSON Schema.
pub fn schema() -> Value {
    let s = |d: &str| json!({"type": "string", "description": d});
    let b = |d: &str| json!({"type": "boolean", "description": d});
    let rule =
        proxops_firewall_rules::rules::rule_schema(&proxops_firewall_rules::rules::Env::Guest {
            aliases: Default::default(),
            ipsets: Default::default(),
        });
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["vmid"],
        "properties": {
            "vmid": {"type": "integer", "minimum": 100, "maximum": 999_999_999},
            "type": {"enum": ["qemu", "lxc"]},
            "vm": s("the VM manifest that declares the guest"),
            "options": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "enable": b("the guest's firewall on"),
                    "dhcp": b("allow DHCP"),
                    "ipfilter": b("IP filter"),
                    "macfilter": b("MAC filter"),
                    "ndp": b("NDP"),
                    "radv": b("router advertisements"),
                    "policy_in": {"enum": ["ACCEPT", "REJECT", "DROP"]},
                    "policy_out": {"enum": ["ACCEPT", "REJECT", "DROP"]},
                    "log_level_in": {"enum": desired::LOG_LEVELS},
                    "log_level_out": {"enum": desired::LOG_LEVELS}
                }
            },
            "rules": {"type": "array", "items": rule},
            "aliases": {"type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["name", "cidr"],
                "properties": {"name": s("alias name"), "cidr": s("address or network"), "comment": s("one line")}
            }},
            "ipsets": {"type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["name"],
                "properties": {
                    "name": s("ipset name"),
                    "comment": s("one line"),
                    "entries": {"type": "array"}
                }
            }}
        }
    });
    proxops_kind_sdk::manifest::manifest_schema(desired::KIND, "A guest's PVE firewall", spec)
}

/// The kind, as the SDK's [`ResourceKind`].
#[derive(Debug)]
pub struct FirewallKind;

impl ResourceKind for FirewallKind {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
            listings: vec![Listing::cluster_resources()],
            references_kinds: vec!["VM".into(), "SecurityGroup".into()],
            ..KindInfo::new(desired::KIND, desired::FOLDER, schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        desired::validate(manifest).map(Validated::new)
    }

    fn references(d: &Desired) -> Vec<Reference> {
        let mut refs = Vec::new();
        if let Some(vm) = &d.vm {
            refs.push(Reference {
                kind: "VM".into(),
                name: vm.clone(),
                path: "spec.vm".into(),
            });
        }
        for (i, r) in d.rules.iter().enumerate() {
            if r.get("type").is_some_and(|t| t == "group")
                && let Some(g) = r.get("action")
            {
                refs.push(Reference {
                    kind: "SecurityGroup".into(),
                    name: g.clone(),
                    path: format!("spec.rules[{i}].group"),
                });
            }
        }
        refs
    }

    fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        let mut out = Vec::new();
        for r in resolved.iter().filter(|r| r.reference.path == "spec.vm") {
            let vm: Value = serde_json::from_str(&r.desired).unwrap_or(Value::Null);
            let vmid = vm.get("vmid").and_then(Value::as_u64);
            if vmid != Some(d.vmid) {
                out.push(Diag::error(
                    "spec.vm",
                    format!(
                        "VM `{}` has vmid {}, but spec.vmid is {}",
                        r.reference.name,
                        vmid.map_or("?".into(), |v| v.to_string()),
                        d.vmid
                    ),
                ));
            }
        }
        out
    }

    fn identity(d: &Desired) -> ObjectKey {
        ObjectKey {
            node: None,
            space: SPACE.into(),
            key: d.vmid.to_string(),
            resource_id: Some(d.resource_id()),
        }
    }

    fn observe(
        d: Option<&Desired>,
        live: Option<&Value>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Vec<Call> {
        match d {
            Some(d) => plan::observe(Some(d), live),
            None => adopt::observe(live),
        }
    }

    fn plan(
        d: Option<&Desired>,
        resolved: &[Resolved],
        _: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(d, resolved, observed)
    }

    fn adopt(observed: &Observation, _: &dyn Secrets) -> Result<Adopted, String> {
        adopt::adopt(observed)
    }
}

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(FirewallKind);

#[cfg(test)]
mod tests;
