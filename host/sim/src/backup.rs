//! Backup jobs: `/cluster/backup` and `/cluster/backup/{id}`, the `vzdump` sections of `/etc/pve/jobs.cfg`.
//!
//! Sources: proxmox/pve-manager `PVE/API2/Backup.pm` (the endpoints: `$schedule_param_check`, `create_job`,
//! `update_job` with its `delete` list and its selection rules, `delete_job`, `read_job`, the messages),
//! `PVE/VZDump.pm` (`verify_vzdump_parameters`: selection conflicts, a missing selection, the notes template),
//! proxmox/pve-cluster `PVE::Cluster::cfs_lock_file` (a plain error under the lock is reported as
//! `error during cfs-locked 'file-jobs_cfg' operation: …`; a parameter exception passes as it is).
//!
//! As in PVE 9: no `digest` (the schema has none for these endpoints), and the storage is not checked when a job is
//! written: a job naming a storage without `backup` content is accepted and fails when it runs (`VZDump::storage_info`:
//! "can't use storage '…' for backups - wrong content type"). Not modelled: running a job (no `vzdump`), `next-run`
//! (PVE computes it from the schedule; the simulator has no calendar arithmetic), the old `vzdump.cron` jobs, and
//! permissions (`Sys.Modify`, root-only `dumpdir`/`tmpdir`/`script`).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::sim::Sim;

/// One job as its `vzdump: <id>` section holds it: option to value as written.
pub(crate) type Job = BTreeMap<String, String>;

/// `PVE::VZDump::option_exists`: the vzdump options a job may carry (and `delete` may name), besides `schedule`,
/// `enabled`, `comment` and `repeat-missed`, which are the job's own.
const VZDUMP_OPTIONS: &[&str] = &[
    "all",
    "bwlimit",
    "compress",
    "dumpdir",
    "exclude",
    "exclude-path",
    "fleecing",
    "ionice",
    "lockwait",
    "mailnotification",
    "mailto",
    "maxfiles",
    "mode",
    "node",
    "notes-template",
    "notification-mode",
    "pbs-change-detection-mode",
    "performance",
    "pigz",
    "pool",
    "protected",
    "prune-backups",
    "quiet",
    "remove",
    "script",
    "stdexcludes",
    "stop",
    "stopwait",
    "storage",
    "tmpdir",
    "vmid",
    "zstd",
];

/// Options written as given (everything the job keeps but `id`, `delete`, `starttime` and `dow`).
const JOB_OPTIONS: &[&str] = &["schedule", "enabled", "comment", "repeat-missed"];

const BOOLEANS: &[&str] = &[
    "all",
    "enabled",
    "protected",
    "quiet",
    "remove",
    "repeat-missed",
    "stdexcludes",
    "stop",
];
const INTEGERS: &[&str] = &[
    "bwlimit", "ionice", "lockwait", "maxfiles", "pigz", "stopwait", "zstd",
];

/// `cfs_lock_file`'s report of a plain error under the lock of `file`.
fn locked(file: &str, e: impl std::fmt::Display) -> String {
    format!(
        "error during cfs-locked 'file-{}' operation: {e}",
        file.replace(['.', '/'], "_")
    )
}

/// Perl's truth of a parameter.
fn truthy(v: Option<&str>) -> bool {
    v.is_some_and(|v| !v.is_empty() && v != "0")
}

/// `$verify_notes_template`.
fn check_notes_template(t: &str) -> Result<(), String> {
    if t.contains('\n') {
        return Err("contains a line feed\n".into());
    }
    let mut problems = Vec::new();
    let chars: Vec<char> = t.chars().collect();
    let mut i = 0;
    while i + 1 < chars.len() {
        if chars[i] == '\\' {
            if chars[i + 1] != 'n' && chars[i + 1] != '\\' {
                problems.push(format!("escape sequence '\\{}' at char {i}", chars[i + 1]));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    let mut rest = t;
    let mut offset = 0;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let var = &after[..end];
        if !var.is_empty() && !var.contains(|c: char| c.is_whitespace() || c == '{' || c == '}') {
            if !matches!(var, "cluster" | "guestname" | "node" | "vmid") {
                // PVE reports `pos` after the match less the name's length.
                problems.push(format!("variable '{var}' at char {}", offset + start + 4));
            }
            offset += start + 2 + end + 2;
            rest = &after[end + 2..];
        } else {
            offset += start + 1;
            rest = &rest[start + 1..];
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("found unknown: {}\n", problems.join(", ")))
    }
}

/// `verify_vzdump_parameters($param, $check_missing)` on a job's options: the selection conflicts, the notes
/// template, `all` implied by `exclude` without `pool`, and with `check_missing` a selection at all.
fn verify(job: &mut Job, check_missing: bool) -> Result<(), ApiError> {
    let has = |job: &Job, k: &str| truthy(job.get(k).map(String::as_str));
    if has(job, "all") && has(job, "vmid") {
        return Err(ApiError::param(
            "all",
            "option conflicts with option 'vmid'",
        ));
    }
    if has(job, "exclude") && has(job, "vmid") {
        return Err(ApiError::param(
            "exclude",
            "option conflicts with option 'vmid'",
        ));
    }
    if has(job, "pool") && has(job, "vmid") {
        return Err(ApiError::param(
            "pool",
            "option conflicts with option 'vmid'",
        ));
    }
    if let Some(t) = job.get("notes-template").filter(|t| !t.is_empty()) {
        check_notes_template(t).map_err(|e| ApiError::param("notes-template", e))?;
    }
    if job.contains_key("exclude") && !has(job, "pool") {
        job.insert("all".into(), "1".into());
    }
    if check_missing
        && !(has(job, "all") || has(job, "stop") || has(job, "pool"))
        && !has(job, "vmid")
    {
        return Err(ApiError::param("vmid", "property is missing"));
    }
    Ok(())
}

/// `$schedule_param_check`: `schedule`, or the deprecated `starttime` (with `dow`) turned into one.
fn schedule(req: &Req, required: bool) -> Result<Option<String>, ApiError> {
    match (req.get("schedule"), req.get("starttime")) {
        (Some(_), Some(_)) => Err(ApiError::param(
            "starttime",
            "'starttime' and 'schedule' cannot both be set",
        )),
        (Some(s), None) => Ok(Some(s.to_string())),
        (None, None) if required => Err(ApiError::param(
            "schedule",
            "neither 'starttime' nor 'schedule' were set",
        )),
        (None, None) => Ok(None),
        (None, Some(start)) => {
            let dow = req
                .get("dow")
                .map(|d| crate::formats::split_list(d).join(","));
            Ok(Some(match dow {
                Some(d) if d != "mon,tue,wed,thu,fri,sat,sun" => format!("{d} {start}"),
                _ => start.to_string(),
            }))
        }
    }
}

/// The options a create or update gives, as the job keeps them.
fn given(req: &Req) -> Job {
    VZDUMP_OPTIONS
        .iter()
        .chain(JOB_OPTIONS)
        .filter(|k| **k != "schedule")
        .filter_map(|k| req.get(k).map(|v| (k.to_string(), v.to_string())))
        .collect()
}

/// `pool` must exist (`check_pool_exist`, before the lock).
fn check_pool(sim: &Sim, req: &Req) -> Result<(), ApiError> {
    match req.get("pool").filter(|p| !p.is_empty()) {
        Some(p) => crate::pools::check_exists(&sim.read(), Some(p)),
        None => Ok(()),
    }
}

/// A job as the API returns it: booleans and integers as numbers, `prune-backups` as an object, `type` and `id`.
fn entry(id: &str, job: &Job) -> Value {
    let mut out = Map::new();
    for (k, v) in job {
        let value = if BOOLEANS.contains(&k.as_str()) || INTEGERS.contains(&k.as_str()) {
            v.parse::<i64>()
                .map(|n| json!(n))
                .unwrap_or_else(|_| json!(v))
        } else if k == "prune-backups" {
            let mut o = Map::new();
            for part in v.split(',').filter(|p| !p.is_empty()) {
                if let Some((pk, pv)) = part.split_once('=') {
                    o.insert(
                        pk.to_string(),
                        pv.parse::<i64>()
                            .map(|n| json!(n))
                            .unwrap_or_else(|_| json!(pv)),
                    );
                }
            }
            Value::Object(o)
        } else if k == "exclude-path" {
            json!(v.split(crate::schema::ARRAY_SEPARATOR).collect::<Vec<_>>())
        } else {
            json!(v)
        };
        out.insert(k.clone(), value);
    }
    out.insert("type".into(), json!("vzdump"));
    out.insert("id".into(), json!(id));
    Value::Object(out)
}

/// `GET /cluster/backup`: every job, in the order they were created.
pub(crate) fn list(sim: &Arc<Sim>, _req: &Req) -> ApiResult {
    let st = sim.read();
    let out: Vec<Value> = st
        .backup_order()
        .into_iter()
        .map(|(id, job)| entry(id, job))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/backup/{id}`.
pub(crate) fn read(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("id").unwrap_or("");
    let st = sim.read();
    match st.backups.get(id) {
        Some(job) => Ok(Reply::data(entry(id, job))),
        None => Err(ApiError::param("id", format!("No such job '{id}'"))),
    }
}

/// `POST /cluster/backup`: the pool, the schedule, `enabled` set, then under the lock: a new id, the checks.
pub(crate) fn create(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    check_pool(sim, req)?;
    let schedule = schedule(req, true)?;
    let mut job = given(req);
    if let Some(s) = schedule {
        job.insert("schedule".into(), s);
    }
    job.entry("enabled".into()).or_insert_with(|| "1".into());
    let Some(id) = req.get("id").map(str::to_string) else {
        return Err(ApiError::param(
            "id",
            "the simulator needs a job id (PVE would generate a UUID)",
        ));
    };
    let mut st = sim.write();
    if st.backups.contains_key(&id) {
        return Err(ApiError::die(locked(
            "jobs.cfg",
            format!("Job '{id}' already exists"),
        )));
    }
    verify(&mut job, true)?;
    st.insert_backup(id, job);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `PUT /cluster/backup/{id}`: the pool, the schedule, then under the locks: something to do, the job, the
/// `delete` list, the new values, the selection made consistent (the latest of `vmid`, `all`, `pool` wins), and
/// the whole job checked again.
pub(crate) fn update(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("id").unwrap_or("").to_string();
    let delete: Vec<String> = crate::formats::split_list(req.get("delete").unwrap_or(""))
        .into_iter()
        .map(str::to_string)
        .collect();
    check_pool(sim, req)?;
    let schedule = schedule(req, false)?;
    let mut param = given(req);
    if let Some(s) = schedule {
        param.insert("schedule".into(), s);
    }
    // Both locks: a plain error is reported by the inner (jobs.cfg) and again by the outer (vzdump.cron).
    let failed = |e: &str| ApiError::die(locked("vzdump.cron", locked("jobs.cfg", e)));
    let mut st = sim.write();
    if param.is_empty() && delete.is_empty() {
        return Err(failed("no options specified"));
    }
    verify(&mut param.clone(), false)?;
    let Some(mut job) = st.backups.get(&id).cloned() else {
        return Err(failed("no such vzdump job"));
    };
    for k in &delete {
        if !VZDUMP_OPTIONS.contains(&k.as_str()) && k != "comment" && k != "repeat-missed" {
            return Err(ApiError::param("delete", format!("unknown option '{k}'")));
        }
        job.remove(k);
    }
    for (k, v) in &param {
        job.insert(k.clone(), v.clone());
    }
    if job.contains_key("exclude") && !job.contains_key("pool") {
        job.insert("all".into(), "1".into());
    }
    if param.contains_key("vmid") {
        for k in ["all", "exclude", "pool"] {
            job.remove(k);
        }
    } else if truthy(param.get("all").map(String::as_str)) {
        job.remove("vmid");
        job.remove("pool");
    } else if job.contains_key("pool") {
        for k in ["vmid", "all", "exclude"] {
            job.remove(k);
        }
    }
    verify(&mut job, true)?;
    st.backups.insert(id, job);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

/// `DELETE /cluster/backup/{id}`.
pub(crate) fn delete(sim: &Arc<Sim>, req: &Req) -> ApiResult {
    let id = req.get("id").unwrap_or("");
    let mut st = sim.write();
    if st.backups.remove(id).is_none() {
        return Err(ApiError::param("id", format!("No such job '{id}'")));
    }
    st.backup_ids.retain(|i| i != id);
    st.touch();
    drop(st);
    sim.persist();
    Ok(Reply::data(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_templates_are_checked_as_vzdump_does() {
        for (t, want) in [
            ("{{guestname}} on {{node}}", Ok(())),
            ("a\\nb \\\\ c", Ok(())),
            (
                "{{vmname}}",
                Err("found unknown: variable 'vmname' at char 4\n"),
            ),
            (
                "x\\t",
                Err("found unknown: escape sequence '\\t' at char 1\n"),
            ),
            ("a\nb", Err("contains a line feed\n")),
            ("{{ spaced }}", Ok(())),
        ] {
            assert_eq!(
                check_notes_template(t),
                want.map_err(str::to_string),
                "{t:?}"
            );
        }
    }

    #[test]
    fn selections_conflict_as_verify_vzdump_parameters_says() {
        let job = |pairs: &[(&str, &str)]| -> Job {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let field = |e: ApiError| match e {
            ApiError::Param(errors) => errors.keys().next().cloned().unwrap_or_default(),
            other => panic!("{other:?}"),
        };
        for (pairs, want) in [
            (vec![("all", "1"), ("vmid", "100")], Some("all")),
            (vec![("exclude", "100"), ("vmid", "101")], Some("exclude")),
            (vec![("pool", "web"), ("vmid", "101")], Some("pool")),
            (vec![("storage", "local")], Some("vmid")),
            (vec![("vmid", "100")], None),
            (vec![("pool", "web")], None),
            (vec![("exclude", "100")], None),
        ] {
            let mut j = job(&pairs);
            assert_eq!(
                verify(&mut j, true).err().map(field).as_deref(),
                want,
                "{pairs:?}"
            );
        }
        let mut j = job(&[("exclude", "100")]);
        verify(&mut j, true).unwrap();
        assert_eq!(
            j.get("all").map(String::as_str),
            Some("1"),
            "exclude implies all"
        );
    }
}
