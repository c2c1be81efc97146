//! The clusters' SOPS documents as secret sources: opened on first use, so a repository that
//! names no secret needs no age identity. Every value is registered with the process-wide
//! redactor ([`proxops_core::text::register`]) the moment it is resolved, before anyone
//! sees it; a value shorter than 8 bytes is refused with an error naming its path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use proxops_runtime::{SecretError, SecretSource};
use proxops_secrets::{Identities, LookupError, SopsDocument};
use sha2::Digest as _;

/// One cluster's SOPS file, decrypted (and its MAC verified) the first time a secret is read.
pub struct LazySops {
    /// The repository (or `--trusted-config` folder) the file is read from.
    root: PathBuf,
    path: PathBuf,
    shown: String,
    identity: Option<PathBuf>,
    doc: OnceLock<Result<SopsDocument, String>>,
    /// SHA-256 of the bytes the document was read from: a write refuses a file that changed since.
    read_digest: OnceLock<[u8; 32]>,
    /// What this process wrote since it read the document: the SHA-256 of the file it wrote
    /// last (the next write expects it) and the dot-paths stored.
    written: Mutex<(Option<[u8; 32]>, BTreeSet<String>)>,
}

impl LazySops {
    pub fn new(repo: &Path, file: &str, identity: Option<PathBuf>) -> LazySops {
        LazySops {
            root: repo.to_path_buf(),
            path: repo.join(file),
            shown: file.to_string(),
            identity,
            doc: OnceLock::new(),
            read_digest: OnceLock::new(),
            written: Mutex::new((None, BTreeSet::new())),
        }
    }

    /// The file as the cluster file names it (relative to the repository).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Opens and verifies the document now, so a missing file or identity is reported
    /// before any work that depends on it.
    pub fn check(&self) -> Result<(), String> {
        self.doc().map(|_| ())
    }

    /// Adds string entries under `parent` (key segments) as `sops set` would: other
    /// ciphertexts untouched, a new MAC, written atomically with the file's permissions.
    /// Refused when the file changed since this run read it. Errors never hold a value.
    pub fn add_entries(&self, parent: &[&str], entries: &[(&str, &str)]) -> Result<(), String> {
        self.write_entries(parent, entries, false)
    }

    /// [`LazySops::add_entries`], or with `replace` as `sops set`: a string at a taken name is
    /// replaced. A later write in this process expects the file as the earlier one left it.
    fn write_entries(
        &self,
        parent: &[&str],
        entries: &[(&str, &str)],
        replace: bool,
    ) -> Result<(), String> {
        self.check()?;
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let dir = proxops_core::RepoDir::open(&self.root).map_err(|e| e.to_string())?;
        let bytes = dir
            .read(&self.shown, proxops_secrets::MAX_BYTES)
            .map_err(|e| format!("the cluster's SOPS file: {e}"))?;
        let digest: [u8; 32] = sha2::Sha256::digest(&bytes).into();
        let expected = written.0.as_ref().or(self.read_digest.get());
        if expected != Some(&digest) {
            return Err(format!(
                "{} changed while this run had it open; nothing was written, run again",
                self.shown
            ));
        }
        let text =
            std::str::from_utf8(&bytes).map_err(|_| format!("{} is not UTF-8 text", self.shown))?;
        let identities = Identities::from_env_and_defaults(self.identity.as_deref())
            .map_err(|e| e.to_string())?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let edit = if replace {
            proxops_secrets::set_strings
        } else {
            proxops_secrets::add_strings
        };
        let out =
            edit(&self.path, text, &identities, parent, entries, now).map_err(|e| e.to_string())?;
        dir.write_atomic(&self.shown, out.as_bytes(), true)
            .map_err(|e| format!("writing {}: {e}", self.shown))?;
        written.0 = Some(sha2::Sha256::digest(out.as_bytes()).into());
        for (name, _) in entries {
            written.1.insert(format!("{}.{name}", parent.join(".")));
        }
        Ok(())
    }

    fn doc(&self) -> Result<&SopsDocument, String> {
        self.doc
            .get_or_init(|| {
                // Through the repository's rooted directory, as every file it names.
                let dir = proxops_core::RepoDir::open(&self.root).map_err(|e| e.to_string())?;
                let bytes = match dir.read(&self.shown, proxops_secrets::MAX_BYTES) {
                    Ok(bytes) => bytes,
                    Err(proxops_core::rooted::ReadError::NotFound(_)) => {
                        return Err(format!(
                            "the cluster's SOPS file {} does not exist",
                            self.shown
                        ));
                    }
                    Err(e) => return Err(format!("the cluster's SOPS file: {e}")),
                };
                let _ = self.read_digest.set(sha2::Sha256::digest(&bytes).into());
                let identities = Identities::from_env_and_defaults(self.identity.as_deref())
                    .map_err(|e| e.to_string())?;
                SopsDocument::from_bytes(&self.path, &bytes, &identities).map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A value for the host itself (the API token), with an error naming file and path.
    pub fn lookup(&self, path: &str) -> Result<String, String> {
        let doc = self.doc()?;
        let value = doc.lookup(path).map_err(|e| e.to_string())?;
        register(value).map_err(|why| format!("secret `{path}` in {}: {why}", self.shown))?;
        Ok(value.to_string())
    }
}

/// Register a resolved value with the redactor; refuse it when it is too short to be
/// scrubbed safely. The error never holds the value.
fn register(value: &str) -> Result<(), String> {
    proxops_core::text::register(value).map_err(|e| e.to_string())
}

impl SecretSource for LazySops {
    fn resolve(&self, path: &str) -> Result<String, SecretError> {
        let doc = self.doc().map_err(SecretError::Invalid)?;
        match doc.get(path) {
            Ok(v) => {
                register(v).map_err(SecretError::Invalid)?;
                Ok(v.to_string())
            }
            Err(LookupError::Missing) => Err(SecretError::Missing),
            Err(LookupError::Empty) => Err(SecretError::Empty),
            Err(LookupError::Invalid(why)) => Err(SecretError::Invalid(why)),
        }
    }

    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
        if value.is_empty() {
            return Ok(None);
        }
        let doc = self.doc().map_err(SecretError::Invalid)?;
        Ok(doc
            .entries(prefix)
            .into_iter()
            .find(|(_, v)| *v == value)
            .map(|(path, _)| path))
    }

    fn contains(&self, path: &str) -> bool {
        let written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        written.1.contains(path)
            || self
                .doc()
                .is_ok_and(|doc| doc.get(path).is_ok_and(|v| !v.is_empty()))
    }

    fn writable(&self) -> Result<(), SecretError> {
        self.check().map_err(SecretError::Invalid)
    }

    fn store(&self, parent: &[&str], name: &str, value: &str) -> Result<(), SecretError> {
        register(value).map_err(SecretError::Invalid)?;
        self.write_entries(parent, &[(name, value)], true)
            .map_err(SecretError::Invalid)
    }
}

/// The SOPS document of every cluster file of the repository.
pub fn for_repo(
    repo: &Path,
    clusters: &BTreeMap<String, proxops_core::ClusterFile>,
    identity: Option<&Path>,
) -> BTreeMap<String, Arc<LazySops>> {
    clusters
        .iter()
        .map(|(name, c)| {
            (
                name.clone(),
                Arc::new(LazySops::new(
                    repo,
                    &c.sops_file,
                    identity.map(Path::to_path_buf),
                )),
            )
        })
        .collect()
}

/// The same documents as the engine's per-cluster secret sources.
pub fn sources(docs: &BTreeMap<String, Arc<LazySops>>) -> proxops_reconcile::Secrets {
    proxops_reconcile::Secrets(
        docs.iter()
            .map(|(n, d)| (n.clone(), d.clone() as Arc<dyn SecretSource>))
            .collect(),
    )
}
