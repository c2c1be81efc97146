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
    let kinds: Vec<usize> = (0..registry.len())
        .filter(|&k| {
            registry
                .get(k)
                .info()
                .listings
                .iter()
                .any(|l| l.path == listing)
        })
        .collect();
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
            let secrets = secrets.clone();
            let answer = par_map(registry, &[observation], |instances, observation| {
                instances.get(kind).and_then(|i| {
                    i.set_secrets(secrets.clone());
                    i.adopt(observation)
                })
            })
            .pop()
            .expect("one answer");
            match answer {
                Ok(Ok(a)) => match serde_json::from_str::<Value>(&a.manifest) {
                    Ok(manifest) if manifest.is_object() => {
                        adopted = Some(Adoption::Adopted {
                            kind,
                            resource: resource.clone(),
                            manifest,
                            gaps: a.gaps,
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
