//! `/access/users[/{userid}]` and a user's API tokens (`/token[/{tokenid}]`): the answers, the checks
//! and the messages of pve-access-control's User.pm.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;

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
        // PVE sets `$usercfg->{users}->{$userid}->{enable} = 0` before it deletes the entry; Perl creates the
        // entry on that write, so deleting a user that does not exist succeeds (User.pm, `delete_user`).
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
