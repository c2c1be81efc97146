//! `/cluster/ha/rules` (PVE 9): node-affinity and resource-affinity rules, their CRUD and the feasibility checks
//! of pve-ha-manager's `PVE::API2::HA::Rules`, `PVE::HA::Rules`, `Rules/NodeAffinity.pm` and
//! `Rules/ResourceAffinity.pm`, with their messages.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{assert_digest, rules_digest};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::schema::Errors;
use crate::sim::Sim;
use crate::state::State;

/// The options each rule type takes (`options` of the plugins); `true` marks a required one.
fn options(t: &str) -> &'static [(&'static str, bool)] {
    match t {
        "node-affinity" => &[
            ("resources", true),
            ("nodes", true),
            ("strict", false),
            ("disable", false),
            ("comment", false),
        ],
        _ => &[
            ("resources", true),
            ("affinity", true),
            ("disable", false),
            ("comment", false),
        ],
    }
}

/// The sids of a rule (`decode_value` of `resources`).
pub(crate) fn resources_of(opts: &BTreeMap<String, String>) -> BTreeSet<String> {
    crate::formats::split_list(opts.get("resources").map(String::as_str).unwrap_or(""))
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// The nodes of a node-affinity rule with their priorities (`parse_node_priority`; no priority is 0).
pub(crate) fn nodes_of(opts: &BTreeMap<String, String>) -> BTreeMap<String, i64> {
    crate::formats::split_list(opts.get("nodes").map(String::as_str).unwrap_or(""))
        .into_iter()
        .map(|n| match n.split_once(':') {
            Some((node, pri)) => (node.to_string(), pri.parse().unwrap_or(0)),
            None => (n.to_string(), 0),
        })
        .collect()
}

/// `encode_value`: resources sorted, nodes sorted with a priority only when it is not 0.
fn encode(key: &str, value: &str) -> String {
    match key {
        "resources" => {
            let set: BTreeSet<&str> = crate::formats::split_list(value).into_iter().collect();
            set.into_iter().collect::<Vec<_>>().join(",")
        }
        "nodes" => {
            let mut m = BTreeMap::new();
            for n in crate::formats::split_list(value) {
                let (node, pri) = n.split_once(':').unwrap_or((n, "0"));
                m.insert(node.to_string(), pri.parse::<i64>().unwrap_or(0));
            }
            m.into_iter()
                .map(|(n, p)| if p != 0 { format!("{n}:{p}") } else { n })
                .collect::<Vec<_>>()
                .join(",")
        }
        _ => value.to_string(),
    }
}

fn enabled(opts: &BTreeMap<String, String>) -> bool {
    opts.get("disable").is_none_or(|d| d == "0")
}

/// `check_feasibility`: per rule, the errors of the enabled rules, by option (node affinity: one rule per
/// resource; resource affinity: at least two resources, a negative one not more than the nodes; positive and
/// negative rules sharing two resources).
fn feasibility(st: &State, node_count: usize) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut errors: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut push = |rule: &str, msg: String| {
        errors
            .entry(rule.to_string())
            .or_default()
            .entry("resources".into())
            .or_default()
            .push(msg);
    };
    let live: Vec<&(String, BTreeMap<String, String>)> =
        st.ha.rules.iter().filter(|(_, o)| enabled(o)).collect();
    let of_type = |t: &str| {
        live.iter()
            .filter(|(_, o)| o.get("type").map(String::as_str) == Some(t))
            .copied()
            .collect::<Vec<_>>()
    };
    let mut users: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (id, o) in of_type("node-affinity") {
        for sid in resources_of(o) {
            users.entry(sid).or_default().push(id);
        }
    }
    let mut conflicts: Vec<(&str, String)> = Vec::new();
    for (sid, ids) in &users {
        if ids.len() > 1 {
            conflicts.extend(ids.iter().map(|id| (*id, sid.clone())));
        }
    }
    conflicts.sort();
    for (id, sid) in conflicts {
        push(
            id,
            format!("resource '{sid}' is already used in another node affinity rule"),
        );
    }
    let affinity = of_type("resource-affinity");
    for (id, o) in &affinity {
        if resources_of(o).len() < 2 {
            push(
                id,
                "rule is ineffective as there are less than two resources".into(),
            );
        }
    }
    for (id, o) in &affinity {
        if o.get("affinity").map(String::as_str) == Some("negative")
            && resources_of(o).len() > node_count
        {
            push(
                id,
                "rule defines more resources than available nodes".into(),
            );
        }
    }
    for (neg_id, neg) in affinity
        .iter()
        .filter(|(_, o)| o.get("affinity").map(String::as_str) == Some("negative"))
    {
        for (pos_id, pos) in affinity
            .iter()
            .filter(|(_, o)| o.get("affinity").map(String::as_str) == Some("positive"))
        {
            if resources_of(neg).intersection(&resources_of(pos)).count() >= 2 {
                push(
                    neg_id,
                    "rule shares two or more resources with a positive resource affinity rule"
                        .into(),
                );
                push(
                    pos_id,
                    "rule shares two or more resources with a negative resource affinity rule"
                        .into(),
                );
            }
        }
    }
    errors
}

/// `$get_api_ha_rule`: the options as written plus `rule`, `digest`, `order` and the feasibility `errors`.
fn entry(st: &State, id: &str, errors: Option<&BTreeMap<String, Vec<String>>>) -> ApiResult {
    let Some(pos) = st.ha.rules.iter().position(|(r, _)| r == id) else {
        return Err(ApiError::die(format!("no such ha rule '{id}'")));
    };
    let opts = &st.ha.rules[pos].1;
    let mut m = Map::new();
    for (k, v) in opts {
        let value = match k.as_str() {
            "strict" | "disable" => v.parse::<i64>().map(|n| json!(n)).unwrap_or(json!(v)),
            _ => json!(v),
        };
        m.insert(k.clone(), value);
    }
    m.insert("rule".into(), json!(id));
    m.insert("digest".into(), json!(rules_digest(&st.ha)));
    m.insert("order".into(), json!(pos + 1));
    if let Some(e) = errors {
        m.insert("errors".into(), json!(e));
    }
    Ok(Reply::data(Value::Object(m)))
}

/// `GET /cluster/ha/rules`: in file order, `type` and `resource` filter.
pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let errors = feasibility(&st, sim.nodes.len());
    let mut out = Vec::new();
    for (id, opts) in &st.ha.rules {
        if req
            .get("type")
            .is_some_and(|t| opts.get("type").map(String::as_str) != Some(t))
        {
            continue;
        }
        if req
            .get("resource")
            .is_some_and(|sid| !resources_of(opts).contains(sid))
        {
            continue;
        }
        out.push(entry(&st, id, errors.get(id))?.data);
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/ha/rules/{rule}`.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let id = req.get("rule").unwrap_or("");
    let errors = feasibility(&st, sim.nodes.len());
    entry(&st, id, errors.get(id))
}

/// The options a create or update sets, checked against the type's options (`check_config` / `check_value`)
/// and encoded; `disable=0` is dropped, as the API does.
fn options_of(req: &Req, t: &str, create: bool) -> Result<BTreeMap<String, String>, String> {
    let allowed = options(t);
    let mut out = BTreeMap::new();
    for key in [
        "resources",
        "nodes",
        "strict",
        "affinity",
        "disable",
        "comment",
    ] {
        let Some(v) = req.get(key) else { continue };
        if key == "disable" && v == "0" {
            continue;
        }
        if !allowed.iter().any(|(k, _)| *k == key) {
            return Err(format!("unexpected property '{key}'"));
        }
        out.insert(key.to_string(), encode(key, v));
    }
    if create {
        for (k, required) in allowed {
            if *required && !out.contains_key(*k) {
                return Err(format!("missing value for required option '{k}'"));
            }
        }
    }
    Ok(out)
}

/// `$assert_valid_resources_param` and `$assert_valid_nodes_param`.
fn check_references(sim: &Sim, st: &State, opts: &BTreeMap<String, String>) -> Result<(), String> {
    if opts.contains_key("resources") {
        let resources = resources_of(opts);
        if resources.is_empty() {
            return Err("no resources were specified".into());
        }
        let unknown: Vec<&str> = resources
            .iter()
            .filter(|s| !st.ha.resources.contains_key(*s))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "cannot use unmanaged resource(s) {}.",
                unknown.join(", ")
            ));
        }
    }
    if opts.contains_key("nodes") {
        let nodes = nodes_of(opts);
        if nodes.is_empty() {
            return Err("no nodes were specified".into());
        }
        let unknown: Vec<&str> = nodes
            .keys()
            .filter(|n| !sim.has_node(n))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "cannot use non-existent node(s) {}.",
                unknown.join(", ")
            ));
        }
    }
    Ok(())
}

/// `$assert_feasibility`: a 400 `Rule '<id>' is invalid.` with the rule's errors joined by `, `.
fn assert_feasible(sim: &Sim, st: &State, id: &str) -> Result<(), ApiError> {
    let all = feasibility(st, sim.nodes.len());
    let Some(errors) = all.get(id) else {
        return Ok(());
    };
    let errors: Errors = errors
        .iter()
        .map(|(k, v)| (k.clone(), v.join(", ")))
        .collect();
    Err(ApiError::Invalid {
        message: format!("Rule '{id}' is invalid.\n"),
        errors,
    })
}

/// `POST /cluster/ha/rules`.
pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let t = req.get("type").unwrap_or("").to_string();
    let id = req.get("rule").unwrap_or("").to_string();
    let opts = options_of(req, &t, true).map_err(ApiError::die)?;
    let mut st = sim.write();
    let failed = |e: String| ApiError::die(format!("create ha rule failed: {e}"));
    if st.ha.rules.iter().any(|(r, _)| *r == id) {
        return Err(failed(format!("HA rule '{id}' already defined")));
    }
    check_references(sim, &st, &opts).map_err(failed)?;
    let mut opts = opts;
    opts.insert("type".into(), t);
    st.ha.rules.push((id.clone(), opts));
    if let Err(e) = assert_feasible(sim, &st, &id) {
        st.ha.rules.pop();
        return Err(e);
    }
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `PUT /cluster/ha/rules/{rule}`: the type is the rule's; `delete` drops optional options
/// (`SectionConfig::delete_from_config`).
pub(crate) fn update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("rule").unwrap_or("").to_string();
    let mut st = sim.write();
    let failed = |e: String| ApiError::die(format!("update HA rules failed: {e}"));
    assert_digest(&rules_digest(&st.ha), req.get("digest")).map_err(failed)?;
    let Some(pos) = st.ha.rules.iter().position(|(r, _)| *r == id) else {
        return Err(failed(format!("HA rule '{id}' does not exist")));
    };
    let t = st.ha.rules[pos].1.get("type").cloned().unwrap_or_default();
    if req.get("type").is_some_and(|given| given != t) {
        return Err(failed("unexpected property 'type'".to_string()));
    }
    let set = options_of(req, &t, false).map_err(failed)?;
    check_references(sim, &st, &set).map_err(failed)?;
    let mut rule = st.ha.rules[pos].1.clone();
    for k in crate::formats::split_list(req.get("delete").unwrap_or("")) {
        let Some((_, required)) = options(&t).iter().find(|(o, _)| *o == k) else {
            return Err(failed(format!("no such option '{k}'")));
        };
        if *required {
            return Err(failed(format!("unable to delete required option '{k}'")));
        }
        if set.contains_key(k) {
            return Err(failed(format!(
                "cannot set and delete property '{k}' at the same time!"
            )));
        }
        rule.remove(k);
    }
    rule.extend(set);
    let previous = std::mem::replace(&mut st.ha.rules[pos].1, rule);
    if let Err(e) = assert_feasible(sim, &st, &id) {
        st.ha.rules[pos].1 = previous;
        return Err(e);
    }
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `DELETE /cluster/ha/rules/{rule}`: deleting an unknown rule succeeds, as in PVE.
pub(crate) fn delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("rule").unwrap_or("");
    let mut st = sim.write();
    st.ha.rules.retain(|(r, _)| r != id);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// The enabled node-affinity rule of a sid: its nodes with priorities and whether it is strict.
pub(crate) fn node_affinity(st: &State, sid: &str) -> Option<(BTreeMap<String, i64>, bool)> {
    st.ha.rules.iter().find_map(|(_, o)| {
        (enabled(o)
            && o.get("type").map(String::as_str) == Some("node-affinity")
            && resources_of(o).contains(sid))
        .then(|| (nodes_of(o), o.get("strict").is_some_and(|s| s == "1")))
    })
}

/// `get_affinitive_resources`: the sids `sid` must share a node with (positive) and those it must not
/// (negative), from the enabled resource-affinity rules.
pub(crate) fn affinitive(st: &State, sid: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut together = BTreeSet::new();
    let mut separate = BTreeSet::new();
    for (_, o) in &st.ha.rules {
        if !enabled(o) || o.get("type").map(String::as_str) != Some("resource-affinity") {
            continue;
        }
        let members = resources_of(o);
        if !members.contains(sid) {
            continue;
        }
        let into = if o.get("affinity").map(String::as_str) == Some("positive") {
            &mut together
        } else {
            &mut separate
        };
        into.extend(members.into_iter().filter(|s| s != sid));
    }
    (together, separate)
}
