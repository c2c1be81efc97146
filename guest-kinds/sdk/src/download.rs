//! The two download kinds, DiskImage (`content=import`, PVE 9's import content type) and ISO
//! (`content=iso`): a file PVE itself fetches with `POST /nodes/{node}/storage/{storage}/download-url`
//! onto a storage of the nodes that need it. Schema, validation, observe and plan live here
//! as plain Rust; `glue` converts at the WIT boundary.
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
//! this kind. Hence `api-paths` holds no DELETE path.
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

use crate::check::{Checker, Diag};
use crate::manifest;
use crate::model::{
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
/// API path templates the download kinds call: the storage list (shared flag, content types),
/// the content listing and the download. Never a DELETE: proxops does not delete these files.
pub const API_PATHS: &[&str] = &[
    "/nodes/{node}/storage",
    "/nodes/{node}/storage/{storage}/content",
    "/nodes/{node}/storage/{storage}/download-url",
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

const SPEC_KEYS: &[&str] = &[
    "nodes",
    "storage",
    "url",
    "filename",
    "checksum",
    "checksum-algorithm",
    "verify-certificates",
    "size",
    "compression",
];

fn spec_keys(k: &DownloadKind) -> Vec<&'static str> {
    SPEC_KEYS
        .iter()
        .copied()
        .filter(|key| k.compression || *key != "compression")
        .collect()
}

/// What PVE does to an upload's file name: characters outside `[A-Za-z0-9_.-]` become `_`.
pub fn normalise_file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The last path segment of `url` (query and fragment dropped), empty when the URL names no
/// file (no path, or a path ending in `/`).
pub fn url_file_segment(url: &str) -> &str {
    let no_query = url.split(['?', '#']).next().unwrap_or_default();
    let after_scheme = no_query.split_once("://").map_or(no_query, |(_, r)| r);
    match after_scheme.split_once('/') {
        Some((_, path)) => path.rsplit('/').next().unwrap_or_default(),
        None => "",
    }
}

/// The file name proxops uses when `spec.filename` is absent: the URL's last segment without
/// the compression suffix, normalised as PVE would.
pub fn file_name_from_url(url: &str, compression: Option<&str>) -> String {
    let mut seg = url_file_segment(url);
    if let Some(c) = compression
        && let Some(stem) = seg.strip_suffix(&format!(".{c}"))
    {
        seg = stem;
    }
    normalise_file_name(seg)
}

fn extension_ok(k: &DownloadKind, name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && k.extensions.iter().any(|e| {
                if k.extension_any_case {
                    e.eq_ignore_ascii_case(ext)
                } else {
                    *e == ext
                }
            })
    })
}

fn extension_list(k: &DownloadKind) -> String {
    let dotted: Vec<String> = k.extensions.iter().map(|e| format!(".{e}")).collect();
    match dotted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => dotted.join(""),
    }
}

/// Why `name` cannot be the file name, or `None`. `from_url` selects the wording.
fn file_name_problem(k: &DownloadKind, name: &str, from_url: bool) -> Option<String> {
    if name.is_empty() {
        return Some(
            "the URL names no file (its path is empty or ends in `/`); set spec.filename".into(),
        );
    }
    if name.len() > 255 {
        return Some(format!(
            "file name must be at most 255 characters, got {}",
            name.len()
        ));
    }
    if !from_url
        && let Some(c) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Some(format!(
            "`{name}` contains `{c}`, which PVE rewrites to `_` (it would store `{}`); use letters, digits, `-`, `_` and `.` only",
            normalise_file_name(name)
        ));
    }
    if extension_ok(k, name) {
        return None;
    }
    let what = if from_url {
        format!("the file name taken from the URL, `{name}`,")
    } else {
        format!("file name `{name}`")
    };
    let mut msg = format!(
        "{what} must end in {} ({})",
        extension_list(k),
        k.extension_reason
    );
    if from_url {
        let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
        let first = k.extensions[0];
        if k.compression && COMPRESSIONS.contains(&ext) && extension_ok(k, stem) {
            msg.push_str(&format!(
                "; set compression: {ext} to have PVE decompress it to `{stem}`"
            ));
        } else if extension_ok(k, stem) || stem.is_empty() {
            msg.push_str("; set spec.filename");
        } else {
            msg.push_str(&format!("; set spec.filename, e.g. `{stem}.{first}`"));
            if k.content == "import" {
                msg.push_str(&format!(" if the image is {first}"));
            }
        }
    }
    Some(msg)
}

/// Why `name` is not a PVE node name, or `None`.
fn node_name_problem(name: &str) -> Option<String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    (!ok).then(|| {
        format!("`{name}` is not a PVE node name (letters, digits and `-`, not at either end)")
    })
}

/// Why `id` is not a PVE storage id, or `None`.
fn storage_id_problem(id: &str) -> Option<String> {
    let b = id.as_bytes();
    let ok = b.len() >= 2
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_' | b'.')
        })
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit());
    (!ok).then(|| {
        format!("`{id}` is not a PVE storage id (a lower-case letter, then lower-case letters, digits, `-`, `_` or `.`, ending in a letter or digit)")
    })
}

/// Validate a download manifest.
pub fn validate(k: &DownloadKind, doc: &Value) -> Result<(DownloadDesired, Vec<Diag>), Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = manifest::envelope(&mut c, doc, k.kind);
    let desired = spec.and_then(|spec| {
        let p = "spec";
        c.unknown_keys(spec, p, &spec_keys(k));
        let nodes = c.string_list(spec, p, "nodes").unwrap_or_default();
        if spec.get("nodes").is_some_and(|v| v.as_array().is_some_and(Vec::is_empty)) {
            c.error("spec.nodes", "must list at least one node; remove it to place the file on the nodes of the VMs that use it");
        }
        let mut seen = BTreeSet::new();
        for (i, n) in nodes.iter().enumerate() {
            if let Some(problem) = node_name_problem(n) {
                c.error(format!("spec.nodes[{i}]"), problem);
            } else if !seen.insert(n.as_str()) {
                c.error(format!("spec.nodes[{i}]"), format!("`{n}` is listed twice"));
            }
        }
        let storage = c.string(spec, p, "storage", true).filter(|s| match storage_id_problem(s) {
            Some(problem) => {
                c.error("spec.storage", problem);
                false
            }
            None => true,
        });
        let url = c.string(spec, p, "url", true).filter(|u| {
            let ok = (u.starts_with("https://") || u.starts_with("http://"))
                && u.split_once("://").is_some_and(|(_, rest)| !rest.is_empty() && !rest.starts_with('/'))
                && !u.contains(char::is_whitespace);
            if !ok {
                c.error("spec.url", format!("`{u}` is not an http(s) URL"));
            }
            ok
        });
        let compression = if k.compression {
            c.enumeration(spec, p, "compression", false, COMPRESSIONS)
        } else {
            None
        };
        let filename = match c.string(spec, p, "filename", false) {
            Some(f) => match file_name_problem(k, &f, false) {
                Some(problem) => {
                    c.error("spec.filename", problem);
                    None
                }
                None => Some(f),
            },
            None => url.as_deref().and_then(|u| {
                let f = file_name_from_url(u, compression.as_deref());
                match file_name_problem(k, &f, true) {
                    Some(problem) => {
                        c.error("spec.url", problem);
                        None
                    }
                    None => Some(f),
                }
            }),
        };
        let names: Vec<&str> = CHECKSUM_ALGORITHMS.iter().map(|(n, _)| *n).collect();
        let checksum = c.string(spec, p, "checksum", false).map(|s| s.to_ascii_lowercase());
        let algorithm = c.enumeration(spec, p, "checksum-algorithm", false, &names);
        match (&checksum, spec.get("checksum-algorithm").is_some_and(|v| !v.is_null())) {
            (Some(_), false) => c.error("spec.checksum-algorithm", "is required when checksum is set"),
            (None, true) => c.error("spec.checksum", "is required when checksum-algorithm is set"),
            (None, false) => c.warn(
                "spec.checksum",
                "no checksum: PVE cannot verify the download; set checksum and checksum-algorithm",
            ),
            _ => {}
        }
        if let Some(sum) = &checksum {
            if !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                c.error("spec.checksum", "must be a hex digest");
            } else if let Some(alg) = &algorithm
                && let Some((_, len)) = CHECKSUM_ALGORITHMS.iter().find(|(n, _)| n == alg)
                && sum.len() != *len
            {
                c.error(
                    "spec.checksum",
                    format!("a {alg} digest has {len} hex digits, got {}", sum.len()),
                );
            }
        }
        let verify = c.boolean(spec, p, "verify-certificates", false).unwrap_or(true);
        let size = c
            .int(spec, p, "size", false, 1, i64::MAX)
            .and_then(|n| u64::try_from(n).ok());
        let (storage, url, filename) = (storage?, url?, filename?);
        let volid = format!("{storage}:{}/{filename}", k.content);
        Some(DownloadDesired {
            kind: k.kind.to_string(),
            name: name.clone()?,
            nodes,
            storage,
            url,
            filename,
            content: k.content.to_string(),
            volid,
            checksum,
            checksum_algorithm: algorithm,
            verify_certificates: verify,
            size,
            compression,
        })
    });
    match (c.finish(), desired) {
        (Ok(w), Some(d)) => Ok((d, w)),
        (Ok(_), None) => Err(vec![Diag::error("", "manifest could not be read")]),
        (Err(d), _) => Err(d),
    }
}

/// JSON Schema of a download manifest.
pub fn schema(k: &DownloadKind) -> Value {
    let ext_pattern = if k.extension_any_case {
        k.extensions
            .iter()
            .map(|e| {
                e.chars()
                    .map(|ch| format!("[{}{}]", ch.to_ascii_lowercase(), ch.to_ascii_uppercase()))
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("|")
    } else {
        k.extensions.join("|")
    };
    let what = if k.content == "import" {
        "disk image (import content)"
    } else {
        "ISO image (iso content)"
    };
    let mut props = json!({
        "nodes": {
            "type": "array",
            "minItems": 1,
            "uniqueItems": true,
            "items": {"type": "string", "pattern": "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$"},
            "description": "PVE nodes the file must be on. Default: every node where a VM or template references this object. On shared storage the file is downloaded once for all of them."
        },
        "storage": {
            "type": "string",
            "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]$",
            "description": format!("PVE storage id; it must be a file-based storage with `{}` content enabled on every node that needs the file.", k.content)
        },
        "url": {
            "type": "string",
            "pattern": "^https?://[^/\\s]\\S*$",
            "description": "URL PVE downloads the file from (http or https); the node itself fetches it."
        },
        "filename": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": format!("^[A-Za-z0-9_.-]+\\.({ext_pattern})$"),
            "description": format!("File name on the storage; the volume is `<storage>:{}/<filename>`. Default: the URL's last path segment{}, with characters outside letters, digits, `-`, `_`, `.` replaced by `_` as PVE does. Must end in {} ({}).",
                k.content,
                if k.compression { " (without the compression suffix)" } else { "" },
                extension_list(k),
                k.extension_reason)
        },
        "checksum": {
            "type": "string",
            "pattern": "^[0-9A-Fa-f]+$",
            "description": "Expected hex digest of the file; PVE verifies it after the download and discards a file that does not match. Without it validation warns."
        },
        "checksum-algorithm": {
            "type": "string",
            "enum": CHECKSUM_ALGORITHMS.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            "description": "Algorithm of `checksum`."
        },
        "verify-certificates": {
            "type": "boolean",
            "default": true,
            "description": "Whether PVE verifies the server's TLS certificate."
        },
        "size": {
            "type": "integer",
            "minimum": 1,
            "description": "Size in bytes of the downloaded file as PVE lists it (the record of the download). A file of another size is reported as drift and an anomaly, never replaced. Unset: any size is accepted."
        }
    });
    if k.compression {
        props["compression"] = json!({
            "type": "string",
            "enum": COMPRESSIONS,
            "description": "Decompress the download with this algorithm; `filename` (and `size`) are those of the decompressed file."
        });
    }
    let spec = json!({
        "type": "object",
        "description": format!("A {what} PVE downloads onto a storage. proxops never re-downloads, replaces or deletes a present file."),
        "additionalProperties": false,
        "required": ["storage", "url"],
        "properties": props,
        "dependentRequired": {"checksum": ["checksum-algorithm"], "checksum-algorithm": ["checksum"]}
    });
    manifest::manifest_schema(k.kind, &format!("proxops {}", k.kind), spec)
}

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
                    .filter(|(k, _, _)| k != "content")
                    .map(|(k, v, _)| Change::new(k, None, Some(v.clone())))
                    .collect();
                out.actions.push(Action {
                    operation: Operation::Create,
                    summary,
                    calls: vec![call],
                    changes,
                    requires_stop: false,
                    destructive: false,
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

/// The component functions of a download kind, in WIT types.
pub mod glue {
    use super::*;
    use crate::model::diags_into_wit;
    use crate::types::Diagnostic;
    use crate::wit;

    /// `describe`.
    pub fn describe(k: &DownloadKind) -> wit::KindInfo {
        wit::KindInfo {
            kind: k.kind.into(),
            api_version: manifest::API_VERSION.into(),
            folder: k.folder.into(),
            schema: schema(k).to_string(),
            api_paths: API_PATHS.iter().map(|s| s.to_string()).collect(),
            references_kinds: Vec::new(),
        }
    }

    /// `validate`.
    pub fn validate(k: &DownloadKind, manifest: &str) -> Result<wit::Validated, Vec<Diagnostic>> {
        let doc: Value = serde_json::from_str(manifest).map_err(|e| {
            diags_into_wit(vec![Diag::error(
                "",
                format!("manifest is not valid JSON: {e}"),
            )])
        })?;
        let (d, warnings) = super::validate(k, &doc).map_err(diags_into_wit)?;
        Ok(wit::Validated {
            desired: serde_json::to_string(&d).unwrap_or_default(),
            warnings: diags_into_wit(warnings),
        })
    }

    /// `identity`.
    pub fn identity(desired: &str) -> wit::ObjectKey {
        match serde_json::from_str::<DownloadDesired>(desired) {
            Ok(d) => {
                let (space, key) = identity_key(&d);
                wit::ObjectKey {
                    node: None,
                    space,
                    key,
                    resource_id: None,
                }
            }
            Err(e) => wit::ObjectKey {
                node: None,
                space: "invalid".into(),
                key: e.to_string(),
                resource_id: None,
            },
        }
    }

    /// The plain form of the WIT referrers.
    pub fn referrers(rs: Vec<wit::Resolved>) -> Vec<Referrer> {
        rs.into_iter()
            .map(|r| Referrer {
                kind: r.reference.kind,
                name: r.reference.name,
                path: r.reference.path,
                desired: r.desired,
            })
            .collect()
    }

    /// `observe`: nothing for an unreadable or absent desired state.
    pub fn observe(
        desired: Option<String>,
        referrers: Vec<wit::Resolved>,
    ) -> Vec<crate::types::Call> {
        let Some(d) = desired.and_then(|s| serde_json::from_str::<DownloadDesired>(&s).ok()) else {
            return Vec::new();
        };
        super::observe(&d, &self::referrers(referrers))
            .into_iter()
            .map(Call::into_wit)
            .collect()
    }

    /// `plan`: no manifest means nothing to do (the kind claims no live object).
    pub fn plan(
        desired: Option<String>,
        referrers: Vec<wit::Resolved>,
        observed: wit::Observation,
    ) -> Result<wit::Proposal, Vec<Diagnostic>> {
        let Some(desired) = desired else {
            return Ok(Proposal::default().into_wit());
        };
        let d: DownloadDesired = serde_json::from_str(&desired).map_err(|e| {
            diags_into_wit(vec![Diag::error(
                "",
                format!("desired state could not be read: {e}"),
            )])
        })?;
        super::plan(
            &d,
            &self::referrers(referrers),
            &Observation::from_wit(observed),
        )
        .map(Proposal::into_wit)
        .map_err(diags_into_wit)
    }

    /// `adopt`: impossible, since PVE records neither the URL nor the checksum of a file.
    pub fn adopt(k: &DownloadKind) -> Result<String, String> {
        Err(format!(
            "{} objects cannot be adopted: PVE records no source URL or checksum for a file, so no manifest can be written from live state",
            k.kind
        ))
    }
}

/// Defines `Kind`, the exported component type of a download kind (`&DISK_IMAGE` or `&ISO`),
/// delegating to [`glue`], and exports it in the component build (export names contain `:`,
/// which a native cdylib's linker rejects; native builds exist for unit tests only).
#[macro_export]
macro_rules! download_component {
    ($spec:expr) => {
        /// The exported component type.
        pub struct Kind;

        impl $crate::wit::Guest for Kind {
            fn describe() -> $crate::wit::KindInfo {
                $crate::download::glue::describe($spec)
            }

            fn validate(
                manifest: String,
            ) -> Result<$crate::wit::Validated, Vec<$crate::types::Diagnostic>> {
                $crate::download::glue::validate($spec, &manifest)
            }

            fn references(_desired: String) -> Vec<$crate::wit::Reference> {
                Vec::new()
            }

            fn check_references(
                _desired: String,
                _resolved: Vec<$crate::wit::Resolved>,
            ) -> Vec<$crate::types::Diagnostic> {
                Vec::new()
            }

            fn identity(desired: String) -> $crate::wit::ObjectKey {
                $crate::download::glue::identity(&desired)
            }

            fn observe(
                desired: Option<String>,
                _live: Option<String>,
                referrers: Vec<$crate::wit::Resolved>,
            ) -> Vec<$crate::types::Call> {
                $crate::download::glue::observe(desired, referrers)
            }

            fn plan(
                desired: Option<String>,
                _resolved: Vec<$crate::wit::Resolved>,
                referrers: Vec<$crate::wit::Resolved>,
                observed: $crate::wit::Observation,
            ) -> Result<$crate::wit::Proposal, Vec<$crate::types::Diagnostic>> {
                $crate::download::glue::plan(desired, referrers, observed)
            }

            /// Volumes never appear in `/cluster/resources`, and nothing proves proxops
            /// created a file, so no live entry is ever claimed for pruning.
            fn claims(_live: String) -> bool {
                false
            }

            fn adopt(_observed: $crate::wit::Observation) -> Result<String, String> {
                $crate::download::glue::adopt($spec)
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::export_kind!(Kind);
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const UBUNTU: &str =
        "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img";
    const SHA256: &str = "5c3ddb00f60bc455dac0862fabe9d8bacec46c33ac1751143c5c3683404b110d";
    const NOCHECK: (&str, &str) = (
        "spec.checksum",
        "no checksum: PVE cannot verify the download; set checksum and checksum-algorithm",
    );

    /// Diagnostics as `(path, message)`.
    type Pairs<'a> = &'a [(&'a str, &'a str)];

    /// Validate `spec` as a `k` manifest named `img`; `Ok` holds the volid and the warnings,
    /// `Err` every diagnostic, as `(path, message)`.
    fn check(k: &DownloadKind, spec: Value, expected: Result<(&str, Pairs), Pairs>) {
        let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": k.kind, "metadata": {"name": "img"}, "spec": spec});
        let pairs = |ds: &[Diag]| -> Vec<(String, String)> {
            ds.iter()
                .map(|d| (d.path.clone(), d.message.clone()))
                .collect()
        };
        let owned = |xs: &[(&str, &str)]| -> Vec<(String, String)> {
            xs.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        match (validate(k, &doc), expected) {
            (Ok((d, w)), Ok((volid, warnings))) => {
                assert_eq!(d.volid, volid, "{spec}");
                assert_eq!(pairs(&w), owned(warnings), "{spec}");
            }
            (Err(diags), Err(want)) => assert_eq!(pairs(&diags), owned(want), "{spec}"),
            (got, want) => panic!("{spec}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn file_names_from_urls() {
        for (url, compression, want) in [
            (UBUNTU, None, "noble-server-cloudimg-amd64.img"),
            ("https://h/a/b.qcow2?x=1#f", None, "b.qcow2"),
            ("https://h/a/my%20disk+v1.raw", None, "my_20disk_v1.raw"),
            ("https://h/x.iso.gz", Some("gz"), "x.iso"),
            ("https://h/x.iso.zst", Some("gz"), "x.iso.zst"),
            ("https://h/dir/", None, ""),
            ("https://h", None, ""),
            ("https://h?a=/b.iso", None, ""),
        ] {
            assert_eq!(file_name_from_url(url, compression), want, "{url}");
        }
    }

    #[test]
    fn valid_downloads() {
        check(
            &ISO,
            json!({"storage": "local", "url": UBUNTU}),
            Ok(("local:iso/noble-server-cloudimg-amd64.img", &[NOCHECK])),
        );
        check(
            &DISK_IMAGE,
            json!({"nodes": ["pve01", "pve02"], "storage": "local", "url": UBUNTU, "filename": "noble.qcow2",
                "checksum": SHA256.to_uppercase(), "checksum-algorithm": "sha256", "size": 614203392}),
            Ok(("local:import/noble.qcow2", &[])),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "nfs-images", "url": "https://h/debian-13-genericcloud-amd64.raw"}),
            Ok((
                "nfs-images:import/debian-13-genericcloud-amd64.raw",
                &[NOCHECK],
            )),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https://h/x/alpine-virt.ISO.gz", "compression": "gz",
                "checksum": "d41d8cd98f00b204e9800998ecf8427e", "checksum-algorithm": "md5"}),
            Ok(("local:iso/alpine-virt.ISO", &[])),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https://h/a%20b.iso"}),
            Ok(("local:iso/a_20b.iso", &[NOCHECK])),
        );
    }

    #[test]
    fn file_name_rules() {
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": UBUNTU}),
            Err(&[
                (
                    "spec.url",
                    "the file name taken from the URL, `noble-server-cloudimg-amd64.img`, must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names); set spec.filename, e.g. `noble-server-cloudimg-amd64.qcow2` if the image is qcow2",
                ),
                NOCHECK,
            ]),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": UBUNTU, "filename": "appliance.ova", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.filename",
                "file name `appliance.ova` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
            )]),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": UBUNTU, "filename": "noble.QCOW2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.filename",
                "file name `noble.QCOW2` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
            )]),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": UBUNTU, "filename": "noble+v=1.qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.filename",
                "`noble+v=1.qcow2` contains `+`, which PVE rewrites to `_` (it would store `noble_v_1.qcow2`); use letters, digits, `-`, `_` and `.` only",
            )]),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": UBUNTU, "filename": ".qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.filename",
                "file name `.qcow2` must end in .qcow2, .raw or .vmdk (PVE keeps import content under these extensions and imports with the format the extension names)",
            )]),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https://h/downloads/", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.url",
                "the URL names no file (its path is empty or ends in `/`); set spec.filename",
            )]),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https://h/x.iso.xz", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.url",
                "the file name taken from the URL, `x.iso.xz`, must end in .iso or .img (PVE keeps iso content only under these extensions); set spec.filename",
            )]),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https://h/x.iso.zst", "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.url",
                "the file name taken from the URL, `x.iso.zst`, must end in .iso or .img (PVE keeps iso content only under these extensions); set compression: zst to have PVE decompress it to `x.iso`",
            )]),
        );
        let long = format!("{}.iso", "a".repeat(252));
        check(
            &ISO,
            json!({"storage": "local", "url": UBUNTU, "filename": long, "checksum": SHA256, "checksum-algorithm": "sha256"}),
            Err(&[(
                "spec.filename",
                "file name must be at most 255 characters, got 256",
            )]),
        );
    }

    #[test]
    fn field_rules() {
        check(
            &ISO,
            json!({"storage": "local", "url": "ftp://x/a.iso", "checksum": "ab", "compression": "xz"}),
            Err(&[
                ("spec.url", "`ftp://x/a.iso` is not an http(s) URL"),
                (
                    "spec.compression",
                    "must be one of `gz`, `lzo`, `zst`, `bz2`, got `xz`",
                ),
                (
                    "spec.checksum-algorithm",
                    "is required when checksum is set",
                ),
            ]),
        );
        check(
            &DISK_IMAGE,
            json!({"url": "https://h/a.raw", "compression": "gz", "checksum-algorithm": "sha256"}),
            Err(&[
                (
                    "spec.compression",
                    "unknown field `compression`; expected one of `nodes`, `storage`, `url`, `filename`, `checksum`, `checksum-algorithm`, `verify-certificates`, `size`",
                ),
                ("spec.storage", "is required"),
                (
                    "spec.checksum",
                    "is required when checksum-algorithm is set",
                ),
            ]),
        );
        check(
            &DISK_IMAGE,
            json!({"nodes": ["pve01", "pve_2", "pve01"], "storage": "Local", "url": "https://h/a.raw",
                "checksum": "abc123", "checksum-algorithm": "sha256", "size": 0, "verify-certificates": "no"}),
            Err(&[
                (
                    "spec.nodes[1]",
                    "`pve_2` is not a PVE node name (letters, digits and `-`, not at either end)",
                ),
                ("spec.nodes[2]", "`pve01` is listed twice"),
                (
                    "spec.storage",
                    "`Local` is not a PVE storage id (a lower-case letter, then lower-case letters, digits, `-`, `_` or `.`, ending in a letter or digit)",
                ),
                ("spec.checksum", "a sha256 digest has 64 hex digits, got 6"),
                (
                    "spec.verify-certificates",
                    "expected true or false, got a string",
                ),
                ("spec.size", "must be from 1 to 9223372036854775807, got 0"),
            ]),
        );
        check(
            &DISK_IMAGE,
            json!({"nodes": [], "storage": "local", "url": "https://h/a.raw", "checksum": "xyz", "checksum-algorithm": "md5"}),
            Err(&[
                (
                    "spec.nodes",
                    "must list at least one node; remove it to place the file on the nodes of the VMs that use it",
                ),
                ("spec.checksum", "must be a hex digest"),
            ]),
        );
        check(
            &ISO,
            json!({"storage": "local", "url": "https:///a.iso"}),
            Err(&[
                ("spec.url", "`https:///a.iso` is not an http(s) URL"),
                NOCHECK,
            ]),
        );
    }

    #[test]
    fn desired_json_shape_is_stable() {
        let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": "DiskImage", "metadata": {"name": "noble"},
            "spec": {"storage": "local", "url": "https://h/noble.qcow2", "checksum": SHA256, "checksum-algorithm": "sha256"}});
        let (d, _) = validate(&DISK_IMAGE, &doc).unwrap();
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            json!({"kind": "DiskImage", "name": "noble", "storage": "local", "url": "https://h/noble.qcow2",
                "filename": "noble.qcow2", "content": "import", "volid": "local:import/noble.qcow2",
                "checksum": SHA256, "checksum-algorithm": "sha256", "verify-certificates": true})
        );
        assert_eq!(
            identity_key(&d),
            (
                "storage-volume".to_string(),
                "local:import/noble.qcow2".to_string()
            )
        );
    }

    #[test]
    fn schema_lists_checker_keys() {
        for k in [&ISO, &DISK_IMAGE] {
            let s = schema(k);
            let props = s["properties"]["spec"]["properties"].as_object().unwrap();
            let mut keys: Vec<&str> = props.keys().map(String::as_str).collect();
            keys.sort();
            let mut want = spec_keys(k);
            want.sort();
            assert_eq!(keys, want);
            for (key, p) in props {
                assert!(
                    p["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{} {key} has no description",
                    k.kind
                );
            }
        }
        let iso = schema(&ISO);
        assert_eq!(
            iso["properties"]["spec"]["properties"]["filename"]["pattern"],
            "^[A-Za-z0-9_.-]+\\.([iI][sS][oO]|[iI][mM][gG])$"
        );
    }
}
