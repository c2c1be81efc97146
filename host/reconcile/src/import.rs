//! `proxops adopt --adopt-secrets`: live SSH keys that match no SOPS entry become new
//! entries, `cloud-init.ssh-keys.adopted-<fingerprint>`, so adopted manifests can carry
//! `ssh-key-refs` instead of redacting the keys.
//!
//! The kind stays as it is: it asks `secrets.find(prefix, value)` for each live key line, as
//! it does without the flag. [`ImportingSecrets`] answers a miss under [`IMPORT_PREFIX`] with
//! the path the key will have, and remembers the line; the caller writes the remembered
//! entries into the SOPS file (before any manifest that refers to them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use proxops_runtime::{SecretError, SecretSource};
use sha2::{Digest, Sha256};

/// The only mapping imports go to: the SSH keys of the reference's SOPS layout.
pub const IMPORT_PREFIX: &str = "cloud-init.ssh-keys";

/// The longest key line imported (an RSA-16384 public key is about 2.8 KiB of base64).
const MAX_LINE: usize = 16 * 1024;

/// A [`SecretSource`] for adopt that turns unmatched SSH key lines into pending imports.
pub struct ImportingSecrets {
    inner: Arc<dyn SecretSource>,
    state: Mutex<Imports>,
}

/// What adopt asked to import, and what it could not.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Imports {
    /// Entry name (`adopted-<fingerprint>`) to the key line, in name order.
    pub entries: BTreeMap<String, String>,
    /// Why a line was not imported, per line (no key material: the entry name only).
    pub refused: Vec<String>,
}

impl ImportingSecrets {
    pub fn new(inner: Arc<dyn SecretSource>) -> ImportingSecrets {
        ImportingSecrets {
            inner,
            state: Mutex::new(Imports::default()),
        }
    }

    /// The entries to write and the lines refused so far.
    pub fn imports(&self) -> Imports {
        self.state.lock().expect("imports lock").clone()
    }

    /// [`ImportingSecrets::imports`] without the entries no manifest refers to (a kind
    /// asked, then did not adopt the guest): only what is used is written.
    pub fn used_by<'a>(
        &self,
        manifests: impl IntoIterator<Item = &'a serde_json::Value>,
    ) -> Imports {
        let mut imports = self.imports();
        let mut used = std::collections::BTreeSet::new();
        for m in manifests {
            strings(m, &mut used);
        }
        imports
            .entries
            .retain(|name, _| used.contains(format!("{IMPORT_PREFIX}.{name}").as_str()));
        imports
    }
}

impl std::fmt::Debug for ImportingSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock().expect("imports lock");
        f.debug_struct("ImportingSecrets")
            .field("entries", &state.entries.keys().collect::<Vec<_>>())
            .field("refused", &state.refused.len())
            .finish_non_exhaustive()
    }
}

impl SecretSource for ImportingSecrets {
    /// A pending import resolves to its line, so the kind's own check of its manifest
    /// (every ref must resolve) passes before the entry is written.
    fn resolve(&self, path: &str) -> Result<String, SecretError> {
        let pending = path
            .strip_prefix(IMPORT_PREFIX)
            .and_then(|rest| rest.strip_prefix('.'))
            .and_then(|name| {
                let state = self.state.lock().expect("imports lock");
                state.entries.get(name).cloned()
            });
        match pending {
            Some(line) => {
                proxops_core::text::register(&line)
                    .map_err(|e| SecretError::Invalid(e.to_string()))?;
                Ok(line)
            }
            None => self.inner.resolve(path),
        }
    }

    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
        if let Some(found) = self.inner.find(prefix, value)? {
            return Ok(Some(found));
        }
        if prefix != IMPORT_PREFIX {
            return Ok(None);
        }
        let name = entry_name(value);
        let mut state = self.state.lock().expect("imports lock");
        if value.len() < 8 || value.len() > MAX_LINE || value.chars().any(char::is_control) {
            state.refused.push(format!(
                "a key line of {} bytes is not imported: key lines must be one line of 8 to {MAX_LINE} bytes",
                value.len()
            ));
            return Ok(None);
        }
        let path = format!("{IMPORT_PREFIX}.{name}");
        // The same key with another comment: the entry's name is taken by another line.
        let taken = match self.inner.resolve(&path) {
            Err(SecretError::Missing) => false,
            Ok(_) | Err(_) => true,
        };
        let clash = state.entries.get(&name).is_some_and(|v| v != value);
        if taken || clash {
            state.refused.push(format!(
                "`{path}` already holds another line for the same key (another comment?); this line is not imported"
            ));
            return Ok(None);
        }
        state.entries.insert(name, value.to_owned());
        Ok(Some(path))
    }
}

/// Every string in a JSON value.
fn strings<'a>(v: &'a serde_json::Value, out: &mut std::collections::BTreeSet<&'a str>) {
    match v {
        serde_json::Value::String(s) => {
            out.insert(s);
        }
        serde_json::Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        serde_json::Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        _ => {}
    }
}

/// `adopted-` and the first 16 hex digits of the SHA-256 of the key blob: the hash
/// `ssh-keygen -l` shows (in base64) for the key. A line that is not an OpenSSH public key
/// is named after the hash of the whole line.
pub fn entry_name(line: &str) -> String {
    let digest = key_blob(line)
        .map(|blob| Sha256::digest(&blob))
        .unwrap_or_else(|| Sha256::digest(line.trim().as_bytes()));
    format!("adopted-{}", &hex::encode(digest)[..16])
}

/// The decoded key of an OpenSSH public key line (`[options] type base64 [comment]`): the
/// first base64 field whose blob starts with the field before it, the key type.
fn key_blob(line: &str) -> Option<Vec<u8>> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    fields.windows(2).find_map(|w| {
        let blob = base64::engine::general_purpose::STANDARD
            .decode(w[1])
            .ok()?;
        let len = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        (blob.get(4..4 + len)? == w[0].as_bytes()).then_some(blob)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret source over a fixed map, as the cluster's SOPS document answers.
    struct Map(BTreeMap<String, String>);

    impl SecretSource for Map {
        fn resolve(&self, path: &str) -> Result<String, SecretError> {
            self.0.get(path).cloned().ok_or(SecretError::Missing)
        }
        fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
            Ok(self
                .0
                .iter()
                .find(|(k, v)| k.starts_with(&format!("{prefix}.")) && *v == value)
                .map(|(k, _)| k.clone()))
        }
    }

    /// A well-formed ed25519 public key line (its 32 key bytes are sha256("proxops test key"):
    /// no private key exists for it).
    const ED: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPoWCw31DF9rtLKc+eGQP2ELpPeFXfX4fkLcEw9Ie/a5 tester@host";

    #[test]
    fn names_come_from_the_key_not_the_comment() {
        let name = entry_name(ED);
        // sha256 of the decoded blob, as `ssh-keygen -l` hashes it (computed independently).
        assert_eq!(name, "adopted-29fa654af2beccac");
        assert_eq!(name, entry_name(&ED.replace("tester@host", "other")));
        assert_eq!(name, entry_name(&format!("from=\"10.0.0.0/8\" {ED}")));
        assert_ne!(name, entry_name("not a key at all"));
        assert_eq!(
            entry_name("not a key at all"),
            entry_name("  not a key at all ")
        );
    }

    #[test]
    fn misses_under_the_ssh_keys_become_imports_and_matches_stay_matches() {
        let known = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ known@x";
        let inner = Arc::new(Map(BTreeMap::from([(
            "cloud-init.ssh-keys.alice".to_string(),
            known.to_string(),
        )])));
        let s = ImportingSecrets::new(inner);
        assert_eq!(
            s.find(IMPORT_PREFIX, known).unwrap().as_deref(),
            Some("cloud-init.ssh-keys.alice")
        );
        let path = s.find(IMPORT_PREFIX, ED).unwrap().unwrap();
        assert_eq!(path, format!("{IMPORT_PREFIX}.{}", entry_name(ED)));
        // Twice the same line: one entry. Another prefix: never imported.
        assert_eq!(s.find(IMPORT_PREFIX, ED).unwrap(), Some(path.clone()));
        assert_eq!(
            s.find("cloud-init.passwords", "hunter2-long").unwrap(),
            None
        );
        // The same key with another comment clashes with the first line: not imported.
        let other = ED.replace("tester@host", "laptop");
        assert_eq!(s.find(IMPORT_PREFIX, &other).unwrap(), None);
        assert_eq!(s.find(IMPORT_PREFIX, "short").unwrap(), None);
        let imports = s.imports();
        assert_eq!(imports.entries.len(), 1);
        assert_eq!(imports.entries[&entry_name(ED)], ED);
        assert_eq!(imports.refused.len(), 2, "{:?}", imports.refused);
        assert!(imports.refused.iter().all(|r| !r.contains("AAAA")));
        // The pending entry resolves (the kind checks its refs), and only used entries are kept.
        assert_eq!(s.resolve(&path).unwrap(), ED);
        let uses = serde_json::json!({"spec": {"refs": [path.clone()]}});
        assert_eq!(s.used_by([&uses]).entries.len(), 1);
        assert!(s.used_by([&serde_json::json!({})]).entries.is_empty());
    }
}
