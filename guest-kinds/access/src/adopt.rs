//! `adopt`: a manifest for a live user, group or role.
//!
//! * A user: its fields from the listing entry, its groups from `GET /access/users/{userid}`,
//!   its ACL entries from `GET /access/acl`. Its API tokens are not adopted: PVE never shows a
//!   token's secret again, so proxops could not hold it; a gap names each one.
//! * A group: its comment and ACL entries; its id is `metadata.name`, so a group whose id is
//!   not a DNS label cannot be adopted.
//! * A role: only `proxops-<name>` roles (proxops's mark is the prefix); another role is
//!   granted by name in ACL entries, never managed.
//! * `root@pam` is PVE's own superuser and is not adopted.
//! * A user or group without the mark is taken over by the host's
//!   `metadata.adopt: {id, comment}` (the kind never sees it): the next apply adds the mark to
//!   its comment and nothing else. A role has no comment: only `proxops-` roles are adopted.

use std::collections::BTreeSet;

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::dns_label_problem;
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::named::{Named, adopt_comment};
use serde_json::{Map, Value, json};

use crate::desired::{ACL, GROUP, ROLE, ROLE_PREFIX, USER, USERS};
use crate::plan::{entry_id, entry_kind};

/// A DNS label for a user id: lower case, every run of other characters one `-`.
fn label_for(id: &str) -> String {
    let mut out = String::new();
    for ch in id.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-')
        .chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

fn read(observed: &Observation, path: &str) -> Option<Value> {
    let r = observed
        .reads
        .iter()
        .find(|r| r.call.path == path || crate::plan::decoded(&r.call.path) == path)?;
    (r.status == 200)
        .then(|| serde_json::from_str(&r.body).ok())
        .flatten()
}

/// The ACL entries of one principal as the manifest writes them: per path, its roles.
fn acl_of(observed: &Observation, ty: &str, ugid: &str) -> Vec<Value> {
    let Some(Value::Array(entries)) = read(observed, ACL) else {
        return Vec::new();
    };
    let mut by_path: std::collections::BTreeMap<(String, bool), BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for e in &entries {
        if e.get("type").and_then(Value::as_str) != Some(ty)
            || e.get("ugid").and_then(Value::as_str) != Some(ugid)
        {
            continue;
        }
        let (Some(path), Some(role)) = (
            e.get("path").and_then(Value::as_str),
            e.get("roleid").and_then(Value::as_str),
        ) else {
            continue;
        };
        let propagate = e.get("propagate").and_then(Value::as_i64).unwrap_or(1) != 0;
        by_path
            .entry((path.to_string(), propagate))
            .or_default()
            .insert(role.to_string());
    }
    by_path
        .into_iter()
        .map(|((path, propagate), roles)| {
            let mut a = json!({"path": path, "roles": roles});
            if !propagate {
                a["propagate"] = json!(false);
            }
            a
        })
        .collect()
}

/// The manifest for the entry in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let text = observed.live.as_deref().ok_or("no live entry to adopt")?;
    let entry: Value =
        serde_json::from_str(text).map_err(|e| format!("the live entry does not read: {e}"))?;
    let id = entry_id(&entry)
        .ok_or("the entry has no userid, groupid or roleid")?
        .to_string();
    let mut gaps = Vec::new();
    let comment = entry.get("comment").and_then(Value::as_str).unwrap_or("");
    let (named, name, spec): (Named, _, _) = match entry_kind(&entry) {
        Some("user") => {
            if id == "root@pam" {
                return Err("root@pam is PVE's own superuser; proxops does not manage it".into());
            }
            let mut user = Map::new();
            user.insert("id".into(), json!(id));
            adopt_comment(&mut user, &id, Some(comment));
            for key in ["email", "firstname", "lastname"] {
                if let Some(v) = entry
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|v| !v.is_empty())
                {
                    user.insert(key.into(), json!(v));
                }
            }
            if entry.get("enable").and_then(Value::as_i64) == Some(0) {
                user.insert("enabled".into(), json!(false));
            }
            if let Some(e) = entry
                .get("expire")
                .and_then(Value::as_u64)
                .filter(|e| *e != 0)
            {
                user.insert("expire".into(), json!(e));
            }
            let detail = read(observed, &format!("{USERS}/{id}")).unwrap_or(Value::Null);
            if let Some(groups) = detail.get("groups").and_then(Value::as_array)
                && !groups.is_empty()
            {
                user.insert("groups".into(), json!(groups));
                gaps.push(Gap {
                    path: "spec.user.groups".into(),
                    reason: "each group must be an Access group manifest of this cluster (adopt the groups too)".into(),
                });
            }
            let acl = acl_of(observed, "user", &id);
            if !acl.is_empty() {
                user.insert("acl".into(), Value::Array(acl));
            }
            if let Some(tokens) = detail.get("tokens").and_then(Value::as_object) {
                for tid in tokens.keys() {
                    gaps.push(Gap {
                        path: "spec.user.tokens".into(),
                        reason: format!(
                            "API token {id}!{tid} is not adopted: PVE never shows a token's secret again, so proxops could not store it; declare a new token instead"
                        ),
                    });
                }
            }
            (USER, label_for(&id), json!({"user": user}))
        }
        Some("group") => {
            if let Some(p) = dns_label_problem(&id) {
                return Err(format!(
                    "group id `{id}` cannot be a manifest name ({p}); a group manifest's name is its id"
                ));
            }
            let mut group = Map::new();
            adopt_comment(&mut group, &id, Some(comment));
            let acl = acl_of(observed, "group", &id);
            if !acl.is_empty() {
                group.insert("acl".into(), Value::Array(acl));
            }
            (GROUP, id.clone(), json!({"group": group}))
        }
        Some("role") => {
            let Some(name) = id.strip_prefix(ROLE_PREFIX) else {
                return Err(format!(
                    "role {id} is not proxops's (only `{ROLE_PREFIX}<name>` roles are managed; grant other roles by name in ACL entries)"
                ));
            };
            if let Some(p) = dns_label_problem(name) {
                return Err(format!(
                    "role {id}: `{name}` cannot be a manifest name ({p})"
                ));
            }
            let privs: Vec<&str> = entry
                .get("privs")
                .and_then(Value::as_str)
                .unwrap_or("")
                .split(',')
                .filter(|s| !s.is_empty())
                .collect();
            (ROLE, name.to_string(), json!({"role": {"privs": privs}}))
        }
        _ => return Err("the entry is not a user, group or role".into()),
    };
    if let Some(p) = dns_label_problem(&name) {
        return Err(format!("`{id}` gives no manifest name ({p})"));
    }
    Ok(named.adopted(&name, spec, gaps))
}
