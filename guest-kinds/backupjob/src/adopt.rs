//! `adopt`: a manifest for a live backup job, from its listing entry alone.
//!
//! * `metadata.name` is the job id, so a job whose id is not a DNS label starting with a
//!   letter (PVE's generated `backup-<uuid>` ids are fine; ids with `_` or upper case are not)
//!   cannot be adopted: no manifest, the reason. A job writing to a `dumpdir` instead of a
//!   storage cannot be either.
//! * Guests are written as vmids (adopt sees the job, not which manifests hold those vmids);
//!   a pool as its id, which must then be a Pool manifest's name.
//! * Options the kind does not model (`bwlimit`, `mailto`, …) stay in PVE untouched; a gap
//!   names them.
//! * A job without the mark is taken over by the host's `metadata.adopt: {id, comment}` (the
//!   kind never sees it): the next apply adds the mark to its comment and nothing else.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::named::adopt_comment;
use serde_json::{Map, Value, json};

use crate::desired::{KEEP_KEYS, NAMED, jobid_problem};
use crate::plan::LiveJob;

fn vmids(s: &str) -> Vec<u64> {
    s.split(',').filter_map(|v| v.parse().ok()).collect()
}

/// The manifest for the job in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let l = NAMED.adopt_entry(observed, LiveJob::from_entry)?;
    NAMED.adopt_name(&l.id, jobid_problem)?;
    let opt = |k: &str| l.opts.get(k).cloned();
    let storage = opt("storage").ok_or_else(|| {
        format!("backup job {} names no storage (it writes to a dumpdir, or PVE's default `local`); proxops manages jobs that name their storage", l.id)
    })?;
    let schedule = opt("schedule").ok_or_else(|| format!("backup job {} has no schedule", l.id))?;
    let mut spec = Map::new();
    let mut gaps = Vec::new();
    spec.insert("schedule".into(), json!(schedule));
    spec.insert("storage".into(), json!(storage));
    if let Some(p) = opt("pool") {
        spec.insert("pool".into(), json!(p));
        gaps.push(Gap {
            path: "spec.pool".into(),
            reason: format!("names pool {p}, which must be a Pool manifest's name (adopt the pool with the Pool kind)"),
        });
    } else if let Some(v) = opt("vmid") {
        spec.insert("guests".into(), json!(vmids(&v)));
        gaps.push(Gap {
            path: "spec.guests".into(),
            reason: "written as vmids; where a guest has a manifest, name it instead".into(),
        });
    } else if opt("all").is_some() {
        spec.insert("all".into(), json!(true));
        if let Some(x) = opt("exclude") {
            spec.insert("exclude".into(), json!(vmids(&x)));
        }
    } else {
        return Err(format!(
            "backup job {} selects no guests (no all, vmid or pool)",
            l.id
        ));
    }
    if let Some(m) = opt("mode").filter(|m| m != "snapshot") {
        spec.insert("mode".into(), json!(m));
    }
    if let Some(c) = opt("compress").filter(|c| c != "0") {
        spec.insert("compression".into(), json!(c));
    }
    if let Some(p) = opt("prune-backups") {
        let mut r = Map::new();
        for part in p.split(',') {
            if let Some((k, v)) = part.split_once('=') {
                if k == "keep-all" {
                    r.insert(k.into(), json!(v == "1"));
                } else if KEEP_KEYS.contains(&k) {
                    r.insert(k.into(), json!(v.parse::<u64>().unwrap_or(0)));
                }
            }
        }
        spec.insert("retention".into(), Value::Object(r));
    }
    if let Some(t) = opt("notes-template") {
        spec.insert("notes-template".into(), json!(t));
    }
    if opt("enabled").as_deref() == Some("0") {
        spec.insert("enabled".into(), json!(false));
    }
    adopt_comment(&mut spec, &l.id, opt("comment").as_deref());
    if !l.others.is_empty() {
        gaps.push(Gap {
            path: "spec".into(),
            reason: format!(
                "options this kind does not model stay in PVE as they are: {}",
                l.others.join(", ")
            ),
        });
    }
    Ok(NAMED.adopted(&l.id, spec, gaps))
}
