//! Aliases, a guest's and the cluster's (`…/firewall/aliases`), as pve-firewall's Aliases.pm.

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

pub(super) fn aliases_of<'a>(st: &'a State, scope: &Scope) -> Option<&'a BTreeMap<String, Alias>> {
    match scope {
        Scope::Guest { vmid, .. } => Some(
            st.firewall
                .guests
                .get(vmid)
                .map(|g| &g.aliases)
                .unwrap_or(empty_aliases()),
        ),
        Scope::Cluster => Some(&st.firewall.aliases),
        Scope::Group(_) => None,
    }
}

pub(super) fn empty_aliases() -> &'static BTreeMap<String, Alias> {
    static EMPTY: BTreeMap<String, Alias> = BTreeMap::new();
    &EMPTY
}

pub(super) fn aliases_mut<'a>(st: &'a mut State, scope: &Scope) -> &'a mut BTreeMap<String, Alias> {
    match scope {
        Scope::Guest { vmid, .. } => &mut st.firewall.guests.entry(*vmid).or_default().aliases,
        _ => &mut st.firewall.aliases,
    }
}

pub(super) fn alias_entry(a: &Alias) -> BTreeMap<String, String> {
    let mut e = BTreeMap::from([
        ("name".to_string(), a.name.clone()),
        ("cidr".to_string(), a.cidr.clone()),
    ]);
    if let Some(c) = &a.comment {
        e.insert("comment".into(), c.clone());
    }
    if let Some(v) = address_version(&a.cidr) {
        e.insert("ipversion".into(), v.to_string());
    }
    e
}

pub(super) fn entries_answer(entries: Vec<BTreeMap<String, String>>) -> Vec<Value> {
    let d = digest(&entries);
    entries
        .into_iter()
        .map(|e| {
            let mut o: Map<String, Value> = e
                .into_iter()
                .map(|(k, v)| {
                    let value = match k.as_str() {
                        "ipversion" | "nomatch" => json!(v.parse::<i64>().unwrap_or(0)),
                        _ => json!(v),
                    };
                    (k, value)
                })
                .collect();
            o.insert("digest".into(), json!(d));
            Value::Object(o)
        })
        .collect()
}

pub(super) fn alias_list_entries(st: &State, scope: &Scope) -> Vec<BTreeMap<String, String>> {
    aliases_of(st, scope)
        .map(|m| m.values().map(alias_entry).collect())
        .unwrap_or_default()
}

pub(super) fn aliases_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(entries_answer(
        alias_list_entries(&st, scope),
    ))))
}

/// `clean_cidr` and `parse_ip_or_cidr` in short: an address or network, as PVE writes it.
pub(super) fn check_cidr(key: &str, cidr: &str) -> Result<String, ApiError> {
    let (host, prefix) = match cidr.split_once('/') {
        Some((h, p)) => (h, Some(p)),
        None => (cidr, None),
    };
    let ip: std::net::IpAddr = host.parse().map_err(|_| {
        ApiError::param(
            key,
            format!("value does not look like a valid CIDR network: {cidr}"),
        )
    })?;
    if let Some(p) = prefix {
        let max = if ip.is_ipv4() { 32 } else { 128 };
        if !p.parse::<u8>().is_ok_and(|n| n <= max) {
            return Err(ApiError::param(
                key,
                format!("value does not look like a valid CIDR network: {cidr}"),
            ));
        }
    }
    Ok(cidr.to_string())
}

pub(super) fn alias_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = check_cidr("cidr", req.get("cidr").unwrap_or_default())?;
    let mut st = sim.write();
    let aliases = aliases_mut(&mut st, scope);
    if aliases.contains_key(&name.to_lowercase()) {
        return Err(ApiError::param(
            "name",
            format!("alias '{name}' already exists"),
        ));
    }
    aliases.insert(
        name.to_lowercase(),
        Alias {
            name,
            cidr,
            comment: req
                .get("comment")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
        },
    );
    finish(sim, st)
}

pub(super) fn alias_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default().to_lowercase();
    let all = alias_list_entries(&st, scope);
    let d = digest(&all);
    match aliases_of(&st, scope).and_then(|m| m.get(&name)) {
        Some(a) => {
            let mut o = entries_answer(vec![alias_entry(a)]).remove(0);
            o["digest"] = json!(d);
            Ok(Reply::data(o))
        }
        None => Err(ApiError::param("name", "no such alias")),
    }
}

pub(super) fn alias_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    assert_digest(&digest(&alias_list_entries(&st, scope)), req.get("digest"))?;
    let name = req.get("name").unwrap_or_default().to_lowercase();
    let cidr = check_cidr("cidr", req.get("cidr").unwrap_or_default())?;
    let aliases = aliases_mut(&mut st, scope);
    let Some(mut alias) = aliases.get(&name).cloned() else {
        return Err(ApiError::param("name", "no such alias"));
    };
    alias.cidr = cidr;
    alias.comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    if let Some(rename) = req.get("rename").filter(|r| !r.is_empty()) {
        let lc = rename.to_lowercase();
        if lc != name && aliases.contains_key(&lc) {
            return Err(ApiError::param(
                "name",
                format!("alias '{rename}' already exists"),
            ));
        }
        aliases.remove(&name);
        alias.name = rename.to_string();
        aliases.insert(lc, alias);
    } else {
        aliases.insert(name, alias);
    }
    finish(sim, st)
}

pub(super) fn alias_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let mut st = sim.write();
    assert_digest(&digest(&alias_list_entries(&st, scope)), req.get("digest"))?;
    let name = req.get("name").unwrap_or_default().to_lowercase();
    aliases_mut(&mut st, scope).remove(&name);
    finish(sim, st)
}
