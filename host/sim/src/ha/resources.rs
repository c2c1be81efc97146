//! `/cluster/ha/resources`: list, create, read, update and delete HA resources, and the `migrate`/`relocate`
//! requests, with the checks and messages of pve-ha-manager's `PVE::API2::HA::Resources` and `PVE::HA::Config`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{assert_digest, parse_sid, resources_digest};
use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;

/// The options a `vm` or `ct` resource takes (`PVE::HA::Resources::PVEVM::options`), all optional.
const OPTIONS: &[&str] = &[
    "state",
    "group",
    "comment",
    "failback",
    "max_restart",
    "max_relocate",
];

/// `lock_ha_domain($code, $errmsg)`: a failure under the HA lock is prefixed with what failed.
fn under_lock(errmsg: &str, e: String) -> ApiError {
    ApiError::die(format!("{errmsg}: {e}"))
}

/// `$api_copy_config`: the options as written plus `sid`, `type` and the file's `digest`
/// (computed once by the caller: it covers the whole file).
fn entry(st: &State, sid: &str, digest: &str) -> Result<Value, ApiError> {
    let opts = st
        .ha
        .resources
        .get(sid)
        .ok_or_else(|| ApiError::die(format!("no such resource '{sid}'")))?;
    let mut m = Map::new();
    let (t, _) = sid.split_once(':').unwrap_or(("vm", sid));
    m.insert("sid".into(), json!(sid));
    m.insert("type".into(), json!(t));
    m.insert("digest".into(), json!(digest));
    for (k, v) in opts {
        let value = match k.as_str() {
            "max_restart" | "max_relocate" | "failback" => {
                v.parse::<i64>().map(|n| json!(n)).unwrap_or(json!(v))
            }
            _ => json!(v),
        };
        m.insert(k.clone(), value);
    }
    Ok(Value::Object(m))
}

/// `GET /cluster/ha/resources`: every resource (`type` filters), sorted by sid (PVE lists them in hash order).
pub(crate) fn list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let digest = resources_digest(&st.ha);
    let mut out = Vec::new();
    for sid in st.ha.resources.keys() {
        if req
            .get("type")
            .is_some_and(|t| !sid.starts_with(&format!("{t}:")))
        {
            continue;
        }
        out.push(entry(&st, sid, &digest)?);
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/ha/resources/{sid}`.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let (sid, _, _) = parse_sid(&st, req.get("sid").unwrap_or("")).map_err(ApiError::die)?;
    entry(&st, &sid, &resources_digest(&st.ha)).map(Reply::data)
}

/// The plugin checks of a create: the type is known (`SectionConfig::lookup`), the name a VMID (`verify_name`)
/// and the guest exists with the matching kind (`exists`).
fn check_guest(st: &State, t: &str, name: &str) -> Result<(), String> {
    if t != "vm" && t != "ct" {
        return Err(format!("unknown section type '{t}'"));
    }
    let valid =
        name.len() >= 2 && name.bytes().all(|b| b.is_ascii_digit()) && !name.starts_with('0');
    if !valid {
        return Err("invalid VMID".into());
    }
    let vmid: u32 = name.parse().map_err(|_| "invalid VMID".to_string())?;
    let (kind_ok, what) = match t {
        "vm" => (st.vms.contains_key(&vmid), "VM"),
        _ => (st.lxc.contains_key(&vmid), "container"),
    };
    if kind_ok {
        return Ok(());
    }
    if st.vmid_owner(vmid).is_none() {
        return Err(format!("resource '{t}:{vmid}' does not exist in cluster"));
    }
    Err(format!(
        "resource '{t}:{vmid}' - guest with ID {vmid} is not a {what}"
    ))
}

/// The options of a create or update request, as they are written to the config.
fn options_of(req: &Req) -> BTreeMap<String, String> {
    OPTIONS
        .iter()
        .filter_map(|k| req.get(k).map(|v| (k.to_string(), v.to_string())))
        .collect()
}

/// The checks create and update share: the `type` given must match the sid's, groups are gone (migrated to
/// rules, the only state the simulator has).
fn check_common(req: &Req, t: &str) -> Result<(), ApiError> {
    if req.get("type").is_some_and(|given| given != t) {
        return Err(ApiError::die("types does not match"));
    }
    if req.get("group").is_some() {
        return Err(ApiError::die(
            "invalid parameter 'group': ha groups have been migrated to rules",
        ));
    }
    Ok(())
}

/// `POST /cluster/ha/resources`.
pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let mut st = sim.write();
    let (sid, t, name) = parse_sid(&st, req.get("sid").unwrap_or("")).map_err(ApiError::die)?;
    check_common(req, &t)?;
    check_guest(&st, &t, &name).map_err(ApiError::die)?;
    if st.ha.resources.contains_key(&sid) {
        return Err(under_lock(
            "create resource failed",
            format!("resource ID '{sid}' already defined"),
        ));
    }
    st.ha.resources.insert(sid, options_of(req));
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `check_service_state`: a service in `error` takes no request but `disabled`.
fn check_service_state(st: &State, sid: &str, requested: Option<&str>) -> Result<(), ApiError> {
    let managed = st
        .ha
        .resources
        .get(sid)
        .is_some_and(|o| super::requested_state(o) != "ignored");
    let in_error = st.ha.services.get(sid).is_some_and(|s| s.state == "error");
    if managed && in_error && requested != Some("disabled") {
        return Err(ApiError::die(format!(
            "service '{sid}' in error state, must be disabled and fixed first"
        )));
    }
    Ok(())
}

/// `PUT /cluster/ha/resources/{sid}`.
pub(crate) fn update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let mut st = sim.write();
    let (sid, t, _) = parse_sid(&st, req.get("sid").unwrap_or("")).map_err(ApiError::die)?;
    check_common(req, &t)?;
    check_service_state(&st, &sid, req.get("state"))?;
    const FAILED: &str = "update resources config failed";
    assert_digest(&resources_digest(&st.ha), req.get("digest"))
        .map_err(|e| under_lock(FAILED, e))?;
    let set = options_of(req);
    let Some(opts) = st.ha.resources.get_mut(&sid) else {
        return Err(under_lock(FAILED, format!("no such resource '{sid}'")));
    };
    let mut updated = opts.clone();
    updated.extend(set);
    for k in crate::formats::split_list(req.get("delete").unwrap_or("")) {
        if !OPTIONS.contains(&k) {
            return Err(under_lock(FAILED, format!("no such option '{k}'")));
        }
        updated.remove(k);
    }
    *opts = updated;
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `DELETE /cluster/ha/resources/{sid}`: with `purge` (the default) the sid leaves every rule, and a rule left
/// without resources is deleted (`delete_service_from_config`).
pub(crate) fn delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let mut st = sim.write();
    let (sid, _, _) = parse_sid(&st, req.get("sid").unwrap_or("")).map_err(ApiError::die)?;
    if !st.ha.resources.contains_key(&sid) {
        return Err(ApiError::die(format!(
            "cannot delete service '{sid}', not HA managed!"
        )));
    }
    st.ha.resources.remove(&sid);
    if req.get("purge") != Some("0") {
        st.ha.rules.retain_mut(|(_, opts)| {
            let mut left = super::rules::resources_of(opts);
            if !left.remove(&sid) {
                return true;
            }
            if left.is_empty() {
                return false;
            }
            opts.insert(
                "resources".into(),
                left.into_iter().collect::<Vec<_>>().join(","),
            );
            true
        });
    }
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `POST /cluster/ha/resources/{sid}/migrate` and `.../relocate`: queues the CRM command and answers what
/// moves along (positive affinity) and what blocks the target (negative affinity), as
/// `get_resource_motion_info` computes them.
pub(crate) fn motion(sim: &Arc<Sim>, req: &Req, cmd: &str) -> ApiResult {
    let mut st = sim.write();
    let (sid, _, _) = parse_sid(&st, req.get("sid").unwrap_or("")).map_err(ApiError::die)?;
    let managed = st
        .ha
        .resources
        .get(&sid)
        .is_some_and(|o| super::requested_state(o) != "ignored");
    if !managed {
        return Err(ApiError::die(format!("resource '{sid}' is not HA managed")));
    }
    check_service_state(&st, &sid, None)?;
    let target = req.get("node").unwrap_or("").to_string();
    queue(&mut st, &sid, format!("{cmd} {target}"));
    let (together, blocking) = motion_info(&sim.nodes, &st, &sid);
    let mut out = json!({"sid": sid, "requested-node": target});
    if !together.is_empty() {
        out["comigrated-resources"] = json!(together);
    }
    if let Some(b) = blocking.get(&target) {
        out["blocking-resources"] = json!(
            b.iter()
                .map(|s| json!({"sid": s, "cause": "resource-affinity"}))
                .collect::<Vec<_>>()
        );
    }
    st.touch();
    Ok(Reply::data(out))
}

/// Queues a CRM command for a service (`queue_crm_commands`); the CRM takes it on its next round.
pub(crate) fn queue(st: &mut State, sid: &str, cmd: String) {
    if let Some(s) = st.ha.services.get_mut(sid) {
        s.cmd = Some(cmd);
    } else {
        st.ha.pending_cmds.insert(sid.to_string(), cmd);
    }
}

/// `get_resource_motion_info`: the services in positive affinity with `sid` (they move along) and, per online
/// node, those in negative affinity placed there (they block it).
pub(crate) fn motion_info(
    nodes: &[String],
    st: &State,
    sid: &str,
) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
    let (together, separate) = super::rules::affinitive(st, sid);
    let live: Vec<String> = together
        .into_iter()
        .filter(|s| st.ha.services.contains_key(s))
        .collect();
    let mut blocking: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for node in &super::crm::online_nodes(nodes, st) {
        for other in &separate {
            let Some(s) = st.ha.services.get(other) else {
                continue;
            };
            if s.node != *node && s.target.as_deref().is_none_or(|t| t != node) {
                continue;
            }
            blocking
                .entry(node.clone())
                .or_default()
                .push(other.clone());
        }
    }
    (live, blocking)
}
