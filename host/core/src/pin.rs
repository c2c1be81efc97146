//! The pin of a guest in `proxops.yaml` (a policy's or a third-party kind's): its `file:`, a
//! path inside the repository or an `oci://REGISTRY/REPOSITORY:TAG` reference, and its
//! `sha256:`, lower-case hex (the trust root either way).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::rooted::check_relative;

/// How a `file:` names a component in an OCI registry.
pub const OCI_SCHEME: &str = "oci://";

static OCI_CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Where this process keeps components pulled from registries (set once by the CLI, before it
/// pulls and loads anything; later calls are ignored).
pub fn set_oci_cache_dir(dir: PathBuf) {
    let _ = OCI_CACHE.set(dir);
}

/// The folder set by [`set_oci_cache_dir`], if any.
pub fn oci_cache_dir() -> Option<PathBuf> {
    OCI_CACHE.get().cloned()
}

/// The cache file of the component pinned to `pin` below `dir`: one file per pin, so a tag
/// that moves never changes what a pin loads.
pub fn oci_cached_path(dir: &Path, pin: &str) -> PathBuf {
    dir.join("oci").join(format!("sha256-{pin}.wasm"))
}

/// The `file:` of a pinned guest entry: a path relative to the repository root.
pub(crate) fn pinned_file(
    map: &Map<String, Value>,
    at: &dyn Fn(&str) -> String,
    err: &mut impl FnMut(String, String),
) -> Option<String> {
    match map.get("file") {
        Some(Value::String(f)) if f.starts_with(OCI_SCHEME) => {
            // The reference's grammar is checked where it is pulled (proxops-oci).
            if f[OCI_SCHEME.len()..].contains('/') && !f.contains(char::is_whitespace) {
                Some(f.clone())
            } else {
                err(
                    at("file"),
                    format!("`{f}` is not an OCI reference; write oci://REGISTRY/REPOSITORY:TAG"),
                );
                None
            }
        }
        Some(Value::String(f)) if !f.is_empty() => match check_relative(f) {
            Ok(()) => Some(f.replace('\\', "/")),
            Err(e) => {
                err(at("file"), e.to_string());
                None
            }
        },
        Some(_) => {
            err(
                at("file"),
                "expected the path of a .wasm file, relative to the repository root".into(),
            );
            None
        }
        None => {
            err(at("file"), "required field is missing".into());
            None
        }
    }
}

/// The `sha256:` pin of a guest entry (`what`: "a policy", "a kind"), lower-case hex.
pub(crate) fn pinned_sha256(
    map: &Map<String, Value>,
    at: &dyn Fn(&str) -> String,
    err: &mut impl FnMut(String, String),
    what: &str,
) -> Option<String> {
    match map.get("sha256") {
        Some(Value::String(s)) => {
            let hex = s.trim().strip_prefix("sha256:").unwrap_or(s.trim());
            if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                Some(hex.to_ascii_lowercase())
            } else {
                err(
                    at("sha256"),
                    "expected 64 hex digits (run `sha256sum` on the .wasm)".into(),
                );
                None
            }
        }
        Some(_) => {
            err(at("sha256"), "expected 64 hex digits as a string".into());
            None
        }
        None => {
            err(
                at("sha256"),
                format!(
                    "required field is missing; proxops runs {what} only when its hash is pinned (run `sha256sum` on the .wasm)"
                ),
            );
            None
        }
    }
}
