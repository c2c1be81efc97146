//! `adopt`: a manifest for a live security group, from its listing entry and its rules read,
//! such that planning it against the same group proposes nothing (tested as a round trip).
//!
//! * `metadata.name` is the group's name, so a group whose name is not a DNS label (PVE also
//!   allows upper case and `_`) cannot be adopted: no manifest, the reason.
//! * `comment` without proxops's mark when the mark is the ` (proxops:<group>)` suffix proxops
//!   writes, else whole.
//! * Rules are written as PVE holds them; `enable: true` is left out (the default).
//! * A group without the mark stays unowned: the gap says how to hand it over (add the mark to
//!   its comment in PVE). Until then plan reports it and writes nothing.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, dns_label_problem};
use proxops_kind_sdk::model::Observation;
use serde_json::{Map, Value, json};

use crate::desired::{KIND, group_name_problem};
use crate::plan::live_group;

/// The manifest for the group in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let l = live_group(observed, true)?.ok_or("no live security group to adopt")?;
    if let Some(p) = dns_label_problem(&l.group).or_else(|| group_name_problem(&l.group)) {
        return Err(format!(
            "security group `{}` cannot be a manifest name ({p}); a manifest's name is the group's",
            l.group
        ));
    }
    let mut spec = Map::new();
    let mut gaps = Vec::new();
    if let Some(c) = l
        .comment
        .as_deref()
        .and_then(|c| proxops_names::unmarked_comment(&l.group, c))
    {
        spec.insert("comment".into(), json!(c));
    }
    let rules: Vec<Value> = l
        .rules
        .iter()
        .map(|r| {
            let mut o = Map::new();
            for (k, v) in r {
                match k.as_str() {
                    "enable" if v == "1" => {}
                    "enable" => {
                        o.insert("enable".into(), json!(false));
                    }
                    _ => {
                        o.insert(k.clone(), json!(v));
                    }
                }
            }
            Value::Object(o)
        })
        .collect();
    if !rules.is_empty() {
        spec.insert("rules".into(), Value::Array(rules));
    }
    if !l.is_marked() {
        gaps.push(Gap {
            path: "metadata.name".into(),
            reason: format!(
                "security group {g} was not created by proxops (its comment lacks `{mark}`): plan reports it and changes nothing until `{mark}` is added to its comment in PVE (`pvesh create /cluster/firewall/groups --group {g} --rename {g} --comment '{mark}'`, or the comment with ` ({mark})` appended)",
                g = l.group,
                mark = proxops_names::named_mark(&l.group),
            ),
        });
    }
    Ok(Adopted {
        manifest: json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": l.group},
            "spec": spec,
        }),
        gaps,
    })
}
