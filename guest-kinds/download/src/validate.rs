//! Validation of a download manifest (names, nodes, storages, URL, checksum) and its JSON
//! Schema.

use super::*;

pub(super) const SPEC_KEYS: &[&str] = &[
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

pub(super) fn spec_keys(k: &DownloadKind) -> Vec<&'static str> {
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

pub(super) fn extension_ok(k: &DownloadKind, name: &str) -> bool {
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

pub(super) fn extension_list(k: &DownloadKind) -> String {
    let dotted: Vec<String> = k.extensions.iter().map(|e| format!(".{e}")).collect();
    match dotted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => dotted.join(""),
    }
}

/// Why `name` cannot be the file name, or `None`. `from_url` selects the wording.
pub(super) fn file_name_problem(k: &DownloadKind, name: &str, from_url: bool) -> Option<String> {
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
pub(super) fn node_name_problem(name: &str) -> Option<String> {
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
pub(super) fn storage_id_problem(id: &str) -> Option<String> {
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
        // Present, even when of the wrong type (already reported): not also "required".
        let given = |key: &str| spec.get(key).is_some_and(|v| !v.is_null());
        match (given("checksum"), given("checksum-algorithm")) {
            (true, false) => c.error("spec.checksum-algorithm", "is required when checksum is set"),
            (false, true) => c.error("spec.checksum", "is required when checksum-algorithm is set"),
            (false, false) => c.warn(
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
