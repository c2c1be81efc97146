//! `proxops adopt`, the engine side: for each chosen live entry, ask the kinds that list it
//! for the reads they need (`observe(none, entry)`), read them, and let each kind try
//! `adopt()` until one writes a manifest. Only GETs are sent; the host never builds a
//! manifest itself, so a third-party kind adopts the same way.

use std::collections::BTreeSet;
use std::sync::Arc;

use proxops_pve::Client;
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Gap, Method, Observation, Read};
use serde_json::{Value, json};

use crate::live::{Entry, Field};
use crate::plan::method_name;
use crate::registry::KindRegistry;
use crate::wire::to_pve_params;
use crate::workers::par_map;

/// What adopt made of one live entry.
#[derive(Debug, Clone)]
pub enum Adoption {
    /// A kind wrote a manifest for it.
    Adopted {
        /// Index of the kind in the registry.
        kind: usize,
        /// The entry's id in its listing (`qemu/100`).
        resource: String,
        /// The manifest (JSON) as the kind wrote it.
        manifest: Value,
        /// What the manifest does not carry, and why.
        gaps: Vec<Gap>,
        /// The manifest is a guest's (its identity is in the `guest-id` space, or could not be
        /// read): it takes the guest over with `metadata.adopt` ([`finish_manifest`]). Any
        /// other (a named object, a guest's firewall) is finished by [`finish_object`], with
        /// `take_over` for an unmarked named object.
        guest: bool,
        /// A named object without proxops's mark: the take-over claim its manifest carries
        /// (`metadata.adopt: {id, comment}`, [`finish_object`]), which lets the next apply add
        /// the mark to its comment (and nothing else) while the comment is the one read here.
        take_over: Option<crate::ownership::NamedClaim>,
    },
    /// No kind could write a manifest for it: each kind's reason.
    NotAdopted {
        resource: String,
        reasons: Vec<String>,
    },
}

/// Adopt the live `entries` of listing `listing`, trying the kinds that declare that listing
/// in registry order. `secrets` is what kinds granted secrets may match live values against.
pub async fn adopt_entries(
    registry: &KindRegistry,
    client: &Client,
    listing: &str,
    entries: &[Entry],
    secrets: Option<Arc<dyn SecretSource>>,
) -> Vec<Adoption> {
    let kinds = listing_kinds(registry, listing, |_| true);
    adopt_entries_by(registry, client, listing, entries, secrets, &kinds).await
}

/// The kinds (registry indexes, in registry order) that declare listing `listing` and pass
/// `allowed`.
pub fn listing_kinds(
    registry: &KindRegistry,
    listing: &str,
    allowed: impl Fn(usize) -> bool,
) -> Vec<usize> {
    (0..registry.len())
        .filter(|&k| allowed(k))
        .filter(|&k| {
            registry
                .get(k)
                .info()
                .listings
                .iter()
                .any(|l| l.path == listing)
        })
        .collect()
}

/// Whether some kind that declares `listing` claims `entry` (its own mark: a prune candidate
/// when no manifest names it). A kind that fails to answer claims nothing.
pub fn claimed(registry: &KindRegistry, listing: &str, entry: &Entry) -> bool {
    let kinds = listing_kinds(registry, listing, |_| true);
    par_map(registry, &kinds, |instances, &k| {
        instances
            .get(k)
            .and_then(|i| i.claims(listing, entry.text()))
            .unwrap_or(false)
    })
    .into_iter()
    .any(|c| c)
}

/// The live entry whose text is `text`.
fn entry_of(text: &str) -> Entry {
    Entry::from_value(&serde_json::from_str(text).unwrap_or(Value::Null))
}

/// The take-over claim of an adopted named object (identity `key`, live `entry` of `listing`):
/// its id and live comment, when the object lacks proxops's mark and PVE keeps a comment on it
/// (not a role, which is proxops's by its id), and it is not a guest's (a guest-scoped object
/// is owned through its guest).
fn named_claim(
    listing: &str,
    key: &proxops_runtime::kind::ObjectKey,
    entry: Entry,
) -> Option<crate::ownership::NamedClaim> {
    let id = key.resource_id.as_deref()?;
    if crate::ownership::guest_scope(&key.space, &key.key).is_some()
        || crate::ownership::id_marked(listing).is_some()
    {
        return None;
    }
    let comment = entry.str("comment").filter(|c| !c.is_empty());
    (!comment.is_some_and(|c| proxops_names::has_named_mark(c, id))).then(|| {
        crate::ownership::NamedClaim {
            id: id.to_string(),
            comment: comment.map(str::to_string),
        }
    })
}

/// The identity kind `kind` gives `manifest` (JSON text); `None` when the kind does not
/// validate it (it then counts as a guest's, as every manifest adopt wrote before named
/// objects could be adopted).
fn identity(
    registry: &KindRegistry,
    kind: usize,
    manifest: &str,
    secrets: &Option<Arc<dyn SecretSource>>,
) -> Option<proxops_runtime::kind::ObjectKey> {
    par_map(registry, &[manifest], |instances, m| {
        let i = instances.get(kind).ok()?;
        i.set_secrets(secrets.clone());
        let v = i.validate(m).ok()?.ok()?;
        i.identity(&v.desired).ok()
    })
    .pop()
    .flatten()
}

/// [`adopt_entries`] with the kinds to try given (registry indexes, tried in that order).
pub async fn adopt_entries_by(
    registry: &KindRegistry,
    client: &Client,
    listing: &str,
    entries: &[Entry],
    secrets: Option<Arc<dyn SecretSource>>,
    kinds: &[usize],
) -> Vec<Adoption> {
    let kinds = kinds.to_vec();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let resource = kinds
            .first()
            .and_then(|&k| {
                let field = &registry
                    .get(k)
                    .info()
                    .listings
                    .iter()
                    .find(|l| l.path == listing)?
                    .id_field;
                Some(entry.get(field)?.id()?.into_owned())
            })
            .unwrap_or_default();
        let text = entry.text();
        let mut reasons = Vec::new();
        let mut adopted = None;
        for &kind in &kinds {
            let name = registry.get(kind).info().kind.clone();
            let values = &crate::observe::scrub::granted_secret_values(registry, &secrets)[kind];
            let entry = crate::observe::scrub::scrubbed_text(text, values);
            let observation = match observe(registry, client, kind, &entry).await {
                Ok(o) => o,
                Err(why) => {
                    reasons.push(format!("{name}: {why}"));
                    continue;
                }
            };
            let observation = if values.is_empty() {
                observation
            } else {
                crate::observe::scrub::scrubbed(&observation, values)
            };
            let for_kind = secrets.clone();
            let answer = par_map(registry, &[observation], |instances, observation| {
                instances.get(kind).and_then(|i| {
                    i.set_secrets(for_kind.clone());
                    i.adopt(observation)
                })
            })
            .pop()
            .expect("one answer");
            match answer {
                Ok(Ok(a)) => match serde_json::from_str::<Value>(&a.manifest) {
                    Ok(manifest) if manifest.is_object() => {
                        let key = identity(registry, kind, &a.manifest, &secrets);
                        let guest = key.as_ref().is_none_or(|k| k.space == "guest-id");
                        let take_over = key
                            .as_ref()
                            .filter(|_| !guest)
                            .and_then(|k| named_claim(listing, k, entry_of(text)));
                        adopted = Some(Adoption::Adopted {
                            kind,
                            resource: resource.clone(),
                            manifest,
                            gaps: a.gaps,
                            guest,
                            take_over,
                        });
                        break;
                    }
                    _ => reasons.push(format!(
                        "{name}: the kind returned a manifest that is not a JSON object"
                    )),
                },
                Ok(Err(why)) => reasons.push(format!("{name}: {why}")),
                Err(e) => reasons.push(format!("{name}: {e}")),
            }
        }
        out.push(adopted.unwrap_or(Adoption::NotAdopted {
            resource: resource.clone(),
            reasons,
        }));
    }
    out
}

/// The reads kind `kind` asks for to adopt `entry` (GETs among its declared calls only),
/// performed one by one.
async fn observe(
    registry: &KindRegistry,
    client: &Client,
    kind: usize,
    entry: &str,
) -> Result<Observation, String> {
    let calls = par_map(registry, &[entry], |instances, entry| {
        instances
            .get(kind)
            .and_then(|i| i.observe(None, Some(entry), &[], &[]))
    })
    .pop()
    .expect("one answer")
    .map_err(|e| e.to_string())?;
    let info = registry.get(kind).info();
    if let crate::grant::Trust::Granted(grant) = registry.trust(kind)
        && calls.len() as u64 > grant.limits.reads_per_object()
    {
        return Err(format!(
            "observe() asked for {} reads, more than the {} its grant allows (sandbox rule `reads`); nothing was read",
            calls.len(),
            grant.limits.reads_per_object()
        ));
    }
    let mut reads = Vec::with_capacity(calls.len());
    for mut call in calls {
        if call.method != Method::Get {
            return Err(format!(
                "observe() asked for {} {}, which is not a declared GET; nothing was read",
                method_name(call.method),
                crate::request::shown(&call.path)
            ));
        }
        let checked = crate::request::form::canonicalize(&mut call, &info.calls).and_then(|()| {
            crate::request::secret::check_refs(
                &mut call,
                registry.trust(kind).secrets(),
                &info.kind,
            )
        });
        if let Err(r) = checked {
            return Err(format!(
                "observe() asked for a read the sandbox refuses: {r}; nothing was read"
            ));
        }
        let (status, body) = match client.get_text(&call.path, &to_pve_params(&call)).await {
            Ok(data) => (200, data),
            Err(e) => (
                e.status().unwrap_or(0),
                serde_json::json!({ "error": e.to_string() }).to_string(),
            ),
        };
        reads.push(Read { call, status, body });
    }
    Ok(Observation {
        live: Some(entry.to_string()),
        reads,
    })
}

/// Gives an adopted manifest its final `metadata`: the name the kind chose (or
/// `<kind>-<vmid>`), made unique among `taken` (kind, name) by appending the vmid, and
/// `metadata.adopt: {vmid, name}` naming the live guest, which lets the next apply add the
/// ownership tags to it. Returns the name; `taken` gains it.
pub fn finish_manifest(
    manifest: &mut Value,
    entry: &Entry,
    kind: &str,
    taken: &mut BTreeSet<(String, String)>,
) -> String {
    let vmid = entry.get("vmid").and_then(Field::as_u64);
    let shown_vmid = vmid.map(|v| v.to_string()).unwrap_or_default();
    let base = manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}-{shown_vmid}", kind.to_ascii_lowercase()));
    let mut name = base.clone();
    let mut n = 1;
    while taken.contains(&(kind.to_string(), name.clone())) {
        name = if n == 1 {
            format!("{base}-{shown_vmid}")
        } else {
            format!("{base}-{shown_vmid}-{n}")
        };
        n += 1;
    }
    taken.insert((kind.to_string(), name.clone()));
    let pve_name = entry.str("name").unwrap_or_default().to_string();
    if let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), json!(name));
        if let Some(v) = vmid.filter(|_| !pve_name.is_empty()) {
            meta.insert("adopt".into(), json!({"vmid": v, "name": pve_name}));
        }
    }
    name
}

/// Gives the manifest of an adopted object that is not a guest (a named object, a guest's
/// firewall) its final `metadata.name`: the kind's choice, made unique among `taken` (kind,
/// name) with `-2`, `-3`, …; and for a named object without proxops's mark, its take-over
/// claim `metadata.adopt: {id, comment}` (the live comment, `null` when it had none).
/// Returns the name; `taken` gains it.
pub fn finish_object(
    manifest: &mut Value,
    kind: &str,
    taken: &mut BTreeSet<(String, String)>,
    take_over: Option<&crate::ownership::NamedClaim>,
) -> String {
    let base = manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&(kind.to_string(), name.clone())) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.insert((kind.to_string(), name.clone()));
    if let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("name".into(), json!(name));
        if let Some(c) = take_over {
            meta.insert("adopt".into(), json!({"id": c.id, "comment": c.comment}));
        }
    }
    name
}
