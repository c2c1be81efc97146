//! The cluster's security groups (`/cluster/firewall/groups`), as pve-firewall's Groups.pm.

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

pub(super) fn groups_list(sim: &Arc<Sim>) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(groups_answer(&st))))
}

pub(super) fn groups_answer(st: &State) -> Vec<Value> {
    let entries: Vec<BTreeMap<String, String>> = st
        .firewall
        .groups
        .iter()
        .map(|(name, g)| {
            let mut e = BTreeMap::new();
            e.insert("group".to_string(), name.clone());
            if let Some(c) = &g.comment {
                e.insert("comment".to_string(), c.clone());
            }
            e
        })
        .collect();
    let d = digest(&entries);
    entries
        .into_iter()
        .map(|e| {
            let mut o: Map<String, Value> = e.into_iter().map(|(k, v)| (k, json!(v))).collect();
            o.insert("digest".into(), json!(d));
            Value::Object(o)
        })
        .collect()
}

/// Groups.pm `create_security_group`: a new group, or with `rename` the group renamed (or, with
/// `rename` equal to `group`, its comment changed).
pub(super) fn group_create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let group = req.get("group").unwrap_or_default().to_string();
    let comment = req.get("comment").map(str::to_string);
    let mut st = sim.write();
    if let Some(rename) = req.get("rename") {
        let entries: Vec<BTreeMap<String, String>> = st
            .firewall
            .groups
            .iter()
            .map(|(name, g)| {
                let mut e = BTreeMap::from([("group".to_string(), name.clone())]);
                if let Some(c) = &g.comment {
                    e.insert("comment".to_string(), c.clone());
                }
                e
            })
            .collect();
        assert_digest(&digest(&entries), req.get("digest"))?;
        let Some(mut old) = st.firewall.groups.get(rename).cloned() else {
            return Err(ApiError::param(
                "group",
                format!("Security group '{rename}' does not exist"),
            ));
        };
        if group != rename && st.firewall.groups.contains_key(&group) {
            return Err(ApiError::param(
                "group",
                format!("Security group '{group}' does already exist"),
            ));
        }
        if let Some(c) = comment {
            old.comment = (!c.is_empty()).then_some(c);
        }
        st.firewall.groups.remove(rename);
        if group != rename {
            // Every rule naming the old group now names the new one.
            let renamed = |rules: &mut Vec<Rule>| {
                for r in rules.iter_mut() {
                    if r.get("type").is_some_and(|t| t == "group")
                        && r.get("action").is_some_and(|a| a == rename)
                    {
                        r.insert("action".into(), group.clone());
                    }
                }
            };
            for fw in st.firewall.guests.values_mut() {
                renamed(&mut fw.rules);
            }
        }
        st.firewall.groups.insert(group, old);
        return finish(sim, st);
    }
    if st.firewall.groups.contains_key(&group) {
        return Err(ApiError::param(
            "group",
            format!("Security group '{group}' already exists"),
        ));
    }
    st.firewall.groups.insert(
        group,
        Group {
            comment: comment.filter(|c| !c.is_empty()),
            rules: Vec::new(),
        },
    );
    finish(sim, st)
}

/// Rules.pm `delete_security_group`: only an empty group goes. PVE does not look for rules that
/// name it: they stay, and its compiler warns and skips them, as for a group never created.
pub(super) fn group_delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let group = req.get("group").unwrap_or_default().to_string();
    let mut st = sim.write();
    let Some(g) = st.firewall.groups.get(&group) else {
        return Err(ApiError::die(format!("no such security group '{group}'")));
    };
    if !g.rules.is_empty() {
        return Err(ApiError::die(format!(
            "Security group '{group}' is not empty"
        )));
    }
    st.firewall.groups.remove(&group);
    finish(sim, st)
}
