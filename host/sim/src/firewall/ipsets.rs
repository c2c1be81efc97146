//! IP sets and their entries, a guest's and the cluster's (`…/firewall/ipset`), as pve-firewall's IPSet.pm.

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;
use crate::state::State;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;

pub(super) fn ipsets_of<'a>(st: &'a State, scope: &Scope) -> &'a BTreeMap<String, IpSet> {
    static EMPTY: BTreeMap<String, IpSet> = BTreeMap::new();
    match scope {
        Scope::Guest { vmid, .. } => st
            .firewall
            .guests
            .get(vmid)
            .map(|g| &g.ipsets)
            .unwrap_or(&EMPTY),
        _ => &st.firewall.ipsets,
    }
}

pub(super) fn ipsets_mut<'a>(st: &'a mut State, scope: &Scope) -> &'a mut BTreeMap<String, IpSet> {
    match scope {
        Scope::Guest { vmid, .. } => &mut st.firewall.guests.entry(*vmid).or_default().ipsets,
        _ => &mut st.firewall.ipsets,
    }
}

pub(super) fn ipset_list_entries(st: &State, scope: &Scope) -> Vec<BTreeMap<String, String>> {
    ipsets_of(st, scope)
        .iter()
        .map(|(name, s)| {
            let mut e = BTreeMap::from([("name".to_string(), name.clone())]);
            if let Some(c) = &s.comment {
                e.insert("comment".into(), c.clone());
            }
            e
        })
        .collect()
}

pub(super) fn ipsets_list(sim: &Arc<Sim>, scope: &Scope) -> ApiResult {
    let st = sim.read();
    Ok(Reply::data(Value::Array(entries_answer(
        ipset_list_entries(&st, scope),
    ))))
}

/// IPSet.pm `create_ipset`: a new ipset, or with `rename` the ipset renamed (or, with `rename`
/// equal to `name`, its comment changed).
pub(super) fn ipset_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let mut st = sim.write();
    if let Some(rename) = req.get("rename") {
        assert_digest(&digest(&ipset_list_entries(&st, scope)), req.get("digest"))?;
        let sets = ipsets_mut(&mut st, scope);
        let Some(mut set) = sets.get(rename).cloned() else {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{rename}' does not exist"),
            ));
        };
        if name != rename && sets.contains_key(&name) {
            return Err(ApiError::param(
                "name",
                format!("IPSet '{name}' does already exist"),
            ));
        }
        set.comment = comment;
        sets.remove(rename);
        sets.insert(name, set);
        return finish(sim, st);
    }
    let sets = ipsets_mut(&mut st, scope);
    if sets.contains_key(&name) {
        return Err(ApiError::param(
            "name",
            format!("IPSet '{name}' already exists"),
        ));
    }
    sets.insert(
        name,
        IpSet {
            comment,
            entries: BTreeMap::new(),
        },
    );
    finish(sim, st)
}

pub(super) fn no_ipset(name: &str) -> ApiError {
    ApiError::die(format!("no such IPSet '{name}'"))
}

pub(super) fn ip_entries(set: &IpSet) -> Vec<BTreeMap<String, String>> {
    set.entries
        .iter()
        .map(|(cidr, e)| {
            let mut m = BTreeMap::from([("cidr".to_string(), cidr.clone())]);
            if e.nomatch {
                m.insert("nomatch".into(), "1".into());
            }
            if let Some(c) = &e.comment {
                m.insert("comment".into(), c.clone());
            }
            m
        })
        .collect()
}

pub(super) fn ipset_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default();
    let set = ipsets_of(&st, scope)
        .get(name)
        .ok_or_else(|| no_ipset(name))?;
    Ok(Reply::data(Value::Array(entries_answer(ip_entries(set)))))
}

pub(super) fn ipset_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get(&name) else {
        return Err(no_ipset(&name));
    };
    if !set.entries.is_empty() && !req.flag("force") {
        return Err(ApiError::die(format!("IPSet '{name}' is not empty")));
    }
    sets.remove(&name);
    finish(sim, st)
}

pub(super) fn ip_create(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let given = req.get("cidr").unwrap_or_default();
    let mut st = sim.write();
    let alias = given
        .strip_prefix("guest/")
        .or_else(|| given.strip_prefix("dc/"))
        .unwrap_or(given);
    let cidr = if address_version(given).is_none() && is_name(alias) {
        if alias_visible(&st, scope, &alias.to_lowercase()).is_none() {
            return Err(ApiError::die(format!("no such alias '{given}'")));
        }
        given.to_string()
    } else {
        check_cidr("cidr", given)?
    };
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    if set.entries.contains_key(&cidr) {
        return Err(ApiError::param(
            "cidr",
            format!("address '{cidr}' already exists"),
        ));
    }
    if cidr
        .rsplit_once('/')
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b == b'0'))
    {
        return Err(ApiError::param(
            "cidr",
            "a zero prefix is not allowed in ipset entries",
        ));
    }
    set.entries.insert(
        cidr,
        IpEntry {
            nomatch: req.flag("nomatch"),
            comment: req
                .get("comment")
                .filter(|c| !c.is_empty())
                .map(str::to_string),
        },
    );
    finish(sim, st)
}

pub(super) fn ip_get(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let st = sim.read();
    let name = req.get("name").unwrap_or_default();
    let cidr = req.get("cidr").unwrap_or_default();
    let set = ipsets_of(&st, scope)
        .get(name)
        .ok_or_else(|| no_ipset(name))?;
    let all = ip_entries(set);
    let d = digest(&all);
    match all.into_iter().find(|e| e["cidr"] == cidr) {
        Some(e) => {
            let mut o = entries_answer(vec![e]).remove(0);
            o["digest"] = json!(d);
            Ok(Reply::data(o))
        }
        None => Err(ApiError::param("cidr", "no such IP/Network")),
    }
}

pub(super) fn ip_update(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = req.get("cidr").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    assert_digest(&digest(&ip_entries(set)), req.get("digest"))?;
    let Some(entry) = set.entries.get_mut(&cidr) else {
        return Err(ApiError::param("cidr", "no such IP/Network"));
    };
    entry.nomatch = req.flag("nomatch");
    entry.comment = req
        .get("comment")
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    finish(sim, st)
}

pub(super) fn ip_delete(sim: &Arc<Sim>, scope: &Scope, req: &Req) -> ApiResult {
    let name = req.get("name").unwrap_or_default().to_string();
    let cidr = req.get("cidr").unwrap_or_default().to_string();
    let mut st = sim.write();
    let sets = ipsets_mut(&mut st, scope);
    let Some(set) = sets.get_mut(&name) else {
        return Err(no_ipset(&name));
    };
    assert_digest(&digest(&ip_entries(set)), req.get("digest"))?;
    set.entries.remove(&cidr);
    finish(sim, st)
}
