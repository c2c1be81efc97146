//! Manifests proxops would not read: a proxops document outside `<kind folder>/<cluster>/`
//! (a misspelt kind folder, the repository root, a subfolder of a cluster folder, `web.YAML`).
//!
//! Ignoring such a file is not harmless: its guest is then one the repository no longer
//! names, and the next apply deletes it. So each one is an error that stops its cluster (a
//! file under a cluster folder) or every cluster (anywhere else), before PVE is contacted.
//!
//! Only YAML files are read for this (any case of `.yaml`/`.yml`), at most [`MAX_DEPTH`]
//! folders deep, and only their lines: a file is a stray manifest when a top-level
//! `apiVersion:` names `proxops/…` and it is not a cluster file. Hidden entries (`.git`,
//! `.fixtures/`) and the folders whose files are not manifests (`clusters`, `kinds`,
//! `policies`, `secrets`) are not searched. A file that a read manifest symlinks to (or that
//! a cluster folder linking to its folder reads) is what that manifest reads, not a stray.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::diag::Diagnostic;
use crate::rooted::{Entry, RepoDir};
use crate::yaml;

/// How many folders below the root (or below a cluster folder) are searched.
pub const MAX_DEPTH: usize = 4;

/// At most this many entries are looked at outside the read places; past it, a warning says
/// the search stopped.
pub const MAX_ENTRIES: usize = 20_000;

/// Top-level folders that hold no manifests, whose files are never searched.
const NOT_SEARCHED: [&str; 4] = ["clusters", "kinds", "policies", "secrets"];

/// Whether `name` looks like YAML in any letter case.
fn yaml_like(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml")
}

/// Whether `text` is a proxops document other than a cluster file or `proxops.yaml`: a line
/// `apiVersion: proxops/…` (quotes allowed) and a `kind:` line that is not `Cluster`.
pub(crate) fn is_manifest_text(text: &str) -> bool {
    let value = |line: &str, key: &str| -> Option<String> {
        let rest = line.strip_prefix(key)?.strip_prefix(':')?;
        Some(rest.trim().trim_matches(['"', '\'']).to_string())
    };
    let mut proxops = false;
    let mut kind = None;
    for line in text.lines() {
        if let Some(v) = value(line, "apiVersion") {
            proxops |= v.starts_with("proxops/");
        } else if let Some(v) = value(line, "kind") {
            kind = Some(v);
        }
    }
    proxops && kind.is_some_and(|k| !k.is_empty() && k != "Cluster")
}

/// The read places and what they resolve to, computed once and only when a candidate turns
/// up (a repository without stray YAML never pays for it).
#[derive(Debug, Default)]
pub(crate) struct ReadPlaces {
    /// `<folder>/<cluster>` of every cluster folder.
    pub(crate) folders: Vec<String>,
    resolved: OnceLock<HashSet<PathBuf>>,
}

impl ReadPlaces {
    pub(crate) fn new(folders: Vec<String>) -> Self {
        ReadPlaces {
            folders,
            resolved: OnceLock::new(),
        }
    }

    /// The canonical paths of the files read as manifests (through a cluster folder that is
    /// a link too: its entries are listed through the link).
    fn resolved(&self, dir: &RepoDir) -> &HashSet<PathBuf> {
        self.resolved.get_or_init(|| {
            let mut files = HashSet::new();
            for rel in &self.folders {
                let Ok(entries) = std::fs::read_dir(dir.root().join(rel)) else {
                    continue;
                };
                for entry in entries.flatten() {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if (name.ends_with(".yaml") || name.ends_with(".yml"))
                        && let Ok(canon) = std::fs::canonicalize(entry.path())
                    {
                        files.insert(canon);
                    }
                }
            }
            files
        })
    }

    /// Whether `rel` is a file a manifest is read from by another path (a symlink to it).
    fn is_read(&self, dir: &RepoDir, rel: &str) -> bool {
        std::fs::canonicalize(dir.root().join(rel))
            .is_ok_and(|canon| self.resolved(dir).contains(&canon))
    }
}

/// Where a search stands: entries looked at, and whether it already warned it stopped.
struct Search<'a> {
    dir: &'a RepoDir,
    places: &'a ReadPlaces,
    /// Every kind folder, for the message.
    kind_folders: &'a [String],
    seen: usize,
    stopped: bool,
}

impl Search<'_> {
    /// Search the entry `rel` (`entry` is what it is), `depth` folders below where the search
    /// began; an error for every stray manifest found.
    fn entry(&mut self, rel: &str, entry: Entry, depth: usize, diags: &mut Vec<Diagnostic>) {
        self.seen += 1;
        if self.seen > MAX_ENTRIES {
            if !self.stopped {
                self.stopped = true;
                diags.push(Diagnostic::warning(
                    rel,
                    "",
                    format!("the search for manifests outside the kind folders stopped after {MAX_ENTRIES} entries; a manifest further on would be ignored (and its guest pruned) without an error"),
                ));
            }
            return;
        }
        match entry {
            Entry::Folder if depth < MAX_DEPTH => {
                let Ok(entries) = self.dir.list(rel) else {
                    return;
                };
                for (name, entry) in entries {
                    if let Ok(entry) = entry {
                        self.entry(&format!("{rel}/{name}"), entry, depth + 1, diags);
                    }
                }
            }
            Entry::File if yaml_like(rel) => {
                let Ok(bytes) = self.dir.read(rel, yaml::MAX_BYTES) else {
                    return;
                };
                let text = String::from_utf8_lossy(&bytes);
                if is_manifest_text(&text) && !self.places.is_read(self.dir, rel) {
                    diags.push(Diagnostic::error(rel, "", self.message(rel)));
                }
            }
            _ => {}
        }
    }

    fn message(&self, rel: &str) -> String {
        let name = rel.rsplit('/').next().unwrap_or(rel);
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        let folders = self.kind_folders.join("/, ");
        let parts: Vec<&str> = rel.split('/').collect();
        match parts.as_slice() {
            // `vms/lab/web.yaml`: a misspelt kind folder, or the folder of a kind not loaded.
            [folder, cluster, _] if !self.kind_folders.iter().any(|f| f == folder) => format!(
                "this proxops manifest is in {folder}/, which no loaded kind reads (the kind folders are {folders}/), so it would be ignored and its guest pruned; move it to <kind folder>/{cluster}/{stem}.yaml, or load the kind that reads {folder}/ in proxops.yaml"
            ),
            _ => format!(
                "this proxops manifest is not where proxops reads manifests (<kind folder>/<cluster>/<name>.yaml, lowercase .yaml or .yml; the kind folders are {folders}/), so it would be ignored and its guest pruned; move it to <kind folder>/<cluster>/{stem}.yaml, or keep a file not meant to be applied in a folder whose name starts with `.`"
            ),
        }
    }
}

/// Search the repository root, outside the kind folders and [`NOT_SEARCHED`] folders, and
/// the files directly in a kind folder are left to the layout (which already refuses them).
pub(crate) fn outside_kind_folders(
    dir: &RepoDir,
    kind_folders: &[&str],
    places: &ReadPlaces,
    diags: &mut Vec<Diagnostic>,
) {
    let Ok(entries) = dir.list("") else {
        return;
    };
    let kind_folders: Vec<String> = kind_folders.iter().map(|f| f.to_string()).collect();
    let mut search = Search {
        dir,
        places,
        kind_folders: &kind_folders,
        seen: 0,
        stopped: false,
    };
    for (name, entry) in entries {
        if kind_folders.contains(&name)
            || NOT_SEARCHED.contains(&name.as_str())
            || name == crate::settings::FILE
        {
            continue;
        }
        if let Ok(entry) = entry {
            search.entry(&name, entry, 1, diags);
        }
    }
}

/// Search an entry of a cluster folder that is not read as a manifest (a subfolder, or a
/// file such as `web.YAML`); `true` when it holds a stray manifest (the errors are pushed).
pub(crate) fn in_cluster_folder(
    dir: &RepoDir,
    rel: &str,
    entry: Entry,
    places: &ReadPlaces,
    kind_folders: &[String],
    diags: &mut Vec<Diagnostic>,
) -> bool {
    let before = diags.len();
    let mut search = Search {
        dir,
        places,
        kind_folders,
        seen: 0,
        stopped: false,
    };
    search.entry(rel, entry, 1, diags);
    diags[before..].iter().any(Diagnostic::is_error)
}
