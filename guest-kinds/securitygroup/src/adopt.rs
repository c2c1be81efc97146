//! `adopt`: a manifest for a live security group, from its listing entry and its rules read,
//! such that planning it against the same group proposes nothing (tested as a round trip).
//!
//! * `metadata.name` is the group's name, so a group whose name is not a DNS label (PVE also
//!   allows upper case and `_`) cannot be adopted: no manifest, the reason.
//! * `comment` without proxops's mark when the mark is the ` (proxops:<group>)` suffix proxops
//!   writes, else whole.
//! * Rules are written as PVE holds them; `enable: true` is left out (the default).
//! * A group without the mark is taken over by the host's `metadata.adopt: {id, comment}` (the
//!   kind never sees it): the next apply adds the mark to its comment and nothing else.

use proxops_kind_sdk::kind::Adopted;
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::named::adopt_comment;
use serde_json::{Map, Value, json};

use crate::desired::{NAMED, group_name_problem};
use crate::plan::live_group;

/// The manifest for the group in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let l = live_group(observed, true)?.ok_or("no live security group to adopt")?;
    NAMED.adopt_name(&l.group, group_name_problem)?;
    let mut spec = Map::new();
    let gaps = Vec::new();
    adopt_comment(&mut spec, &l.group, l.comment.as_deref());
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
    Ok(NAMED.adopted(&l.group, spec, gaps))
}
