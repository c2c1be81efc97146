//! A guest's firewall options (`…/firewall/options`), with their digest, as pve-firewall's VM.pm.

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use serde_json::{Map, Value, json};
use std::sync::Arc;

use super::*;

/// The options as `GET …/options` answers them (booleans as integers), with their digest.
pub(super) fn options_get(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let Scope::Guest { vmid, .. } = scope else {
        return Err(ApiError::die("no options here"));
    };
    let st = sim.read();
    let options = st
        .firewall
        .guests
        .get(vmid)
        .map(|g| g.options.clone())
        .unwrap_or_default();
    let mut o = Map::new();
    for (k, v) in &options {
        let value = if BOOL_OPTIONS.contains(&k.as_str()) {
            json!(v.parse::<i64>().unwrap_or(0))
        } else {
            json!(v)
        };
        o.insert(k.clone(), value);
    }
    o.insert("digest".into(), json!(digest([&options])));
    Ok(Reply::data(Value::Object(o)))
}

const BOOL_OPTIONS: &[&str] = &["enable", "dhcp", "ipfilter", "macfilter", "ndp", "radv"];
const OPTIONS: &[&str] = &[
    "enable",
    "dhcp",
    "ipfilter",
    "macfilter",
    "ndp",
    "radv",
    "policy_in",
    "policy_out",
    "log_level_in",
    "log_level_out",
];

/// PVE's JSONSchema booleans, as `1`/`0`.
pub(super) fn bool_value(v: &str) -> &'static str {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => "1",
        _ => "0",
    }
}

pub(super) fn options_set(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let Scope::Guest { vmid, .. } = scope else {
        return Err(ApiError::die("no options here"));
    };
    let mut st = sim.write();
    let fw = st.firewall.guests.entry(*vmid).or_default();
    assert_digest(&digest([&fw.options]), req.get("digest"))?;
    let mut options = fw.options.clone();
    if let Some(delete) = req.get("delete") {
        for opt in crate::formats::split_list(delete) {
            if !OPTIONS.contains(&opt) {
                return Err(ApiError::param("delete", format!("no such option '{opt}'")));
            }
            options.remove(opt);
        }
    }
    for k in OPTIONS {
        if let Some(v) = req.get(k) {
            let v = if BOOL_OPTIONS.contains(k) {
                bool_value(v).to_string()
            } else {
                v.to_string()
            };
            options.insert(k.to_string(), v);
        }
    }
    fw.options = options;
    finish(sim, st)
}
