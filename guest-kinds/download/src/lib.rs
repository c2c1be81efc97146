//! The two download kinds, DiskImage (`content=import`, PVE 9's import content type) and ISO
//! (`content=iso`): a file PVE itself fetches with `POST /nodes/{node}/storage/{storage}/download-url`
//! onto a storage of the nodes that need it. Schema, validation, observe and plan live here
//! as plain Rust; [`DiskImage`] and [`Iso`] implement the SDK's
//! [`ResourceKind`](proxops_kind_sdk::kind::ResourceKind) with them (the SDK converts at the WIT
//! boundary), and the `diskimage` and `iso` crates export those as components.
//!
//! # Desired state (the JSON `validate` returns; other kinds read it from `resolved`)
//!
//! ```json
//! {"kind": "DiskImage", "name": "noble", "nodes": ["pve01"], "storage": "local",
//!  "url": "https://example.org/noble.img", "filename": "noble.qcow2", "content": "import",
//!  "volid": "local:import/noble.qcow2", "checksum": "<lower-case hex>",
//!  "checksum-algorithm": "sha256", "verify-certificates": true, "size": 614203392}
//! ```
//!
//! Stable fields, read by the VM kinds to build `import-from=<storage>:import/<filename>` and
//! `<storage>:iso/<filename>`: `kind`, `storage`, `filename` (the exact name PVE stores, already
//! normalised), `content` (`import` or `iso`) and `volid` (`<storage>:<content>/<filename>`).
//! `nodes` is absent when the manifest lists none; `checksum`, `checksum-algorithm`, `size` and
//! (ISO only) `compression` are absent when unset.
//!
//! # Which nodes need the file
//!
//! `spec.nodes` when given; otherwise the nodes (`node` in their desired state) of the objects
//! that reference this one (`referrers`: VMs and templates). No node, nothing to do. A
//! referrer on a node outside an explicit `spec.nodes` is an anomaly unless the storage is
//! shared. When the storage is shared (`shared` in `GET /nodes/{node}/storage`), the file is
//! one file for the whole cluster: it is downloaded once, on the first node (by name) that
//! needs it.
//!
//! # Drift, and what is never done
//!
//! Live state is the storage content listing. A missing file is downloaded (one action per
//! node, one in total on shared storage). A present file is never downloaded again, replaced
//! or deleted. PVE keeps no metadata on a volume (no URL, no checksum, no notes outside
//! backups), so "the size recorded at download" is recorded in the manifest: `spec.size`, the
//! byte count PVE lists for the file. proxops keeps no state of its own; the record is
//! versioned with the manifest and read the same by every checkout and CI runner.
//!
//! * `spec.size` set and a copy of another size: drift at `spec.size` and an anomaly.
//! * `spec.size` unset and copies on several nodes of different sizes: an anomaly.
//! * A changed `url` or `checksum` cannot be seen on a present file (PVE does not record
//!   them); update `spec.size` with them and the old file shows as a size anomaly. A file of the
//!   same size and other bytes cannot be told apart through the API.
//!
//! The explicit action an anomaly names is one of: set `spec.size` to the live size (accept
//! the file); set a new `spec.filename` (the new file is downloaded next to the old one, which
//! proxops leaves in place); or delete the file by hand on the node (`pvesm free <volid>`) after
//! checking no VM uses it, and apply again.
//!
//! # Ownership
//!
//! proxops never deletes an image or ISO file. Nothing proves it created a file: PVE keeps
//! no tag, note or owner on `import`/`iso` volumes, and `claims` only ever sees
//! `/cluster/resources` entries, which list no volumes, so no file without a manifest reaches
//! this kind. Hence the declared calls hold no DELETE.
//!
//! # File names
//!
//! `spec.filename`, or the last path segment of the URL (query and fragment dropped, and for an
//! ISO with `compression` the compression suffix such as `.gz` dropped). PVE rewrites every
//! character outside `[A-Za-z0-9_.-]` to `_`: a name taken from the URL is rewritten the same
//! way, an explicit name must already be in that form (else the volume PVE writes would not be
//! the one proxops looks for). Import content needs `.qcow2`, `.raw` or `.vmdk` (PVE also takes
//! `.ova`, an appliance archive no disk can be imported from directly): the extension is the
//! image format PVE imports with, so proxops never guesses it from a `.img` URL. ISO content
//! needs `.iso` or `.img`, in any case.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use proxops_kind_sdk::check::{Checker, Diag};
use proxops_kind_sdk::manifest;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal, Read,
};

/// Static description of a download kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadKind {
    /// `kind:` value.
    pub kind: &'static str,
    /// Repository folder.
    pub folder: &'static str,
    /// PVE storage content type.
    pub content: &'static str,
    /// File extensions proxops accepts for that content (lower case).
    pub extensions: &'static [&'static str],
    /// Whether PVE matches the extension regardless of case.
    pub extension_any_case: bool,
    /// Why the extension matters, appended to the extension error.
    pub extension_reason: &'static str,
    /// Whether `compression` is allowed.
    pub compression: bool,
}

/// The DiskImage kind.
pub const DISK_IMAGE: DownloadKind = DownloadKind {
    kind: "DiskImage",
    folder: "diskimage",
    content: "import",
    extensions: &["qcow2", "raw", "vmdk"],
    extension_any_case: false,
    extension_reason: "PVE keeps import content under these extensions and imports with the format the extension names",
    compression: false,
};

/// The ISO kind.
pub const ISO: DownloadKind = DownloadKind {
    kind: "ISO",
    folder: "iso",
    content: "iso",
    extensions: &["iso", "img"],
    extension_any_case: true,
    extension_reason: "PVE keeps iso content only under these extensions",
    compression: true,
};

/// Checksum algorithms PVE accepts, with the length of their hex digest.
pub const CHECKSUM_ALGORITHMS: &[(&str, usize)] = &[
    ("md5", 32),
    ("sha1", 40),
    ("sha224", 56),
    ("sha256", 64),
    ("sha384", 96),
    ("sha512", 128),
];
/// Compression algorithms PVE decompresses (ISO only); each is also the file suffix.
pub const COMPRESSIONS: &[&str] = &["gz", "lzo", "zst", "bz2"];
/// The calls the download kinds make, by method and path template: the storage list (shared
/// flag, content types), the content listing and the download. Never a DELETE: proxops does
/// not delete these files. PVE's answer to the download is a task, which the host itself
/// polls: the kind reads no task.
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/nodes/{node}/storage"),
    (Method::Get, "/nodes/{node}/storage/{storage}/content"),
    (Method::Post, "/nodes/{node}/storage/{storage}/download-url"),
];

/// Normalised desired state of a download (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DownloadDesired {
    /// `DiskImage` or `ISO`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Nodes listed in `spec.nodes`; empty means "the nodes of the referrers".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Storage id.
    pub storage: String,
    /// Source URL.
    pub url: String,
    /// File name on the storage, exactly as PVE stores it.
    pub filename: String,
    /// PVE content type (`import` or `iso`).
    pub content: String,
    /// Volume id the download creates, `<storage>:<content>/<filename>`.
    pub volid: String,
    /// Expected checksum, lower-case hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Its algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
    /// TLS verification (PVE default true).
    pub verify_certificates: bool,
    /// Size in bytes the file has once downloaded (decompressed), as PVE lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Decompression (ISO only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
}

mod validate;
pub use validate::{file_name_from_url, normalise_file_name, schema, url_file_segment, validate};

/// Identity: space `storage-volume`, key the volid; no node (one object may cover several
/// nodes) and no `/cluster/resources` id (volumes are not listed there).
pub fn identity_key(d: &DownloadDesired) -> (String, String) {
    ("storage-volume".into(), d.volid.clone())
}

/// An object whose reference names a download object (a VM or template), in plain Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referrer {
    /// Referring object's kind.
    pub kind: String,
    /// Referring object's name.
    pub name: String,
    /// Field of the referrer holding the reference, e.g. `spec.disks[0].image`.
    pub path: String,
    /// The referrer's desired state (JSON).
    pub desired: String,
}

impl From<&proxops_kind_sdk::kind::Resolved> for Referrer {
    /// The host hands a referrer as its reference (whose kind and name are this object's, the
    /// target) and its desired state: the referrer's own kind and name come from that state
    /// (`kind`, `name`, as the VM kind writes them), else it is called an object.
    fn from(r: &proxops_kind_sdk::kind::Resolved) -> Self {
        let desired: Value = serde_json::from_str(&r.desired).unwrap_or(Value::Null);
        let field = |key: &str| {
            desired
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Referrer {
            kind: field("kind").unwrap_or_else(|| "object".into()),
            name: field("name").unwrap_or_else(|| "?".into()),
            path: r.reference.path.clone(),
            desired: r.desired.clone(),
        }
    }
}

impl Referrer {
    /// The referrer's node (`node` in its desired state).
    pub fn node(&self) -> Option<String> {
        serde_json::from_str::<Value>(&self.desired)
            .ok()?
            .get("node")?
            .as_str()
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    }

    fn label(&self) -> String {
        format!("{} `{}` ({})", self.kind, self.name, self.path)
    }
}

/// The nodes that need the file, and the referrers explicit nodes leave out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Sorted, without duplicates.
    pub nodes: Vec<String>,
    /// Referrers on a node an explicit `spec.nodes` does not list, with that node.
    pub outside: Vec<(Referrer, String)>,
    /// Referrers whose desired state names no node.
    pub unplaced: Vec<Referrer>,
}

/// Which nodes need the file.
pub fn needs(d: &DownloadDesired, referrers: &[Referrer]) -> Needs {
    let mut out = Needs::default();
    let mut nodes: BTreeSet<String> = d.nodes.iter().cloned().collect();
    for r in referrers {
        match r.node() {
            None => out.unplaced.push(r.clone()),
            Some(n) if d.nodes.is_empty() => {
                nodes.insert(n);
            }
            Some(n) if !nodes.contains(&n) => out.outside.push((r.clone(), n)),
            Some(_) => {}
        }
    }
    out.nodes = nodes.into_iter().collect();
    out
}

fn storage_list_call(node: &str) -> Call {
    Call::new(Method::Get, format!("/nodes/{node}/storage"))
}

fn content_call(d: &DownloadDesired, node: &str) -> Call {
    Call::new(
        Method::Get,
        format!("/nodes/{node}/storage/{}/content", d.storage),
    )
    .param("content", &d.content)
}

fn download_call(d: &DownloadDesired, node: &str) -> Call {
    let mut c = Call::new(
        Method::Post,
        format!("/nodes/{node}/storage/{}/download-url", d.storage),
    )
    .param("url", &d.url)
    .param("content", &d.content)
    .param("filename", &d.filename);
    if let (Some(sum), Some(alg)) = (&d.checksum, &d.checksum_algorithm) {
        c = c.param("checksum", sum).param("checksum-algorithm", alg);
    }
    c = c.param(
        "verify-certificates",
        if d.verify_certificates { "1" } else { "0" },
    );
    if let Some(z) = &d.compression {
        c = c.param("compression", z);
    }
    c
}

/// The reads `plan` needs: per node that needs the file, the node's storage list (whether the
/// storage is there, shared, enabled for the content) and the storage's content listing. The
/// storage list carries no parameter so that the host reads it once per node for all objects.
pub fn observe(d: &DownloadDesired, referrers: &[Referrer]) -> Vec<Call> {
    needs(d, referrers)
        .nodes
        .iter()
        .flat_map(|n| [storage_list_call(n), content_call(d, n)])
        .collect()
}

/// What one node showed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeView {
    node: String,
    shared: bool,
    /// `None`: no such file; `Some(size)`: present, with its listed size when readable.
    file: Option<Option<u64>>,
}

fn lenient_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn lenient_flag(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_f64() != Some(0.0)),
        Value::String(s) => Some(!matches!(s.as_str(), "0" | "" | "false")),
        _ => None,
    }
}

fn read_answer<'a>(obs: &'a Observation, call: &Call) -> Result<&'a Read, Diag> {
    let read = obs
        .reads
        .iter()
        .find(|r| r.call.path == call.path && r.call.params == call.params)
        .ok_or_else(|| Diag::error("", format!("the host gave no answer to GET {}", call.path)))?;
    if read.status != 200 {
        let detail = serde_json::from_str::<Value>(&read.body)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| read.body.clone());
        let status = if read.status == 0 {
            "no HTTP status".to_string()
        } else {
            format!("HTTP {}", read.status)
        };
        return Err(Diag::error(
            "",
            format!("reading GET {} failed ({status}): {detail}", call.path),
        ));
    }
    Ok(read)
}

fn node_view(
    d: &DownloadDesired,
    node: &str,
    why: &str,
    obs: &Observation,
) -> Result<NodeView, Diag> {
    let list = read_answer(obs, &storage_list_call(node))?;
    let list: Value = serde_json::from_str(&list.body).map_err(|e| {
        Diag::error(
            "",
            format!("the storage list of node {node} is not JSON: {e}"),
        )
    })?;
    let entry = list
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s.get("storage").and_then(Value::as_str) == Some(d.storage.as_str()))
        .ok_or_else(|| {
            Diag::error(
                "spec.storage",
                format!(
                    "storage `{}` is not available on node {node} ({why})",
                    d.storage
                ),
            )
        })?;
    if lenient_flag(entry.get("enabled")) == Some(false) {
        return Err(Diag::error(
            "spec.storage",
            format!("storage `{}` is disabled on node {node} ({why})", d.storage),
        ));
    }
    if lenient_flag(entry.get("active")) == Some(false) {
        return Err(Diag::error(
            "spec.storage",
            format!(
                "storage `{}` is not active on node {node} ({why})",
                d.storage
            ),
        ));
    }
    let content = entry
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !content.split(',').any(|c| c.trim() == d.content) {
        return Err(Diag::error(
            "spec.storage",
            format!(
                "storage `{}` on node {node} does not hold `{}` content (it holds `{content}`); enable `{}` content on it or choose another storage",
                d.storage, d.content, d.content
            ),
        ));
    }
    let shared = lenient_flag(entry.get("shared")).unwrap_or(false);
    let listing = read_answer(obs, &content_call(d, node))?;
    let listing: Value = serde_json::from_str(&listing.body).map_err(|e| {
        Diag::error(
            "",
            format!(
                "the content listing of `{}` on node {node} is not JSON: {e}",
                d.storage
            ),
        )
    })?;
    let file = listing
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v.get("volid").and_then(Value::as_str) == Some(d.volid.as_str()))
        .map(|v| v.get("size").and_then(lenient_u64));
    Ok(NodeView {
        node: node.to_string(),
        shared,
        file,
    })
}

fn why_needed(d: &DownloadDesired, node: &str, referrers: &[Referrer]) -> String {
    if d.nodes.iter().any(|n| n == node) {
        return "listed in spec.nodes".into();
    }
    let users: Vec<String> = referrers
        .iter()
        .filter(|r| r.node().as_deref() == Some(node))
        .map(|r| format!("{} `{}`", r.kind, r.name))
        .collect();
    format!("needed by {}", users.join(", "))
}

fn referenced_by(referrers: &[Referrer]) -> String {
    let mut names: Vec<String> = referrers
        .iter()
        .map(|r| format!("{} `{}`", r.kind, r.name))
        .collect();
    names.dedup();
    if names.is_empty() {
        String::new()
    } else {
        format!(" (referenced by {})", names.join(", "))
    }
}

/// The anomaly path that tells the host this object cannot serve referrers on a node; the
/// host blocks those referrers before any of their calls (contract 0.1.0 convention).
pub const UNAVAILABLE_ON: &str = "unavailable-on:";

/// Compare the desired file with the content listings and propose downloads, drift and
/// anomalies. A failed read, or a storage a node cannot hold the file on, fails the object.
pub fn plan(
    d: &DownloadDesired,
    referrers: &[Referrer],
    obs: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let needs = needs(d, referrers);
    let mut out = Proposal::default();
    let mut views = Vec::new();
    for node in &needs.nodes {
        // A node where the file cannot be placed (or its storage not read) fails that node
        // only: the host blocks the referrers there, before any of their calls.
        match node_view(d, node, &why_needed(d, node, referrers), obs) {
            Ok(v) => views.push(v),
            Err(e) => out
                .anomalies
                .push(Anomaly::new(format!("{UNAVAILABLE_ON}{node}"), e.message)),
        }
    }
    let shared = views.iter().any(|v| v.shared);
    for (r, node) in &needs.outside {
        if !shared {
            out.anomalies.push(Anomaly::new(
                format!("{UNAVAILABLE_ON}{node}"),
                format!(
                    "{} is on node {node}, which spec.nodes does not list: the file is not placed there; add {node} to spec.nodes, or remove spec.nodes to follow the VMs",
                    r.label()
                ),
            ));
        }
    }
    for r in &needs.unplaced {
        out.anomalies.push(Anomaly::new(
            "",
            format!(
                "the desired state of {} names no node; no node is provisioned for it",
                r.label()
            ),
        ));
    }

    // Shared storage: one file for every node that sees the storage as shared.
    let mut groups: Vec<Vec<&NodeView>> = Vec::new();
    let shared_views: Vec<&NodeView> = views.iter().filter(|v| v.shared).collect();
    if !shared_views.is_empty() {
        groups.push(shared_views);
    }
    groups.extend(views.iter().filter(|v| !v.shared).map(|v| vec![v]));
    groups.sort_by(|a, b| a[0].node.cmp(&b[0].node));

    let mut copies: Vec<(String, u64)> = Vec::new();
    for g in &groups {
        let node = &g[0].node;
        let nodes: Vec<&str> = g.iter().map(|v| v.node.as_str()).collect();
        let is_shared = g[0].shared;
        match g
            .iter()
            .find_map(|v| v.file.map(|size| (v.node.as_str(), size)))
        {
            None => {
                let (place, summary) = if is_shared {
                    (
                        format!("{} (shared storage, for {})", d.volid, nodes.join(", ")),
                        format!(
                            "download {} {} to {} on {node}, once for {} (shared storage)",
                            d.kind,
                            d.name,
                            d.volid,
                            nodes.join(", ")
                        ),
                    )
                } else {
                    (
                        format!("{} on {node}", d.volid),
                        format!("download {} {} to {} on {node}", d.kind, d.name, d.volid),
                    )
                };
                out.drift.push(Drift::new("", None, Some(place)));
                let call = download_call(d, node);
                let changes = call
                    .params
                    .iter()
                    .filter(|p| p.name != "content")
                    .map(|p| Change::new(&p.name, None, Some(p.value.clone())))
                    .collect();
                out.actions.push(Action {
                    operation: Operation::Create,
                    summary,
                    calls: vec![call],
                    changes,
                    disturbs_availability: false,
                    destructive: false,
                    restore: None,
                });
            }
            Some((seen_on, Some(live))) => {
                let place = if is_shared {
                    format!("{} (shared storage)", d.volid)
                } else {
                    format!("{} on {seen_on}", d.volid)
                };
                copies.push((place.clone(), live));
                if let Some(want) = d.size
                    && live != want
                {
                    out.drift.push(Drift::new(
                        "spec.size",
                        Some(live.to_string()),
                        Some(want.to_string()),
                    ));
                    out.anomalies.push(Anomaly::new(
                        "spec.size",
                        format!(
                            "{place} is {live} bytes but spec.size records {want}; proxops never replaces a present file{}. If this file is the right one, set spec.size to {live}; otherwise set a new spec.filename to download the new file next to it, or check that no VM uses it, delete it by hand (`pvesm free {}` on {seen_on}) and apply again",
                            referenced_by(referrers),
                            d.volid
                        ),
                    ));
                }
            }
            Some((_, None)) => {}
        }
    }
    if d.size.is_none() {
        let sizes: BTreeSet<u64> = copies.iter().map(|(_, s)| *s).collect();
        if sizes.len() > 1 {
            let list: Vec<String> = copies
                .iter()
                .map(|(p, s)| format!("{p}: {s} bytes"))
                .collect();
            out.anomalies.push(Anomaly::new(
                "spec.size",
                format!(
                    "the copies of {} differ in size ({}); proxops cannot tell which is right and replaces neither. Set spec.size to the right size to see which copy is off, then delete that copy by hand (`pvesm free {}` on its node) and apply again",
                    d.volid,
                    list.join(", "),
                    d.volid
                ),
            ));
        }
    }
    Ok(out)
}

mod kind;
pub use kind::{DiskImage, Download, Iso};

#[cfg(test)]
mod tests;
