//! Loading a repository: `<folder>/<cluster>/<name>.yaml` manifests for every kind folder,
//! and `clusters/<cluster>.yaml`, read through a cap-std `Dir` rooted at the repository so
//! that no path and no symlink can lead outside it.
//!
//! Naming rule: a manifest's `metadata.name` must equal its file name without the `.yaml`
//! (or `.yml`) extension, so the file tree alone tells what exists and two files can never
//! claim one object by accident. The cluster is the folder the file sits in.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::cluster::ClusterFile;
use crate::diag::Diagnostic;

/// One manifest file, parsed.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Path relative to the repository root, e.g. `vm/lab/web-01.yaml`.
    pub file: String,
    /// Kind folder, e.g. `vm`.
    pub folder: String,
    /// Cluster folder, e.g. `lab`.
    pub cluster: String,
    /// File name without extension (equal to `metadata.name` once validated).
    pub name: String,
    /// The document, YAML turned into JSON.
    pub document: serde_json::Value,
}

impl Manifest {
    /// The document's `kind:` value, if it is a string.
    pub fn kind(&self) -> Option<&str> {
        self.document.get("kind").and_then(|k| k.as_str())
    }
}

/// Everything read from a repository.
#[derive(Debug, Clone, Default)]
pub struct Repo {
    pub root: PathBuf,
    pub clusters: BTreeMap<String, ClusterFile>,
    /// Sorted by file path.
    pub manifests: Vec<Manifest>,
}

/// Read the repository at `root`. `folders` are the kind folders to look in (from the
/// kinds' `describe()`). Returns what could be read plus every problem found, so that one
/// run reports all of them.
pub fn load(root: &Path, folders: &[&str]) -> (Repo, Vec<Diagnostic>) {
    let mut repo = Repo {
        root: root.to_path_buf(),
        ..Repo::default()
    };
    let mut diags = Vec::new();
    let dir = match Dir::open_ambient_dir(root, ambient_authority()) {
        Ok(dir) => dir,
        Err(e) => {
            diags.push(Diagnostic::error(
                root.display().to_string(),
                "",
                format!("cannot open the repository: {e}"),
            ));
            return (repo, diags);
        }
    };

    for (file, doc) in read_folder_files(&dir, "clusters", &mut diags) {
        let name = stem(&file).to_string();
        match ClusterFile::parse(&file, &name, &doc) {
            Ok(cluster) => {
                repo.clusters.insert(name, cluster);
            }
            Err(mut errors) => diags.append(&mut errors),
        }
    }

    let mut seen: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for folder in folders {
        let Some(kind_dir) = open_optional_dir(&dir, folder, &mut diags) else {
            continue;
        };
        for cluster_entry in sorted_entries(&kind_dir, folder, &mut diags) {
            let (cluster, is_dir) = cluster_entry;
            let rel = format!("{folder}/{cluster}");
            if !is_dir {
                diags.push(Diagnostic::error(
                    rel,
                    "",
                    format!("manifests live in {folder}/<cluster>/<name>.yaml; move this file into a cluster folder"),
                ));
                continue;
            }
            if !repo.clusters.contains_key(&cluster) {
                diags.push(Diagnostic::error(
                    rel.clone(),
                    "",
                    format!("no cluster file clusters/{cluster}.yaml for the manifests in {rel}/"),
                ));
            }
            for (file, document) in read_folder_files(&dir, &rel, &mut diags) {
                let name = stem(&file).to_string();
                check_name(&file, &name, &document, &mut diags);
                let key = (folder.to_string(), cluster.clone(), name.clone());
                if let Some(first) = seen.get(&key) {
                    diags.push(Diagnostic::error(
                        file.clone(),
                        "metadata.name",
                        format!("`{name}` is already defined by {first} (same kind and cluster); remove one of them"),
                    ));
                    continue;
                }
                seen.insert(key, file.clone());
                repo.manifests.push(Manifest {
                    file,
                    folder: folder.to_string(),
                    cluster: cluster.clone(),
                    name,
                    document,
                });
            }
        }
    }
    repo.manifests.sort_by(|a, b| a.file.cmp(&b.file));
    diags.sort();
    (repo, diags)
}

fn stem(file: &str) -> &str {
    let base = file.rsplit('/').next().unwrap_or(file);
    base.strip_suffix(".yaml")
        .or_else(|| base.strip_suffix(".yml"))
        .unwrap_or(base)
}

fn check_name(file: &str, stem: &str, document: &serde_json::Value, diags: &mut Vec<Diagnostic>) {
    if let Some(name) = document.pointer("/metadata/name").and_then(|n| n.as_str())
        && name != stem
    {
        diags.push(Diagnostic::error(
            file,
            "metadata.name",
            format!("`{name}` does not match the file name `{stem}`; metadata.name must equal the file name without .yaml"),
        ));
    }
}

fn open_optional_dir(dir: &Dir, path: &str, diags: &mut Vec<Diagnostic>) -> Option<Dir> {
    match dir.open_dir(path) {
        Ok(d) => Some(d),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            diags.push(Diagnostic::error(path, "", escape_message(&e, "folder")));
            None
        }
    }
}

fn escape_message(e: &io::Error, what: &str) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied || e.to_string().contains("outside") {
        format!(
            "refused: this {what} leads outside the repository (symlink or `..`); proxops only reads inside the repository"
        )
    } else {
        format!("cannot read this {what}: {e}")
    }
}

/// Entries of a directory as (name, is_dir), sorted; symlinks count by what they point to
/// inside the repository.
fn sorted_entries(dir: &Dir, rel: &str, diags: &mut Vec<Diagnostic>) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let entries = match dir.entries() {
        Ok(e) => e,
        Err(e) => {
            diags.push(Diagnostic::error(rel, "", escape_message(&e, "folder")));
            return out;
        }
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        // A plain file or folder is known from the entry; for a symlink, `metadata` follows
        // it, but only inside `dir`: cap-std refuses escapes.
        match entry.file_type() {
            Ok(t) if !t.is_symlink() => {
                out.push((name, t.is_dir()));
                continue;
            }
            _ => {}
        }
        match dir.metadata(&name) {
            Ok(meta) => out.push((name, meta.is_dir())),
            Err(e) => diags.push(Diagnostic::error(
                format!("{rel}/{name}"),
                "",
                escape_message(&e, "path"),
            )),
        }
    }
    out.sort();
    out
}

/// Parse every `.yaml`/`.yml` file directly in `rel`; other files are ignored with a warning.
fn read_folder_files(
    root: &Dir,
    rel: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(String, serde_json::Value)> {
    let Some(dir) = open_optional_dir(root, rel, diags) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for (name, is_dir) in sorted_entries(&dir, rel, diags) {
        if is_dir || !(name.ends_with(".yaml") || name.ends_with(".yml")) {
            diags.push(Diagnostic::warning(
                format!("{rel}/{name}"),
                "",
                "ignored: only .yaml and .yml files are read here",
            ));
            continue;
        }
        names.push(name);
    }
    // Reading and parsing thousands of manifests is the bulk of loading: spread it over the
    // cores, keeping the order.
    let read = |name: &String| -> Result<(String, serde_json::Value), Diagnostic> {
        let file = format!("{rel}/{name}");
        let text = dir
            .read_to_string(name)
            .map_err(|e| Diagnostic::error(&file, "", escape_message(&e, "file")))?;
        let doc = parse_yaml(&file, &text)?;
        Ok((file, doc))
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results: Vec<Result<(String, serde_json::Value), Diagnostic>> =
        if names.len() < 64 || threads < 2 {
            names.iter().map(read).collect()
        } else {
            let chunk = names.len().div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = names
                    .chunks(chunk)
                    .map(|part| scope.spawn(move || part.iter().map(read).collect::<Vec<_>>()))
                    .collect();
                handles
                    .into_iter()
                    .flat_map(|h| h.join().expect("manifest reader panicked"))
                    .collect()
            })
        };
    let mut out = Vec::new();
    for r in results {
        match r {
            Ok(doc) => out.push(doc),
            Err(d) => diags.push(d),
        }
    }
    out
}

/// Parse one YAML document into JSON; syntax errors carry line and column.
pub fn parse_yaml(file: &str, text: &str) -> Result<serde_json::Value, Diagnostic> {
    let mut docs = serde_yaml::Deserializer::from_str(text);
    let Some(first) = docs.next() else {
        return Err(Diagnostic::error(
            file,
            "",
            "the file is empty; expected one manifest",
        ));
    };
    let value = <serde_json::Value as serde::Deserialize>::deserialize(first)
        .map_err(|e| yaml_error(file, &e))?;
    if docs.next().is_some() {
        return Err(Diagnostic::error(
            file,
            "",
            "the file holds several YAML documents; put one manifest per file",
        ));
    }
    if value.is_null() {
        return Err(Diagnostic::error(
            file,
            "",
            "the file is empty; expected one manifest",
        ));
    }
    if !value.is_object() {
        return Err(Diagnostic::error(
            file,
            "",
            "expected a mapping with apiVersion, kind, metadata and spec",
        ));
    }
    Ok(value)
}

fn yaml_error(file: &str, e: &serde_yaml::Error) -> Diagnostic {
    let message = format!("invalid YAML: {e}");
    // serde_yaml appends " at line L column C" to its messages; the location is kept apart.
    let message = match message.find(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message,
    };
    let d = Diagnostic::error(file, "", message);
    match e.location() {
        Some(loc) => d.at(loc.line(), loc.column()),
        None => d,
    }
}
