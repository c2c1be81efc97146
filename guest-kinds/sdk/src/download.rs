//! The manifest shape shared by the two download kinds, DiskImage (`content=import`) and ISO
//! (`content=iso`): both become one `POST /nodes/{node}/storage/{storage}/download-url`. This
//! module holds their schema and structural validation; planning is not implemented yet.
//!
//! `spec`: `node`, `storage`, `url` (http or https), optional `filename` (defaults to the last
//! URL path segment; PVE's extension rules apply), optional `checksum` + `checksum-algorithm`
//! (both or neither; a download without a checksum is a warning), optional
//! `verify-certificates`, and for ISO only `compression` (`gz`, `lzo`, `zst`, `bz2`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::check::{Checker, Diag};
use crate::manifest;

/// Static description of a download kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadKind {
    /// `kind:` value.
    pub kind: &'static str,
    /// Repository folder.
    pub folder: &'static str,
    /// PVE storage content type.
    pub content: &'static str,
    /// File extensions PVE accepts for that content.
    pub extensions: &'static [&'static str],
    /// Whether `compression` is allowed.
    pub compression: bool,
}

/// The DiskImage kind.
pub const DISK_IMAGE: DownloadKind = DownloadKind {
    kind: "DiskImage",
    folder: "diskimage",
    content: "import",
    extensions: &["qcow2", "raw", "vmdk", "ova"],
    compression: false,
};

/// The ISO kind.
pub const ISO: DownloadKind = DownloadKind {
    kind: "ISO",
    folder: "iso",
    content: "iso",
    extensions: &["iso", "img"],
    compression: true,
};

/// Checksum algorithms PVE accepts.
pub const CHECKSUM_ALGORITHMS: &[&str] = &["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];
/// Compression algorithms PVE decompresses (ISO only).
pub const COMPRESSIONS: &[&str] = &["gz", "lzo", "zst", "bz2"];
/// API path templates the download kinds will call.
pub const API_PATHS: &[&str] = &[
    "/nodes/{node}/storage/{storage}/content",
    "/nodes/{node}/storage/{storage}/download-url",
    "/nodes/{node}/storage/{storage}/content/{volume}",
];

/// Normalised desired state of a download.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DownloadDesired {
    /// `DiskImage` or `ISO`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// Node.
    pub node: String,
    /// Storage id.
    pub storage: String,
    /// Source URL.
    pub url: String,
    /// File name on the storage.
    pub filename: String,
    /// PVE content type (`import` or `iso`).
    pub content: String,
    /// Volume id the download creates, `<storage>:<content>/<filename>`.
    pub volid: String,
    /// Expected checksum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Its algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
    /// TLS verification (PVE default true).
    pub verify_certificates: bool,
    /// Decompression (ISO only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression: Option<String>,
}

const SPEC_KEYS: &[&str] = &[
    "node",
    "storage",
    "url",
    "filename",
    "checksum",
    "checksum-algorithm",
    "verify-certificates",
    "compression",
];

fn spec_keys(k: &DownloadKind) -> Vec<&'static str> {
    SPEC_KEYS
        .iter()
        .copied()
        .filter(|key| k.compression || *key != "compression")
        .collect()
}

/// Validate a download manifest.
pub fn validate(k: &DownloadKind, doc: &Value) -> Result<(DownloadDesired, Vec<Diag>), Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = manifest::envelope(&mut c, doc, k.kind);
    let desired = spec.and_then(|spec| {
        let p = "spec";
        c.unknown_keys(spec, p, &spec_keys(k));
        let node = c.string(spec, p, "node", true);
        let storage = c.string(spec, p, "storage", true);
        let url = c.string(spec, p, "url", true).filter(|u| {
            let ok = (u.starts_with("https://") || u.starts_with("http://")) && !u.contains(char::is_whitespace);
            if !ok {
                c.error("spec.url", format!("`{u}` is not an http(s) URL"));
            }
            ok
        });
        let filename = match c.string(spec, p, "filename", false) {
            Some(f) => Some(f),
            None => url.as_deref().map(|u| {
                let path = u.split(['?', '#']).next().unwrap_or_default();
                path.rsplit('/').next().unwrap_or_default().to_string()
            }),
        };
        let filename = filename.filter(|f| {
            let ext_ok = f.rsplit_once('.').is_some_and(|(stem, ext)| !stem.is_empty() && k.extensions.contains(&ext));
            let chars_ok = !f.is_empty() && f.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'+' | b'=' | b'_'));
            if !(ext_ok && chars_ok) && f.len() <= 255 {
                let what = if spec.contains_key("filename") { "spec.filename" } else { "spec.url" };
                c.error(
                    what,
                    format!(
                        "file name `{f}` must use letters, digits, `-`, `.`, `+`, `=`, `_` and end in .{}{}",
                        k.extensions.join(", ."),
                        if spec.contains_key("filename") { "" } else { "; set spec.filename" }
                    ),
                );
                return false;
            }
            if f.len() > 255 {
                c.error("spec.filename", "must be at most 255 characters");
                return false;
            }
            true
        });
        let checksum = c.string(spec, p, "checksum", false);
        let algorithm = c.enumeration(spec, p, "checksum-algorithm", false, CHECKSUM_ALGORITHMS);
        match (&checksum, spec.get("checksum-algorithm").is_some_and(|v| !v.is_null())) {
            (Some(_), false) => c.error("spec.checksum-algorithm", "is required when checksum is set"),
            (None, true) => c.error("spec.checksum", "is required when checksum-algorithm is set"),
            (None, false) => c.warn("spec.checksum", "no checksum: the download cannot be verified; set checksum and checksum-algorithm"),
            _ => {}
        }
        if let Some(sum) = &checksum
            && !sum.bytes().all(|b| b.is_ascii_hexdigit()) {
                c.error("spec.checksum", "must be a hex digest");
            }
        let verify = c.boolean(spec, p, "verify-certificates", false).unwrap_or(true);
        let compression =
            if k.compression { c.enumeration(spec, p, "compression", false, COMPRESSIONS) } else { None };
        let (node, storage, url, filename) = (node?, storage?, url?, filename?);
        let volid = format!("{storage}:{}/{filename}", k.content);
        Some(DownloadDesired {
            kind: k.kind.to_string(),
            name: name.clone()?,
            node,
            storage,
            url,
            filename,
            content: k.content.to_string(),
            volid,
            checksum,
            checksum_algorithm: algorithm,
            verify_certificates: verify,
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
    let mut props = json!({
        "node": {"type": "string", "description": "PVE node the file is downloaded on."},
        "storage": {"type": "string", "pattern": "^[a-z][a-z0-9._-]*[a-z0-9]$", "description": format!("Storage id (needs `{}` content).", k.content)},
        "url": {"type": "string", "pattern": "^https?://\\S+$", "description": "Source URL."},
        "filename": {"type": "string", "maxLength": 255, "pattern": format!("^[A-Za-z0-9.+=_-]+\\.({})$", k.extensions.join("|")),
            "description": "File name on the storage; defaults to the URL's last path segment."},
        "checksum": {"type": "string", "pattern": "^[0-9A-Fa-f]+$", "description": "Expected hex digest."},
        "checksum-algorithm": {"type": "string", "enum": CHECKSUM_ALGORITHMS},
        "verify-certificates": {"type": "boolean", "default": true}
    });
    if k.compression {
        props["compression"] = json!({"type": "string", "enum": COMPRESSIONS, "description": "Decompress after download."});
    }
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["node", "storage", "url"],
        "properties": props,
        "dependentRequired": {"checksum": ["checksum-algorithm"], "checksum-algorithm": ["checksum"]}
    });
    manifest::manifest_schema(k.kind, &format!("proxops {}", k.kind), spec)
}

/// Identity: `(node, storage-volume, <volid>)`; storage volumes have no `/cluster/resources` id.
pub fn identity_key(d: &DownloadDesired) -> (String, String, String) {
    (
        d.node.clone(),
        "storage-volume".into(),
        format!("{}/{}", d.node, d.volid),
    )
}

/// The component functions of a download kind, in WIT types.
pub mod glue {
    use super::*;
    use crate::model::{Anomaly, Proposal, diags_into_wit};
    use crate::types::{Call, Diagnostic};
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
                let (node, space, key) = identity_key(&d);
                wit::ObjectKey {
                    node: Some(node),
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

    /// `observe`: nothing yet.
    pub fn observe() -> Vec<Call> {
        Vec::new()
    }

    /// `plan`: not implemented yet; says so as an anomaly rather than failing the cycle.
    pub fn plan(k: &DownloadKind) -> wit::Proposal {
        Proposal {
            anomalies: vec![Anomaly::new(
                "",
                format!(
                    "planning {} objects is not implemented yet; nothing is downloaded",
                    k.kind
                ),
            )],
            ..Proposal::default()
        }
        .into_wit()
    }

    /// `adopt`: not implemented yet.
    pub fn adopt(k: &DownloadKind) -> Result<String, String> {
        Err(format!(
            "adopting {} objects is not implemented yet",
            k.kind
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(k: &DownloadKind, spec: Value, expected: Result<&str, &[(&str, &str)]>) {
        let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": k.kind, "metadata": {"name": "img"}, "spec": spec});
        match (validate(k, &doc), expected) {
            (Ok((d, _)), Ok(volid)) => assert_eq!(d.volid, volid),
            (Err(diags), Err(want)) => {
                let got: Vec<(&str, &str)> = diags
                    .iter()
                    .map(|d| (d.path.as_str(), d.message.as_str()))
                    .collect();
                assert_eq!(got, want);
            }
            (got, want) => panic!("got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn downloads() {
        let url = "https://cloud-images.ubuntu.com/noble/current/noble-server-cloudimg-amd64.img";
        check(
            &ISO,
            json!({"node": "pve01", "storage": "local", "url": url}),
            Ok("local:iso/noble-server-cloudimg-amd64.img"),
        );
        check(
            &DISK_IMAGE,
            json!({"node": "pve01", "storage": "local", "url": url, "filename": "noble.qcow2",
            "checksum": "abc123", "checksum-algorithm": "sha256"}),
            Ok("local:import/noble.qcow2"),
        );
        check(
            &DISK_IMAGE,
            json!({"node": "pve01", "storage": "local", "url": url}),
            Err(&[
                (
                    "spec.url",
                    "file name `noble-server-cloudimg-amd64.img` must use letters, digits, `-`, `.`, `+`, `=`, `_` and end in .qcow2, .raw, .vmdk, .ova; set spec.filename",
                ),
                (
                    "spec.checksum",
                    "no checksum: the download cannot be verified; set checksum and checksum-algorithm",
                ),
            ]),
        );
        check(
            &ISO,
            json!({"node": "pve01", "storage": "local", "url": "ftp://x/a.iso", "checksum": "ab", "compression": "xz"}),
            Err(&[
                ("spec.url", "`ftp://x/a.iso` is not an http(s) URL"),
                (
                    "spec.checksum-algorithm",
                    "is required when checksum is set",
                ),
                (
                    "spec.compression",
                    "must be one of `gz`, `lzo`, `zst`, `bz2`, got `xz`",
                ),
            ]),
        );
        check(
            &DISK_IMAGE,
            json!({"storage": "local", "url": "https://h/a.raw", "compression": "gz"}),
            Err(&[
                (
                    "spec.compression",
                    "unknown field `compression`; expected one of `node`, `storage`, `url`, `filename`, `checksum`, `checksum-algorithm`, `verify-certificates`",
                ),
                ("spec.node", "is required"),
                (
                    "spec.checksum",
                    "no checksum: the download cannot be verified; set checksum and checksum-algorithm",
                ),
            ]),
        );
    }

    #[test]
    fn missing_checksum_is_a_warning() {
        let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": "ISO", "metadata": {"name": "x"},
            "spec": {"node": "pve01", "storage": "local", "url": "https://h/x.iso"}});
        let (_, w) = validate(&ISO, &doc).unwrap();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].path, "spec.checksum");
    }

    #[test]
    fn schema_lists_checker_keys() {
        for k in [&ISO, &DISK_IMAGE] {
            let s = schema(k);
            let mut props: Vec<&str> = s["properties"]["spec"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            props.sort();
            let mut keys = spec_keys(k);
            keys.sort();
            assert_eq!(props, keys);
        }
    }
}
