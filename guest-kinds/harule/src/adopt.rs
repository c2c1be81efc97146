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
//! * A rule without the mark stays unowned: `metadata.adopt` (the host's take-over field)
//!   covers guests only, so the gap says how to hand the rule over (add the mark to its
//!   comment in PVE). Until then plan reports it, and writes nothing.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, dns_label_problem};
use proxops_kind_sdk::model::Observation;
use serde_json::{Map, Value, json};

use crate::desired::{RuleType, configid_problem, is_sid, manifest_comment};
use crate::live::LiveRule;
use crate::validate::KIND;

/// The manifest for the rule in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let text = observed.live.as_deref().ok_or("no live HA rule to adopt")?;
    let entry: Value =
        serde_json::from_str(text).map_err(|e| format!("the HA rule entry does not read: {e}"))?;
    let l = LiveRule::from_entry(&entry).ok_or("the HA rule entry has no `rule` id")?;
    if let Some(p) = dns_label_problem(&l.rule).or_else(|| configid_problem(&l.rule)) {
        return Err(format!(
            "HA rule id `{}` cannot be a manifest name ({p}); a manifest's name is the rule id",
            l.rule
        ));
    }
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
    if let Some(c) = l
        .comment
        .as_deref()
        .and_then(|c| manifest_comment(&l.rule, c))
    {
        spec.insert("comment".into(), json!(c));
    }
    if !l.is_marked() {
        gaps.push(Gap {
            path: "metadata.name".into(),
            reason: format!(
                "HA rule {id} was not created by proxops (its comment lacks `{mark}`) and metadata.adopt takes over guests only: plan reports it and changes nothing until `{mark}` is added to its comment in PVE (`ha-manager rules set {t} {id} --comment '{mark}'`, or the comment with ` ({mark})` appended)",
                id = l.rule,
                mark = proxops_names::named_mark(&l.rule),
                t = rule_type.as_str(),
            ),
        });
    }
    Ok(Adopted {
        manifest: json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": l.rule},
            "spec": spec,
        }),
        gaps,
    })
}
