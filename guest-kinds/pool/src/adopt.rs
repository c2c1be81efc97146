//! `adopt`: a manifest for a live pool, from its listing entry and its members read.
//!
//! * `metadata.name` is the pool id, so a pool whose id is not a DNS label starting with a
//!   letter (PVE also allows upper case, `_`, `.` and nested `a/b` ids) cannot be adopted: no
//!   manifest, the reason.
//! * `guests` are written as vmids: adopt sees the pool, not which VM manifests hold those
//!   vmids. A gap says so: naming the VM instead orders the pool after it.
//! * `comment` without proxops's mark when the mark is the ` (proxops:<id>)` suffix proxops
//!   writes, else whole.
//! * A pool without the mark stays unowned: the gap says how to hand it over (add the mark to
//!   its comment in PVE). Until then plan reports it and writes nothing.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, dns_label_problem};
use proxops_kind_sdk::model::Observation;
use serde_json::{Map, Value, json};

use crate::desired::{POOLS, manifest_comment, poolid_problem};
use crate::plan::LivePool;
use crate::validate::KIND;

/// The manifest for the pool in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let text = observed.live.as_deref().ok_or("no live pool to adopt")?;
    let entry: Value =
        serde_json::from_str(text).map_err(|e| format!("the pool entry does not read: {e}"))?;
    let mut l = LivePool::from_entry(&entry).ok_or("the pool entry has no `poolid`")?;
    if let Some(p) = dns_label_problem(&l.pool).or_else(|| poolid_problem(&l.pool)) {
        return Err(format!(
            "pool id `{}` cannot be a manifest name ({p}); a manifest's name is the pool id",
            l.pool
        ));
    }
    let read = observed
        .reads
        .iter()
        .find(|r| r.call.path == POOLS && r.status == 200)
        .ok_or_else(|| format!("the members of pool {} were not read", l.pool))?;
    l.read_members(&read.body)?;
    let mut spec = Map::new();
    let mut gaps = Vec::new();
    if let Some(c) = l
        .comment
        .as_deref()
        .and_then(|c| manifest_comment(&l.pool, c))
    {
        spec.insert("comment".into(), json!(c));
    }
    if !l.vms.is_empty() {
        spec.insert("guests".into(), json!(l.vms));
        gaps.push(Gap {
            path: "spec.guests".into(),
            reason: "written as vmids; where a guest has a manifest, name it instead (`web-01`, `TemplateVM/base`) so the pool is written after it".into(),
        });
    }
    if !l.storages.is_empty() {
        spec.insert("storages".into(), json!(l.storages));
    }
    if !l.is_marked() {
        gaps.push(Gap {
            path: "metadata.name".into(),
            reason: format!(
                "pool {id} was not created by proxops (its comment lacks `{mark}`): plan reports it and changes nothing until `{mark}` is added to its comment in PVE (`pvesh set /pools --poolid {id} --comment '{mark}'`, or the comment with ` ({mark})` appended)",
                id = l.pool,
                mark = proxops_names::named_mark(&l.pool),
            ),
        });
    }
    Ok(Adopted {
        manifest: json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": l.pool},
            "spec": spec,
        }),
        gaps,
    })
}
