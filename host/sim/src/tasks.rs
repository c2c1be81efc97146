//! Task endpoints: the node and cluster task lists, /nodes/{node}/tasks/{upid}, its status and its log.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::Task;

/// PVE's UPID syntax check (`PVE::Tools::upid_decode`).
fn parse_upid(upid: &str) -> bool {
    let Some(rest) = upid.strip_prefix("UPID:") else {
        return false;
    };
    let Some(body) = rest.strip_suffix(':') else {
        return false;
    };
    let parts: Vec<&str> = body.split(':').collect();
    if parts.len() != 7 {
        return false;
    }
    let hex = |s: &str, lens: &[usize]| {
        lens.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    !parts[0].is_empty()
        && hex(parts[1], &[8])
        && hex(parts[2], &[8, 9])
        && hex(parts[3], &[8])
        && !parts[4].is_empty()
        && !parts[6].is_empty()
}

fn lookup<'a>(st: &'a crate::state::State, req: &Req) -> Result<&'a Task, ApiError> {
    let upid = req.get("upid").unwrap_or("");
    if !parse_upid(upid) {
        return Err(ApiError::param("upid", "unable to parse worker upid"));
    }
    st.tasks
        .get(upid)
        .filter(|t| t.node == req.node())
        .ok_or_else(|| ApiError::param("upid", "no such task"))
}

pub(crate) fn index(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    lookup(&st, req)?;
    Ok(Reply::data(json!([{"name": "log"}, {"name": "status"}])))
}

/// PVE's `normalize_status_type`: `ok`, `warning`, `error`, or `unknown` for a running task.
fn status_type(exitstatus: Option<&str>) -> &'static str {
    match exitstatus {
        None | Some("") => "unknown",
        Some("OK") => "ok",
        Some(s) if s.starts_with("WARNINGS: ") => "warning",
        Some(_) => "error",
    }
}

/// The user and the token id of a task's auth id (`convert_token_task`).
fn split_user(user: &str) -> (&str, Option<&str>) {
    match user.split_once('!') {
        Some((u, tok)) => (u, Some(tok)),
        None => (user, None),
    }
}

/// One task list entry: the decoded UPID, plus `endtime` and `status` (`RUNNING` while it runs).
fn list_entry(t: &Task) -> Value {
    let (user, tokenid) = split_user(&t.user);
    let mut v = json!({
        "upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart,
        "starttime": t.starttime, "type": t.kind, "id": t.id, "user": user,
        "status": t.exitstatus.as_deref().unwrap_or("RUNNING"),
    });
    if let Some(tok) = tokenid {
        v["tokenid"] = json!(tok);
    }
    if let Some(end) = t.endtime {
        v["endtime"] = json!(end);
    }
    v
}

/// `GET /nodes/{node}/tasks` as pve-manager's `node_tasks`: the running tasks (`source=active|all`), then the
/// finished ones newest first (`source=archive|all`), filtered by user, type, vmid, time and status; `start`
/// skips and `limit` caps the matches, `total` counts them all.
pub(crate) fn node_list(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let node = req.node();
    let start: u64 = req.get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut limit: i64 = req.get("limit").and_then(|v| v.parse().ok()).unwrap_or(50);
    let source = req.get("source").unwrap_or("archive");
    let errors = req.flag("errors");
    let userfilter = req.get("userfilter").map(str::to_lowercase);
    let typefilter = req.get("typefilter").filter(|t| !t.is_empty());
    let vmid = req.get("vmid").filter(|v| *v != "0");
    let since: Option<u64> = req.get("since").and_then(|v| v.parse().ok());
    let until: Option<u64> = req.get("until").and_then(|v| v.parse().ok());
    let statuses: Vec<String> = match req.get("statusfilter") {
        Some(list) if !errors => crate::formats::split_list(list)
            .into_iter()
            .map(str::to_lowercase)
            .collect(),
        _ if errors => vec!["warning".into(), "error".into(), "unknown".into()],
        _ => vec![
            "ok".into(),
            "warning".into(),
            "error".into(),
            "unknown".into(),
        ],
    };
    let matches = |t: &Task| -> bool {
        let (user, _) = split_user(&t.user);
        userfilter
            .as_ref()
            .is_none_or(|f| user.to_lowercase().contains(f.as_str()))
            && typefilter.is_none_or(|f| f == t.kind)
            && vmid.is_none_or(|v| v == t.id)
            && since.is_none_or(|s| t.starttime >= s)
            && until.is_none_or(|u| t.starttime <= u)
            && statuses
                .iter()
                .any(|s| s == status_type(t.exitstatus.as_deref()))
    };
    let mut listed: Vec<&Task> = Vec::new();
    if source == "active" || source == "all" {
        let mut running: Vec<&Task> = st
            .tasks
            .values()
            .filter(|t| t.node == node && t.exitstatus.is_none())
            .collect();
        running.sort_by_key(|t| std::cmp::Reverse((t.starttime, t.pid)));
        listed.extend(running);
    }
    if source != "active" {
        let mut done: Vec<&Task> = st
            .tasks
            .values()
            .filter(|t| t.node == node && t.exitstatus.is_some())
            .collect();
        done.sort_by_key(|t| std::cmp::Reverse(t.end_seq));
        listed.extend(done);
    }
    let mut count: u64 = 0;
    let mut out = Vec::new();
    for t in listed.into_iter().filter(|t| matches(t)) {
        count += 1;
        if count > start && limit > 0 {
            out.push(list_entry(t));
            limit -= 1;
        }
    }
    Ok(Reply {
        data: Value::Array(out),
        total: Some(count),
        raw: None,
    })
}

/// `GET /cluster/tasks`: the tasks of every node, newest first (PVE lists each node's recent ones).
pub(crate) fn cluster_list(sim: &Arc<Sim>) -> ApiResult {
    let st = sim.read();
    let mut all: Vec<&Task> = st.tasks.values().collect();
    all.sort_by_key(|t| std::cmp::Reverse((t.starttime, t.pid)));
    Ok(Reply::data(Value::Array(
        all.into_iter().map(list_entry).collect(),
    )))
}

pub(crate) fn status(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let t = lookup(&st, req)?;
    let (user, tokenid) = split_user(&t.user);
    let mut v = json!({
        "upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart,
        "starttime": t.starttime, "type": t.kind, "id": t.id, "user": user,
        "status": if t.exitstatus.is_some() { "stopped" } else { "running" },
    });
    if let Some(tok) = tokenid {
        v["tokenid"] = json!(tok);
    }
    if let Some(e) = &t.exitstatus {
        v["exitstatus"] = json!(e);
    }
    Ok(Reply::data(v))
}

pub(crate) fn log(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let t = lookup(&st, req)?;
    let start: usize = req.get("start").and_then(|v| v.parse().ok()).unwrap_or(0);
    let limit: usize = req.get("limit").and_then(|v| v.parse().ok()).unwrap_or(50);
    let lines: Vec<Value> = t
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(limit)
        .map(|(i, l)| json!({"n": i + 1, "t": l}))
        .collect();
    Ok(Reply {
        data: Value::Array(lines),
        total: Some(t.log.len() as u64),
        raw: None,
    })
}
