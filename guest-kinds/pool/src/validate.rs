//! `validate`: a Pool manifest into its [`Desired`] state, with PVE's own rules checked up
//! front (pve-access-control's `verify_poolname`, the vmid range, `pve-storage-id`) so that an
//! apply does not fail on what the manifest already shows.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::{Checker, Diag, index, type_name};
use proxops_kind_sdk::manifest::{dns_label_problem, envelope, manifest_schema};
use serde_json::{Map, Value, json};

use crate::desired::{Desired, Guest, VMID_MAX, poolid_problem};

/// The kind's `kind:`.
pub const KIND: &str = "Pool";

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &["comment", "guests", "storages"];

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    if let Some(n) = &name
        && let Some(p) = poolid_problem(n)
    {
        c.error("metadata.name", p);
    }
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let comment = c.string(spec, "spec", "comment", false);
    if let Some(text) = &comment
        && text.chars().any(char::is_control)
    {
        c.error(
            "spec.comment",
            "must be one line without control characters",
        );
    }
    let guests = guests(&mut c, spec);
    let storages = storages(&mut c, spec);
    if c.has_errors() {
        return Err(c.diags);
    }
    match name {
        Some(pool) => Ok(Desired {
            pool,
            comment,
            guests: guests.unwrap_or_default(),
            storages: storages.unwrap_or_default(),
        }),
        None => Err(vec![Diag::error("metadata.name", "is required")]),
    }
}

/// `spec.guests`: VM names (`web-01`, `VM/web-01`), TemplateVM names (`TemplateVM/base`) and
/// raw vmids; none twice.
fn guests(c: &mut Checker, spec: &Map<String, Value>) -> Option<Vec<Guest>> {
    let items = c.array(spec, "spec", "guests", false)?;
    let mut out = Vec::new();
    let mut seen: BTreeMap<Guest, usize> = BTreeMap::new();
    let mut ok = true;
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.guests", i);
        let guest = match item {
            Value::Number(n) => match n.as_u64().filter(|n| (100..=VMID_MAX).contains(n)) {
                Some(n) => Some(Guest::Vmid(n)),
                None => {
                    c.error(
                        &path,
                        format!("vmid {n} is outside PVE's range (100 to {VMID_MAX})"),
                    );
                    None
                }
            },
            Value::String(s) => named(c, &path, s),
            other => {
                c.error(
                    &path,
                    format!(
                        "expected a VM name (`web-01`), `TemplateVM/<name>` or a vmid, got {}",
                        type_name(other)
                    ),
                );
                None
            }
        };
        let Some(guest) = guest else {
            ok = false;
            continue;
        };
        if let Some(first) = seen.get(&guest) {
            c.error(
                &path,
                format!(
                    "`{}` is already spec.guests[{first}]; name each guest once",
                    guest.display()
                ),
            );
            ok = false;
            continue;
        }
        seen.insert(guest.clone(), i);
        out.push(guest);
    }
    ok.then_some(out)
}

fn named(c: &mut Checker, path: &str, text: &str) -> Option<Guest> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        c.error(
            path,
            format!("`{text}` is a vmid written as a string; write it as a number (`- {text}`)"),
        );
        return None;
    }
    let (guest, name): (fn(String) -> Guest, &str) = match text.split_once('/') {
        Some(("VM", name)) => (Guest::Vm, name),
        Some(("TemplateVM", name)) => (Guest::Template, name),
        Some((kind, _)) => {
            c.error(
                path,
                format!(
                    "`{text}` names a {kind}; a pool's guests are VMs (`<name>`, `VM/<name>`), templates (`TemplateVM/<name>`) or vmids"
                ),
            );
            return None;
        }
        None => (Guest::Vm, text),
    };
    if let Some(p) = dns_label_problem(name) {
        c.error(path, format!("guest name {p}"));
        return None;
    }
    Some(guest(name.to_string()))
}

/// `spec.storages`: PVE storage ids, none twice.
fn storages(c: &mut Checker, spec: &Map<String, Value>) -> Option<BTreeSet<String>> {
    let list = c.string_list(spec, "spec", "storages")?;
    let mut out = BTreeSet::new();
    let mut ok = true;
    for (i, s) in list.iter().enumerate() {
        let path = index("spec.storages", i);
        if !proxops_names::is_storage_id(s) {
            c.error(&path, format!("`{s}` is not a PVE storage id"));
            ok = false;
        } else if !out.insert(s.clone()) {
            c.error(&path, format!("storage `{s}` is listed twice"));
            ok = false;
        }
    }
    ok.then_some(out)
}

/// JSON Schema of a Pool manifest.
pub fn schema() -> Value {
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "comment": {
                "type": "string",
                "description": "The pool's comment; proxops appends its ownership mark ` (proxops:<name>)` unless the comment carries it."
            },
            "guests": {
                "type": "array",
                "uniqueItems": true,
                "description": "Member guests: proxops VMs by manifest name (`web-01` or `VM/web-01`), templates (`TemplateVM/<name>`), or vmids of guests proxops does not manage. Named guests are references: the pool is written after them.",
                "items": {
                    "anyOf": [
                        {"type": "string", "pattern": "^((VM|TemplateVM)/)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"},
                        {"type": "integer", "minimum": 100, "maximum": VMID_MAX}
                    ]
                }
            },
            "storages": {
                "type": "array",
                "uniqueItems": true,
                "description": "Member storages, by PVE storage id.",
                "items": {"type": "string", "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]$"}
            }
        }
    });
    let mut s = manifest_schema(KIND, "proxops Pool (PVE resource pool)", spec);
    s["properties"]["metadata"]["properties"]["name"]["description"] =
        json!("The PVE pool id: a DNS label that starts with a letter.");
    s["properties"]["metadata"]["properties"]["name"]["pattern"] =
        json!("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$");
    s
}
