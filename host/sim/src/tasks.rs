//! Task endpoints: /nodes/{node}/tasks/{upid}, its status and its log.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::{ApiError, ApiResult, Reply};
use crate::server::Req;
use crate::sim::Sim;

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

fn lookup<'a>(st: &'a crate::state::State, req: &Req) -> Result<&'a crate::state::Task, ApiError> {
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

pub(crate) fn status(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let st = sim.read();
    let t = lookup(&st, req)?;
    let (user, tokenid) = match t.user.split_once('!') {
        Some((u, tok)) => (u.to_string(), Some(tok.to_string())),
        None => (t.user.clone(), None),
    };
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
