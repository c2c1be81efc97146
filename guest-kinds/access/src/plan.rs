//! `observe`, `plan` and `claims`.
//!
//! * User: the listing entry (`/access/users`) holds its own fields; `GET
//!   /access/users/{userid}` its groups and tokens (each with the host's `secret-stored`),
//!   `GET /access/acl` every ACL entry, `GET /access/domains` the realms. Absent: one `create`
//!   action (`POST /access/users` with the mark in `comment`, the groups, then its ACL
//!   entries), then one `create` action per token. Present and marked: the changed fields in one
//!   `PUT /access/users/{userid}`, the ACL difference (one `PUT /access/acl` per path and
//!   propagation to add, one per path with `delete=1` to remove), and per token: create,
//!   update (`PUT …/token/{tokenid}`), delete (a marked token no longer declared), or delete
//!   and create again when the host says its secret is not stored (`secret-stored: false`).
//!   A token without its own mark (`proxops:<user>!<token>`) is an anomaly, never written.
//! * Group: `POST /access/groups` with the mark, `PUT /access/groups/{groupid}` for the
//!   comment, and its ACL entries as for a user.
//! * Role: `proxops-<name>`; `POST /access/roles` with `privs`, `PUT /access/roles/{roleid}`
//!   with the whole list when it differs.
//! * A live user or group without its mark: an anomaly, nothing written; unless the host
//!   flagged it for a take-over (its manifest's `metadata.adopt` matches it): then the one
//!   write `PUT /access/users|groups/{id}` of the live comment with the mark appended.
//! * No manifest (a claimed entry): `DELETE` of the user (PVE removes its tokens and ACL
//!   entries with it), the group (and its ACL entries) or the role.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::named;
use serde_json::Value;

use crate::desired::{
    ACL, Acl, DOMAINS, Desired, GROUP, GROUPS, Group, ROLE_PREFIX, ROLES, Role, Token, USER, USERS,
    User, full_token_id, pve_comment,
};

fn user_path(id: &str) -> String {
    format!("{USERS}/{id}")
}

fn token_path(user: &str, token: &str) -> String {
    format!("{USERS}/{user}/token/{token}")
}

/// The reads `plan` needs for an object (or, with no manifest, for `adopt`).
pub fn observe(d: Option<&Desired>, live: Option<&Value>) -> Vec<Call> {
    let kind = match (d, live) {
        (Some(d), _) => d.what(),
        (None, Some(l)) => entry_kind(l).unwrap_or(""),
        (None, None) => "",
    };
    let id = d
        .map(|d| d.id().to_string())
        .or_else(|| live.and_then(entry_id).map(str::to_string))
        .unwrap_or_default();
    let mut out = Vec::new();
    match kind {
        "user" => {
            if d.is_some() {
                out.push(Call::new(Method::Get, DOMAINS));
            }
            if live.is_some() {
                out.push(Call::new(Method::Get, user_path(&id)));
                out.push(Call::new(Method::Get, ACL));
            }
        }
        "group" if live.is_some() => out.push(Call::new(Method::Get, ACL)),
        _ => {}
    }
    out
}

/// `user`, `group` or `role`, by the id field the entry has.
pub fn entry_kind(entry: &Value) -> Option<&'static str> {
    if entry.get("userid").is_some() {
        Some("user")
    } else if entry.get("groupid").is_some() {
        Some("group")
    } else if entry.get("roleid").is_some() {
        Some("role")
    } else {
        None
    }
}

/// The entry's id, by its kind's field.
pub fn entry_id(entry: &Value) -> Option<&str> {
    ["userid", "groupid", "roleid"]
        .iter()
        .find_map(|k| entry.get(*k).and_then(Value::as_str))
}

/// Whether the listing entry carries proxops's mark for its own id (a role: its prefix).
pub fn marked(entry: &Value) -> bool {
    match (entry_kind(entry), entry_id(entry)) {
        (Some("role"), Some(id)) => id.starts_with(ROLE_PREFIX),
        (Some(_), Some(id)) => named::is_marked(entry.get("comment").and_then(Value::as_str), id),
        _ => false,
    }
}

/// `claims`: a user or group carrying its mark, a role with proxops's prefix.
pub fn claims(listing: &str, entry: &Value) -> bool {
    matches!(listing, USERS | GROUPS | ROLES)
        && marked(entry)
        && entry_id(entry) != Some("root@pam")
}

/// `path` with its `%XX` escapes decoded (the host hands reads back in its canonical form,
/// `/access/users/deploy%40pve`).
pub fn decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read(observed: &Observation, path: &str) -> Option<Result<Value, String>> {
    let r = observed
        .reads
        .iter()
        .find(|r| r.call.path == path || decoded(&r.call.path) == path)?;
    if r.status != 200 {
        return Some(Err(format!("GET {path} answered {}: {}", r.status, r.body)));
    }
    Some(
        serde_json::from_str(&r.body).map_err(|e| format!("GET {path} does not read as JSON: {e}")),
    )
}

fn flag(b: bool) -> String {
    if b { "1" } else { "0" }.to_string()
}

/// The proposal for one object.
pub fn plan(d: Option<&Desired>, observed: &Observation) -> Result<Proposal, Vec<Diag>> {
    let live: Option<Value> = match observed.live.as_deref() {
        None => None,
        Some(text) => Some(serde_json::from_str(text).map_err(|e| {
            vec![Diag::error(
                "",
                format!("the live entry does not read as JSON: {e}"),
            )]
        })?),
    };
    let mut out = Proposal::default();
    let Some(d) = d else {
        if let Some(l) = &live {
            prune(l, &mut out);
        }
        return Ok(out);
    };
    // The host finds the live entry by id across the kind's listings: one of another type
    // (a hand-made role `ops` for group `ops`) is not this object's.
    let live = live.filter(|l| entry_kind(l) == Some(d.what()));
    let fail = |e: String| vec![Diag::error("", e)];
    match d {
        Desired::User(u) => plan_user(u, live.as_ref(), observed, &mut out).map_err(fail)?,
        Desired::Group(g) => plan_group(g, live.as_ref(), observed, &mut out).map_err(fail)?,
        Desired::Role(r) => plan_role(r, live.as_ref(), &mut out),
    }
    Ok(out)
}

fn prune(entry: &Value, out: &mut Proposal) {
    if !marked(entry) {
        return;
    }
    let Some(id) = entry_id(entry) else { return };
    let (what, path) = match entry_kind(entry) {
        Some("user") => ("user", user_path(id)),
        Some("group") => ("group", format!("{GROUPS}/{id}")),
        Some("role") => ("role", format!("{ROLES}/{id}")),
        _ => return,
    };
    let extra = match what {
        "user" => " with its tokens and ACL entries",
        "group" => " with its ACL entries",
        _ => "",
    };
    out.actions.push(Action {
        operation: Operation::Delete,
        summary: format!("delete {what} {id}{extra} (no manifest)"),
        calls: vec![Call::new(Method::Delete, path)],
        changes: Vec::new(),
        disturbs_availability: false,
        destructive: true,
        restore: None,
    });
}

/// The anomaly for a live object with a managed id that proxops did not create.
fn unmarked(what: &str, id: &str, live: Option<&str>, path: &str, out: &mut Proposal) {
    out.anomalies.push(Anomaly::new(
        path,
        format!(
            "{what} {id} exists in PVE but was not created by proxops (its comment lacks `{mark}`); nothing is changed. Take it over: {claim}, or add `{mark}` to its comment in PVE; or rename the manifest's {what}",
            mark = proxops_names::named_mark(id),
            claim = named::take_over_claim(id, live),
        ),
    ));
}

// ---- ACL entries ----

/// The ACL entries of one principal (`type`, `ugid`) in PVE's listing: (path, role) -> propagate.
fn live_acl(acl: &[Value], ty: &str, ugid: &str) -> BTreeMap<(String, String), bool> {
    acl.iter()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some(ty))
        .filter(|e| e.get("ugid").and_then(Value::as_str) == Some(ugid))
        .filter_map(|e| {
            let path = e.get("path")?.as_str()?.to_string();
            let role = e.get("roleid")?.as_str()?.to_string();
            let propagate = match e.get("propagate") {
                Some(Value::Bool(b)) => *b,
                Some(v) => v.as_i64().unwrap_or(1) != 0,
                None => true,
            };
            Some(((path, role), propagate))
        })
        .collect()
}

/// The calls that turn `live` into `desired` for one principal (`param`: `users`, `groups`,
/// `tokens`), with their drift: one `PUT /access/acl` per path and propagation to add or
/// change, one per path with `delete=1` to remove.
fn acl_calls(
    desired: &[Acl],
    live: &BTreeMap<(String, String), bool>,
    param: &str,
    ugid: &str,
    drift_path: &str,
    drift: &mut Vec<Drift>,
) -> Vec<Call> {
    let mut want: BTreeMap<(String, String), bool> = BTreeMap::new();
    for a in desired {
        for r in &a.roles {
            want.insert((a.path.clone(), r.clone()), a.propagate);
        }
    }
    let mut add: BTreeMap<(String, bool), BTreeSet<String>> = BTreeMap::new();
    for ((path, role), p) in &want {
        if live.get(&(path.clone(), role.clone())) != Some(p) {
            add.entry((path.clone(), *p))
                .or_default()
                .insert(role.clone());
            drift.push(Drift::new(
                format!("{drift_path}[{path}]"),
                live.get(&(path.clone(), role.clone()))
                    .map(|lp| format!("{role} (propagate {lp})")),
                Some(format!("{role} (propagate {p})")),
            ));
        }
    }
    let mut remove: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, role) in live.keys() {
        if !want.contains_key(&(path.clone(), role.clone())) {
            remove.entry(path.clone()).or_default().insert(role.clone());
            drift.push(Drift::new(
                format!("{drift_path}[{path}]"),
                Some(role.clone()),
                None,
            ));
        }
    }
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(",");
    let mut calls = Vec::new();
    for ((path, p), roles) in &add {
        calls.push(
            Call::new(Method::Put, ACL)
                .param("path", path)
                .param("roles", join(roles))
                .param(param, ugid)
                .param("propagate", flag(*p)),
        );
    }
    for (path, roles) in &remove {
        calls.push(
            Call::new(Method::Put, ACL)
                .param("path", path)
                .param("roles", join(roles))
                .param(param, ugid)
                .param("delete", "1"),
        );
    }
    calls
}

fn acl_read(observed: &Observation) -> Result<Vec<Value>, String> {
    match read(observed, ACL) {
        Some(Ok(Value::Array(a))) => Ok(a),
        Some(Ok(_)) => Err(format!("GET {ACL} did not answer a list")),
        Some(Err(e)) => Err(e),
        None => Ok(Vec::new()),
    }
}

// ---- users and tokens ----

/// One field of a user as PVE holds it: `None` absent (or empty).
struct Field {
    key: &'static str,
    path: &'static str,
    desired: Option<String>,
    live: Option<String>,
}

fn live_str(entry: Option<&Value>, key: &str) -> Option<String> {
    let v = entry?.get(key)?;
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => flag(*b),
        _ => return None,
    };
    Some(s).filter(|s| !s.is_empty())
}

fn user_fields(u: &User, live: Option<&Value>, groups: Option<&BTreeSet<String>>) -> Vec<Field> {
    let join = |s: &BTreeSet<String>| {
        Some(s.iter().cloned().collect::<Vec<_>>().join(",")).filter(|s| !s.is_empty())
    };
    let mut out = vec![
        Field {
            key: "comment",
            path: "spec.user.comment",
            desired: Some(pve_comment(&u.id, u.comment.as_deref())),
            live: live_str(live, "comment"),
        },
        Field {
            key: "enable",
            path: "spec.user.enabled",
            desired: Some(flag(u.enabled)),
            live: live_str(live, "enable").or(Some("1".into())),
        },
        Field {
            key: "expire",
            path: "spec.user.expire",
            desired: Some(u.expire.to_string()),
            live: live_str(live, "expire").or(Some("0".into())),
        },
        Field {
            key: "groups",
            path: "spec.user.groups",
            desired: join(&u.groups),
            live: groups.and_then(join),
        },
    ];
    // Optional fields are managed only when declared.
    for (key, path, desired) in [
        ("email", "spec.user.email", &u.email),
        ("firstname", "spec.user.firstname", &u.firstname),
        ("lastname", "spec.user.lastname", &u.lastname),
    ] {
        if desired.is_some() {
            out.push(Field {
                key,
                path,
                desired: desired.clone(),
                live: live_str(live, key),
            });
        }
    }
    out
}

fn plan_user(
    u: &User,
    live: Option<&Value>,
    observed: &Observation,
    out: &mut Proposal,
) -> Result<(), String> {
    if let Some(Ok(Value::Array(realms))) = read(observed, DOMAINS)
        && !realms
            .iter()
            .any(|r| r.get("realm").and_then(Value::as_str) == Some(u.realm()))
    {
        let known: Vec<&str> = realms
            .iter()
            .filter_map(|r| r.get("realm")?.as_str())
            .collect();
        out.anomalies.push(Anomaly::new(
            "spec.user.id",
            format!(
                "realm `{}` does not exist in this cluster (its realms: {}); create it in PVE first, or use `@pve`",
                u.realm(),
                known.join(", ")
            ),
        ));
        return Ok(());
    }
    let Some(l) = live else {
        create_user(u, out);
        return Ok(());
    };
    if !marked(l) {
        if named::take_over_requested(observed) {
            let live = l.get("comment").and_then(Value::as_str);
            USER.take_over(out, &u.id, live, |comment| {
                Call::new(Method::Put, user_path(&u.id)).param("comment", comment)
            });
            return Ok(());
        }
        unmarked(
            "user",
            &u.id,
            l.get("comment").and_then(Value::as_str),
            "spec.user.id",
            out,
        );
        return Ok(());
    }
    let detail = match read(observed, &user_path(&u.id)) {
        Some(Ok(v)) => v,
        Some(Err(e)) => return Err(e),
        None => return Err(format!("no read of {}", user_path(&u.id))),
    };
    let groups: BTreeSet<String> = detail
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| {
            g.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let acl = acl_read(observed)?;
    // The user itself.
    let mut put = Call::new(Method::Put, user_path(&u.id));
    let mut changes = Vec::new();
    for f in user_fields(u, Some(l), Some(&groups)) {
        if f.desired != f.live {
            out.drift
                .push(Drift::new(f.path, f.live.clone(), f.desired.clone()));
            changes.push(Change::new(f.key, f.live.clone(), f.desired.clone()));
            put = put.param(f.key, f.desired.clone().unwrap_or_default());
        }
    }
    let mut calls = Vec::new();
    if !put.params.is_empty() {
        calls.push(put);
    }
    calls.extend(acl_calls(
        &u.acl,
        &live_acl(&acl, "user", &u.id),
        "users",
        &u.id,
        "spec.user.acl",
        &mut out.drift,
    ));
    if !calls.is_empty() {
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update user {}", u.id),
            calls,
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
    // Its tokens.
    let live_tokens = detail
        .get("tokens")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (i, t) in u.tokens.iter().enumerate() {
        let full = full_token_id(&u.id, &t.id);
        let path = format!("spec.user.tokens[{i}]");
        let live_acl = live_acl(&acl, "token", &full);
        match live_tokens.get(&t.id) {
            None => create_token(u, t, out),
            Some(lt) => {
                let comment = lt.get("comment").and_then(Value::as_str).unwrap_or("");
                if !proxops_names::has_named_mark(comment, &full) {
                    out.anomalies.push(Anomaly::new(
                        &path,
                        format!(
                            "API token {full} exists in PVE but was not created by proxops (its comment lacks `{mark}`); nothing is changed. Its secret is not in the SOPS file: delete it in PVE (`pveum user token remove {} {}`) to let proxops create it, or rename the manifest's token",
                            u.id,
                            t.id,
                            mark = proxops_names::named_mark(&full)
                        ),
                    ));
                    continue;
                }
                if lt.get("secret-stored").and_then(Value::as_bool) != Some(true) {
                    out.drift.push(Drift::new(
                        format!("{path}.secret"),
                        Some("not in the SOPS file".into()),
                        Some("stored".into()),
                    ));
                    let mut recreate = token_calls(u, t);
                    recreate.insert(0, Call::new(Method::Delete, token_path(&u.id, &t.id)));
                    out.actions.push(Action {
                        operation: Operation::Update,
                        summary: format!(
                            "re-create API token {full}: its secret is not in the cluster's SOPS file"
                        ),
                        calls: recreate,
                        changes: vec![Change::new("secret", None, Some("(new, into SOPS)".into()))],
                        disturbs_availability: false,
                        destructive: true,
                        restore: None,
                    });
                    continue;
                }
                update_token(u, t, lt, &live_acl, &path, out);
            }
        }
    }
    // Marked tokens no manifest declares.
    for (tid, lt) in &live_tokens {
        let full = full_token_id(&u.id, tid);
        let comment = lt.get("comment").and_then(Value::as_str).unwrap_or("");
        if u.tokens.iter().any(|t| &t.id == tid) || !proxops_names::has_named_mark(comment, &full) {
            continue;
        }
        out.actions.push(Action {
            operation: Operation::Delete,
            summary: format!("delete API token {full} (not in the manifest)"),
            calls: vec![Call::new(Method::Delete, token_path(&u.id, tid))],
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: true,
            restore: None,
        });
    }
    Ok(())
}

fn create_user(u: &User, out: &mut Proposal) {
    let mut post = Call::new(Method::Post, USERS).param("userid", &u.id);
    let mut changes = vec![Change::new("userid", None, Some(u.id.clone()))];
    for f in user_fields(u, None, None) {
        if let Some(v) = f.desired {
            post = post.param(f.key, &v);
            changes.push(Change::new(f.key, None, Some(v)));
        }
    }
    let mut calls = vec![post];
    let mut drift = Vec::new();
    calls.extend(acl_calls(
        &u.acl,
        &BTreeMap::new(),
        "users",
        &u.id,
        "spec.user.acl",
        &mut drift,
    ));
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!("create user {}", u.id),
        calls,
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
    for t in &u.tokens {
        create_token(u, t, out);
    }
}

/// A token's creation and its ACL entries.
fn token_calls(u: &User, t: &Token) -> Vec<Call> {
    let full = full_token_id(&u.id, &t.id);
    let mut post = Call::new(Method::Post, token_path(&u.id, &t.id))
        .param("comment", pve_comment(&full, t.comment.as_deref()))
        .param("privsep", flag(t.privsep));
    if t.expire != 0 {
        post = post.param("expire", t.expire.to_string());
    }
    let mut calls = vec![post];
    let mut drift = Vec::new();
    calls.extend(acl_calls(
        &t.acl,
        &BTreeMap::new(),
        "tokens",
        &full,
        "",
        &mut drift,
    ));
    calls
}

fn create_token(u: &User, t: &Token, out: &mut Proposal) {
    let full = full_token_id(&u.id, &t.id);
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!("create API token {full} (its secret goes into the cluster's SOPS file)"),
        calls: token_calls(u, t),
        changes: vec![
            Change::new("privsep", None, Some(flag(t.privsep))),
            Change::new("secret", None, Some("(new, into SOPS)".into())),
        ],
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn update_token(
    u: &User,
    t: &Token,
    lt: &Value,
    live_acl: &BTreeMap<(String, String), bool>,
    path: &str,
    out: &mut Proposal,
) {
    let full = full_token_id(&u.id, &t.id);
    let mut put = Call::new(Method::Put, token_path(&u.id, &t.id));
    let mut changes = Vec::new();
    let fields = [
        (
            "comment",
            "comment",
            Some(pve_comment(&full, t.comment.as_deref())),
            live_str(Some(lt), "comment"),
        ),
        (
            "privsep",
            "privsep",
            Some(flag(t.privsep)),
            live_str(Some(lt), "privsep").or(Some("1".into())),
        ),
        (
            "expire",
            "expire",
            Some(t.expire.to_string()),
            live_str(Some(lt), "expire").or(Some("0".into())),
        ),
    ];
    for (key, field, desired, live) in fields {
        if desired != live {
            out.drift.push(Drift::new(
                format!("{path}.{field}"),
                live.clone(),
                desired.clone(),
            ));
            changes.push(Change::new(key, live, desired.clone()));
            put = put.param(key, desired.unwrap_or_default());
        }
    }
    let mut calls = Vec::new();
    if !put.params.is_empty() {
        calls.push(put);
    }
    calls.extend(acl_calls(
        &t.acl,
        live_acl,
        "tokens",
        &full,
        &format!("{path}.acl"),
        &mut out.drift,
    ));
    if !calls.is_empty() {
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update API token {full}"),
            calls,
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
}

// ---- groups and roles ----

fn plan_group(
    g: &Group,
    live: Option<&Value>,
    observed: &Observation,
    out: &mut Proposal,
) -> Result<(), String> {
    let comment = pve_comment(&g.id, g.comment.as_deref());
    let Some(l) = live else {
        let mut calls = vec![
            Call::new(Method::Post, GROUPS)
                .param("groupid", &g.id)
                .param("comment", &comment),
        ];
        let mut drift = Vec::new();
        calls.extend(acl_calls(
            &g.acl,
            &BTreeMap::new(),
            "groups",
            &g.id,
            "",
            &mut drift,
        ));
        out.actions.push(Action {
            operation: Operation::Create,
            summary: format!("create group {}", g.id),
            calls,
            changes: vec![
                Change::new("groupid", None, Some(g.id.clone())),
                Change::new("comment", None, Some(comment)),
            ],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
        return Ok(());
    };
    if !marked(l) {
        if named::take_over_requested(observed) {
            let live = l.get("comment").and_then(Value::as_str);
            GROUP.take_over(out, &g.id, live, |comment| {
                Call::new(Method::Put, format!("{GROUPS}/{}", g.id)).param("comment", comment)
            });
            return Ok(());
        }
        unmarked(
            "group",
            &g.id,
            l.get("comment").and_then(Value::as_str),
            "metadata.name",
            out,
        );
        return Ok(());
    }
    let acl = acl_read(observed)?;
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    let live_comment = live_str(Some(l), "comment");
    if live_comment.as_deref() != Some(comment.as_str()) {
        out.drift.push(Drift::new(
            "spec.group.comment",
            live_comment.clone(),
            Some(comment.clone()),
        ));
        changes.push(Change::new("comment", live_comment, Some(comment.clone())));
        calls.push(Call::new(Method::Put, format!("{GROUPS}/{}", g.id)).param("comment", &comment));
    }
    calls.extend(acl_calls(
        &g.acl,
        &live_acl(&acl, "group", &g.id),
        "groups",
        &g.id,
        "spec.group.acl",
        &mut out.drift,
    ));
    if !calls.is_empty() {
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update group {}", g.id),
            calls,
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
    Ok(())
}

fn plan_role(r: &Role, live: Option<&Value>, out: &mut Proposal) {
    let privs = r.privs.iter().cloned().collect::<Vec<_>>().join(",");
    let Some(l) = live else {
        let mut post = Call::new(Method::Post, ROLES).param("roleid", &r.id);
        if !privs.is_empty() {
            post = post.param("privs", &privs);
        }
        out.actions.push(Action {
            operation: Operation::Create,
            summary: format!("create role {}", r.id),
            calls: vec![post],
            changes: vec![Change::new("privs", None, Some(privs))],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
        return;
    };
    let live_privs: BTreeSet<String> = l
        .get("privs")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if live_privs != r.privs {
        let shown = live_privs.iter().cloned().collect::<Vec<_>>().join(",");
        out.drift.push(Drift::new(
            "spec.role.privs",
            Some(shown.clone()),
            Some(privs.clone()),
        ));
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update role {}", r.id),
            calls: vec![Call::new(Method::Put, format!("{ROLES}/{}", r.id)).param("privs", &privs)],
            changes: vec![Change::new("privs", Some(shown), Some(privs))],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
}
