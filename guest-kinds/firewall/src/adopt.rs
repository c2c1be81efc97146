//! `adopt`: a Firewall manifest for a guest's live firewall, such that planning it against the
//! same firewall proposes nothing (tested as a round trip).
//!
//! * Adopt has one round of reads, asked before anything is known: options, rules, aliases and
//!   the ipset list. An ipset's entries need a read by its name, so a guest with ipsets is not
//!   adopted (the reason says so): a manifest without its entries would have plan remove them.
//! * A `group` rule is written as `group: <name>`, a reference to kind `SecurityGroup`: the
//!   group needs a manifest of its own before the adopted one validates (a gap says so).
//! * Rules and aliases are written as PVE holds them; booleans as booleans; `enable: true` is
//!   left out of rules (the default).

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, dns_label_problem};
use proxops_kind_sdk::model::{Call, Method, Observation};
use serde_json::{Map, Value, json};

use crate::desired::{BOOL_OPTIONS, Desired, KIND};
use crate::plan::{live_guest, read_live};

/// The reads adopt needs for the guest of `live`.
pub fn observe(live: Option<&Value>) -> Vec<Call> {
    let Some((node, ty)) = live_guest(live) else {
        return Vec::new();
    };
    let Some(vmid) = live.and_then(|e| e.get("vmid")).and_then(Value::as_u64) else {
        return Vec::new();
    };
    ["options", "rules", "aliases", "ipset"]
        .iter()
        .map(|p| {
            Call::new(
                Method::Get,
                format!("/nodes/{node}/{ty}/{vmid}/firewall/{p}"),
            )
        })
        .collect()
}

/// The manifest for the firewall of the guest in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let text = observed.live.as_deref().ok_or("no live guest to adopt")?;
    let entry: Value =
        serde_json::from_str(text).map_err(|e| format!("the guest entry does not read: {e}"))?;
    let (node, ty) = live_guest(Some(&entry)).ok_or("the guest entry has no node or type")?;
    let vmid = entry
        .get("vmid")
        .and_then(Value::as_u64)
        .ok_or("the guest entry has no vmid")?;
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("guest-{vmid}"));
    if let Some(p) = dns_label_problem(&name) {
        return Err(format!(
            "guest {vmid}'s name `{name}` cannot be a manifest name ({p})"
        ));
    }
    let probe = Desired {
        name: name.clone(),
        vmid,
        guest_type: ty.clone(),
        vm: None,
        options: Default::default(),
        rules: Vec::new(),
        aliases: Default::default(),
        ipsets: Default::default(),
    };
    let live = read_live(&probe, &probe.base(&node), observed)?;
    if !live.ipsets.is_empty() {
        let names: Vec<&str> = live.ipsets.keys().map(String::as_str).collect();
        return Err(format!(
            "guest {vmid}'s firewall has ipsets ({}): adopt cannot read their entries in its one round of reads, and a manifest without them would have plan remove them; write spec.ipsets by hand",
            names.join(", ")
        ));
    }
    let mut gaps = Vec::new();
    let mut spec = Map::new();
    spec.insert("vmid".into(), json!(vmid));
    if ty != "qemu" {
        spec.insert("type".into(), json!(ty));
    }
    let mut options = Map::new();
    for (k, v) in &live.options {
        if BOOL_OPTIONS.contains(&k.as_str()) {
            options.insert(k.clone(), json!(v == "1"));
        } else {
            options.insert(k.clone(), json!(v));
        }
    }
    if !options.is_empty() {
        spec.insert("options".into(), Value::Object(options));
    }
    if !live.aliases.is_empty() {
        let aliases: Vec<Value> = live
            .aliases
            .values()
            .map(|a| {
                let mut o = json!({"name": a.name, "cidr": a.cidr});
                if let Some(c) = &a.comment {
                    o["comment"] = json!(c);
                }
                o
            })
            .collect();
        spec.insert("aliases".into(), Value::Array(aliases));
    }
    let mut rules = Vec::new();
    for (i, r) in live.rules.iter().enumerate() {
        let mut o = Map::new();
        for (k, v) in r {
            match k.as_str() {
                "enable" if v == "1" => {}
                "enable" => {
                    o.insert("enable".into(), json!(false));
                }
                "action" if r.get("type").is_some_and(|t| t == "group") => {
                    o.insert("group".into(), json!(v));
                    gaps.push(Gap {
                        path: format!("spec.rules[{i}].group"),
                        reason: format!(
                            "security group `{v}` needs a SecurityGroup manifest of its own before this one validates"
                        ),
                    });
                }
                _ => {
                    o.insert(k.clone(), json!(v));
                }
            }
        }
        rules.push(Value::Object(o));
    }
    if !rules.is_empty() {
        spec.insert("rules".into(), Value::Array(rules));
    }
    Ok(Adopted {
        manifest: json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name},
            "spec": spec,
        }),
        gaps,
    })
}
