//! The `Access` kind: PVE's access control (`/access`): users with their group memberships,
//! ACL entries and API tokens, groups with their ACL entries, and roles. A third-party kind
//! built from this repository and never embedded: it is loaded from its `.wasm` with a grant
//! that includes the `access` capability (access control is something an operator grants on
//! purpose).
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: Access
//! metadata:
//!   name: deployer
//! spec:
//!   user:
//!     id: deploy@pve            # name@realm; the realm must exist (`pve`, `pam`, ...)
//!     comment: CI deployer
//!     groups: [ops]             # Access group manifests of this cluster, exactly these
//!     acl:
//!       - {path: /vms, roles: [PVEAuditor]}
//!     tokens:
//!       - id: ci                # deploy@pve!ci; its secret goes into the SOPS file
//!         acl:
//!           - {path: /, roles: [proxops-deploy]}   # role manifest `deploy`
//! ```
//!
//! Decisions:
//! * One PVE object per manifest (`spec.user`, `spec.group` or `spec.role`); a user carries
//!   its tokens and ACL entries, a group its ACL entries, because ACL entries and tokens have
//!   no comment of their own: they are owned through their principal (the host judges `PUT
//!   /access/acl` by the users, groups and tokens it names, and a token write as a write to its
//!   user).
//! * Ownership: users and groups carry `proxops:<id>` in their comment, tokens
//!   `proxops:<user>!<token>` in theirs (a token without it is an anomaly, never deleted);
//!   roles have no comment, so proxops's roles are `proxops-<name>` (the host writes no other).
//!   A group's id is `metadata.name`; a role's `proxops-<metadata.name>`; a user's
//!   `spec.user.id`.
//! * `groups` and `proxops-` roles in ACL entries are references to the Access manifests that
//!   declare them, so they are created first; built-in roles (`PVEAuditor`, ...) and other
//!   existing roles are granted by name.
//! * Token secrets: the host, not the kind, takes the secret from PVE's answer and stores it
//!   in the cluster's SOPS file (`pve-tokens.<key>`); the kind never sees it. It sees only the
//!   host's `secret-stored` flag on each token of `GET /access/users/{userid}`, and deletes and
//!   re-creates a marked token whose secret is not stored.

pub mod adopt;
pub mod desired;
pub mod plan;
pub mod validate;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{
    Adopted, KindInfo, ObjectKey, Reference, Resolved, ResourceKind, Validated,
};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

use crate::desired::{
    ACL, Acl, DOMAINS, Desired, GROUP, GROUPS, ROLE, ROLE_PREFIX, ROLES, USER, USERS,
};

/// The Access kind.
pub struct Access;

/// Every call the kind may propose or read.
pub fn calls() -> Vec<(Method, String)> {
    vec![
        (Method::Get, USERS.into()),
        (Method::Get, GROUPS.into()),
        (Method::Get, ROLES.into()),
        (Method::Get, ACL.into()),
        (Method::Get, DOMAINS.into()),
        (Method::Get, format!("{USERS}/{{userid}}")),
        (Method::Post, USERS.into()),
        (Method::Put, format!("{USERS}/{{userid}}")),
        (Method::Delete, format!("{USERS}/{{userid}}")),
        (
            Method::Post,
            format!("{USERS}/{{userid}}/token/{{tokenid}}"),
        ),
        (Method::Put, format!("{USERS}/{{userid}}/token/{{tokenid}}")),
        (
            Method::Delete,
            format!("{USERS}/{{userid}}/token/{{tokenid}}"),
        ),
        (Method::Post, GROUPS.into()),
        (Method::Put, format!("{GROUPS}/{{groupid}}")),
        (Method::Delete, format!("{GROUPS}/{{groupid}}")),
        (Method::Post, ROLES.into()),
        (Method::Put, format!("{ROLES}/{{roleid}}")),
        (Method::Delete, format!("{ROLES}/{{roleid}}")),
        (Method::Put, ACL.into()),
    ]
}

fn acl_refs(acl: &[Acl], path: &str, out: &mut Vec<Reference>) {
    for (i, a) in acl.iter().enumerate() {
        for r in &a.roles {
            if let Some(name) = r.strip_prefix(ROLE_PREFIX) {
                out.push(Reference {
                    kind: validate::KIND.into(),
                    name: name.into(),
                    path: format!("{path}[{i}].roles"),
                });
            }
        }
    }
}

impl ResourceKind for Access {
    type Desired = Desired;

    fn describe() -> KindInfo {
        KindInfo {
            calls: calls(),
            listings: vec![USER.listing(), GROUP.listing(), ROLE.listing()],
            references_kinds: vec![validate::KIND.into()],
            ..KindInfo::new(validate::KIND, "access", validate::schema())
        }
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Desired>, Vec<Diag>> {
        validate::validate(manifest).map(Validated::new)
    }

    fn references(d: &Desired) -> Vec<Reference> {
        let mut out = Vec::new();
        match d {
            Desired::User(u) => {
                for g in &u.groups {
                    out.push(Reference {
                        kind: validate::KIND.into(),
                        name: g.clone(),
                        path: "spec.user.groups".into(),
                    });
                }
                acl_refs(&u.acl, "spec.user.acl", &mut out);
                for (i, t) in u.tokens.iter().enumerate() {
                    acl_refs(&t.acl, &format!("spec.user.tokens[{i}].acl"), &mut out);
                }
            }
            Desired::Group(g) => acl_refs(&g.acl, "spec.group.acl", &mut out),
            Desired::Role(_) => {}
        }
        out
    }

    fn check_references(d: &Desired, resolved: &[Resolved]) -> Vec<Diag> {
        let mut out = Vec::new();
        for r in resolved {
            let t: Value = serde_json::from_str(&r.desired).unwrap_or(Value::Null);
            let want = if r.reference.path.ends_with(".groups") {
                "group"
            } else {
                "role"
            };
            if t.get(want).is_none() {
                out.push(Diag::error(
                    &r.reference.path,
                    format!(
                        "`{}` is an Access manifest that declares no {want}",
                        r.reference.name
                    ),
                ));
            }
        }
        let _ = d;
        out
    }

    fn identity(d: &Desired) -> ObjectKey {
        d.named().key(d.id())
    }

    fn observe(
        d: Option<&Desired>,
        live: Option<&Value>,
        _resolved: &[Resolved],
        _referrers: &[Resolved],
    ) -> Vec<Call> {
        plan::observe(d, live)
    }

    fn plan(
        d: Option<&Desired>,
        _resolved: &[Resolved],
        _referrers: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(d, observed)
    }

    fn claims(listing: &str, entry: &Value) -> bool {
        plan::claims(listing, entry)
    }

    fn adopt(observed: &Observation, _: &dyn Secrets) -> Result<Adopted, String> {
        adopt::adopt(observed)
    }
}

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Access);

#[cfg(test)]
mod tests;
