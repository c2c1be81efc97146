//! Who may do what: a created token's authentication, the ACL walk (`roles`, `permissions`) and the
//! privileges each served write needs (`authorize`), as pve-access-control and RPCEnvironment.pm decide them.

use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::api::{ApiError, Req};
use crate::sim::Sim;
use crate::state::State;

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
    // qemu-server's create: `VM.Allocate` on `/vms/<vmid>`, or on `/pool/<pool>` when it names
    // a pool (after `check_pool_exist`, which the handler runs).
    if method == "POST"
        && template == "/nodes/{node}/qemu"
        && let Some(pool) = req.get("pool")
        && permissions(&st.access, who, &format!("/pool/{pool}")).contains("VM.Allocate")
    {
        return Ok(());
    }
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
