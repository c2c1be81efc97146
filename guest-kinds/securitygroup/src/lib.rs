//! The `SecurityGroup` kind: a cluster firewall security group (`/cluster/firewall/groups`) and
//! its ordered rules, which a `Firewall` manifest's `group` rules apply to a guest. A third-party
//! kind built from this repository and loaded from its `.wasm` with a grant (never embedded).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: SecurityGroup
//! metadata:
//!   name: webtier               # the PVE group name (2 to 18 characters)
//! spec:
//!   comment: web servers
//!   rules:                      # in order: PVE matches the first
//!     - {type: in, action: ACCEPT, macro: HTTPS, comment: https}
//!     - {type: in, action: ACCEPT, proto: tcp, dport: '80', source: dc/office}
//! ```
//!
//! Decisions:
//! * A named object (docs/kinds.md §7): owned by the token `proxops:<group>` in the group's
//!   `comment`. A create writes it, an update keeps it, a prune needs it, and a live group
//!   without it is an anomaly, never written to. The rules inside a marked group are owned
//!   through it (the host's gate checks the group's mark, not the rule's comment).
//! * The rules are planned by the Firewall kind's planner ([`proxops_firewall_rules`]): kept
//!   rules are only moved, with the fewest `moveto`s. PVE's group rules are `in`, `out` or
//!   `forward`, with no `iface` and no `group` rule (`verify_rule` with `rule_env` `group`).
//!   Aliases and ipsets a group's rules name are the cluster's (`dc/<name>`, `+<name>`): no kind
//!   manages them, so they are not checked here and PVE refuses a missing one at apply.
//! * A `Firewall` manifest's `{type: group, group: <name>}` rule is a reference to this kind:
//!   the host orders the group's create before the guest rule that applies it, and a missing
//!   group is a validation error of the Firewall manifest.

pub mod adopt;
pub mod desired;
pub mod plan;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{Adopted, KindInfo, ObjectKey, Resolved, ResourceKind, Validated};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::{Value, json};

pub use desired::Desired;
use desired::{FOLDER, GROUPS, KIND, NAMED};

/// Every call this kind proposes or asks the host to read (method, path template).
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, GROUPS),
    (Method::Post, GROUPS),
    (Method::Get, "/cluster/firewall/groups/{group}"),
    (Method::Post, "/cluster/firewall/groups/{group}"),
    (Method::Delete, "/cluster/firewall/groups/{group}"),
    (Method::Put, "/cluster/firewall/groups/{group}/{pos}"),
    (Method::Delete, "/cluster/firewall/groups/{group}/{pos}"),
];

/// The manifest's JSON Schema.
pub fn schema() -> Value {
    let rule =
        proxops_firewall_rules::rules::rule_schema(&proxops_firewall_rules::rules::Env::Group);
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "comment": {"type": "string", "description": "one line; proxops appends its mark"},
            "rules": {"type": "array", "items": rule}
        }
    });
    proxops_kind_sdk::manifest::manifest_schema(KIND, "A cluster firewall security group", spec)
}

/// The kind, as the SDK's [`ResourceKind`].
#[derive(Debug)]
pub struct SecurityGroupKind;

impl ResourceKind for SecurityGroupKind {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
            listings: vec![NAMED.listing()],
            ..KindInfo::new(KIND, FOLDER, schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        desired::validate(manifest).map(Validated::new)
    }

    fn identity(d: &Desired) -> ObjectKey {
        NAMED.key(&d.group)
    }

    fn observe(
        _: Option<&Desired>,
        live: Option<&Value>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Vec<Call> {
        plan::observe(live)
    }

    fn plan(
        d: Option<&Desired>,
        _: &[Resolved],
        _: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(d, observed)
    }

    fn claims(listing: &str, entry: &Value) -> bool {
        NAMED.claims(listing, entry)
    }

    fn adopt(observed: &Observation, _: &dyn Secrets) -> Result<Adopted, String> {
        adopt::adopt(observed)
    }
}

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(SecurityGroupKind);

#[cfg(test)]
mod tests;
