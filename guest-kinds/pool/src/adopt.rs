//! `adopt`: a manifest for a live pool, from its listing entry and its members read.
//!
//! * `metadata.name` is the pool id, so a pool whose id is not a DNS label starting with a
//!   letter (PVE also allows upper case, `_`, `.` and nested `a/b` ids) cannot be adopted: no
//!   manifest, the reason.
//! * `guests` are written as vmids: adopt sees the pool, not which VM manifests hold those
//!   vmids. A gap says so: naming the VM instead orders the pool after it.
//! * `comment` without proxops's mark when the mark is the ` (proxops:<id>)` suffix proxops
//!   writes, else whole.
//! * A pool without the mark is taken over by the host's `metadata.adopt: {id, comment}`
//!   (the kind never sees it): the next apply adds the mark to its comment and nothing else.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::named::adopt_comment;
use serde_json::{Map, json};

use crate::desired::{NAMED, POOLS, poolid_problem};
use crate::plan::LivePool;

/// The manifest for the pool in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let mut l = NAMED.adopt_entry(observed, LivePool::from_entry)?;
    NAMED.adopt_name(&l.pool, poolid_problem)?;
    let read = observed
        .reads
        .iter()
        .find(|r| r.call.path == POOLS && r.status == 200)
        .ok_or_else(|| format!("the members of pool {} were not read", l.pool))?;
    l.read_members(&read.body)?;
    let mut spec = Map::new();
    let mut gaps = Vec::new();
    adopt_comment(&mut spec, &l.pool, l.comment.as_deref());
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
    Ok(NAMED.adopted(&l.pool, spec, gaps))
}
