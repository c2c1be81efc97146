//! `observe`, `check-references` and `plan`; `claims` is the SDK's, by the mark
//! ([`NAMED`]).
//!
//! * Every cycle reads the job's storage (`GET /storage/{storage}`): a storage without `backup`
//!   content is an error before any write. PVE itself accepts such a job and every run fails
//!   ("can't use storage … for backups - wrong content type").
//! * No live job: one `create` action, `POST /cluster/backup` with `id`, the options, and the
//!   `comment` carrying the mark ([`Desired::pve_comment`]).
//! * A live job whose comment carries `proxops:<id>`: the options proxops models compared with
//!   PVE's defaults filled in (`mode` snapshot, `compress` 0, `enabled` 1); one `update` action,
//!   `PUT /cluster/backup/<id>` with the changed options and `delete=` for the ones the manifest
//!   drops. PVE keeps no digest on backup jobs. Options the kind does not model (`bwlimit`,
//!   `mailto`, …) are left as they are.
//! * A live job without the mark is not proxops's: an anomaly, never a write.
//! * No manifest, a claimed (marked) live job: `DELETE /cluster/backup/<id>` (prune).

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::Resolved;
use proxops_kind_sdk::model::{
    Action, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::named;
use serde_json::Value;

use crate::desired::{Desired, Guest, JOBS, KEEP_KEYS, NAMED, Selection, vmid_list};

/// The options this kind compares, in the order calls carry them.
pub const MODELLED: &[&str] = &[
    "schedule",
    "storage",
    "all",
    "vmid",
    "pool",
    "exclude",
    "mode",
    "compress",
    "prune-backups",
    "notes-template",
    "enabled",
    "comment",
];

/// The reference path of entry `i` of `spec.<list>`.
pub fn guest_path(list: &str, i: usize) -> String {
    format!("spec.{list}[{i}]")
}

/// A live job's option as text: numbers and booleans as PVE writes them in `jobs.cfg`.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.into()),
        _ => None,
    }
}

/// One live job: its id and the options this kind models, normalised as the desired ones are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveJob {
    pub id: String,
    pub opts: BTreeMap<String, String>,
    /// Options this kind does not model, by name (for adopt).
    pub others: Vec<String>,
}

impl LiveJob {
    /// Read a listing entry; `None` when it has no `id`.
    pub fn from_entry(e: &Value) -> Option<Self> {
        let id = e.get("id")?.as_str()?.to_string();
        let mut opts = BTreeMap::new();
        let mut others = Vec::new();
        for (k, v) in e.as_object()? {
            match k.as_str() {
                "id" | "type" | "next-run" | "digest" => {}
                "prune-backups" => {
                    let keep: BTreeMap<String, String> = match v {
                        Value::Object(o) => o
                            .iter()
                            .filter_map(|(k, v)| Some((k.clone(), text(v)?)))
                            .collect(),
                        Value::String(s) => s
                            .split(',')
                            .filter_map(|p| p.split_once('='))
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        _ => BTreeMap::new(),
                    };
                    if let Some(p) = prune_text(&keep) {
                        opts.insert(k.clone(), p);
                    }
                }
                "vmid" | "exclude" => {
                    let mut ids: Vec<u64> = text(v)
                        .unwrap_or_default()
                        .split([',', ';', ' '])
                        .filter_map(|s| s.parse().ok())
                        .collect();
                    ids.sort_unstable();
                    ids.dedup();
                    opts.insert(
                        k.clone(),
                        ids.iter().map(u64::to_string).collect::<Vec<_>>().join(","),
                    );
                }
                key if MODELLED.contains(&key) => {
                    if let Some(t) = text(v).filter(|t| !t.is_empty()) {
                        opts.insert(k.clone(), t);
                    }
                }
                other => others.push(other.to_string()),
            }
        }
        // PVE's defaults, so that an absent option compares equal to the default written.
        let defaults = [("mode", "snapshot"), ("compress", "0"), ("enabled", "1")];
        for (k, d) in defaults {
            opts.entry(k.into()).or_insert_with(|| d.into());
        }
        // vzdump reads `compress=1` as lzo.
        if opts.get("compress").is_some_and(|v| v == "1") {
            opts.insert("compress".into(), "lzo".into());
        }
        if opts.get("all").is_some_and(|v| v == "0") {
            opts.remove("all");
        }
        Some(LiveJob { id, opts, others })
    }

    /// Whether the job's comment carries proxops's mark for its own id.
    pub fn is_marked(&self) -> bool {
        named::is_marked(self.opts.get("comment").map(String::as_str), &self.id)
    }
}

/// `prune-backups` from its keys: `keep-all=1` alone, or the counts in PVE's order.
fn prune_text(keep: &BTreeMap<String, String>) -> Option<String> {
    if keep.get("keep-all").is_some_and(|v| v == "1") {
        let others = keep.iter().any(|(k, v)| k != "keep-all" && v != "0");
        if !others {
            return Some("keep-all=1".into());
        }
    }
    let parts: Vec<String> = KEEP_KEYS
        .iter()
        .filter_map(|k| {
            keep.get(*k)
                .filter(|v| v.as_str() != "0")
                .map(|v| format!("{k}={v}"))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The storage read.
pub fn storage_read(storage: &str) -> Call {
    Call::new(Method::Get, format!("/storage/{storage}"))
}

/// The vmids of `list` (named guests from their resolved desired states); errors name the
/// guest's path.
pub fn vmids(
    list_name: &str,
    list: &[Guest],
    resolved: &[Resolved],
    errors: &mut Vec<Diag>,
) -> BTreeSet<u64> {
    let mut out = BTreeSet::new();
    for (i, g) in list.iter().enumerate() {
        let path = guest_path(list_name, i);
        let vmid = match (g, g.kind()) {
            (Guest::Vmid(n), _) => *n,
            (_, Some((kind, name))) => {
                let found = resolved.iter().find(|r| r.reference.path == path);
                let vmid = found.and_then(|r| {
                    serde_json::from_str::<Value>(&r.desired)
                        .ok()?
                        .get("vmid")?
                        .as_u64()
                });
                match vmid {
                    Some(v) => v,
                    None => {
                        errors.push(Diag::error(
                            &path,
                            format!("no {kind} named `{name}` with a vmid in this cluster"),
                        ));
                        continue;
                    }
                }
            }
            (_, None) => continue,
        };
        if !out.insert(vmid) {
            errors.push(Diag::error(
                &path,
                format!(
                    "`{}` is vmid {vmid}, which spec.{list_name} already names",
                    g.display()
                ),
            ));
        }
    }
    out
}

/// The options PVE should hold for `d`, with the references resolved.
pub fn desired_opts(
    d: &Desired,
    resolved: &[Resolved],
) -> Result<BTreeMap<String, String>, Vec<Diag>> {
    let mut errors = Vec::new();
    let mut o = BTreeMap::new();
    o.insert("schedule".to_string(), d.schedule.clone());
    o.insert("storage".into(), d.storage.clone());
    match &d.selection {
        Selection::All { exclude } => {
            o.insert("all".into(), "1".into());
            let ex = vmids("exclude", exclude, resolved, &mut errors);
            if !ex.is_empty() {
                o.insert("exclude".into(), vmid_list(&ex));
            }
        }
        Selection::Guests(g) => {
            o.insert(
                "vmid".into(),
                vmid_list(&vmids("guests", g, resolved, &mut errors)),
            );
        }
        Selection::Pool(p) => {
            let r = resolved.iter().find(|r| r.reference.path == "spec.pool");
            let is_pool = r.is_some_and(|r| {
                serde_json::from_str::<Value>(&r.desired)
                    .ok()
                    .and_then(|v| v.get("pool").and_then(Value::as_str).map(|id| id == p))
                    .unwrap_or(false)
            });
            if !is_pool {
                errors.push(Diag::error(
                    "spec.pool",
                    format!("no Pool named `{p}` in this cluster"),
                ));
            }
            o.insert("pool".into(), p.clone());
        }
    }
    o.insert("mode".into(), d.mode.clone());
    o.insert("compress".into(), d.compress.clone());
    if let Some(p) = d.prune_backups() {
        o.insert("prune-backups".into(), p);
    }
    if let Some(t) = &d.notes_template {
        o.insert("notes-template".into(), t.clone());
    }
    o.insert("enabled".into(), if d.enabled { "1" } else { "0" }.into());
    o.insert("comment".into(), d.pve_comment());
    if errors.is_empty() {
        Ok(o)
    } else {
        Err(errors)
    }
}

/// `observe`: the storage's config, when there is a desired state.
pub fn observe(d: Option<&Desired>) -> Vec<Call> {
    d.map(|d| vec![storage_read(&d.storage)])
        .unwrap_or_default()
}

/// The storage check: the read must show `backup` in the storage's `content`.
fn check_storage(d: &Desired, observed: &Observation) -> Result<(), Vec<Diag>> {
    let path = format!("/storage/{}", d.storage);
    let Some(read) = observed.reads.iter().find(|r| r.call.path == path) else {
        return Err(vec![Diag::error(
            "spec.storage",
            format!("storage {} was not read", d.storage),
        )]);
    };
    if read.status != 200 {
        return Err(vec![Diag::error(
            "spec.storage",
            format!(
                "storage {} is not defined in this cluster (PVE answered HTTP {})",
                d.storage, read.status
            ),
        )]);
    }
    let v: Value = serde_json::from_str(&read.body).unwrap_or(Value::Null);
    let content = v.get("content").and_then(text).unwrap_or_default();
    if content.split([',', ';', ' ']).any(|c| c == "backup") {
        return Ok(());
    }
    Err(vec![Diag::error(
        "spec.storage",
        format!(
            "storage {} has no `backup` content (its content: {}); PVE would take the job and fail every run (\"can't use storage '{}' for backups - wrong content type\"). Pick a storage with backup content, or add it (`pvesm set {} --content {},backup`)",
            d.storage,
            if content.is_empty() { "none" } else { &content },
            d.storage,
            d.storage,
            content
        ),
    )])
}

fn manifest_path(key: &str) -> &'static str {
    match key {
        "schedule" => "spec.schedule",
        "storage" => "spec.storage",
        "all" | "vmid" | "pool" => "spec",
        "exclude" => "spec.exclude",
        "mode" => "spec.mode",
        "compress" => "spec.compression",
        "prune-backups" => "spec.retention",
        "notes-template" => "spec.notes-template",
        "enabled" => "spec.enabled",
        _ => "spec.comment",
    }
}

/// The proposal for one job.
pub fn plan(
    d: Option<&Desired>,
    resolved: &[Resolved],
    observed: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let live = NAMED
        .live(observed, LiveJob::from_entry)
        .map_err(|e| vec![Diag::error("", e)])?;
    let mut out = Proposal::default();
    let Some(d) = d else {
        if let Some(l) = live {
            prune(&l, &mut out);
        }
        return Ok(out);
    };
    let want = desired_opts(d, resolved)?;
    check_storage(d, observed)?;
    let Some(l) = live else {
        create(d, &want, &mut out);
        return Ok(out);
    };
    if !l.is_marked() {
        if named::take_over_requested(observed) {
            let live = l.opts.get("comment").map(String::as_str);
            NAMED.take_over(&mut out, &d.id, live, |comment| {
                Call::new(Method::Put, format!("{JOBS}/{}", d.id)).param("comment", comment)
            });
            return Ok(out);
        }
        let command = format!("pvesh set {JOBS}/{}", d.id);
        out.anomalies.push(NAMED.unowned(
            &d.id,
            l.opts.get("comment").map(String::as_str),
            "",
            &command,
            &d.pve_comment(),
        ));
        return Ok(out);
    }
    let mut call = Call::new(Method::Put, format!("{JOBS}/{}", d.id));
    let mut delete = Vec::new();
    let mut changes = Vec::new();
    let mut keys = Vec::new();
    for k in MODELLED {
        let (w, h) = (want.get(*k), l.opts.get(*k));
        if w == h {
            continue;
        }
        out.drift
            .push(Drift::new(manifest_path(k), h.cloned(), w.cloned()));
        changes.push(Change::new(*k, h.cloned(), w.cloned()));
        keys.push(*k);
        match w {
            Some(v) => call = call.param(*k, v),
            // PVE's update drops `all`, `vmid`, `pool` and `exclude` itself when another selection is given.
            None if matches!(*k, "all" | "vmid" | "pool") => {}
            None => delete.push(*k),
        }
    }
    if keys.is_empty() {
        return Ok(out);
    }
    if !delete.is_empty() {
        call = call.param("delete", delete.join(","));
    }
    out.actions.push(Action {
        operation: Operation::Update,
        summary: format!("update backup job {} ({})", d.id, keys.join(", ")),
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
    Ok(out)
}

fn create(d: &Desired, want: &BTreeMap<String, String>, out: &mut Proposal) {
    let mut call = Call::new(Method::Post, JOBS).param("id", &d.id);
    let mut changes = Vec::new();
    for k in MODELLED {
        if let Some(v) = want.get(*k) {
            changes.push(Change::new(*k, None, Some(v.clone())));
            call = call.param(*k, v);
        }
    }
    let what = match &d.selection {
        Selection::All { .. } => "all guests".to_string(),
        Selection::Guests(_) => format!("guests {}", want.get("vmid").cloned().unwrap_or_default()),
        Selection::Pool(p) => format!("pool {p}"),
    };
    out.drift.push(Drift::new(
        "spec",
        None,
        Some(format!(
            "backup of {what} at {} to {}",
            d.schedule, d.storage
        )),
    ));
    out.actions.push(Action {
        operation: Operation::Create,
        summary: format!(
            "create backup job {} ({what}, `{}`, to {})",
            d.id, d.schedule, d.storage
        ),
        calls: vec![call],
        changes,
        disturbs_availability: false,
        destructive: false,
        restore: None,
    });
}

fn prune(l: &LiveJob, out: &mut Proposal) {
    if !l.is_marked() {
        out.anomalies.push(NAMED.prune_unowned(&l.id));
        return;
    }
    let summary = format!(
        "delete backup job {} (no manifest names it; its backups are kept)",
        l.id
    );
    let calls = vec![Call::new(Method::Delete, format!("{JOBS}/{}", l.id))];
    let changes = vec![Change::new("id", Some(l.id.clone()), None)];
    NAMED.prune(out, &l.id, summary, calls, changes);
}
