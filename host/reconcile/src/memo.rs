//! What one run remembers of a repository's manifests for the next ([`Memo`]): each file's
//! parsed manifest, by the SHA-256 of its bytes, and what its kind's `validate`,
//! `references` and `identity` answered for it, by the kind's fingerprint (the component's
//! SHA-256 and its limits). A file whose bytes are unchanged is not parsed again, and its
//! kind is not asked again. Everything that looks at more than one file (names, duplicates,
//! references, cycles, identity collisions, `metadata.adopt`) runs on every run.
//!
//! Sound because guests are deterministic functions of their inputs: a stopped clock, fixed
//! randomness, no files, network or environment ([`proxops_runtime`]). Only answers that
//! read no secret and logged nothing are kept ([`proxops_runtime::calls::KindCalls::last_call_replayable`]);
//! errors are never kept, so a broken manifest is validated (and reported) on every run.
//!
//! Kept in the cache folder, one file per repository, written atomically and only when
//! something changed. A file that cannot be read, or that another build of proxops wrote,
//! is ignored: the run validates everything, as without a memo.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use proxops_core::{Manifest, ReadMemo, StoredManifest};
use proxops_runtime::kind::{self, ObjectKey, Reference, Severity};

/// Manifests and kind answers remembered from earlier runs over one repository.
#[derive(Debug)]
pub struct Memo {
    /// Where it is kept; `None`: in memory only (one process, e.g. the cycles of `watch`).
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
}

/// Entries by file.
type Files = HashMap<String, Entry>;

#[derive(Debug, Default)]
struct Inner {
    /// By cluster, then by file: a cluster's entries are taken and put back whole.
    clusters: HashMap<String, Files>,
    /// Whether `clusters` differs from what `path` holds.
    dirty: bool,
}

/// One file: its manifest and, when its kind's answers could be kept, those.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) manifest: StoredManifest,
    pub(crate) replay: Option<Replay>,
}

/// What a kind answered for one manifest: `validate`, then `references` and `identity` of
/// the desired state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Replay {
    /// [`proxops_runtime::KindComponent::fingerprint`] of the kind that answered.
    pub(crate) fingerprint: String,
    pub(crate) desired: String,
    pub(crate) warnings: Vec<kind::Diagnostic>,
    pub(crate) references: Vec<Reference>,
    pub(crate) key: ObjectKey,
}

/// What to remember of one manifest after a run.
#[derive(Debug)]
pub(crate) enum Remember {
    /// Its kind's answers came from the memo: its entry is still true as it is.
    Known,
    /// Read or asked this time: the answers that may be kept, if any.
    Fresh(Option<Replay>),
}

/// One cluster's entries, taken out of the [`Memo`] while the cluster is read and validated.
#[derive(Debug, Default)]
pub struct ClusterMemo {
    cluster: String,
    entries: Files,
}

impl ReadMemo for ClusterMemo {
    fn manifest(&self, file: &str, digest: &[u8; 32]) -> Option<Manifest> {
        let entry = self.entries.get(file)?;
        (entry.manifest.digest == *digest)
            .then(|| Manifest::restore(entry.manifest.clone()))
            .flatten()
    }
}

impl ClusterMemo {
    /// The kind answers kept for `m` (read from the same bytes) from a kind with `fingerprint`.
    pub(crate) fn replay(&self, m: &Manifest, fingerprint: &str) -> Option<&Replay> {
        let entry = self.entries.get(&m.file)?;
        let replay = entry.replay.as_ref()?;
        (Some(&entry.manifest.digest) == m.digest() && replay.fingerprint == fingerprint)
            .then_some(replay)
    }
}

/// Version of the file format, and of what an entry means.
const FORMAT: &[u8] = b"proxops-memo 1\n";

/// What wrote a memo: the same version of proxops, built the same way (the executable's
/// size and modification time), turns YAML into the same JSON.
fn build_id() -> String {
    let exe = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} {modified}", m.len())
        })
        .unwrap_or_default();
    format!("{} {exe}", env!("CARGO_PKG_VERSION"))
}

impl Memo {
    /// A memo kept in memory only.
    pub fn in_memory() -> Memo {
        Memo {
            path: None,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The memo of the repository at `repo` (manifests root and config root) kept in
    /// `cache_dir`, with what it holds (nothing when the file is missing, unreadable or
    /// written by another build).
    pub fn open(cache_dir: &Path, repo: &Path, config: &Path) -> Memo {
        let key = |p: &Path| {
            std::fs::canonicalize(p)
                .unwrap_or_else(|_| p.to_path_buf())
                .to_string_lossy()
                .into_owned()
        };
        let name = {
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            h.update(key(repo).as_bytes());
            h.update([0]);
            h.update(key(config).as_bytes());
            hex::encode(&h.finalize()[..16])
        };
        let path = cache_dir.join("manifests").join(format!("{name}.memo"));
        let started = std::time::Instant::now();
        let clusters = match std::fs::read(&path) {
            Ok(bytes) => match decode(&bytes, &build_id()) {
                Some(clusters) => {
                    tracing::debug!(
                        "read the memo of {} files ({} bytes) in {:?}",
                        clusters.values().map(HashMap::len).sum::<usize>(),
                        bytes.len(),
                        started.elapsed()
                    );
                    clusters
                }
                None => {
                    tracing::debug!("{}: not a memo of this build; ignored", path.display());
                    HashMap::new()
                }
            },
            Err(_) => HashMap::new(),
        };
        Memo {
            path: Some(path),
            inner: Mutex::new(Inner {
                clusters,
                dirty: false,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take `cluster`'s entries out, to read and validate it with; validating the cluster
    /// puts back what is true afterwards.
    pub fn take_cluster(&self, cluster: &str) -> ClusterMemo {
        let entries = self.lock().clusters.remove(cluster).unwrap_or_default();
        ClusterMemo {
            cluster: cluster.to_string(),
            entries,
        }
    }

    /// `cluster`'s entries after it was read and validated, replacing whatever
    /// [`Memo::take_cluster`] took (files gone from the repository are forgotten): per
    /// manifest, [`Remember::Known`] keeps its entry as it was, [`Remember::Fresh`] is what
    /// this run learnt.
    pub(crate) fn put_cluster(&self, taken: ClusterMemo, now: Vec<(StoredManifest, Remember)>) {
        let mut old = taken.entries;
        let mut changed = false;
        let mut entries = Files::with_capacity(now.len());
        for (manifest, remember) in now {
            let entry = match remember {
                Remember::Known => match old.remove(&manifest.file) {
                    Some(entry) => entry,
                    None => {
                        changed = true;
                        Entry {
                            manifest,
                            replay: None,
                        }
                    }
                },
                Remember::Fresh(replay) => {
                    let entry = Entry { manifest, replay };
                    changed |= old.remove(&entry.manifest.file).as_ref() != Some(&entry);
                    entry
                }
            };
            entries.insert(entry.manifest.file.clone(), entry);
        }
        // What is left was not read this time: gone from the repository.
        changed |= !old.is_empty();
        let mut inner = self.lock();
        inner.dirty |= changed;
        if !entries.is_empty() {
            inner.clusters.insert(taken.cluster, entries);
        }
    }

    /// How many files it holds, and how many of them with their kind's answers.
    pub fn len(&self) -> (usize, usize) {
        let inner = self.lock();
        let files = inner.clusters.values().flat_map(HashMap::values);
        let replays = files.clone().filter(|e| e.replay.is_some()).count();
        (files.count(), replays)
    }

    /// Write it back when it changed (atomically: a temporary file renamed over the old
    /// one, so a reader never sees half a file). A failure is logged and otherwise
    /// ignored: the next run validates everything again.
    pub fn save(&self) {
        let Some(path) = &self.path else {
            return;
        };
        let bytes = {
            let mut inner = self.lock();
            if !inner.dirty {
                return;
            }
            inner.dirty = false;
            encode(&inner.clusters, &build_id())
        };
        if let Err(e) = write_atomically(path, &bytes) {
            tracing::debug!("{}: not written: {e}", path.display());
        }
    }
}

/// Write `bytes` to a temporary file of this process beside `path`, then rename it over
/// `path`: two runs at once each replace the whole file, never mix theirs.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

// ---------------------------------------------------------------------------------------
// The file: FORMAT, the build id, the entries, a CRC-32 of everything before it. Strings
// are a little-endian u32 length and their bytes; an option is a byte 0 or 1 and the value.

struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, n: usize) {
        self.0
            .extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u32(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            Some(s) => {
                self.0.push(1);
                self.str(s);
            }
            None => self.0.push(0),
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<usize> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }
    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn opt(&mut self) -> Option<Option<String>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.str()?)),
            _ => None,
        }
    }
}

fn encode(clusters: &HashMap<String, Files>, build: &str) -> Vec<u8> {
    let mut entries: Vec<&Entry> = clusters.values().flat_map(HashMap::values).collect();
    entries.sort_by(|a, b| a.manifest.file.cmp(&b.manifest.file));
    let mut w = Writer(Vec::with_capacity(entries.len() * 2048));
    w.0.extend_from_slice(FORMAT);
    w.str(build);
    w.u32(entries.len());
    for Entry {
        manifest: m,
        replay,
    } in entries
    {
        w.str(&m.file);
        w.0.extend_from_slice(&m.digest);
        w.str(&m.folder);
        w.str(&m.cluster);
        w.str(&m.name);
        w.str(&m.json);
        w.opt(m.api_version.as_deref());
        w.opt(m.kind.as_deref());
        w.opt(m.adopt.as_deref());
        w.opt(m.stated.as_deref());
        match replay {
            None => w.0.push(0),
            Some(r) => {
                w.0.push(1);
                w.str(&r.fingerprint);
                w.str(&r.desired);
                w.u32(r.warnings.len());
                for d in &r.warnings {
                    w.0.push(match d.severity {
                        Severity::Error => 0,
                        Severity::Warning => 1,
                    });
                    w.str(&d.path);
                    w.str(&d.message);
                }
                w.u32(r.references.len());
                for r in &r.references {
                    w.str(&r.kind);
                    w.str(&r.name);
                    w.str(&r.path);
                }
                w.opt(r.key.node.as_deref());
                w.str(&r.key.space);
                w.str(&r.key.key);
                w.opt(r.key.resource_id.as_deref());
            }
        }
    }
    let crc = crc32fast::hash(&w.0);
    w.0.extend_from_slice(&crc.to_le_bytes());
    w.0
}

fn decode(bytes: &[u8], build: &str) -> Option<HashMap<String, Files>> {
    let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
    if crc32fast::hash(body).to_le_bytes() != crc {
        return None;
    }
    let mut r = Reader(body.strip_prefix(FORMAT)?);
    if r.str()? != build {
        return None;
    }
    let count = r.u32()?;
    let mut clusters: HashMap<String, Files> = HashMap::new();
    for _ in 0..count {
        let file = r.str()?;
        let digest: [u8; 32] = r.take(32)?.try_into().ok()?;
        let manifest = StoredManifest {
            file: file.clone(),
            digest,
            folder: r.str()?,
            cluster: r.str()?,
            name: r.str()?,
            json: r.str()?.into(),
            api_version: r.opt()?,
            kind: r.opt()?,
            adopt: r.opt()?,
            stated: r.opt()?,
        };
        let replay = match r.byte()? {
            0 => None,
            1 => {
                let fingerprint = r.str()?;
                let desired = r.str()?;
                let mut warnings = Vec::new();
                for _ in 0..r.u32()? {
                    let severity = match r.byte()? {
                        0 => Severity::Error,
                        1 => Severity::Warning,
                        _ => return None,
                    };
                    warnings.push(kind::Diagnostic {
                        severity,
                        path: r.str()?,
                        message: r.str()?,
                    });
                }
                let mut references = Vec::new();
                for _ in 0..r.u32()? {
                    references.push(Reference {
                        kind: r.str()?,
                        name: r.str()?,
                        path: r.str()?,
                    });
                }
                let key = ObjectKey {
                    node: r.opt()?,
                    space: r.str()?,
                    key: r.str()?,
                    resource_id: r.opt()?,
                };
                Some(Replay {
                    fingerprint,
                    desired,
                    warnings,
                    references,
                    key,
                })
            }
            _ => return None,
        };
        let files = clusters.entry(manifest.cluster.clone()).or_default();
        if files.insert(file, Entry { manifest, replay }).is_some() {
            return None;
        }
    }
    r.0.is_empty().then_some(clusters)
}

#[cfg(test)]
mod tests;
