//! The `policies:` entries of `proxops.yaml` (mode, scope, the pinned `.wasm`) and how a
//! pinned file is read: from the repository through [`RepoDir`], or from the OCI cache.

use std::path::Path;

use serde_json::{Map, Value};

use crate::pin::{pinned_file, pinned_sha256};
use crate::rooted::{RepoDir, check_relative};

/// What a policy's denial does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A deny (or a policy failure) stops the cluster's apply before any mutation.
    Enforce,
    /// Denials are shown as warnings; nothing stops.
    Warn,
    /// Findings are recorded (JSON output, logs) but not shown and never stop anything.
    Monitor,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Monitor => "monitor",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a policy applies; an empty list means every cluster (kind).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Scope {
    pub clusters: Vec<String>,
    pub kinds: Vec<String>,
}

impl Scope {
    pub fn includes_cluster(&self, cluster: &str) -> bool {
        self.clusters.is_empty() || self.clusters.iter().any(|c| c == cluster)
    }

    pub fn includes_kind(&self, kind: &str) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind)
    }
}

/// One entry of `policies:`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PolicyEntry {
    /// Position in the list, for diagnostics (`policies[2].settings`).
    pub index: usize,
    /// Display name given in the file, if any.
    pub name: Option<String>,
    /// Path of the `.wasm`, relative to the repository root, `/`-separated.
    pub file: String,
    /// Expected SHA-256 of the file, 64 lower-case hex digits.
    pub sha256: String,
    /// The `settings:` mapping (an empty object when absent).
    pub settings: Value,
    pub mode: Mode,
    pub scope: Scope,
}

impl PolicyEntry {
    /// The field path of this entry in `proxops.yaml`, e.g. `policies[1]`.
    pub fn path(&self) -> String {
        format!("policies[{}]", self.index)
    }
}

const ENTRY_KEYS: &[&str] = &["file", "sha256", "name", "settings", "mode", "scope"];

pub(super) fn parse_entry(
    index: usize,
    item: &Value,
    err: &mut impl FnMut(String, String),
) -> Option<PolicyEntry> {
    let at = |k: &str| {
        if k.is_empty() {
            format!("policies[{index}]")
        } else {
            format!("policies[{index}].{k}")
        }
    };
    let Some(map) = item.as_object() else {
        err(at(""), "expected a mapping with file and sha256".into());
        return None;
    };
    let mut ok = true;
    for key in map.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            err(
                at(key),
                format!("unknown field; expected one of: {}", ENTRY_KEYS.join(", ")),
            );
            ok = false;
        }
    }
    let file = pinned_file(map, &at, err);
    let sha256 = pinned_sha256(map, &at, err, "a policy");
    let name = match map.get("name") {
        None => None,
        Some(Value::String(n)) if !n.trim().is_empty() => Some(n.clone()),
        Some(_) => {
            err(at("name"), "expected a non-empty string".into());
            ok = false;
            None
        }
    };
    let settings = match map.get("settings") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            err(at("settings"), "expected a mapping".into());
            ok = false;
            Value::Null
        }
    };
    let mode = match map.get("mode") {
        None => Mode::Enforce,
        Some(v) => match v.as_str() {
            Some("enforce") => Mode::Enforce,
            Some("warn") => Mode::Warn,
            Some("monitor") => Mode::Monitor,
            _ => {
                err(at("mode"), "expected one of: enforce, warn, monitor".into());
                ok = false;
                Mode::Enforce
            }
        },
    };
    let mut scope = Scope::default();
    if let Some(v) = map.get("scope") {
        match v.as_object() {
            None if v.is_null() => {}
            None => {
                err(
                    at("scope"),
                    "expected a mapping with clusters and kinds".into(),
                );
                ok = false;
            }
            Some(s) => {
                for key in s.keys() {
                    if !["clusters", "kinds"].contains(&key.as_str()) {
                        err(
                            at(&format!("scope.{key}")),
                            "unknown field; expected one of: clusters, kinds".into(),
                        );
                        ok = false;
                    }
                }
                for (key, slot) in [
                    ("clusters", &mut scope.clusters),
                    ("kinds", &mut scope.kinds),
                ] {
                    match s.get(key) {
                        None | Some(Value::Null) => {}
                        Some(Value::Array(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                match item.as_str() {
                                    Some(x) if !x.is_empty() => slot.push(x.to_string()),
                                    _ => {
                                        err(
                                            at(&format!("scope.{key}[{i}]")),
                                            "expected a non-empty string".into(),
                                        );
                                        ok = false;
                                    }
                                }
                            }
                        }
                        Some(_) => {
                            err(at(&format!("scope.{key}")), "expected a list".into());
                            ok = false;
                        }
                    }
                }
            }
        }
    }
    let (file, sha256) = (file?, sha256?);
    ok.then_some(PolicyEntry {
        index,
        name,
        file,
        sha256,
        settings,
        mode,
        scope,
    })
}

/// The largest policy file proxops reads.
pub const MAX_POLICY_BYTES: usize = 64 * 1024 * 1024;

/// The `.wasm` of a pinned guest entry: an `oci://` file from the OCI cache (where
/// `proxops_oci::fetch` put it, checked against `pin`; see [`crate::pin::oci_cache_dir`]),
/// anything else from the repository ([`read_repo_file`]). The caller checks the pin.
pub fn read_pinned_file(root: &Path, file: &str, pin: &str) -> Result<Vec<u8>, String> {
    if !file.starts_with(crate::pin::OCI_SCHEME) {
        return read_repo_file(root, file);
    }
    let Some(dir) = crate::pin::oci_cache_dir() else {
        return Err(format!(
            "{file} has not been pulled: this command does not pull from registries"
        ));
    };
    let path = crate::pin::oci_cached_path(&dir, pin);
    std::fs::read(&path).map_err(|e| {
        format!(
            "{file} is not in the OCI cache ({}: {e}); it is pulled before a run",
            path.display()
        )
    })
}

/// Read a file of the repository through [`RepoDir`]: absolute paths, `..`, symlinks that
/// lead outside the repository and non-regular files are refused.
pub fn read_repo_file(root: &Path, rel: &str) -> Result<Vec<u8>, String> {
    check_relative(rel).map_err(|e| e.to_string())?;
    let dir = RepoDir::open(root).map_err(|e| e.to_string())?;
    dir.read(rel, MAX_POLICY_BYTES).map_err(|e| e.to_string())
}

/// SHA-256 of `data` as 64 lower-case hex digits, the form policy pins are written in.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::tests::SHA;
    use crate::settings::{FILE, RepoSettings, load};

    #[test]
    fn sha256_known_answers() {
        let cases: &[(&[u8], &str)] = &[
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(sha256_hex(input), *want);
        }
        assert_eq!(
            sha256_hex(&vec![b'a'; 1_000_000]),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
        // Lengths around the padding boundary.
        assert_eq!(
            sha256_hex(&[0u8; 55]),
            "02779466cdec163811d078815c633f21901413081449002f24aa3e80f0b88ef7"
        );
        assert_eq!(
            sha256_hex(&[0u8; 64]),
            "f5a5fd42d16a20302798ef6ed309979b43003d2320d9f0e8ea9831a92759fb4b"
        );
    }

    #[test]
    fn loads_from_the_repository_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(load(dir.path()).expect("no file"), RepoSettings::default());
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::write(dir.path().join("policies/p.wasm"), b"abc").unwrap();
        assert_eq!(
            read_repo_file(dir.path(), "policies/p.wasm").unwrap(),
            b"abc"
        );
        assert!(
            read_repo_file(dir.path(), "../p.wasm")
                .unwrap_err()
                .contains("outside")
        );
        assert!(
            read_repo_file(dir.path(), "/etc/passwd")
                .unwrap_err()
                .contains("absolute")
        );
        assert!(
            read_repo_file(dir.path(), "nope.wasm")
                .unwrap_err()
                .contains("does not exist")
        );
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("x.wasm"), b"x").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path().join("x.wasm"), dir.path().join("link.wasm"))
                .unwrap();
            let e = read_repo_file(dir.path(), "link.wasm").unwrap_err();
            assert!(e.contains("outside"), "{e}");
        }
        std::fs::write(
            dir.path().join(FILE),
            format!("policies: [{{file: policies/p.wasm, sha256: {SHA}}}]\n"),
        )
        .unwrap();
        assert_eq!(load(dir.path()).expect("valid").policies.len(), 1);
    }
}
