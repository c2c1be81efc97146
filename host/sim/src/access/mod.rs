//! Access control (`/access`): users, groups, roles, ACL entries and API tokens as `/etc/pve/user.cfg` and
//! `priv/token.cfg` hold them, the realms of `domains.cfg`, and what a token created here may do: it
//! authenticates, and each write it sends meets PVE's privilege check.
//!
//! Sources: proxmox/pve-access-control `src/PVE/API2/{User,Group,Role,ACL,Domains}.pm` (the endpoints, their checks
//! and messages), `src/PVE/AccessControl.pm` (`verify_token`, `check_user_exist`, `check_token_exist`, the
//! privilege list and the built-in roles of `create_roles`, `add_role_privs`, `normalize_path`, `check_path`,
//! `roles`: the ACL walk where a token's entries beat its user's and a user's beat its groups', `delete_user_acl`,
//! `delete_group_acl`, and `parse_user_config`, which drops ACL entries of a token or role that no longer exists),
//! `src/PVE/Auth/Plugin.pm` (`verify_username`, the realm and group grammars) and `src/PVE/RPCEnvironment.pm`
//! (`permissions`: a privilege-separated token gets its own privileges intersected with its user's, one without
//! privilege separation its user's; `raise_perm_exc`'s 403).
//!
//! Not modelled: passwords and TFA (a user's `password` is checked and dropped), realms other than `pam` and
//! `pve` (their endpoints are not served), the answers' filtering by the caller's privileges (every GET answers
//! in full), pool-derived roles, `PUT /access/acl`'s delegation without `Permissions.Modify` (the caller needs
//! `Permissions.Modify` on the path), and `regenerate` on a token update (PVE 9.1.3's schema has none). The
//! simulator's own token (`SimConfig::token`) is root's and listed nowhere; only tokens created through the API
//! are held to privileges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{ApiError, ApiResult, Reply};
use crate::sim::Sim;
use crate::state::State;

mod objects;
mod privileges;
mod users;

pub(crate) use objects::*;
pub(crate) use privileges::{authenticate, authorize};
pub(crate) use users::*;

/// PVE's privileges (`AccessControl.pm`'s `$privgroups` and `Permissions.Modify`), by category and tier:
/// `(category, root, admin, user, audit)`.
type Tiers = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const PRIVGROUPS: &[Tiers] = &[
    (
        "VM",
        &[],
        &[
            "VM.Config.Disk",
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.HWType",
            "VM.Config.Options",
            "VM.Allocate",
            "VM.Clone",
            "VM.GuestAgent.Unrestricted",
            "VM.Migrate",
            "VM.Replicate",
            "VM.Snapshot",
            "VM.Snapshot.Rollback",
        ],
        &[
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.Backup",
            "VM.GuestAgent.FileRead",
            "VM.GuestAgent.FileSystemMgmt",
            "VM.GuestAgent.FileWrite",
            "VM.PowerMgmt",
        ],
        &["VM.Audit", "VM.GuestAgent.Audit"],
    ),
    (
        "Sys",
        &[
            "Sys.PowerMgmt",
            "Sys.Modify",
            "Sys.Incoming",
            "Sys.AccessNetwork",
        ],
        &["Sys.Console", "Sys.Syslog"],
        &[],
        &["Sys.Audit"],
    ),
    (
        "Datastore",
        &[],
        &["Datastore.Allocate", "Datastore.AllocateTemplate"],
        &["Datastore.AllocateSpace"],
        &["Datastore.Audit"],
    ),
    (
        "SDN",
        &[],
        &["SDN.Allocate", "SDN.Audit"],
        &["SDN.Use"],
        &["SDN.Audit"],
    ),
    (
        "User",
        &["Realm.Allocate"],
        &["User.Modify", "Group.Allocate", "Realm.AllocateUser"],
        &[],
        &[],
    ),
    (
        "Pool",
        &[],
        &["Pool.Allocate"],
        &["Pool.Audit"],
        &["Pool.Audit"],
    ),
    (
        "Mapping",
        &[],
        &["Mapping.Modify"],
        &["Mapping.Use"],
        &["Mapping.Audit"],
    ),
];

/// True for a privilege PVE knows (`verify_privname`).
pub(crate) fn valid_priv(p: &str) -> bool {
    p == "Permissions.Modify"
        || PRIVGROUPS.iter().any(|(_, r, a, u, au)| {
            r.contains(&p) || a.contains(&p) || u.contains(&p) || au.contains(&p)
        })
}

/// Every privilege PVE knows, sorted.
fn all_privs() -> BTreeSet<String> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    out.insert("Permissions.Modify".into());
    for (_, r, a, u, au) in PRIVGROUPS {
        for p in r.iter().chain(a.iter()).chain(u.iter()).chain(au.iter()) {
            out.insert((*p).to_string());
        }
    }
    out
}

/// The built-in roles (`create_roles`): `NoAccess`, `Administrator`, `PVEAdmin`, `PVEAuditor`, `PVE<cat>Admin`,
/// `PVE<cat>User`, `PVETemplateUser`.
fn special_roles() -> BTreeMap<String, BTreeSet<String>> {
    let mut roles: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    roles.insert("NoAccess".into(), BTreeSet::new());
    roles.insert("Administrator".into(), all_privs());
    for (cat, _, admin, user, audit) in PRIVGROUPS {
        for p in admin.iter().chain(user.iter()).chain(audit.iter()) {
            roles
                .entry(format!("PVE{cat}Admin"))
                .or_default()
                .insert((*p).into());
            roles
                .entry("PVEAdmin".into())
                .or_default()
                .insert((*p).into());
        }
        if !user.is_empty() {
            for p in user.iter().chain(audit.iter()) {
                roles
                    .entry(format!("PVE{cat}User"))
                    .or_default()
                    .insert((*p).into());
            }
        }
        for p in *audit {
            roles
                .entry("PVEAuditor".into())
                .or_default()
                .insert((*p).into());
        }
    }
    if let Some(admin) = roles.get_mut("PVEAdmin") {
        admin.remove("Mapping.Modify");
    }
    roles.insert(
        "PVETemplateUser".into(),
        ["VM.Clone", "VM.Audit"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    roles
}

/// True for a built-in role, which cannot be changed or deleted (`role_is_special`).
fn is_special(role: &str) -> bool {
    special_roles().contains_key(role)
}

/// One user of `user.cfg`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct User {
    pub enable: bool,
    /// Seconds since the epoch; 0 never.
    #[serde(default)]
    pub expire: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firstname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lastname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tokens: BTreeMap<String, Token>,
}

impl Default for User {
    fn default() -> User {
        User {
            enable: true,
            expire: 0,
            firstname: None,
            lastname: None,
            email: None,
            comment: None,
            keys: None,
            tokens: BTreeMap::new(),
        }
    }
}

/// One API token of a user.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Token {
    pub privsep: bool,
    #[serde(default)]
    pub expire: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// One group with its members.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Group {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub users: BTreeSet<String>,
}

/// One ACL entry: `roleid` granted to `ugid` (a user, a group or a full token id, by `kind`) on `path`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AclEntry {
    pub path: String,
    /// `user`, `group` or `token`.
    pub kind: String,
    pub ugid: String,
    pub roleid: String,
    pub propagate: bool,
}

/// The access-control state; absent from the state file while empty.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Access {
    /// Users other than `root@pam` (always there, as `userconfig_force_defaults` adds it) and root once changed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<String, User>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, Group>,
    /// Roles created through the API (the built-in ones are computed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, BTreeSet<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<AclEntry>,
    /// `priv/token.cfg`: each token's secret by full token id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
}

impl Access {
    pub(crate) fn is_empty(&self) -> bool {
        *self == Access::default()
    }

    /// The user, `root@pam` included.
    fn user(&self, id: &str) -> Option<User> {
        match self.users.get(id) {
            Some(u) => Some(u.clone()),
            None if id == "root@pam" => Some(User::default()),
            None => None,
        }
    }

    /// The user to change, `root@pam` stored on its first change.
    fn user_mut(&mut self, id: &str) -> Option<&mut User> {
        if id == "root@pam" && !self.users.contains_key(id) {
            self.users.insert(id.to_string(), User::default());
        }
        self.users.get_mut(id)
    }

    fn role(&self, id: &str) -> Option<BTreeSet<String>> {
        special_roles()
            .remove(id)
            .or_else(|| self.roles.get(id).cloned())
    }

    /// Every user id, `root@pam` included, sorted.
    fn user_ids(&self) -> BTreeSet<String> {
        let mut ids: BTreeSet<String> = self.users.keys().cloned().collect();
        ids.insert("root@pam".into());
        ids
    }
}

/// The realms of `domains.cfg` on a fresh installation.
const REALMS: &[(&str, &str, &str)] = &[
    ("pam", "pam", "Linux PAM standard authentication"),
    ("pve", "pve", "Proxmox VE authentication server"),
];

fn realm_exists(realm: &str) -> bool {
    REALMS.iter().any(|(r, _, _)| *r == realm)
}

/// `Auth::Plugin::verify_username`: 3 to 64 characters, `<user>@<realm>`; returns `(user, realm)`.
fn verify_username(id: &str) -> Result<(&str, &str), String> {
    let len = id.chars().count();
    if len < 3 {
        return Err(format!("user name '{id}' is too short\n"));
    }
    if len > 64 {
        return Err(format!("user name '{id}' is too long ({len} > 64)\n"));
    }
    let bad = || format!("value '{id}' does not look like a valid user name\n");
    let (user, realm) = id.rsplit_once('@').ok_or_else(bad)?;
    let user_ok = !user.is_empty()
        && !user
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == '/');
    if !user_ok || !realm_ok(realm) {
        return Err(bad());
    }
    Ok((user, realm))
}

/// `$realm_regex`: a letter, then at least one of letters, digits, `.`, `-`, `_`.
fn realm_ok(realm: &str) -> bool {
    let mut chars = realm.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && realm.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// `$groupname_regex`, also the role name grammar.
fn name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// `$token_subid_regex`: a letter, then at least one of letters, digits, `.`, `-`, `_`.
fn token_subid_ok(s: &str) -> bool {
    realm_ok(s)
}

/// `split_tokenid`: `(user, subid)` of `user@realm!subid`.
pub(crate) fn split_tokenid(full: &str) -> Option<(&str, &str)> {
    let (user, sub) = full.rsplit_once('!')?;
    (verify_username(user).is_ok() && token_subid_ok(sub)).then_some((user, sub))
}

/// Formats of `/access` parameters, for the schema check (`Err` is the validator's die text).
pub(crate) fn check_format(name: &str, value: &str) -> Option<Result<(), String>> {
    let r = match name {
        "pve-userid" => verify_username(value).map(|_| ()),
        "pve-groupid" => {
            if name_ok(value) {
                Ok(())
            } else {
                Err(format!(
                    "group name '{value}' contains invalid characters\n"
                ))
            }
        }
        "pve-roleid" => {
            if name_ok(value) {
                Ok(())
            } else {
                Err(format!("role name '{value}' contains invalid characters\n"))
            }
        }
        "pve-priv" => {
            if valid_priv(value) {
                Ok(())
            } else {
                Err(format!("invalid privilege '{value}'\n"))
            }
        }
        "pve-tokenid" => {
            if split_tokenid(value).is_some() {
                Ok(())
            } else {
                Err(format!(
                    "value '{value}' does not look like a valid token ID\n"
                ))
            }
        }
        "pve-realm" => {
            if realm_ok(value) {
                Ok(())
            } else {
                Err("value does not look like a valid realm\n".to_string())
            }
        }
        "email-opt" => {
            // pve-common `pve_verify_email`, empty allowed.
            let email = r"[\w\+\-\~]+(\.[\w\+\-\~]+)*@[a-zA-Z0-9\-]+(\.[a-zA-Z0-9\-]+)*";
            if value.is_empty() || crate::grammar::matches_pattern(email, value) {
                Ok(())
            } else {
                Err("value does not look like a valid email address\n".to_string())
            }
        }
        _ => return None,
    };
    Some(r)
}

fn now() -> u64 {
    crate::state::now()
}

/// `lock_user_config`'s `"<what> failed: <error>"`.
fn failed(what: &str) -> impl Fn(String) -> ApiError + '_ {
    move |e| ApiError::die(format!("{what} failed: {e}"))
}

/// The comment as PVE stores it: a false Perl string is not written.
fn perl_true(s: &str) -> bool {
    !s.is_empty() && s != "0"
}

fn persist(sim: &Arc<Sim>, mut st: std::sync::RwLockWriteGuard<'_, State>) -> ApiResult {
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}
