//! The CRM loop: a tokio task that takes the HA resources and commands up and carries them out as PVE's
//! `PVE::HA::Manager` and the LRMs do, each action taking `ha_crm_delay` after the CRM decided it; a node offline
//! for `ha_fence_delay` is fenced and its services recovered to nodes `select_service_node` picks (node affinity
//! with priorities and `strict`, negative and positive resource affinity, fewest services, maintenance fallback,
//! `failback`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Service, requested_state};
use crate::sim::Sim;
use crate::state::State;

/// Runs the CRM until `stop` flips.
pub(crate) async fn run(sim: Arc<Sim>, mut stop: watch::Receiver<bool>) {
    let poll = (sim.ha_crm_delay / 4).clamp(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = stop.changed() => break,
        }
        let changed = {
            let mut st = sim.write();
            let changed = round(&sim, &mut st, Instant::now());
            if changed {
                st.touch();
            }
            changed
        };
        if changed {
            sim.persist();
        }
    }
}

/// Nodes services may be placed on: online and not in maintenance.
pub(crate) fn online_nodes(nodes: &[String], st: &State) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| !st.offline_nodes.contains(*n) && !st.ha.maintenance.contains(*n))
        .cloned()
        .collect()
}

/// How `select_service_node` may move a service: `Stay` keeps it where it is when allowed, `Best` picks the
/// best-scored node (recovery).
#[derive(Clone, Copy, PartialEq)]
enum Preference {
    Stay,
    Best,
}

/// `select_service_node`: the node a service should run on, `None` when no node is allowed.
fn select_node(sim: &Sim, st: &State, sid: &str, pref: Preference) -> Option<String> {
    let ss = st.ha.services.get(sid)?;
    let current = ss.node.as_str();
    let failback = st
        .ha
        .resources
        .get(sid)
        .is_none_or(|o| o.get("failback").is_none_or(|f| f != "0"));
    let online: Vec<String> = online_nodes(&sim.nodes, st);
    // get_node_affinity: allowed nodes and the highest-priority class among them.
    let (allowed, mut preferred): (BTreeSet<String>, BTreeSet<String>) =
        match super::rules::node_affinity(st, sid) {
            None => (
                online.iter().cloned().collect(),
                online.iter().cloned().collect(),
            ),
            Some((nodes, strict)) => {
                let mut prio: Vec<(i64, String)> = online
                    .iter()
                    .filter_map(|n| match nodes.get(n) {
                        Some(p) => Some((*p, n.clone())),
                        None if !strict => Some((-1, n.clone())),
                        None => None,
                    })
                    .collect();
                prio.sort();
                let top = prio.last().map(|(p, _)| *p);
                let allowed = prio.iter().map(|(_, n)| n.clone()).collect();
                let preferred = prio
                    .iter()
                    .filter(|(p, _)| Some(*p) == top)
                    .map(|(_, n)| n.clone())
                    .collect();
                (allowed, preferred)
            }
        };
    if preferred.is_empty() {
        return None;
    }
    let (together, separate) = super::rules::affinitive(st, sid);
    let placed = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter()
            .filter_map(|s| st.ha.services.get(s))
            .flat_map(|s| std::iter::once(s.node.clone()).chain(s.target.clone()))
            .collect()
    };
    let separate_nodes = placed(&separate);
    let together_nodes = placed(&together);
    let allowed_here = |n: &str| {
        !separate_nodes.contains(n) && (together_nodes.is_empty() || together_nodes.contains(n))
    };
    if pref == Preference::Stay && !failback && allowed.contains(current) && allowed_here(current) {
        return Some(current.to_string());
    }
    preferred.retain(|n| !separate_nodes.contains(n));
    if !together_nodes.is_empty() && preferred.iter().any(|n| together_nodes.contains(n)) {
        preferred.retain(|n| together_nodes.contains(n));
    }
    if let Some(fallback) = &ss.maintenance_node
        && preferred.contains(fallback)
    {
        return Some(fallback.clone());
    }
    if pref == Preference::Stay && preferred.contains(current) {
        return Some(current.to_string());
    }
    let score = |n: &str| {
        st.ha
            .services
            .iter()
            .filter(|(other, s)| *other != sid && (s.node == n || s.target.as_deref() == Some(n)))
            .count()
    };
    preferred.into_iter().min_by_key(|n| (score(n), n.clone()))
}

/// Moves a service to a new CRM state, restarting its delay.
fn change(ss: &mut Service, state: &str, now: Instant) {
    ss.state = state.to_string();
    ss.since = Some(now);
    if state != "started" {
        ss.running = false;
    }
    if state != "migrate" && state != "relocate" {
        ss.target = None;
    }
}

/// True once a service has been in its state for the CRM delay.
fn due(sim: &Sim, ss: &Service, now: Instant) -> bool {
    ss.since
        .is_none_or(|t| now.saturating_duration_since(t) >= sim.ha_crm_delay)
}

/// One CRM round over every service; true when anything changed.
pub(crate) fn round(sim: &Arc<Sim>, st: &mut State, now: Instant) -> bool {
    if !st.ha.active() {
        return false;
    }
    st.ha.timestamp = crate::state::now();
    let mut changed = false;
    // Fencing: an offline node is fenced once it has been gone for the fencing delay; its HA guests die with it.
    let offline: Vec<String> = st.offline_nodes.iter().cloned().collect();
    for node in offline {
        if st.ha.fenced.contains(&node) {
            continue;
        }
        let since = *st.ha.offline_since.entry(node.clone()).or_insert(now);
        if now.saturating_duration_since(since) >= sim.ha_fence_delay {
            st.ha.fenced.insert(node.clone());
            let sids: Vec<String> = st
                .ha
                .services
                .iter()
                .filter(|(_, s)| s.node == node)
                .map(|(sid, _)| sid.clone())
                .collect();
            for sid in sids {
                if let Some(g) = super::guest_of_mut(st, &sid) {
                    g.running = false;
                    g.started_at = 0;
                    g.pid = 0;
                }
            }
            changed = true;
        }
    }
    // Stale or ignored services leave the manager status; new ones are added.
    let before = st.ha.services.len();
    let resources = st.ha.resources.clone();
    st.ha.services.retain(|sid, _| {
        resources
            .get(sid)
            .is_some_and(|o| requested_state(o) != "ignored")
    });
    let gone: Vec<String> = st
        .ha
        .services
        .keys()
        .filter(|sid| super::guest_of(st, sid).is_none())
        .cloned()
        .collect();
    for sid in gone {
        st.ha.services.remove(&sid);
    }
    changed |= st.ha.services.len() != before;
    for (sid, opts) in &resources {
        let req = requested_state(opts);
        if req == "ignored" || st.ha.services.contains_key(sid) {
            continue;
        }
        let Some(node) = super::guest_of(st, sid).map(|g| g.node.clone()) else {
            continue;
        };
        let state = if req == "started" {
            "request_start"
        } else {
            "request_stop"
        };
        st.ha.services.insert(
            sid.clone(),
            Service {
                node,
                state: state.into(),
                target: None,
                running: false,
                maintenance_node: None,
                cmd: st.ha.pending_cmds.remove(sid),
                since: Some(now),
            },
        );
        changed = true;
    }
    st.ha
        .pending_cmds
        .retain(|sid, _| resources.contains_key(sid));
    let sids: Vec<String> = st.ha.services.keys().cloned().collect();
    for sid in sids {
        changed |= step(sim, st, &sid, now);
    }
    changed
}

/// One service's next state (`next_state_*`), and the LRM's action once it is due.
fn step(sim: &Arc<Sim>, st: &mut State, sid: &str, now: Instant) -> bool {
    let Some(opts) = st.ha.resources.get(sid) else {
        return false;
    };
    let req = requested_state(opts).to_string();
    let Some(mut ss) = st.ha.services.get(sid).cloned() else {
        return false;
    };
    let original = ss.clone();
    let node_state = super::node_state(st, &ss.node);
    match ss.state.as_str() {
        "fence" if due(sim, &ss, now) => change(&mut ss, "recovery", now),
        "fence" => {}
        "recovery" => {
            if let Some(target) = select_node(sim, st, sid, Preference::Best) {
                if let Some(g) = super::guest_of_mut(st, sid) {
                    // steal_service: the config moves to the new node, its volumes do not.
                    g.node = target.clone();
                    g.running = false;
                }
                ss.node = target;
                ss.maintenance_node = None;
                let next = if req == "started" {
                    "started"
                } else {
                    "request_stop"
                };
                change(&mut ss, next, now);
            } else if req == "disabled" {
                change(&mut ss, "stopped", now);
            }
        }
        _ if node_state == "unknown" => {}
        _ if node_state == "fence" && ss.state != "error" && req != "disabled" => {
            change(&mut ss, "fence", now);
        }
        _ if node_state == "fence" => {}
        "request_start" => {
            if req != "started" {
                change(&mut ss, "request_stop", now);
            } else if due(sim, &ss, now) {
                lrm_start(sim, st, sid, &mut ss, now);
            }
        }
        "request_stop" => {
            if req == "started" {
                change(&mut ss, "request_start", now);
            } else if due(sim, &ss, now) {
                lrm_stop(sim, st, sid);
                change(&mut ss, "stopped", now);
            }
        }
        "stopped" => {
            if let Some(cmd) = ss.cmd.take() {
                if let Some(target) = cmd_target(&cmd)
                    && target != ss.node
                    && online_nodes(&sim.nodes, st).contains(&target)
                {
                    change(&mut ss, "migrate", now);
                    ss.target = Some(target);
                }
            } else if req == "started" {
                change(&mut ss, "request_start", now);
            } else if node_state == "maintenance"
                && let Some(target) = select_node(sim, st, sid, Preference::Best)
                && target != ss.node
            {
                ss.maintenance_node = Some(ss.node.clone());
                change(&mut ss, "migrate", now);
                ss.target = Some(target);
            }
        }
        "started" => started(sim, st, sid, &req, &mut ss, now, node_state),
        "migrate" | "relocate" if due(sim, &ss, now) => {
            let target = ss.target.clone().unwrap_or_else(|| ss.node.clone());
            let relocate = ss.state == "relocate";
            let was_running = super::guest_of(st, sid).is_some_and(|g| g.running);
            match crate::migrate::move_guest(sim, st, sid, &target, relocate) {
                Ok(()) => {
                    ss.node = target;
                }
                Err(e) => {
                    tracing::info!("HA {} of '{sid}' failed: {e}", ss.state);
                }
            }
            let next = if req == "started" {
                "started"
            } else {
                "stopped"
            };
            change(&mut ss, next, now);
            ss.running = was_running && req == "started";
            if req == "started" && !ss.running {
                change(&mut ss, "request_start", now);
            }
        }
        "error" if req == "disabled" => change(&mut ss, "stopped", now),
        _ => {}
    }
    let changed = ss != original || ss.since != original.since;
    st.ha.services.insert(sid.to_string(), ss);
    changed
}

/// `next_state_started`.
#[allow(clippy::too_many_arguments)]
fn started(
    sim: &Arc<Sim>,
    st: &mut State,
    sid: &str,
    req: &str,
    ss: &mut Service,
    now: Instant,
    node_state: &str,
) {
    if node_state == "maintenance" && ss.maintenance_node.is_none() {
        ss.maintenance_node = Some(ss.node.clone());
    }
    if req == "stopped" || req == "disabled" {
        change(ss, "request_stop", now);
        return;
    }
    if let Some(cmd) = ss.cmd.take() {
        let mut words = cmd.split_whitespace();
        match (words.next(), words.next()) {
            (Some(c @ ("migrate" | "relocate")), Some(target))
                if target != ss.node
                    && online_nodes(&sim.nodes, st).iter().any(|n| n == target) =>
            {
                change(ss, c, now);
                ss.target = Some(target.to_string());
            }
            (Some("stop"), _) => {
                change(ss, "request_stop", now);
                if let Some(o) = st.ha.resources.get_mut(sid) {
                    o.insert("state".into(), "stopped".into());
                }
            }
            _ => {}
        }
        return;
    }
    let guest_running = super::guest_of(st, sid).is_some_and(|g| g.running);
    if !guest_running {
        // Not running (yet, or it went down): the LRM starts it once the delay has passed.
        ss.running = false;
        if due(sim, ss, now) {
            lrm_start(sim, st, sid, ss, now);
        }
        return;
    }
    ss.running = true;
    if let Some(node) = select_node(sim, st, sid, Preference::Stay)
        && node != ss.node
    {
        if let Some(fallback) = &ss.maintenance_node
            && (node == *fallback || ss.node != *fallback)
        {
            ss.maintenance_node = None;
        }
        let how = if sid.starts_with("vm:") {
            "migrate"
        } else {
            "relocate"
        };
        change(ss, how, now);
        ss.target = Some(node);
    } else if ss.maintenance_node.as_deref() == Some(ss.node.as_str()) && node_state == "online" {
        ss.maintenance_node = None;
    }
}

/// The node of a `migrate <node>` or `relocate <node>` command.
fn cmd_target(cmd: &str) -> Option<String> {
    let mut words = cmd.split_whitespace();
    match (words.next(), words.next()) {
        (Some("migrate" | "relocate"), Some(t)) => Some(t.to_string()),
        _ => None,
    }
}

/// The LRM starts a service on its node; a start that fails puts it in `error` (the simulator does not model
/// `max_restart`/`max_relocate` retries).
fn lrm_start(sim: &Arc<Sim>, st: &mut State, sid: &str, ss: &mut Service, now: Instant) {
    let result = match sid.split_once(':') {
        Some(("vm", n)) => crate::qemu::ha_start(sim, st, n.parse().unwrap_or(0)),
        Some(("ct", n)) => crate::lxc::ha_start(sim, st, n.parse().unwrap_or(0)),
        _ => Err(format!("unknown service '{sid}'")),
    };
    match result {
        Ok(()) => {
            change(ss, "started", now);
            ss.running = true;
        }
        Err(e) => {
            tracing::info!("HA start of '{sid}' failed: {e}");
            change(ss, "error", now);
        }
    }
}

/// The LRM stops a service (hard stop; a shutdown's timeout is not modelled).
fn lrm_stop(sim: &Arc<Sim>, st: &mut State, sid: &str) {
    match sid.split_once(':') {
        Some(("vm", n)) => crate::qemu::ha_stop(sim, st, n.parse().unwrap_or(0)),
        Some(("ct", n)) => crate::lxc::ha_stop(sim, st, n.parse().unwrap_or(0)),
        _ => {}
    }
}
