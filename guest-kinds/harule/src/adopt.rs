//! `adopt`: a manifest for a live rule, from its listing entry alone.
//!
//! * `metadata.name` is the rule id, so a rule whose id is not a DNS label starting with a
//!   letter (PVE also allows `_` and upper case) cannot be adopted: no manifest, the reason.
//! * `resources` are written as raw sids (`vm:100`): adopt sees only the entry, not which VM
//!   manifests hold those vmids. A gap says so: replacing `vm:N` with the VM's manifest name
//!   orders the rule after the VM (and checks its `spec.ha`).
//! * `nodes` as names, `{node, priority}` where the priority is not 0; `strict` and
//!   `disabled` only when true; `comment` without proxops's mark when the mark is the
//!   ` (proxops:<id>)` suffix proxops writes, else whole.
//! * A rule without the mark is taken over by the host's `metadata.adopt: {id, comment}` (the
//!   kind never sees it): the next apply adds the mark to its comment and nothing else.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::named::adopt_comment;
use serde_json::{Map, Value, json};

use crate::desired::{NAMED, RuleType, configid_problem, is_sid};
use crate::live::LiveRule;

/// The manifest for the rule in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let l = NAMED.adopt_entry(observed, LiveRule::from_entry)?;
    NAMED.adopt_name(&l.rule, configid_problem)?;
    let rule_type = RuleType::parse(&l.rule_type).ok_or_else(|| {
        format!(
            "HA rule {} has type `{}`, which this kind does not know",
            l.rule, l.rule_type
        )
    })?;
    let mut gaps = Vec::new();
    if let Some(bad) = l.resources.iter().find(|s| !is_sid(s)) {
        return Err(format!(
            "HA rule {} names `{bad}`, which is not an HA resource id this kind writes (`vm:N`, `ct:N`)",
            l.rule
        ));
    }
    let mut spec = Map::new();
    spec.insert("type".into(), json!(rule_type.as_str()));
    spec.insert("resources".into(), json!(l.resources));
    if l.resources.iter().any(|s| s.starts_with("vm:")) {
        gaps.push(Gap {
            path: "spec.resources".into(),
            reason: "written as raw HA resource ids; where a VM has a manifest, name it instead (`web-01` for vm:100) so the rule is applied after the VM and its spec.ha is checked".into(),
        });
    }
    match rule_type {
        RuleType::NodeAffinity => {
            let nodes: Vec<Value> = l
                .nodes
                .iter()
                .map(|(n, p)| {
                    if *p == 0 {
                        json!(n)
                    } else {
                        json!({"node": n, "priority": p})
                    }
                })
                .collect();
            spec.insert("nodes".into(), Value::Array(nodes));
            if l.strict {
                spec.insert("strict".into(), json!(true));
            }
        }
        RuleType::ResourceAffinity => {
            if let Some(a) = &l.affinity {
                spec.insert("affinity".into(), json!(a));
            }
        }
    }
    if l.disabled {
        spec.insert("disabled".into(), json!(true));
    }
    adopt_comment(&mut spec, &l.rule, l.comment.as_deref());
    Ok(NAMED.adopted(&l.rule, spec, gaps))
}
