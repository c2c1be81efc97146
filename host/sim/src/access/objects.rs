//! `/access/groups`, `/access/roles`, `/access/acl` and `/access/domains`: the answers, the checks and the
//! messages of pve-access-control's Group.pm, Role.pm, ACL.pm and Domains.pm.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;

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
