//! `validate`: a BackupJob manifest into its [`Desired`] state, with PVE's own rules checked
//! up front: the schedule by PVE's calendar-event grammar ([`proxops_names::calendar`]), one
//! selection (pve-manager's `verify_vzdump_parameters`), the notes template's variables,
//! `prune-backups`' keys, the lengths of PVE's schema.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::{Checker, Diag, index, join, type_name};
use proxops_kind_sdk::manifest::{dns_label_problem, envelope, manifest_schema};
use proxops_kind_sdk::named::check_comment;
use serde_json::{Map, Value, json};

use crate::desired::{
    COMMENT_MAX, Desired, Guest, KEEP_KEYS, NOTES_MAX, SCHEDULE_MAX, Selection, jobid_problem,
};

/// The kind's `kind:`.
pub const KIND: &str = "BackupJob";

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &[
    "schedule",
    "storage",
    "all",
    "guests",
    "pool",
    "exclude",
    "mode",
    "compression",
    "retention",
    "notes-template",
    "enabled",
    "comment",
];

/// Keys of `spec.retention`.
pub const RETENTION_KEYS: &[&str] = &[
    "keep-all",
    "keep-last",
    "keep-hourly",
    "keep-daily",
    "keep-weekly",
    "keep-monthly",
    "keep-yearly",
];

const VMID_MAX: u64 = 999_999_999;

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    if let Some(n) = &name
        && let Some(p) = jobid_problem(n)
    {
        c.error("metadata.name", p);
    }
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let schedule = c.string(spec, "spec", "schedule", true);
    if let Some(s) = &schedule {
        if let Err(e) = proxops_names::calendar::check(s) {
            c.error(
                "spec.schedule",
                format!("`{s}` is not a PVE calendar event: {e} (examples: `21:00`, `mon..fri 22:30`, `sun 01:00`, `daily`)"),
            );
        } else if s.len() > SCHEDULE_MAX {
            c.error(
                "spec.schedule",
                format!("is longer than PVE's {SCHEDULE_MAX} characters"),
            );
        }
    }
    let storage = c.string(spec, "spec", "storage", true);
    if let Some(s) = &storage
        && !proxops_names::is_storage_id(s)
    {
        c.error("spec.storage", format!("`{s}` is not a PVE storage id"));
    }
    let selection = selection(&mut c, spec);
    let mode = c
        .enumeration(
            spec,
            "spec",
            "mode",
            false,
            &["snapshot", "suspend", "stop"],
        )
        .unwrap_or_else(|| "snapshot".into());
    let compress = c
        .enumeration(
            spec,
            "spec",
            "compression",
            false,
            &["none", "gzip", "lzo", "zstd"],
        )
        .map(|v| if v == "none" { "0".to_string() } else { v })
        .unwrap_or_else(|| "0".into());
    let (retention, keep_all) = retention(&mut c, spec);
    let notes_template = c.string(spec, "spec", "notes-template", false);
    if let Some(t) = &notes_template
        && let Some(p) = notes_problem(t)
    {
        c.error("spec.notes-template", p);
    }
    let enabled = c.boolean(spec, "spec", "enabled", false).unwrap_or(true);
    let comment = c.string(spec, "spec", "comment", false);
    if let (Some(name), Some(text)) = (&name, &comment) {
        check_comment(&mut c, name, text, Some(COMMENT_MAX), "");
    }
    if c.has_errors() {
        return Err(c.diags);
    }
    match (name, schedule, storage, selection) {
        (Some(id), Some(schedule), Some(storage), Some(selection)) => Ok(Desired {
            id,
            schedule: schedule.trim().to_string(),
            storage,
            selection,
            mode,
            compress,
            retention,
            keep_all,
            notes_template,
            enabled,
            comment,
        }),
        _ => Err(vec![Diag::error("spec", "internal: incomplete backup job")]),
    }
}

/// Exactly one of `all: true`, `guests`, `pool`; `exclude` with `all` only.
fn selection(c: &mut Checker, spec: &Map<String, Value>) -> Option<Selection> {
    let all = c.boolean(spec, "spec", "all", false).unwrap_or(false);
    let guests = guest_list(c, spec, "guests");
    let pool = c.string(spec, "spec", "pool", false);
    let exclude = guest_list(c, spec, "exclude");
    let chosen = usize::from(all) + usize::from(guests.is_some()) + usize::from(pool.is_some());
    if chosen != 1 {
        c.error(
            "spec",
            "name exactly one selection: `all: true` (with `exclude` if need be), `guests: [...]`, or `pool: <Pool name>` (PVE: option conflicts with option 'vmid')",
        );
        return None;
    }
    if exclude.is_some() && !all {
        c.error(
            "spec.exclude",
            "applies to `all: true` only (PVE drops `exclude` from a job that selects a pool, and refuses it next to `vmid`)",
        );
        return None;
    }
    if let Some(p) = &pool
        && let Some(problem) = dns_label_problem(p)
    {
        c.error("spec.pool", format!("Pool name {problem}"));
        return None;
    }
    match (all, guests, pool) {
        (true, _, _) => Some(Selection::All {
            exclude: exclude.unwrap_or_default(),
        }),
        (_, Some(g), _) if g.is_empty() => {
            c.error(
                "spec.guests",
                "must name at least one guest (PVE: property is missing)",
            );
            None
        }
        (_, Some(g), _) => Some(Selection::Guests(g)),
        (_, _, Some(p)) => Some(Selection::Pool(p)),
        _ => None,
    }
}

/// `spec.<key>`: VM names, `TemplateVM/<name>`, vmids; none twice.
fn guest_list(c: &mut Checker, spec: &Map<String, Value>, key: &str) -> Option<Vec<Guest>> {
    let items = c.array(spec, "spec", key, false)?;
    let p = join("spec", key);
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, item) in items.iter().enumerate() {
        let path = index(&p, i);
        let guest = match item {
            Value::Number(n) => match n.as_u64().filter(|n| (100..=VMID_MAX).contains(n)) {
                Some(n) => Guest::Vmid(n),
                None => {
                    c.error(
                        &path,
                        format!("vmid {n} is outside PVE's range (100 to {VMID_MAX})"),
                    );
                    continue;
                }
            },
            Value::String(s) => {
                let (make, name): (fn(String) -> Guest, &str) = match s.split_once('/') {
                    Some(("VM", n)) => (Guest::Vm, n),
                    Some(("TemplateVM", n)) => (Guest::Template, n),
                    None => (Guest::Vm, s.as_str()),
                    Some((kind, _)) => {
                        c.error(&path, format!("`{s}` names a {kind}; name VMs (`<name>`), templates (`TemplateVM/<name>`) or vmids"));
                        continue;
                    }
                };
                if let Some(problem) = dns_label_problem(name) {
                    c.error(&path, format!("guest name {problem}"));
                    continue;
                }
                make(name.to_string())
            }
            other => {
                c.error(
                    &path,
                    format!("expected a VM name or a vmid, got {}", type_name(other)),
                );
                continue;
            }
        };
        if !seen.insert(guest.clone()) {
            c.error(&path, format!("`{}` is listed twice", guest.display()));
            continue;
        }
        out.push(guest);
    }
    Some(out)
}

/// `spec.retention`: `keep-all: true`, or `keep-…` counts (PVE's `prune-backups`).
fn retention(c: &mut Checker, spec: &Map<String, Value>) -> (BTreeMap<String, u64>, bool) {
    let Some(obj) = c.object_field(spec, "spec", "retention", false, RETENTION_KEYS) else {
        return (BTreeMap::new(), false);
    };
    let keep_all = c
        .boolean(obj, "spec.retention", "keep-all", false)
        .unwrap_or(false);
    let mut keep = BTreeMap::new();
    for k in KEEP_KEYS {
        if let Some(n) = c.int(obj, "spec.retention", k, false, 1, 1_000_000) {
            keep.insert(k.to_string(), n as u64);
        }
    }
    if keep_all && !keep.is_empty() {
        c.error(
            "spec.retention.keep-all",
            "cannot be set together with other options (PVE: keep-all cannot be set together with other options)",
        );
    }
    (keep, keep_all)
}

/// pve-manager's `$verify_notes_template`: one line, escapes `\n` and `\\` only, variables
/// `{{cluster}}`, `{{guestname}}`, `{{node}}`, `{{vmid}}`, and PVE's length.
pub fn notes_problem(t: &str) -> Option<String> {
    if t.contains('\n') {
        return Some("contains a line feed; write `\\n` for a new line in the notes".into());
    }
    if t.len() > NOTES_MAX {
        return Some(format!("is longer than PVE's {NOTES_MAX} characters"));
    }
    let b = t.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'\\' {
            if b[i + 1] != b'n' && b[i + 1] != b'\\' {
                return Some(format!(
                    "has the escape sequence `\\{}`; PVE knows `\\n` and `\\\\` only",
                    t[i + 1..].chars().next().unwrap_or(' ')
                ));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    let mut rest = t;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        let var = &after[..end];
        if !var.is_empty() && !var.contains(|c: char| c.is_whitespace() || c == '{' || c == '}') {
            if !matches!(var, "cluster" | "guestname" | "node" | "vmid") {
                return Some(format!(
                    "names the variable `{{{{{var}}}}}`; PVE knows {{{{cluster}}}}, {{{{guestname}}}}, {{{{node}}}} and {{{{vmid}}}}"
                ));
            }
            rest = &after[end + 2..];
        } else {
            rest = &rest[start + 1..];
        }
    }
    None
}

/// JSON Schema of a BackupJob manifest.
pub fn schema() -> Value {
    let guests = json!({
        "type": "array",
        "uniqueItems": true,
        "items": {"anyOf": [
            {"type": "string", "pattern": "^((VM|TemplateVM)/)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"},
            {"type": "integer", "minimum": 100, "maximum": VMID_MAX}
        ]}
    });
    let keep = json!({"type": "integer", "minimum": 1});
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["schedule", "storage"],
        "properties": {
            "schedule": {"type": "string", "maxLength": SCHEDULE_MAX, "description": "When the job runs: a PVE calendar event (`21:00`, `mon..fri 22:30`, `sun 01:00`, `daily`)."},
            "storage": {"type": "string", "description": "The storage the backups go to; it must have `backup` content."},
            "all": {"const": true, "description": "Back up every guest (less `exclude`)."},
            "guests": {"description": "Back up these guests: VM names, `TemplateVM/<name>`, or vmids.", "minItems": 1, "allOf": [guests.clone()]},
            "pool": {"type": "string", "description": "Back up the members of this proxops Pool (its manifest name, which is the PVE pool id)."},
            "exclude": {"description": "With `all`: guests left out.", "allOf": [guests]},
            "mode": {"enum": ["snapshot", "suspend", "stop"], "default": "snapshot"},
            "compression": {"enum": ["none", "gzip", "lzo", "zstd"], "default": "none"},
            "retention": {
                "type": "object",
                "additionalProperties": false,
                "description": "PVE's prune-backups: `keep-all: true`, or keep-… counts; absent: the storage's retention.",
                "properties": {
                    "keep-all": {"type": "boolean"},
                    "keep-last": keep.clone(), "keep-hourly": keep.clone(), "keep-daily": keep.clone(),
                    "keep-weekly": keep.clone(), "keep-monthly": keep.clone(), "keep-yearly": keep
                }
            },
            "notes-template": {"type": "string", "maxLength": NOTES_MAX, "description": "The backups' notes: {{cluster}}, {{guestname}}, {{node}}, {{vmid}}."},
            "enabled": {"type": "boolean", "default": true},
            "comment": {"type": "string", "description": "The job's comment; proxops appends its ownership mark ` (proxops:<name>)`."}
        },
        "oneOf": [
            {"required": ["all"], "not": {"anyOf": [{"required": ["guests"]}, {"required": ["pool"]}]}},
            {"required": ["guests"], "not": {"anyOf": [{"required": ["all"]}, {"required": ["pool"]}, {"required": ["exclude"]}]}},
            {"required": ["pool"], "not": {"anyOf": [{"required": ["all"]}, {"required": ["guests"]}, {"required": ["exclude"]}]}}
        ]
    });
    let mut s = manifest_schema(KIND, "proxops BackupJob (PVE backup job)", spec);
    s["properties"]["metadata"]["properties"]["name"]["description"] =
        json!("The PVE backup job id: a DNS label that starts with a letter, 2 to 50 characters.");
    s["properties"]["metadata"]["properties"]["name"]["pattern"] =
        json!("^[a-z]([a-z0-9-]{0,48}[a-z0-9])$");
    s
}
