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
use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;

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

// ---- authentication and privileges ----

/// Why a token did not authenticate (pveproxy answers 401 with the reason).
pub(crate) fn authenticate(st: &State, full: &str, secret: &str) -> Result<(), &'static str> {
    let Some((userid, sub)) = split_tokenid(full) else {
        return Err("authentication failure");
    };
    let a = &st.access;
    let Some(user) = a.user(userid) else {
        return Err("authentication failure");
    };
    let now = now();
    if !user.enable || (user.expire != 0 && user.expire < now) {
        return Err("authentication failure");
    }
    let Some(token) = user.tokens.get(sub) else {
        return Err("authentication failure");
    };
    if token.expire != 0 && token.expire < now {
        return Err("authentication failure");
    }
    match a.secrets.get(full) {
        Some(v) if v == secret => Ok(()),
        _ => Err("authentication failure"),
    }
}

/// `AccessControl::roles` of a user, group member or token id on `path`, without pools: each level's token entries,
/// else user entries, else group entries replace what the levels above gave, where they propagate or at the path
/// itself; `NoAccess` wins.
fn roles(a: &Access, who: &str, path: &str) -> BTreeMap<String, bool> {
    if who == "root@pam" {
        return BTreeMap::from([("Administrator".to_string(), true)]);
    }
    let is_token = who.contains('!');
    let user_groups: BTreeSet<&str> = a
        .groups
        .iter()
        .filter(|(_, g)| g.users.contains(who))
        .map(|(id, _)| id.as_str())
        .collect();
    let levels: Vec<String> = if path == "/" {
        vec!["/".into()]
    } else {
        let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let mut out = vec!["/".to_string()];
        for i in 1..=parts.len() {
            out.push(format!("/{}", parts[..i].join("/")));
        }
        out
    };
    let mut roles: BTreeMap<String, bool> = BTreeMap::new();
    let last = levels.len() - 1;
    for (i, level) in levels.iter().enumerate() {
        let fin = i == last;
        let pick = |kind: &str, ids: &dyn Fn(&str) -> bool| -> BTreeMap<String, bool> {
            a.acl
                .iter()
                .filter(|e| e.path == *level && e.kind == kind && ids(&e.ugid))
                .filter(|e| fin || e.propagate)
                .map(|e| (e.roleid.clone(), e.propagate))
                .collect()
        };
        if is_token {
            let new = pick("token", &|u| u == who);
            if !new.is_empty() {
                roles = new;
                continue;
            }
            continue;
        }
        let new = pick("user", &|u| u == who);
        if !new.is_empty() {
            roles = new;
            continue;
        }
        let new = pick("group", &|g| user_groups.contains(g));
        if !new.is_empty() {
            roles = new;
        }
    }
    if let Some(p) = roles.get("NoAccess") {
        return BTreeMap::from([("NoAccess".to_string(), *p)]);
    }
    roles
}

/// `RPCEnvironment::permissions`: the privileges `who` holds on `path` (root everything; a token without privilege
/// separation its user's; one with, its own intersected with its user's).
fn permissions(a: &Access, who: &str, path: &str) -> BTreeSet<String> {
    if who == "root@pam" {
        return all_privs();
    }
    let user_privs = |id: &str| -> BTreeSet<String> {
        roles(a, id, path)
            .keys()
            .filter_map(|r| a.role(r))
            .flatten()
            .collect()
    };
    if let Some((userid, sub)) = split_tokenid(who) {
        let Some(token) = a.user(userid).and_then(|u| u.tokens.get(sub).cloned()) else {
            return BTreeSet::new();
        };
        let of_user = permissions(a, userid, path);
        if !token.privsep {
            return of_user;
        }
        return user_privs(who)
            .into_iter()
            .filter(|p| of_user.contains(p))
            .collect();
    }
    user_privs(who)
}

/// One privilege check: any of `privs` on `path`.
struct Need {
    path: String,
    privs: &'static [&'static str],
}

fn need(path: impl Into<String>, privs: &'static [&'static str]) -> Need {
    Need {
        path: path.into(),
        privs,
    }
}

/// The privileges a write needs, by PVE's `permissions` of each method (simplified where PVE checks per
/// parameter: a guest config write needs one of the `VM.Config.*` privileges). A write the table does not know
/// needs `Sys.Modify` on `/`, so nothing is allowed by omission.
fn needs(method: &str, template: &str, req: &Req) -> Vec<Need> {
    let vms = || format!("/vms/{}", req.get("vmid").unwrap_or(""));
    let storage = || format!("/storage/{}", req.get("storage").unwrap_or(""));
    const CONFIG: &[&str] = &[
        "VM.Config.Disk",
        "VM.Config.CPU",
        "VM.Config.Memory",
        "VM.Config.Network",
        "VM.Config.HWType",
        "VM.Config.Options",
        "VM.Config.CDROM",
        "VM.Config.Cloudinit",
    ];
    let t = template;
    match (method, t) {
        ("POST", "/nodes/{node}/qemu") | ("POST", "/nodes/{node}/lxc") => {
            vec![need(vms(), &["VM.Allocate"])]
        }
        ("DELETE", "/nodes/{node}/qemu/{vmid}") | ("DELETE", "/nodes/{node}/lxc/{vmid}") => {
            vec![need(vms(), &["VM.Allocate"])]
        }
        ("POST", "/nodes/{node}/qemu/{vmid}/template") => vec![need(vms(), &["VM.Allocate"])],
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => vec![need(vms(), &["VM.Clone"])],
        (_, "/nodes/{node}/qemu/{vmid}/resize") | (_, "/nodes/{node}/lxc/{vmid}/resize") => {
            vec![need(vms(), &["VM.Config.Disk"])]
        }
        (_, "/nodes/{node}/qemu/{vmid}/config")
        | (_, "/nodes/{node}/lxc/{vmid}/config")
        | (_, "/nodes/{node}/qemu/{vmid}/unlink") => vec![need(vms(), CONFIG)],
        (_, "/nodes/{node}/qemu/{vmid}/agent/ping") => vec![need(vms(), &["VM.GuestAgent.Audit"])],
        (_, "/nodes/{node}/qemu/{vmid}/migrate") | (_, "/nodes/{node}/lxc/{vmid}/migrate") => {
            vec![need(vms(), &["VM.Migrate"])]
        }
        _ if t.starts_with("/nodes/{node}/qemu/{vmid}/status/")
            || t.starts_with("/nodes/{node}/lxc/{vmid}/status/") =>
        {
            vec![need(vms(), &["VM.PowerMgmt"])]
        }
        ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}") => {
            vec![need(storage(), &["Datastore.Allocate"])]
        }
        ("POST", "/nodes/{node}/storage/{storage}/download-url") => vec![
            need(storage(), &["Datastore.AllocateTemplate"]),
            need(format!("/nodes/{}", req.node()), &["Sys.AccessNetwork"]),
        ],
        (_, "/pools") | (_, "/pools/{poolid}") => vec![need(
            format!("/pool/{}", req.get("poolid").unwrap_or("")),
            &["Pool.Allocate"],
        )],
        _ if t.starts_with("/cluster/ha/") => vec![need("/", &["Sys.Console"])],
        _ if t.starts_with("/cluster/mapping/") => vec![need("/mapping", &["Mapping.Modify"])],
        ("POST", "/access/users") | ("DELETE", "/access/users/{userid}") => {
            let realm = req
                .get("userid")
                .and_then(|u| u.rsplit_once('@'))
                .map_or("", |(_, r)| r);
            vec![
                need(format!("/access/realm/{realm}"), &["Realm.AllocateUser"]),
                need("/access/groups", &["User.Modify"]),
            ]
        }
        ("PUT", "/access/users/{userid}") | (_, "/access/users/{userid}/token/{tokenid}") => {
            vec![need("/access/groups", &["User.Modify"])]
        }
        (_, "/access/groups") | (_, "/access/groups/{groupid}") => {
            vec![need("/access/groups", &["Group.Allocate"])]
        }
        (_, "/access/roles") | (_, "/access/roles/{roleid}") => {
            vec![need("/access", &["Sys.Modify"])]
        }
        ("PUT", "/access/acl") => {
            let path = normalize_path(req.get("path").unwrap_or("")).unwrap_or_default();
            vec![need(path, &["Permissions.Modify"])]
        }
        _ => vec![need("/", &["Sys.Modify"])],
    }
}

/// Checks that `who` may send this request: GETs answer everyone; a write needs its privileges, else PVE's 403
/// `Permission check failed (<path>, <privs>)`.
pub(crate) fn authorize(
    sim: &Sim,
    who: &str,
    method: &str,
    template: &str,
    req: &Req,
) -> Result<(), ApiError> {
    if who == sim.token_id || method == "GET" {
        return Ok(());
    }
    let st = sim.read();
    for n in needs(method, template, req) {
        let held = permissions(&st.access, who, &n.path);
        if !n.privs.iter().any(|p| held.contains(*p)) {
            return Err(ApiError::Status {
                code: 403,
                message: format!(
                    "Permission check failed ({}, {})\n",
                    n.path,
                    n.privs.join("|")
                ),
            });
        }
    }
    Ok(())
}

// ---- users ----

/// `extract_user_data` for a listing or read.
fn user_json(u: &User) -> serde_json::Map<String, Value> {
    let mut e = serde_json::Map::new();
    e.insert("enable".into(), json!(u8::from(u.enable)));
    e.insert("expire".into(), json!(u.expire));
    for (k, v) in [
        ("firstname", &u.firstname),
        ("lastname", &u.lastname),
        ("email", &u.email),
        ("comment", &u.comment),
        ("keys", &u.keys),
    ] {
        if let Some(v) = v {
            e.insert(k.into(), json!(v));
        }
    }
    e
}

fn token_json(t: &Token) -> Value {
    let mut e = json!({"privsep": u8::from(t.privsep), "expire": t.expire});
    if let Some(c) = &t.comment {
        e["comment"] = json!(c);
    }
    e
}

fn groups_of(a: &Access, userid: &str) -> Vec<String> {
    a.groups
        .iter()
        .filter(|(_, g)| g.users.contains(userid))
        .map(|(id, _)| id.clone())
        .collect()
}

/// `GET /access/users`: every user sorted, with `realm-type`; `full` adds `groups` and `tokens`; `enabled` filters.
pub(crate) fn users_list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let a = &st.access;
    let full = req.flag("full");
    let mut out = Vec::new();
    for id in a.user_ids() {
        let Some(u) = a.user(&id) else { continue };
        if let Some(want) = req.get("enabled")
            && (want == "1") != u.enable
        {
            continue;
        }
        let mut e = user_json(&u);
        if full {
            let groups = groups_of(a, &id);
            if !groups.is_empty() {
                e.insert("groups".into(), json!(groups.join(",")));
            }
            let tokens: Vec<Value> = u
                .tokens
                .iter()
                .map(|(tid, t)| {
                    let mut v = token_json(t);
                    v["tokenid"] = json!(tid);
                    v
                })
                .collect();
            e.insert("tokens".into(), json!(tokens));
        }
        if let Some((_, realm)) = id.rsplit_once('@')
            && let Some((_, ty, _)) = REALMS.iter().find(|(r, _, _)| *r == realm)
        {
            e.insert("realm-type".into(), json!(ty));
        }
        e.insert("userid".into(), json!(id));
        out.push(Value::Object(e));
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /access/users/{userid}`: the user with `groups` and `tokens` (by id).
pub(crate) fn user_read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("userid").unwrap_or("");
    let Some(u) = st.access.user(id) else {
        return Err(ApiError::die(format!("no such user ('{id}')")));
    };
    let mut e = user_json(&u);
    e.insert("groups".into(), json!(groups_of(&st.access, id)));
    let tokens: serde_json::Map<String, Value> = u
        .tokens
        .iter()
        .map(|(tid, t)| (tid.clone(), token_json(t)))
        .collect();
    e.insert("tokens".into(), Value::Object(tokens));
    Ok(Reply::data(Value::Object(e)))
}

/// The `groups` parameter's groups, each existing (`no such group '<g>'`).
fn requested_groups(a: &Access, req: &Req) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for g in crate::formats::split_list(req.get("groups").unwrap_or("")) {
        if !a.groups.contains_key(g) {
            return Err(format!("no such group '{g}'\n"));
        }
        out.push(g.to_string());
    }
    Ok(out)
}

/// `POST /access/users`.
pub(crate) fn user_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let fail = failed("create user");
    let (_, realm) = verify_username(&id).map_err(&fail)?;
    let mut st = sim.write();
    if st.access.user(&id).is_some() {
        return Err(fail(format!("user '{id}' already exists\n")));
    }
    if req.get("password").is_some() && !realm_exists(realm) {
        return Err(fail(format!("auth domain '{realm}' does not exist\n")));
    }
    let groups = requested_groups(&st.access, req).map_err(&fail)?;
    let keep = |k: &str| req.get(k).filter(|v| perl_true(v)).map(str::to_string);
    let user = User {
        enable: req.get("enable").is_none_or(|v| v == "1"),
        expire: req.get("expire").and_then(|v| v.parse().ok()).unwrap_or(0),
        firstname: keep("firstname"),
        lastname: keep("lastname"),
        email: keep("email"),
        comment: keep("comment"),
        keys: keep("keys"),
        tokens: BTreeMap::new(),
    };
    let a = &mut st.access;
    a.users.insert(id.clone(), user);
    for g in groups {
        if let Some(g) = a.groups.get_mut(&g) {
            g.users.insert(id.clone());
        }
    }
    persist(sim, st)
}

/// `PUT /access/users/{userid}`: the given fields; `groups` replaces the memberships unless `append`.
pub(crate) fn user_update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let fail = failed("update user");
    let mut st = sim.write();
    if st.access.user(&id).is_none() {
        return Err(fail(format!("no such user ('{id}')\n")));
    }
    let groups = requested_groups(&st.access, req).map_err(&fail)?;
    let a = &mut st.access;
    if req.get("groups").is_some() && !req.flag("append") {
        for g in a.groups.values_mut() {
            g.users.remove(&id);
        }
    }
    for g in groups {
        if let Some(g) = a.groups.get_mut(&g) {
            g.users.insert(id.clone());
        }
    }
    let Some(u) = a.user_mut(&id) else {
        return Err(fail(format!("no such user ('{id}')\n")));
    };
    if let Some(v) = req.get("enable") {
        u.enable = v == "1";
    }
    if let Some(v) = req.get("expire") {
        u.expire = v.parse().unwrap_or(0);
    }
    for (k, slot) in [
        ("firstname", &mut u.firstname),
        ("lastname", &mut u.lastname),
        ("email", &mut u.email),
        ("comment", &mut u.comment),
        ("keys", &mut u.keys),
    ] {
        if let Some(v) = req.get(k) {
            *slot = Some(v.to_string());
        }
    }
    persist(sim, st)
}

/// `DELETE /access/users/{userid}`: the user, its memberships, its ACL entries and its tokens' (which
/// `parse_user_config` drops once the tokens are gone).
pub(crate) fn user_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let mut st = sim.write();
    let a = &mut st.access;
    if a.user(&id).is_none() {
        // PVE disables the user first (`$usercfg->{users}->{$userid}->{enable} = 0`), creating a stub it then
        // deletes: deleting a user that does not exist succeeds.
        return Ok(Reply::data(Value::Null));
    }
    a.users.remove(&id);
    for g in a.groups.values_mut() {
        g.users.remove(&id);
    }
    let token_prefix = format!("{id}!");
    a.acl.retain(|e| {
        !(e.kind == "user" && e.ugid == id
            || e.kind == "token" && e.ugid.starts_with(&token_prefix))
    });
    a.secrets.retain(|k, _| !k.starts_with(&token_prefix));
    persist(sim, st)
}

// ---- tokens ----

/// `GET /access/users/{userid}/token`.
pub(crate) fn token_list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("userid").unwrap_or("");
    let Some(u) = st.access.user(id) else {
        return Err(ApiError::die(format!("no such user ('{id}')")));
    };
    let out: Vec<Value> = u
        .tokens
        .iter()
        .map(|(tid, t)| {
            let mut v = token_json(t);
            v["tokenid"] = json!(tid);
            v
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /access/users/{userid}/token/{tokenid}`: the token's info, never its value.
pub(crate) fn token_read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("userid").unwrap_or("");
    let tid = req.get("tokenid").unwrap_or("");
    let Some(u) = st.access.user(id) else {
        return Err(ApiError::die(format!("no such user ('{id}')")));
    };
    match u.tokens.get(tid) {
        Some(t) => Ok(Reply::data(token_json(t))),
        None => Err(ApiError::die(format!(
            "no such token '{tid}' for user '{id}'"
        ))),
    }
}

/// `POST /access/users/{userid}/token/{tokenid}`: the new token; its `value` is in this answer and nowhere else.
pub(crate) fn token_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let tid = req.get("tokenid").unwrap_or("").to_string();
    let mut st = sim.write();
    let Some(u) = st.access.user(&id) else {
        return Err(ApiError::die(format!("no such user ('{id}')")));
    };
    if u.tokens.contains_key(&tid) {
        return Err(ApiError::param("tokenid", "Token already exists."));
    }
    let token = Token {
        privsep: req.get("privsep").is_none_or(|v| v == "1"),
        expire: req.get("expire").and_then(|v| v.parse().ok()).unwrap_or(0),
        comment: req
            .get("comment")
            .filter(|c| perl_true(c))
            .map(str::to_string),
    };
    let full = format!("{id}!{tid}");
    let value = crate::generate_secret();
    let info = token_json(&token);
    let a = &mut st.access;
    if let Some(u) = a.user_mut(&id) {
        u.tokens.insert(tid, token);
    }
    a.secrets.insert(full.clone(), value.clone());
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(
        json!({"info": info, "value": value, "full-tokenid": full}),
    ))
}

/// `PUT /access/users/{userid}/token/{tokenid}`: `privsep`, `expire`, `comment` (an empty one removes it),
/// `delete=comment`; answers the token's info.
pub(crate) fn token_update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let tid = req.get("tokenid").unwrap_or("").to_string();
    let mut st = sim.write();
    let exists = st.access.user(&id).map(|u| u.tokens.contains_key(&tid));
    match exists {
        None => return Err(ApiError::die(format!("no such user ('{id}')"))),
        Some(false) => {
            return Err(ApiError::die(format!(
                "no such token '{tid}' for user '{id}'"
            )));
        }
        Some(true) => {}
    }
    let deletes: Vec<String> = crate::formats::split_list(req.get("delete").unwrap_or(""))
        .into_iter()
        .map(str::to_string)
        .collect();
    if let Some(bad) = deletes.iter().find(|k| *k != "comment") {
        return Err(ApiError::param("delete", format!("unknown option '{bad}'")));
    }
    let Some(token) = st.access.user_mut(&id).and_then(|u| u.tokens.get_mut(&tid)) else {
        return Err(ApiError::die(format!(
            "no such token '{tid}' for user '{id}'"
        )));
    };
    if let Some(v) = req.get("privsep") {
        token.privsep = v == "1";
    }
    if let Some(v) = req.get("expire") {
        token.expire = v.parse().unwrap_or(0);
    }
    if let Some(c) = req.get("comment") {
        token.comment = (!c.is_empty()).then(|| c.to_string());
    }
    if !deletes.is_empty() {
        token.comment = None;
    }
    let info = token_json(token);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(info))
}

/// `DELETE /access/users/{userid}/token/{tokenid}`: the token, its secret and (as `parse_user_config` drops them)
/// its ACL entries.
pub(crate) fn token_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("userid").unwrap_or("").to_string();
    let tid = req.get("tokenid").unwrap_or("").to_string();
    let mut st = sim.write();
    let exists = st.access.user(&id).map(|u| u.tokens.contains_key(&tid));
    match exists {
        None => return Err(ApiError::die(format!("no such user ('{id}')"))),
        Some(false) => {
            return Err(ApiError::die(format!(
                "no such token '{tid}' for user '{id}'"
            )));
        }
        Some(true) => {}
    }
    let full = format!("{id}!{tid}");
    let a = &mut st.access;
    if let Some(u) = a.user_mut(&id) {
        u.tokens.remove(&tid);
    }
    a.secrets.remove(&full);
    a.acl.retain(|e| !(e.kind == "token" && e.ugid == full));
    persist(sim, st)
}

// ---- groups ----

/// `GET /access/groups`: `groupid`, `comment`, `users` (comma-separated, sorted).
pub(crate) fn groups_list(sim: &Arc<Sim>, _req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .access
        .groups
        .iter()
        .map(|(id, g)| {
            let mut e = json!({"groupid": id});
            if let Some(c) = &g.comment {
                e["comment"] = json!(c);
            }
            e["users"] = json!(g.users.iter().cloned().collect::<Vec<_>>().join(","));
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /access/groups/{groupid}`: `members` and `comment`.
pub(crate) fn group_read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("groupid").unwrap_or("");
    let Some(g) = st.access.groups.get(id) else {
        return Err(ApiError::die(format!("group '{id}' does not exist")));
    };
    let mut e = json!({"members": g.users.iter().collect::<Vec<_>>()});
    if let Some(c) = &g.comment {
        e["comment"] = json!(c);
    }
    Ok(Reply::data(e))
}

/// `POST /access/groups`.
pub(crate) fn group_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("groupid").unwrap_or("").to_string();
    let mut st = sim.write();
    if st.access.groups.contains_key(&id) {
        return Err(failed("create group")(format!(
            "group '{id}' already exists\n"
        )));
    }
    let comment = req
        .get("comment")
        .filter(|c| perl_true(c))
        .map(str::to_string);
    st.access.groups.insert(
        id,
        Group {
            comment,
            users: BTreeSet::new(),
        },
    );
    persist(sim, st)
}

/// `PUT /access/groups/{groupid}`: the comment.
pub(crate) fn group_update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("groupid").unwrap_or("").to_string();
    let mut st = sim.write();
    let Some(g) = st.access.groups.get_mut(&id) else {
        return Err(failed("update group")(format!(
            "group '{id}' does not exist\n"
        )));
    };
    if let Some(c) = req.get("comment") {
        g.comment = Some(c.to_string());
    }
    persist(sim, st)
}

/// `DELETE /access/groups/{groupid}`: the group and its ACL entries.
pub(crate) fn group_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("groupid").unwrap_or("").to_string();
    let mut st = sim.write();
    if st.access.groups.remove(&id).is_none() {
        return Err(failed("delete group")(format!(
            "group '{id}' does not exist\n"
        )));
    }
    st.access
        .acl
        .retain(|e| !(e.kind == "group" && e.ugid == id));
    persist(sim, st)
}

// ---- roles ----

/// `GET /access/roles`: every role with its privileges (comma-separated, sorted) and `special`.
pub(crate) fn roles_list(sim: &Arc<Sim>, _req: &Req) -> ApiResult {
    let st = sim.read();
    let mut all = special_roles();
    for (id, privs) in &st.access.roles {
        all.insert(id.clone(), privs.clone());
    }
    let out: Vec<Value> = all
        .iter()
        .map(|(id, privs)| {
            json!({
                "roleid": id,
                "privs": privs.iter().cloned().collect::<Vec<_>>().join(","),
                "special": u8::from(is_special(id)),
            })
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /access/roles/{roleid}`: `{priv: 1, ...}`.
pub(crate) fn role_read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("roleid").unwrap_or("");
    let Some(privs) = st.access.role(id) else {
        return Err(ApiError::die(format!("role '{id}' does not exist")));
    };
    let map: serde_json::Map<String, Value> = privs.into_iter().map(|p| (p, json!(1))).collect();
    Ok(Reply::data(Value::Object(map)))
}

/// The `privs` parameter's privileges (`add_role_privs`: `invalid privilege '<p>'`).
fn requested_privs(req: &Req) -> Result<BTreeSet<String>, String> {
    let mut out = BTreeSet::new();
    for p in crate::formats::split_list(req.get("privs").unwrap_or("")) {
        if !valid_priv(p) {
            return Err(format!("invalid privilege '{p}'\n"));
        }
        out.insert(p.to_string());
    }
    Ok(out)
}

/// `POST /access/roles`: no id in PVE's namespace.
pub(crate) fn role_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("roleid").unwrap_or("").to_string();
    if id.to_ascii_lowercase().starts_with("pve") {
        return Err(ApiError::param(
            "roleid",
            "cannot use role ID starting with the (case-insensitive) 'PVE' namespace",
        ));
    }
    let fail = failed("create role");
    let mut st = sim.write();
    if st.access.role(&id).is_some() {
        return Err(fail(format!("role '{id}' already exists\n")));
    }
    let privs = requested_privs(req).map_err(&fail)?;
    st.access.roles.insert(id, privs);
    persist(sim, st)
}

/// `PUT /access/roles/{roleid}`: the privileges replaced, or added with `append`.
pub(crate) fn role_update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("roleid").unwrap_or("").to_string();
    if is_special(&id) {
        return Err(ApiError::die(format!(
            "auto-generated role '{id}' cannot be modified"
        )));
    }
    let fail = failed("update role");
    let mut st = sim.write();
    if !st.access.roles.contains_key(&id) {
        return Err(fail(format!("role '{id}' does not exist\n")));
    }
    let privs = requested_privs(req).map_err(&fail)?;
    let append = req.flag("append");
    if let Some(r) = st.access.roles.get_mut(&id) {
        if !append {
            r.clear();
        }
        r.extend(privs);
    }
    persist(sim, st)
}

/// `DELETE /access/roles/{roleid}`: the role, and the ACL entries naming it (`parse_user_config` drops them).
pub(crate) fn role_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("roleid").unwrap_or("").to_string();
    if is_special(&id) {
        return Err(ApiError::die(format!(
            "auto-generated role '{id}' cannot be deleted"
        )));
    }
    let mut st = sim.write();
    if st.access.roles.remove(&id).is_none() {
        return Err(failed("delete role")(format!(
            "role '{id}' does not exist\n"
        )));
    }
    st.access.acl.retain(|e| e.roleid != id);
    persist(sim, st)
}

// ---- ACL ----

/// `AccessControl::normalize_path`: `//` folded, no trailing `/`, a leading `/`; only `[[:alnum:].-_/]`.
pub(crate) fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    let mut p = String::new();
    for c in path.chars() {
        if c == '/' && p.ends_with('/') {
            continue;
        }
        p.push(c);
    }
    let mut p = p.trim_end_matches('/').to_string();
    if p.is_empty() {
        p = "/".into();
    }
    if !p.starts_with('/') {
        p.insert(0, '/');
    }
    p.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        .then_some(p)
}

/// `AccessControl::check_path`: the ACL paths PVE accepts (SDN's paths included).
fn check_path(path: &str) -> bool {
    let seg = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    };
    let alnum = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    match parts.as_slice() {
        [""] => true,
        ["access"] | ["access", "groups"] | ["access", "realm"] => true,
        ["access", "groups", g] | ["access", "realm", g] => seg(g),
        ["nodes"] | ["pool"] | ["sdn"] | ["storage"] | ["vms"] | ["mapping"] => true,
        ["nodes", n] | ["storage", n] | ["mapping", n] => seg(n),
        ["mapping", a, b] => seg(a) && seg(b),
        ["pool", rest @ ..] => (1..=3).contains(&rest.len()) && rest.iter().all(|s| seg(s)),
        ["vms", v] => v.len() >= 3 && !v.starts_with('0') && v.bytes().all(|b| b.is_ascii_digit()),
        ["sdn", kind] => matches!(
            *kind,
            "controllers" | "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps" | "zones"
        ),
        ["sdn", "zones", z] | ["sdn", "controllers", z] => seg(z),
        [
            "sdn",
            "dns" | "fabrics" | "ipams" | "prefix-lists" | "route-maps",
            x,
        ] => alnum(x),
        ["sdn", "zones", z, v] => seg(z) && seg(v),
        ["sdn", "zones", z, v, tag] => {
            seg(z)
                && seg(v)
                && !tag.starts_with('0')
                && tag.len() <= 4
                && tag.bytes().all(|b| b.is_ascii_digit())
        }
        _ => false,
    }
}

/// `GET /access/acl`: every entry (`path`, `type`, `ugid`, `roleid`, `propagate`), in the tree's order.
pub(crate) fn acl_list(sim: &Arc<Sim>, _req: &Req) -> ApiResult {
    let st = sim.read();
    let mut entries = st.access.acl.clone();
    entries.sort();
    let out: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "path": e.path,
                "type": e.kind,
                "ugid": e.ugid,
                "roleid": e.roleid,
                "propagate": u8::from(e.propagate),
            })
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `PUT /access/acl`: each role given to (or with `delete` taken from) each user, group and token on the path.
pub(crate) fn acl_update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let users = req.get("users").filter(|v| perl_true(v));
    let groups = req.get("groups").filter(|v| perl_true(v));
    let tokens = req.get("tokens").filter(|v| perl_true(v));
    if users.is_none() && groups.is_none() && tokens.is_none() {
        let msg = "either 'users', 'groups' or 'tokens' is required.";
        let mut errors = crate::schema::Errors::new();
        for k in ["groups", "tokens", "users"] {
            errors.insert(k.to_string(), msg.to_string());
        }
        return Err(ApiError::Param(errors));
    }
    let raw = req.get("path").unwrap_or("");
    let invalid = || ApiError::param("path", format!("invalid ACL path '{raw}'"));
    let path = normalize_path(raw).ok_or_else(invalid)?;
    let delete = req.flag("delete");
    if !delete && !check_path(&path) {
        return Err(invalid());
    }
    let propagate = req.get("propagate").is_none_or(|v| v == "1");
    let fail = failed("ACL update");
    let mut st = sim.write();
    let mut a = st.access.clone();
    for role in crate::formats::split_list(req.get("roles").unwrap_or("")) {
        if a.role(role).is_none() {
            return Err(fail(format!("role '{role}' does not exist\n")));
        }
        let mut targets: Vec<(&str, String)> = Vec::new();
        for g in crate::formats::split_list(groups.unwrap_or("")) {
            if !a.groups.contains_key(g) {
                return Err(fail(format!("group '{g}' does not exist\n")));
            }
            targets.push(("group", g.to_string()));
        }
        for u in crate::formats::split_list(users.unwrap_or("")) {
            if a.user(u).is_none() {
                return Err(fail(format!("user '{u}' does not exist\n")));
            }
            targets.push(("user", u.to_string()));
        }
        for t in crate::formats::split_list(tokens.unwrap_or("")) {
            let Some((u, sub)) = split_tokenid(t) else {
                return Err(fail(format!(
                    "'{t}' is not a valid token ID - not able to split into user and token parts\n"
                )));
            };
            match a.user(u) {
                None => return Err(fail(format!("no such user ('{u}')\n"))),
                Some(user) if !user.tokens.contains_key(sub) => {
                    return Err(fail(format!("no such token '{sub}' for user '{u}'\n")));
                }
                Some(_) => {}
            }
            targets.push(("token", t.to_string()));
        }
        for (kind, ugid) in targets {
            a.acl.retain(|e| {
                !(e.path == path && e.kind == kind && e.ugid == ugid && e.roleid == role)
            });
            if !delete {
                a.acl.push(AclEntry {
                    path: path.clone(),
                    kind: kind.to_string(),
                    ugid,
                    roleid: role.to_string(),
                    propagate,
                });
            }
        }
    }
    a.acl.sort();
    st.access = a;
    persist(sim, st)
}

// ---- realms ----

/// `GET /access/domains`: the realms, sorted.
pub(crate) fn domains(_sim: &Arc<Sim>, _req: &Req) -> ApiResult {
    let out: Vec<Value> = REALMS
        .iter()
        .map(|(realm, ty, comment)| json!({"realm": realm, "type": ty, "comment": comment}))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}
