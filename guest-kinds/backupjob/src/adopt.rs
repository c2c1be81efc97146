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
//! * A job without the mark stays unowned: the gap says how to hand it over.

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, dns_label_problem};
use proxops_kind_sdk::model::Observation;
use serde_json::{Map, Value, json};

use crate::desired::{KEEP_KEYS, jobid_problem, manifest_comment};
use crate::plan::LiveJob;
use crate::validate::KIND;

fn vmids(s: &str) -> Vec<u64> {
    s.split(',').filter_map(|v| v.parse().ok()).collect()
}

/// The manifest for the job in `observed.live`.
pub fn adopt(observed: &Observation) -> Result<Adopted, String> {
    let text = observed
        .live
        .as_deref()
        .ok_or("no live backup job to adopt")?;
    let entry: Value = serde_json::from_str(text)
        .map_err(|e| format!("the backup job entry does not read: {e}"))?;
    let l = LiveJob::from_entry(&entry).ok_or("the backup job entry has no `id`")?;
    if let Some(p) = dns_label_problem(&l.id).or_else(|| jobid_problem(&l.id)) {
        return Err(format!(
            "backup job id `{}` cannot be a manifest name ({p}); a manifest's name is the job id",
            l.id
        ));
    }
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
    if let Some(c) = opt("comment").and_then(|c| manifest_comment(&l.id, &c)) {
        spec.insert("comment".into(), json!(c));
    }
    if !l.others.is_empty() {
        gaps.push(Gap {
            path: "spec".into(),
            reason: format!(
                "options this kind does not model stay in PVE as they are: {}",
                l.others.join(", ")
            ),
        });
    }
    if !l.is_marked() {
        gaps.push(Gap {
            path: "metadata.name".into(),
            reason: format!(
                "backup job {id} was not created by proxops (its comment lacks `{mark}`): plan reports it and changes nothing until `{mark}` is added to its comment in PVE (`pvesh set /cluster/backup/{id} --comment '{mark}'`)",
                id = l.id,
                mark = proxops_names::named_mark(&l.id),
            ),
        });
    }
    Ok(Adopted {
        manifest: json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": l.id}, "spec": spec}),
        gaps,
    })
}
