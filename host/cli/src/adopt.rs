//! `proxops adopt`: write manifests for guests that already run, and for the named objects
//! (pools, backup jobs, users, ...) of the loaded kinds' listings, through the kinds' own
//! `adopt()`, and report per object what the manifest does not carry. Adopt reads PVE and
//! writes only into the repository: each manifest atomically, never over an existing file
//! without `--force`, never through a symlink. Each manifest names the guest it takes over in
//! `metadata.adopt`, the one write the next apply may make to it (the ownership tags).
//! With `--adopt-secrets`, SSH keys no SOPS entry holds are imported into the cluster's
//! SOPS file first (`proxops_reconcile::import`), so the manifests can refer to them.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use proxops_reconcile::adopt::{
    Adoption, adopt_entries_by, claimed, finish_manifest, finish_object, listing_kinds,
};
use proxops_reconcile::import::{IMPORT_PREFIX, ImportingSecrets};
use proxops_reconcile::live::{Entry, Field};
use proxops_runtime::SecretSource;
use serde_json::Value;

use crate::context::Context;
use crate::exit;
use crate::output::{self, errln, outln};

/// What to adopt.
#[derive(Debug, Clone)]
pub struct AdoptOptions {
    pub cluster: String,
    /// Guests by vmid.
    pub vmids: Vec<u64>,
    /// Every guest and named object no manifest names.
    pub all: bool,
    /// Named objects by their id in their kind's listing.
    pub objects: Vec<String>,
    /// Only these kinds write manifests; empty: every loaded kind.
    pub kinds: Vec<String>,
    pub adopt_secrets: bool,
    /// Replace existing manifest files.
    pub force: bool,
}

/// One live entry chosen for adoption: the listing it came from and the kinds to try on it.
struct Chosen {
    listing: String,
    entries: Vec<Entry>,
    kinds: Vec<usize>,
}

pub async fn adopt(ctx: &Context, repo: &Path, o: &AdoptOptions) -> anyhow::Result<u8> {
    if o.vmids.is_empty() && o.objects.is_empty() && !o.all {
        errln!("error: say what to adopt: --vmid N, --object ID (both repeatable) or --all");
        return Ok(exit::ERROR);
    }
    let registry = &ctx.kinds;
    let mut allowed = BTreeSet::new();
    for k in &o.kinds {
        match (0..registry.len()).find(|&i| registry.get(i).info().kind == *k) {
            Some(i) => {
                allowed.insert(i);
            }
            None => {
                errln!(
                    "error: --kind {}: no such kind is loaded (kinds: {})",
                    output::inline(k),
                    (0..registry.len())
                        .map(|i| registry.get(i).info().kind.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                return Ok(exit::ERROR);
            }
        }
    }
    let allows = |k: usize| allowed.is_empty() || allowed.contains(&k);
    let checked = crate::validate::check(ctx, repo);
    let errors: Vec<_> = checked
        .diags
        .iter()
        .filter(|d| d.severity == proxops_core::Severity::Error)
        .collect();
    if !errors.is_empty() {
        errln!(
            "not adopted: the repository does not validate; fix it first (`proxops validate`), so that new manifests cannot collide with broken ones:"
        );
        for d in errors {
            errln!("  {}", output::inline(&d.to_string()));
        }
        return Ok(exit::ERROR);
    }
    let Some(cluster) = checked.repo.clusters.get(&o.cluster) else {
        errln!(
            "error: no cluster `{}` in {} (clusters: {})",
            output::inline(&o.cluster),
            repo.display(),
            checked
                .repo
                .clusters
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(exit::ERROR);
    };
    let sops = checked.sops.get(&o.cluster).cloned();
    if o.adopt_secrets {
        // Imports need the data key: the file must open and verify before anything is read.
        let checked_sops = match &sops {
            Some(doc) => doc
                .check()
                .map_err(|e| format!("{e}; create or fix it with `sops` first")),
            None => Err(format!(
                "cluster {} has no SOPS file to import keys into",
                o.cluster
            )),
        };
        if let Err(why) = checked_sops {
            errln!(
                "error: --adopt-secrets: {}; nothing was read or written",
                output::inline(&why)
            );
            return Ok(exit::ERROR);
        }
    }
    let conn = crate::connect::connect(repo, ctx.config_root(repo), cluster, sops.as_deref())
        .await
        .with_context(|| format!("connecting to cluster {}", o.cluster))?;
    // What the repository's manifests (in this cluster) already name: per listing, the ids of
    // the entries of the kinds that declare it; `selected` only the allowed kinds' manifests.
    let objects: Vec<&proxops_reconcile::validate::Object> = checked
        .catalog
        .objects
        .iter()
        .filter(|obj| obj.id.cluster == o.cluster)
        .collect();
    let named_in = |listing: &str, only_allowed: bool| -> BTreeSet<String> {
        objects
            .iter()
            .filter(|obj| !only_allowed || allows(obj.kind))
            .filter(|obj| {
                registry
                    .get(obj.kind)
                    .info()
                    .listings
                    .iter()
                    .any(|l| l.path == listing)
            })
            .filter_map(|obj| obj.key.resource_id.clone())
            .collect()
    };
    let mut code = exit::OK;
    let mut chosen: Vec<Chosen> = Vec::new();
    let resources = proxops_reconcile::observe::CLUSTER_RESOURCES;
    let guest_kinds = listing_kinds(registry, resources, allows);
    if (o.all || !o.vmids.is_empty()) && !guest_kinds.is_empty() {
        let mut live = proxops_reconcile::observe::listing(&conn.client, resources).await?;
        // An HA-managed guest's manifest carries `spec.ha`, from its HA resource.
        proxops_reconcile::observe::ha::merge_into(&conn.client, &mut live).await?;
        let guests: Vec<&Entry> = live
            .iter()
            .filter(|e| matches!(e.str("type"), Some("qemu" | "lxc")))
            .collect();
        // Named by a manifest of a kind that may adopt it: nothing to adopt. Named only by
        // another kind's (a VM, for `--kind Firewall`): proxops's through that manifest.
        let named = named_in(resources, true);
        let named_any = named_in(resources, false);
        let vmid = |e: &Entry| e.get("vmid").and_then(Field::as_u64);
        let id = |e: &Entry| e.str("id").unwrap_or_default().to_string();
        let mut picked = Vec::new();
        if o.all {
            use proxops_reconcile::ownership::{LiveGuest, Mark};
            // Tagged guests no manifest names: with their own mark, prune candidates; a copy
            // (another vmid's mark) or no mark at all, never deleted, but not adopted in bulk.
            let (mut owned_unnamed, mut copies, mut unmarked) =
                (Vec::new(), Vec::new(), Vec::new());
            for e in &guests {
                if named.contains(id(e).as_str()) {
                    continue;
                }
                if named_any.contains(id(e).as_str()) {
                    picked.push((*e).clone());
                    continue;
                }
                match LiveGuest::from_entry(e)
                    .filter(LiveGuest::tagged)
                    .map(|g| g.mark())
                {
                    Some(Mark::Own) => owned_unnamed.push(id(e)),
                    Some(Mark::Other(_)) => copies.push(id(e)),
                    Some(Mark::Missing) => unmarked.push(id(e)),
                    None => picked.push((*e).clone()),
                }
            }
            if allowed.is_empty() {
                report_volumes(&conn.client, &live).await;
            }
            if !owned_unnamed.is_empty() {
                outln!(
                    "Not adopted: proxops already owns {} (the `proxops` tag and its own `proxops-<vmid>` mark) and no manifest names them; they are prune candidates, adopt them one by one with --vmid if you mean to keep them",
                    owned_unnamed.join(", ")
                );
            }
            if !copies.is_empty() {
                outln!(
                    "Not adopted: {} carry the `proxops` tag with another guest's `proxops-<vmid>` mark: copies (a clone or restore made outside proxops), which proxops never deletes; adopt them one by one with --vmid to manage them",
                    copies.join(", ")
                );
            }
            if !unmarked.is_empty() {
                outln!(
                    "Not adopted: {} carry the `proxops` tag but no `proxops-<vmid>` mark, so proxops cannot prove it created them and never deletes them; adopt them one by one with --vmid to manage them",
                    unmarked.join(", ")
                );
            }
        } else {
            for v in &o.vmids {
                match guests.iter().find(|e| vmid(e) == Some(*v)) {
                    Some(e) if named.contains(id(e).as_str()) => {
                        errln!(
                            "not adopted: vmid {v} ({}) is already named by a manifest",
                            id(e)
                        );
                        code = exit::ERROR;
                    }
                    Some(e) => picked.push((*e).clone()),
                    None => {
                        errln!(
                            "not adopted: no guest with vmid {v} in cluster {}",
                            o.cluster
                        );
                        code = exit::ERROR;
                    }
                }
            }
        }
        chosen.push(Chosen {
            listing: resources.to_string(),
            entries: picked,
            kinds: guest_kinds,
        });
    } else if !o.vmids.is_empty() {
        errln!("not adopted: --vmid names guests, and no kind allowed by --kind lists guests");
        code = exit::ERROR;
    }
    if o.all || !o.objects.is_empty() {
        let (picked, failed) = named_objects(registry, &conn.client, o, &allows, &named_in).await?;
        if failed {
            code = exit::ERROR;
        }
        chosen.extend(picked);
    }
    let total: usize = chosen.iter().map(|c| c.entries.len()).sum();
    if total == 0 {
        outln!("Nothing to adopt in cluster {}.", o.cluster);
        return Ok(code);
    }
    let importing = match (&sops, o.adopt_secrets) {
        (Some(doc), true) => Some(Arc::new(ImportingSecrets::new(doc.clone()))),
        _ => None,
    };
    let secrets: Option<Arc<dyn SecretSource>> = match (&importing, &sops) {
        (Some(i), _) => Some(i.clone()),
        (None, Some(doc)) => Some(doc.clone()),
        (None, None) => None,
    };
    let mut results = Vec::with_capacity(chosen.len());
    for c in &chosen {
        results.push(
            adopt_entries_by(
                registry,
                &conn.client,
                &c.listing,
                &c.entries,
                secrets.clone(),
                &c.kinds,
            )
            .await,
        );
    }
    // The keys go into the SOPS file before any manifest that refers to them is written.
    if let (Some(importing), Some(doc)) = (&importing, &sops) {
        let imports = importing.used_by(results.iter().flatten().filter_map(|r| match r {
            Adoption::Adopted { manifest, .. } => Some(manifest),
            Adoption::NotAdopted { .. } => None,
        }));
        for why in &imports.refused {
            outln!("! not imported: {}", output::inline(why));
        }
        if !imports.entries.is_empty() {
            let pairs: Vec<(&str, &str)> = imports
                .entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let parent: Vec<&str> = IMPORT_PREFIX.split('.').collect();
            if let Err(why) = doc.add_entries(&parent, &pairs) {
                errln!(
                    "not adopted: importing {} SSH keys into {} failed: {}; no manifest was written",
                    pairs.len(),
                    doc.shown(),
                    output::inline(&why)
                );
                return Ok(exit::ERROR);
            }
            outln!(
                "Imported {} SSH keys into {} (encrypted, new MAC, other entries untouched): {}",
                pairs.len(),
                doc.shown(),
                imports
                    .entries
                    .keys()
                    .map(|k| format!("{IMPORT_PREFIX}.{k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    let dir = proxops_core::RepoDir::open(repo)?;
    let mut taken: BTreeSet<(String, String)> = objects
        .iter()
        .map(|obj| (obj.id.kind.clone(), obj.id.name.clone()))
        .collect();
    let (mut adopted, mut guests_adopted, mut gaps_total) = (0, 0, 0);
    for (c, results) in chosen.iter().zip(results) {
        for (entry, result) in c.entries.iter().zip(results) {
            let (kind, resource, mut manifest, gaps, guest, take_over) = match result {
                Adoption::NotAdopted { resource, reasons } => {
                    let shown = if c.listing == resources {
                        resource
                    } else {
                        format!("{} {resource}", c.listing)
                    };
                    outln!("! {}: not adopted", output::inline(&shown));
                    for r in reasons {
                        outln!("    {}", output::inline(&r));
                    }
                    continue;
                }
                Adoption::Adopted {
                    kind,
                    resource,
                    manifest,
                    gaps,
                    guest,
                    take_over,
                } => (kind, resource, manifest, gaps, guest, take_over),
            };
            let info = registry.get(kind).info();
            let wanted = manifest
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            // A name is a file name and a line of output: one the kind chose with a
            // control character, a separator or a leading dot is refused, not written.
            let unusable = wanted
                .chars()
                .any(|c| c.is_control() || matches!(c, '/' | '\\'))
                || wanted.starts_with('.')
                || wanted.len() > 200;
            if unusable {
                code = exit::ERROR;
                outln!(
                    "! {} ({}): not adopted: the {} kind chose the name {}, which cannot be a file name (a control character, `/`, `\\`, a leading `.` or over 200 bytes); no file was written",
                    output::inline(&resource),
                    info.kind,
                    info.kind,
                    proxops_reconcile::request::shown(&wanted)
                );
                continue;
            }
            let (name, header) = if guest {
                (
                    finish_manifest(&mut manifest, entry, &info.kind, &mut taken),
                    format!(
                        "# Adopted from {resource} by `proxops adopt`; metadata.adopt lets the next apply add\n# the ownership tags to this guest (and nothing else) while its vmid and PVE name match.\n"
                    ),
                )
            } else {
                let from = if c.listing == resources {
                    resource.clone()
                } else {
                    format!("{} entry {resource}", c.listing)
                };
                let header = if take_over.is_some() {
                    format!(
                        "# Adopted from {from} by `proxops adopt`; metadata.adopt lets the next apply add\n# proxops's mark to its comment (and nothing else) while its comment is the one adopt read.\n"
                    )
                } else {
                    format!(
                        "# Adopted from {from} by `proxops adopt`; proxops writes to it only while it is proxops's\n# (its mark, or its guest's), which the gaps below say how to hand over.\n"
                    )
                };
                (
                    finish_object(&mut manifest, &info.kind, &mut taken, take_over.as_ref()),
                    header,
                )
            };
            let rel = format!("{}/{}/{name}.yaml", info.folder, o.cluster);
            let yaml = format!("{header}{}", manifest_yaml(&manifest)?);
            match dir.write_atomic(&rel, yaml.as_bytes(), o.force) {
                Ok(()) => {
                    adopted += 1;
                    if guest {
                        guests_adopted += 1;
                    }
                    outln!(
                        "+ {} {} ({}) -> {}",
                        info.kind,
                        output::inline(&name),
                        output::inline(&resource),
                        output::inline(&rel)
                    );
                    if !wanted.is_empty() && wanted != name {
                        outln!(
                            "    the name `{}` is taken ({}/{}/{}.yaml); written as {name}",
                            output::inline(&wanted),
                            info.folder,
                            o.cluster,
                            output::inline(&wanted)
                        );
                    }
                }
                Err(e) => {
                    code = exit::ERROR;
                    outln!(
                        "! {} {} ({}): {}",
                        info.kind,
                        output::inline(&name),
                        output::inline(&resource),
                        output::inline(&e.to_string())
                    );
                }
            }
            for g in &gaps {
                gaps_total += 1;
                outln!(
                    "    gap {}: {}",
                    output::inline(&g.path),
                    output::inline(&g.reason)
                );
            }
        }
    }
    outln!(
        "Adopted {adopted} of {total} in cluster {} ({guests_adopted} guests, {} other objects; {gaps_total} gaps listed); nothing was sent to PVE but reads. Run `proxops plan` next: the only change it should show for a guest is its ownership tags, and for a named object without proxops's mark, the mark added to its comment.",
        o.cluster,
        adopted - guests_adopted
    );
    Ok(code)
}

/// The named objects to adopt: the entries of every listing the allowed kinds declare other
/// than `/cluster/resources` (guests are chosen above), each by its id in that listing.
/// `--all`: those no manifest names, except entries a kind claims (proxops's own mark with no
/// manifest: prune candidates, listed); `--object ID`: each id, wherever it is listed. The
/// bool is true when an id was not found or is already named.
async fn named_objects(
    registry: &proxops_reconcile::registry::KindRegistry,
    client: &proxops_pve::Client,
    o: &AdoptOptions,
    allows: &impl Fn(usize) -> bool,
    named_in: &impl Fn(&str, bool) -> BTreeSet<String>,
) -> anyhow::Result<(Vec<Chosen>, bool)> {
    let resources = proxops_reconcile::observe::CLUSTER_RESOURCES;
    // Each listing once, in registry order, with the id field of its first declaring kind.
    let mut listings: Vec<(String, String)> = Vec::new();
    for k in (0..registry.len()).filter(|&k| allows(k)) {
        for l in &registry.get(k).info().listings {
            if l.path != resources && !listings.iter().any(|(p, _)| *p == l.path) {
                listings.push((l.path.clone(), l.id_field.clone()));
            }
        }
    }
    let mut out = Vec::new();
    let mut found: BTreeSet<String> = BTreeSet::new();
    let mut failed = false;
    for (listing, id_field) in &listings {
        let entries = match proxops_reconcile::observe::listing(client, listing).await {
            Ok(e) => e,
            Err(e) => {
                outln!(
                    "! {}: not read, so nothing of it is adopted: {}",
                    output::inline(listing),
                    output::inline(&e.to_string())
                );
                failed = true;
                continue;
            }
        };
        let named = named_in(listing, false);
        let id_of = |e: &Entry| e.get(id_field).and_then(|f| f.id()).map(|c| c.into_owned());
        let mut picked = Vec::new();
        let mut owned_unnamed = Vec::new();
        // Objects PVE keeps no comment on are proxops's by an id prefix (roles: `proxops-`);
        // any other id can never be, so `--all` counts them instead of trying each.
        let prefix = proxops_reconcile::ownership::id_marked(listing);
        let mut foreign = 0;
        for e in &entries {
            let Some(id) = id_of(e) else { continue };
            if o.all && prefix.is_some_and(|p| !id.starts_with(p)) {
                foreign += 1;
                continue;
            }
            if o.all {
                if named.contains(&id) {
                    continue;
                }
                if claimed(registry, listing, e) {
                    owned_unnamed.push(id);
                    continue;
                }
                picked.push(e.clone());
            } else if o.objects.contains(&id) {
                found.insert(id.clone());
                if named.contains(&id) {
                    errln!(
                        "not adopted: {} {} is already named by a manifest",
                        output::inline(listing),
                        output::inline(&id)
                    );
                    failed = true;
                } else {
                    picked.push(e.clone());
                }
            }
        }
        if let Some(p) = prefix.filter(|_| foreign > 0) {
            outln!(
                "Not adopted: {foreign} entries of {} whose id does not start with `{p}` (PVE keeps no comment on them, so proxops manages only its own prefix; refer to the others by name)",
                output::inline(listing)
            );
        }
        if !owned_unnamed.is_empty() {
            outln!(
                "Not adopted: {} {} carry proxops's mark and no manifest names them; they are prune candidates, adopt them one by one with --object if you mean to keep them",
                output::inline(listing),
                output::inline(&owned_unnamed.join(", "))
            );
        }
        if !picked.is_empty() {
            out.push(Chosen {
                listing: listing.clone(),
                entries: picked,
                kinds: listing_kinds(registry, listing, allows),
            });
        }
    }
    for id in o.objects.iter().filter(|id| !found.contains(*id)) {
        errln!(
            "not adopted: no object {} in the listings of the loaded kinds ({})",
            output::inline(id),
            listings
                .iter()
                .map(|(p, _)| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        failed = true;
    }
    Ok((out, failed))
}

/// Images and ISOs on the cluster's storages, listed for the gap report: PVE keeps no URL
/// for a volume, so no DiskImage or ISO manifest can be written for one.
async fn report_volumes(client: &proxops_pve::Client, live: &[Entry]) {
    let mut found = BTreeSet::new();
    for s in live.iter().filter(|e| e.str("type") == Some("storage")) {
        let (Some(node), Some(storage)) = (s.str("node"), s.str("storage")) else {
            continue;
        };
        let path = format!("/nodes/{node}/storage/{storage}/content");
        let Ok(Value::Array(content)) = client.get(&path, &[]).await else {
            continue;
        };
        for v in content {
            let kind = v.get("content").and_then(Value::as_str).unwrap_or_default();
            if (kind == "iso" || kind == "import")
                && let Some(volid) = v.get("volid").and_then(Value::as_str)
            {
                found.insert(volid.to_string());
            }
        }
    }
    if !found.is_empty() {
        outln!(
            "Not adopted (PVE keeps no URL for a volume, so no DiskImage or ISO manifest can be written; declare them with their URL to manage them): {}",
            found.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
}

/// The words YAML 1.1 reads as booleans. proxops reads YAML 1.2, where they are strings, but
/// the manifests adopt writes are read by other tools too (PyYAML, Ansible, yamllint), and
/// serde_yaml writes these words unquoted: `discard: on` would be `true` to them.
const YAML11_BOOLEANS: &[&str] = &[
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off",
    "OFF",
];

/// `manifest` as YAML, with every key or value that YAML 1.1 would read as a boolean quoted.
/// The quoted text is kept only when proxops reads it back as the same manifest; otherwise
/// serde_yaml's text is written as it is (it reads back the same in YAML 1.2).
fn manifest_yaml(manifest: &Value) -> anyhow::Result<String> {
    let plain = serde_yaml::to_string(manifest).context("writing the manifest as YAML")?;
    let quoted = quote_yaml11_booleans(&plain);
    let same = proxops_core::yaml::parse(&quoted).is_ok_and(|docs| docs == [manifest.clone()]);
    Ok(if same { quoted } else { plain })
}

/// Quote the YAML 1.1 boolean words that stand alone as a key or a plain value on a line of
/// serde_yaml's block output (`key: on`, `- off`, `yes:`), leaving block scalars' content alone.
fn quote_yaml11_booleans(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    // While inside a block scalar (`key: |-`): the column its content must be deeper than.
    let mut block_over: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let body = line.strip_suffix('\n').unwrap_or(line);
        let indent = body.len() - body.trim_start_matches(' ').len();
        if let Some(over) = block_over {
            if body.trim().is_empty() || indent > over {
                out.push_str(line);
                continue;
            }
            block_over = None;
        }
        let mut start = indent;
        while body[start..].starts_with("- ") {
            start += 2;
        }
        let rest = &body[start..];
        let (key, value) = match rest.find(": ") {
            Some(at) => (Some(&rest[..at]), &rest[at + 2..]),
            None => match rest.strip_suffix(':') {
                Some(key) => (Some(key), ""),
                None => (None, rest),
            },
        };
        let quote = |word: &str| {
            if YAML11_BOOLEANS.contains(&word) {
                format!("'{word}'")
            } else {
                word.to_string()
            }
        };
        out.push_str(&body[..start]);
        if let Some(key) = key {
            out.push_str(&quote(key));
            out.push(':');
            if !value.is_empty() {
                out.push(' ');
            }
        }
        out.push_str(&quote(value));
        if line.ends_with('\n') {
            out.push('\n');
        }
        if value.starts_with('|') || value.starts_with('>') {
            // Content of a key's block scalar is deeper than the key; of a bare sequence
            // item's, deeper than its dash.
            block_over = Some(if key.is_some() { start } else { start - 2 });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str, expected: &str) {
        assert_eq!(quote_yaml11_booleans(yaml), expected, "input:\n{yaml}");
    }

    #[test]
    fn yaml11_booleans_are_quoted_where_they_stand_alone() {
        for (yaml, expected) in [
            ("discard: on\n", "discard: 'on'\n"),
            (
                "a:\n  b: off\n  c: onboard\n",
                "a:\n  b: 'off'\n  c: onboard\n",
            ),
            ("- yes\n- 'no'\n- maybe\n", "- 'yes'\n- 'no'\n- maybe\n"),
            ("- - N\n", "- - 'N'\n"),
            (
                "disks:\n- bus: scsi\n  ssd: Y\n",
                "disks:\n- bus: scsi\n  ssd: 'Y'\n",
            ),
            ("on:\n  off: 1\n", "'on':\n  'off': 1\n"),
            ("note: 'on'\nflag: true\n", "note: 'on'\nflag: true\n"),
            ("text: on the wall\n", "text: on the wall\n"),
            ("empty: {}\n", "empty: {}\n"),
            ("no newline: no", "no newline: 'no'"),
            // Block scalars' content is text, not keys or values.
            (
                "description: |-\n  on\n  yes: no\nnext: on\n",
                "description: |-\n  on\n  yes: no\nnext: 'on'\n",
            ),
            (
                "- k: |\n    off\n  other: off\n",
                "- k: |\n    off\n  other: 'off'\n",
            ),
            ("- |-\n  no\n  on\n- on\n", "- |-\n  no\n  on\n- 'on'\n"),
        ] {
            check(yaml, expected);
        }
    }

    #[test]
    fn manifests_read_back_the_same_and_carry_no_bare_yaml11_boolean() {
        let manifest = serde_json::json!({
            "metadata": {"name": "web", "labels": {"on": "off"}},
            "spec": {
                "description": "line one\non\nyes: no",
                "disks": [{"bus": "scsi", "discard": "on", "ssd": true}],
                "tags": ["y", "n", "yes-really"],
            },
        });
        let yaml = manifest_yaml(&manifest).unwrap();
        assert_eq!(proxops_core::yaml::parse(&yaml).unwrap(), [manifest]);
        assert!(yaml.contains("discard: 'on'"), "{yaml}");
        assert!(yaml.contains("'on': 'off'"), "{yaml}");
        assert!(yaml.contains("- 'y'\n"), "{yaml}");
        assert!(yaml.contains("ssd: true"), "{yaml}");
    }
}
