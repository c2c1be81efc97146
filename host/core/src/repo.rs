//! Loading a repository: `<folder>/<cluster>/<name>.yaml` manifests for every kind folder,
//! and `clusters/<cluster>.yaml`, read through [`RepoDir`] (a cap-std `Dir` rooted at the
//! repository) so that no path and no symlink can lead outside it.
//!
//! Naming rule: a manifest's `metadata.name` must equal its file name without the `.yaml`
//! (or `.yml`) extension, so the file tree alone tells what exists and two files can never
//! claim one object by accident. The cluster is the folder the file sits in.
//!
//! With `--trusted-config`, manifests come from the tree under review and cluster files from
//! another root (the protected branch's checkout): [`load_split`].

use std::collections::{BTreeMap, BTreeSet, HashMap, hash_map};
use std::path::{Path, PathBuf};

use crate::cluster::{ClusterFile, Tls};
use crate::diag::Diagnostic;
use crate::rooted::{Entry, Listing, ReadError, RepoDir};
use crate::{stray, yaml};

/// The largest CA file (`spec.tls.ca-file`) proxops reads.
pub const MAX_CA_BYTES: usize = 1024 * 1024;

/// One manifest file, parsed.
///
/// The document is kept as JSON text, which is what kinds and policies are handed: a
/// 257-byte manifest took 7 KB as a `serde_json::Value` (70 MB for 10,000 of them, most of
/// the memory of a plan), and its text its own size. The fields the host itself reads are
/// taken out when the manifest is made.
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
    /// The document, YAML turned into JSON, as JSON text.
    json: std::sync::Arc<str>,
    api_version: Option<String>,
    kind: Option<String>,
    /// `metadata.adopt`, the host's take-over field, when present.
    adopt: Option<serde_json::Value>,
    /// `metadata.name` as written, if it is a string.
    stated: Option<String>,
    /// SHA-256 of the file's bytes, when it was read for a [`ReadMemo`].
    digest: Option<[u8; 32]>,
}

/// Manifests read in an earlier run, by file ([`Layout::manifests_with`]): one whose bytes
/// are the same (by SHA-256) is not parsed again. Implemented by `proxops_reconcile::Memo`.
pub trait ReadMemo: Sync {
    /// The manifest read from `file` when its bytes had this digest, if it is known.
    fn manifest(&self, file: &str, digest: &[u8; 32]) -> Option<Manifest>;
}

/// A [`Manifest`] taken apart, for a [`ReadMemo`] to store and give back.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredManifest {
    pub file: String,
    pub folder: String,
    pub cluster: String,
    pub name: String,
    /// Shared with the manifests made from it.
    pub json: std::sync::Arc<str>,
    pub api_version: Option<String>,
    pub kind: Option<String>,
    /// `metadata.adopt` as JSON text.
    pub adopt: Option<String>,
    pub stated: Option<String>,
    pub digest: [u8; 32],
}

impl Manifest {
    /// The manifest a [`ReadMemo`] stored; `None` when its `adopt` text is not JSON.
    pub fn restore(s: StoredManifest) -> Option<Manifest> {
        let adopt = match s.adopt {
            Some(text) => Some(serde_json::from_str(&text).ok()?),
            None => None,
        };
        Some(Manifest {
            file: s.file,
            folder: s.folder,
            cluster: s.cluster,
            name: s.name,
            json: s.json,
            api_version: s.api_version,
            kind: s.kind,
            adopt,
            stated: s.stated,
            digest: Some(s.digest),
        })
    }

    /// This manifest taken apart, when it was read with its digest.
    pub fn store(&self) -> Option<StoredManifest> {
        Some(StoredManifest {
            file: self.file.clone(),
            folder: self.folder.clone(),
            cluster: self.cluster.clone(),
            name: self.name.clone(),
            json: self.json.clone(),
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            adopt: self.adopt.as_ref().map(|a| a.to_string()),
            stated: self.stated.clone(),
            digest: self.digest?,
        })
    }

    /// SHA-256 of the file's bytes, when it was read for a [`ReadMemo`].
    pub fn digest(&self) -> Option<&[u8; 32]> {
        self.digest.as_ref()
    }

    /// A manifest of `document` (YAML turned into JSON) read from `file`.
    pub fn new(
        file: String,
        folder: String,
        cluster: String,
        name: String,
        document: &serde_json::Value,
    ) -> Manifest {
        let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_string);
        Manifest {
            file,
            folder,
            cluster,
            name,
            json: document.to_string().into(),
            api_version: text(document.get("apiVersion")),
            kind: text(document.get("kind")),
            adopt: document
                .get("metadata")
                .and_then(|m| m.get("adopt"))
                .cloned(),
            stated: text(document.pointer("/metadata/name")),
            digest: None,
        }
    }

    /// The document as JSON text.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The document as a JSON value (read from its text again).
    pub fn document(&self) -> serde_json::Value {
        serde_json::from_str(&self.json).expect("the text was printed from a JSON value")
    }

    /// The document's `apiVersion:` value, if it is a string.
    pub fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }

    /// The document's `kind:` value, if it is a string.
    pub fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }

    /// The document's `metadata.adopt`, if it has one.
    pub fn adopt(&self) -> Option<&serde_json::Value> {
        self.adopt.as_ref()
    }
}

/// Everything read from a repository.
#[derive(Debug, Clone, Default)]
pub struct Repo {
    /// Where the manifests were read.
    pub root: PathBuf,
    /// Where the cluster files were read; files they name (SOPS, CA) are read there too.
    /// Equal to `root` unless `--trusted-config` was given.
    pub config_root: PathBuf,
    pub clusters: BTreeMap<String, ClusterFile>,
    /// Sorted by file path.
    pub manifests: Vec<Manifest>,
}

/// Read the repository at `root`. `folders` are the kind folders to look in (from the
/// kinds' `describe()`). Returns what could be read plus every problem found, so that one
/// run reports all of them.
pub fn load(root: &Path, folders: &[&str]) -> (Repo, Vec<Diagnostic>) {
    load_split(root, root, folders)
}

/// [`load`] with the manifests from `root` and the cluster files from `config`.
pub fn load_split(root: &Path, config: &Path, folders: &[&str]) -> (Repo, Vec<Diagnostic>) {
    let (layout, mut diags) = load_layout(root, config, folders);
    let mut repo = Repo {
        root: root.to_path_buf(),
        config_root: config.to_path_buf(),
        ..Repo::default()
    };
    let Some(layout) = layout else {
        return (repo, diags);
    };
    let (manifests, mut more) = layout.all_manifests();
    repo.manifests = manifests;
    diags.append(&mut more);
    diags.sort();
    repo.clusters = layout.clusters;
    (repo, diags)
}

/// What a repository holds before any manifest is read: its cluster files and which kind
/// folders hold manifests for which cluster. [`Layout::manifests`] then reads one cluster's
/// manifests, so that a run over many clusters can start on the first while it reads the
/// next.
#[derive(Debug)]
pub struct Layout {
    dir: RepoDir,
    /// Every cluster file that parsed, by name.
    pub clusters: BTreeMap<String, ClusterFile>,
    /// Per cluster with manifests: the kind folders that hold a folder for it
    /// (`<folder>/<cluster>/`), in the order the kinds were given. A cluster without a
    /// cluster file is here too; its error is among the layout's diagnostics.
    folders: BTreeMap<String, Vec<String>>,
    /// Every `<folder>/<cluster>`, for the search for manifests outside them.
    places: stray::ReadPlaces,
    /// The kind folders, as given.
    kind_folders: Vec<String>,
}

/// Two cluster files naming one PVE endpoint are two views of one cluster, and each prunes
/// the proxops guests its own manifests do not name: each would delete the other's guests on
/// every apply. Both files get an error (which stops both clusters before any PVE call).
fn check_shared_endpoints(clusters: &BTreeMap<String, ClusterFile>, diags: &mut Vec<Diagnostic>) {
    let mut by_endpoint: BTreeMap<String, Vec<&ClusterFile>> = BTreeMap::new();
    for cluster in clusters.values() {
        if let Some(key) = cluster.endpoint.identity() {
            by_endpoint.entry(key).or_default().push(cluster);
        }
    }
    for same in by_endpoint.values().filter(|same| same.len() > 1) {
        for cluster in same {
            let others: Vec<&str> = same
                .iter()
                .filter(|o| o.file != cluster.file)
                .map(|o| o.file.as_str())
                .collect();
            diags.push(Diagnostic::error(
                &cluster.file,
                "spec.endpoint",
                format!(
                    "{} names the same PVE endpoint; one PVE cluster needs exactly one cluster file, because each cluster prunes the proxops guests its manifests do not name (each would delete the other's). Move the manifests into one cluster's folders and remove the other cluster file",
                    others.join(", ")
                ),
            ));
        }
    }
}

/// Read the cluster files (from `config`) and list the kind folders (under `root`); `None`
/// when a root cannot be opened. The diagnostics cover the cluster files and the folder
/// layout (a manifest outside a cluster folder, a cluster folder without a cluster file).
pub fn load_layout(
    root: &Path,
    config: &Path,
    folders: &[&str],
) -> (Option<Layout>, Vec<Diagnostic>) {
    let mut diags = Vec::new();
    let open = |path: &Path| {
        RepoDir::open(path)
            .map_err(|e| Diagnostic::error(path.display().to_string(), "", e.to_string()))
    };
    let (dir, config_dir) = match (open(root), open(config)) {
        (Ok(dir), Ok(config_dir)) => (dir, config_dir),
        (a, b) => {
            diags.extend(a.err());
            if config != root {
                diags.extend(b.err());
            }
            return (None, diags);
        }
    };

    // Every cluster file that exists, valid or not: a manifest folder whose cluster file is
    // invalid gets that file's errors, not a second, false "no cluster file".
    let mut clusters = BTreeMap::new();
    let mut cluster_names = BTreeSet::new();
    let files = read_folder_files(
        &config_dir,
        "clusters",
        &mut diags,
        Some(&mut cluster_names),
        None,
        None,
        |_, doc, _| doc,
    );
    for (file, doc) in files {
        let name = stem(&file).to_string();
        match ClusterFile::parse(&file, &name, &doc) {
            Ok(cluster) => {
                check_named_files(&config_dir, &cluster, &mut diags);
                clusters.insert(name, cluster);
            }
            Err(mut errors) => diags.append(&mut errors),
        }
    }

    check_shared_endpoints(&clusters, &mut diags);

    let mut by_cluster: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for folder in folders {
        let Some(entries) = list_optional(&dir, folder, &mut diags) else {
            continue;
        };
        for (cluster, entry) in entries {
            let rel = format!("{folder}/{cluster}");
            match entry {
                Ok(Entry::Folder) => {}
                Ok(_) => {
                    diags.push(Diagnostic::error(
                        rel,
                        "",
                        format!("manifests live in {folder}/<cluster>/<name>.yaml; move this file into a cluster folder"),
                    ));
                    continue;
                }
                Err(e) => {
                    diags.push(Diagnostic::error(rel, "", e.to_string()));
                    continue;
                }
            }
            if !cluster_names.contains(&cluster) {
                diags.push(Diagnostic::error(
                    rel.clone(),
                    "",
                    format!("no cluster file clusters/{cluster}.yaml for the manifests in {rel}/"),
                ));
            }
            by_cluster
                .entry(cluster)
                .or_default()
                .push(folder.to_string());
        }
    }
    let places = stray::ReadPlaces::new(
        by_cluster
            .iter()
            .flat_map(|(cluster, folders)| folders.iter().map(move |f| format!("{f}/{cluster}")))
            .collect(),
    );
    stray::outside_kind_folders(&dir, folders, &places, &mut diags);
    diags.sort();
    (
        Some(Layout {
            dir,
            clusters,
            folders: by_cluster,
            places,
            kind_folders: folders.iter().map(|f| f.to_string()).collect(),
        }),
        diags,
    )
}

impl Layout {
    /// The cluster a problem in repository file `file` belongs to: `clusters/<c>.yaml` and
    /// everything under `<kind folder>/<c>/` belong to `c`; anything else (`proxops.yaml`, a
    /// manifest outside the kind folders) to the whole repository (`None`), so it stops every
    /// cluster.
    pub fn cluster_of<'f>(&self, file: &'f str) -> Option<&'f str> {
        let mut parts = file.split('/');
        match (parts.next(), parts.next()) {
            (Some("clusters"), Some(name)) if parts.next().is_none() => {
                name.strip_suffix(".yaml").or(name.strip_suffix(".yml"))
            }
            (Some(folder), Some(cluster)) if self.kind_folders.iter().any(|f| f == folder) => {
                Some(cluster)
            }
            _ => None,
        }
    }

    /// The clusters that have manifest folders, sorted.
    pub fn manifest_clusters(&self) -> impl Iterator<Item = &str> {
        self.folders.keys().map(String::as_str)
    }

    /// Every cluster's manifests, sorted by file, and the problems reading them.
    pub fn all_manifests(&self) -> (Vec<Manifest>, Vec<Diagnostic>) {
        let (mut manifests, mut diags) = (Vec::new(), Vec::new());
        for cluster in self.manifest_clusters() {
            let (mut more, mut problems) = self.manifests(cluster);
            manifests.append(&mut more);
            diags.append(&mut problems);
        }
        manifests.sort_by(|a, b| a.file.cmp(&b.file));
        diags.sort();
        (manifests, diags)
    }

    /// The manifests of `cluster` (`<folder>/<cluster>/*.yaml` of every kind folder), sorted
    /// by file, and the problems reading them.
    pub fn manifests(&self, cluster: &str) -> (Vec<Manifest>, Vec<Diagnostic>) {
        self.manifests_with(cluster, None)
    }

    /// [`Layout::manifests`], taking from `memo` each manifest whose file's bytes it has seen
    /// (by SHA-256) instead of parsing it again. Every manifest then carries its digest.
    /// Every check after the parse (names, duplicates, stray files) runs either way.
    pub fn manifests_with(
        &self,
        cluster: &str,
        memo: Option<&dyn ReadMemo>,
    ) -> (Vec<Manifest>, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let mut manifests = Vec::new();
        for folder in self.folders.get(cluster).into_iter().flatten() {
            let rel = format!("{folder}/{cluster}");
            // Each document becomes its manifest where it was read, so a folder's documents
            // never all live as JSON trees at once.
            let places = Some((&self.places, self.kind_folders.as_slice()));
            let reuse = |file: &str, digest: &[u8; 32]| {
                memo?
                    .manifest(file, digest)
                    // A stored manifest of another folder or cluster is not this one.
                    .filter(|m| m.folder == *folder && m.cluster == cluster)
            };
            let reuse: Option<&Reuse<'_, Manifest>> = memo.map(|_| &reuse as _);
            let read = read_folder_files(
                &self.dir,
                &rel,
                &mut diags,
                None,
                places,
                reuse,
                |file, doc, digest| Manifest {
                    digest,
                    ..Manifest::new(
                        file.to_string(),
                        folder.to_string(),
                        cluster.to_string(),
                        stem(file).to_string(),
                        &doc,
                    )
                },
            );
            // The file that claimed each name first; `web.yaml` and `web.yml` in one folder
            // claim the same object. Names of other folders are other kinds' objects.
            let mut seen: HashMap<String, String> = HashMap::with_capacity(read.len());
            for (file, manifest) in read {
                check_name(
                    &file,
                    &manifest.name,
                    manifest.stated.as_deref(),
                    &mut diags,
                );
                match seen.entry(manifest.name.clone()) {
                    hash_map::Entry::Occupied(first) => {
                        diags.push(Diagnostic::error(
                            file,
                            "metadata.name",
                            format!(
                                "`{}` is already defined by {} (same kind and cluster); remove one of them",
                                manifest.name,
                                first.get()
                            ),
                        ));
                        continue;
                    }
                    hash_map::Entry::Vacant(slot) => {
                        slot.insert(file);
                    }
                }
                manifests.push(manifest);
            }
        }
        manifests.sort_by(|a, b| a.file.cmp(&b.file));
        diags.sort();
        (manifests, diags)
    }
}

/// The files a cluster file names must be readable inside the repository: the CA file now
/// (it is small and always needed), the SOPS file's path (read only when a secret is used).
fn check_named_files(config: &RepoDir, cluster: &ClusterFile, diags: &mut Vec<Diagnostic>) {
    if let Tls::CaFile(ca) = &cluster.tls
        && let Err(e) = config.read(ca, MAX_CA_BYTES)
    {
        diags.push(Diagnostic::error(
            &cluster.file,
            "spec.tls.ca-file",
            e.to_string(),
        ));
    }
    let problem = match config.entry(&cluster.sops_file) {
        Ok(Entry::File) | Err(ReadError::NotFound(_)) => None,
        Ok(Entry::Folder) => Some(format!(
            "refused: `{}` is a folder, not a regular file",
            crate::diag::quote(&cluster.sops_file)
        )),
        Ok(Entry::Other(what)) => Some(format!(
            "refused: `{}` is {what}, not a regular file",
            crate::diag::quote(&cluster.sops_file)
        )),
        Err(e) => Some(e.to_string()),
    };
    if let Some(message) = problem {
        diags.push(Diagnostic::error(&cluster.file, "spec.sops-file", message));
    }
}

fn stem(file: &str) -> &str {
    let base = file.rsplit('/').next().unwrap_or(file);
    base.strip_suffix(".yaml")
        .or_else(|| base.strip_suffix(".yml"))
        .unwrap_or(base)
}

/// `metadata.name` (as written, if it is a string) must be the file's stem.
fn check_name(file: &str, stem: &str, stated: Option<&str>, diags: &mut Vec<Diagnostic>) {
    if let Some(name) = stated
        && name != stem
    {
        diags.push(Diagnostic::error(
            file,
            "metadata.name",
            format!("`{name}` does not match the file name `{stem}`; metadata.name must equal the file name without .yaml"),
        ));
    }
}

/// The entries of folder `rel`; `None` when it does not exist.
fn list_optional(dir: &RepoDir, rel: &str, diags: &mut Vec<Diagnostic>) -> Option<Listing> {
    match dir.entry(rel) {
        Err(ReadError::NotFound(_)) => return None,
        Err(e) => {
            diags.push(Diagnostic::error(rel, "", e.to_string()));
            return None;
        }
        Ok(Entry::Folder) => {}
        Ok(_) => {
            diags.push(Diagnostic::error(rel, "", "expected a folder"));
            return None;
        }
    }
    match dir.list(rel) {
        Ok(entries) => Some(entries),
        Err(e) => {
            diags.push(Diagnostic::error(rel, "", e.to_string()));
            None
        }
    }
}

/// What stands in for parsing a file: the value known for its path and digest, if any.
type Reuse<'a, T> = dyn Fn(&str, &[u8; 32]) -> Option<T> + Sync + 'a;

/// Parse every `.yaml`/`.yml` file directly in `rel`; other files are ignored with a warning.
/// `stems`, when given, receives the stem of every YAML file found, whether it parses or not
/// (the cluster names of `clusters/`). With `places` (a cluster folder), an ignored entry
/// that is or holds a proxops manifest is an error instead ([`stray`]). Each file's
/// document is handed to `convert` (with its path) on the thread that read it. With
/// `reuse`, each file's bytes are hashed (SHA-256) first and what `reuse` gives for the
/// digest stands in for parsing the file; `convert` then gets the digest too.
fn read_folder_files<T: Send>(
    dir: &RepoDir,
    rel: &str,
    diags: &mut Vec<Diagnostic>,
    mut stems: Option<&mut BTreeSet<String>>,
    places: Option<(&stray::ReadPlaces, &[String])>,
    reuse: Option<&Reuse<'_, T>>,
    convert: impl Fn(&str, serde_json::Value, Option<[u8; 32]>) -> T + Sync,
) -> Vec<(String, T)> {
    let Some(entries) = list_optional(dir, rel, diags) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for (name, entry) in entries {
        let file = format!("{rel}/{name}");
        if !(name.ends_with(".yaml") || name.ends_with(".yml"))
            || entry.as_ref().is_ok_and(|e| *e == Entry::Folder)
        {
            if let (Some((places, kind_folders)), Ok(entry)) = (places, &entry)
                && stray::in_cluster_folder(dir, &file, *entry, places, kind_folders, diags)
            {
                continue;
            }
            diags.push(Diagnostic::warning(
                file,
                "",
                "ignored: only .yaml and .yml files are read here",
            ));
            continue;
        }
        if let Some(stems) = stems.as_deref_mut() {
            stems.insert(stem(&name).to_string());
        }
        match entry {
            // Read (and refused there) below, so that every refusal has one wording.
            Ok(entry) => names.push((name, entry == Entry::File)),
            Err(e) => diags.push(Diagnostic::error(file, "", e.to_string())),
        }
    }
    // Reading and parsing thousands of manifests is the bulk of loading: spread it over the
    // cores, keeping the order.
    let read = |(name, listed_file): &(String, bool)| -> Result<(String, T), Diagnostic> {
        let file = format!("{rel}/{name}");
        let bytes = if *listed_file {
            dir.read_listed(&file, yaml::MAX_BYTES)
        } else {
            dir.read(&file, yaml::MAX_BYTES)
        }
        .map_err(|e| Diagnostic::error(&file, "", e.to_string()))?;
        let digest =
            reuse.map(|_| <[u8; 32]>::from(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
        if let (Some(reuse), Some(digest)) = (reuse, &digest)
            && let Some(known) = reuse(&file, digest)
        {
            return Ok((file, known));
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            Diagnostic::error(
                &file,
                "",
                format!(
                    "the file is not UTF-8 text (invalid byte at offset {})",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let doc = parse_yaml(&file, &text)?;
        let converted = convert(&file, doc, digest);
        Ok((file, converted))
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results: Vec<Result<(String, T), Diagnostic>> = if names.len() < 64 || threads < 2 {
        names.iter().map(read).collect()
    } else {
        crate::parallel::map_ordered(&names, threads, || (), |_, name| read(name))
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

/// Parse one YAML document into JSON; every refusal carries line and column.
///
/// One pass of [`crate::yaml`]: the limits (size, depth, duplicate keys, alias expansion)
/// are held while the value is built; a leading byte order mark is skipped.
pub fn parse_yaml(file: &str, text: &str) -> Result<serde_json::Value, Diagnostic> {
    let text = yaml::strip_bom(text);
    let mut docs = yaml::parse(text)
        .map_err(|p| yaml_error(file, p))?
        .into_iter();
    let Some(value) = docs.next() else {
        return Err(Diagnostic::error(
            file,
            "",
            "the file is empty; expected one manifest",
        ));
    };
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

/// A refusal of [`yaml::parse`] as a diagnostic of `file`.
pub fn yaml_error(file: &str, p: yaml::Problem) -> Diagnostic {
    let d = Diagnostic::error(file, p.path, p.message);
    if p.line == 0 {
        d
    } else {
        d.at(p.line, p.column)
    }
}
