//! `/cluster/ha/status/current` and `/cluster/ha/status/manager_status` as pve-ha-manager's
//! `PVE::API2::HA::Status` builds them from the manager status, the LRM status of each node and the resources.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{Service, node_state, requested_state};
use crate::api::{ApiResult, Reply};
use crate::sim::Sim;
use crate::state::{State, now};

/// The node answering (the simulator's first node), for the `quorum` entry.
fn local(sim: &Sim) -> &str {
    sim.nodes.first().map(String::as_str).unwrap_or("")
}

/// The CRM master: the first online node.
pub(crate) fn master(sim: &Sim, st: &State) -> Option<String> {
    sim.nodes
        .iter()
        .find(|n| !st.offline_nodes.contains(*n))
        .cloned()
}

/// Perl's scalar `localtime` (`Thu Sep  9 12:00:00 2025`), in UTC.
fn localtime(secs: u64) -> String {
    let c = proxops_names::civil::from_unix(secs);
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {} {:>2} {:02}:{:02}:{:02} {}",
        DAYS[c.days.rem_euclid(7) as usize],
        MONTHS[(c.month - 1) as usize],
        c.day,
        c.hour,
        c.minute,
        c.second,
        c.year
    )
}

/// The LRM's mode and state on a node: `maintenance` in maintenance, `active` with services, else waiting for
/// the agent lock (idle).
fn lrm(st: &State, node: &str) -> (&'static str, &'static str) {
    if st.ha.maintenance.contains(node) {
        return ("maintenance", "maintenance");
    }
    let busy = st
        .ha
        .services
        .values()
        .any(|s| s.node == node && s.state != "stopped" && s.state != "error");
    (
        "active",
        if busy {
            "active"
        } else {
            "wait_for_agent_lock"
        },
    )
}

/// `get_verbose_service_state`.
fn verbose_state(st: &State, sid: &str, ss: Option<&Service>) -> String {
    let Some(conf) = st.ha.resources.get(sid) else {
        return "deleting".into();
    };
    let req = conf.get("state").map(String::as_str).unwrap_or("started");
    let req = if req == "enabled" { "started" } else { req };
    if req == "ignored" {
        return "ignored".into();
    }
    if super::guest_of(st, sid).is_none() {
        return "not found".into();
    }
    let Some(ss) = ss else {
        return "queued".into();
    };
    match ss.state.as_str() {
        "stopped" if req == "started" => "starting".into(),
        "stopped" if req == "disabled" => "disabled".into(),
        "started" if !ss.running => "starting".into(),
        "started" if req == "stopped" || req == "disabled" => "stopping".into(),
        "error" if req == "disabled" => "clearing error flag".into(),
        other => other.to_string(),
    }
}

/// `GET /cluster/ha/status/current`.
pub(crate) fn current(sim: &Arc<Sim>) -> ApiResult {
    let st = sim.read();
    let me = local(sim);
    let mut out = vec![json!({
        "id": "quorum", "type": "quorum", "node": me, "status": "OK", "quorate": 1,
    })];
    let master = master(sim, &st);
    let active = st.ha.timestamp > 0;
    if active && let Some(m) = &master {
        out.push(json!({
            "id": "master", "type": "master", "node": m, "timestamp": st.ha.timestamp,
            "status": format!("{m} (active, {})", localtime(st.ha.timestamp)),
        }));
    }
    let (armed, wd) = if active {
        ("armed", "CRM watchdog active")
    } else {
        ("standby", "CRM watchdog standby")
    };
    out.push(json!({
        "id": "fencing", "type": "fencing", "node": master.as_deref().unwrap_or(me),
        "status": format!("{armed} ({wd})"), "armed-state": armed,
    }));
    if active {
        for node in &sim.nodes {
            let t = st.ha.timestamp;
            let status = if st.offline_nodes.contains(node) {
                format!(
                    "{node} (old timestamp - dead?, watchdog standby, {})",
                    localtime(t)
                )
            } else {
                let (mode, state) = lrm(&st, node);
                let (text, wd) = match (mode, state) {
                    ("maintenance", _) => ("maintenance mode", "watchdog active"),
                    (_, "active") => ("active", "watchdog active"),
                    _ => ("idle", "watchdog standby"),
                };
                format!("{node} ({text}, {wd}, {})", localtime(t))
            };
            out.push(json!({
                "id": format!("lrm:{node}"), "type": "lrm", "node": node,
                "status": status, "timestamp": t,
            }));
        }
    }
    let mut sids: Vec<&String> = st.ha.services.keys().collect();
    sids.extend(
        st.ha
            .resources
            .keys()
            .filter(|s| !st.ha.services.contains_key(*s)),
    );
    for sid in sids {
        let ss = st.ha.services.get(sid);
        let sc = st.ha.resources.get(sid);
        let mut m = Map::new();
        m.insert("id".into(), json!(format!("service:{sid}")));
        m.insert("type".into(), json!("service"));
        m.insert("sid".into(), json!(sid));
        let node = match ss {
            Some(s) => {
                m.insert("crm_state".into(), json!(s.state));
                Some(s.node.clone())
            }
            None => super::guest_of(&st, sid).map(|g| g.node.clone()),
        };
        if let Some(n) = &node {
            m.insert("node".into(), json!(n));
        }
        let state = verbose_state(&st, sid, ss);
        m.insert(
            "status".into(),
            json!(format!(
                "{sid} ({}, {state})",
                node.as_deref().unwrap_or("---")
            )),
        );
        m.insert("state".into(), json!(state));
        if let Some(sc) = sc {
            m.insert("request_state".into(), json!(requested_state(sc)));
            for key in ["max_restart", "max_relocate", "failback", "comment"] {
                if let Some(v) = sc.get(key) {
                    let value = match key {
                        "comment" => json!(v),
                        _ => v.parse::<i64>().map(|n| json!(n)).unwrap_or(json!(v)),
                    };
                    m.insert(key.into(), value);
                }
            }
        }
        out.push(Value::Object(m));
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/ha/status/manager_status`: the CRM's status file, the quorum and each node's LRM status.
pub(crate) fn manager_status(sim: &Arc<Sim>) -> ApiResult {
    let st = sim.read();
    let mut data = json!({"quorum": {"node": local(sim), "quorate": 1}});
    if st.ha.timestamp == 0 {
        data["manager_status"] = json!({});
        return Ok(Reply::data(data));
    }
    let node_status: Map<String, Value> = sim
        .nodes
        .iter()
        .map(|n| (n.clone(), json!(node_state(&st, n))))
        .collect();
    let service_status: Map<String, Value> = st
        .ha
        .services
        .iter()
        .map(|(sid, s)| {
            let mut v = serde_json::to_value(s).unwrap_or_default();
            v["uid"] = json!(crate::hashes::sha1_hex(
                format!("{sid}{}", s.state).as_bytes()
            ));
            (sid.clone(), v)
        })
        .collect();
    data["manager_status"] = json!({
        "master_node": master(sim, &st),
        "timestamp": st.ha.timestamp,
        "node_status": node_status,
        "service_status": service_status,
    });
    let mut lrm_status = Map::new();
    for node in &sim.nodes {
        if st.offline_nodes.contains(node) {
            lrm_status.insert(
                node.clone(),
                json!({"mode": "active", "state": "lost_agent_lock"}),
            );
            continue;
        }
        let (mode, state) = lrm(&st, node);
        lrm_status.insert(
            node.clone(),
            json!({"mode": mode, "state": state, "timestamp": now(), "results": {}}),
        );
    }
    data["lrm_status"] = Value::Object(lrm_status);
    Ok(Reply::data(data))
}
