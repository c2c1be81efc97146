//! Loader tests: each case is a small repository written to a temp dir and the exact
//! diagnostics expected from loading it.

use crate::load;

const CLUSTER: &str = "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec: {endpoint: 'sim:'}\n";
const VM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: web}\nspec: {}\n";

/// Write `files` into a fresh repository, load it, and compare the rendered diagnostics.
fn check(files: &[(&str, &str)], expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let (_, diags) = load(dir.path(), &["vm", "templatevm"]);
    let got: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    assert_eq!(got, expected);
}

#[test]
fn a_clean_repository_has_no_diagnostics() {
    check(
        &[("clusters/lab.yaml", CLUSTER), ("vm/lab/web.yaml", VM)],
        &[],
    );
}

#[test]
fn yaml_syntax_errors_carry_line_and_column() {
    check(
        &[
            ("clusters/lab.yaml", CLUSTER),
            ("vm/lab/web.yaml", "kind: VM\nspec:\n  memory: [1, 2\n"),
        ],
        &["vm/lab/web.yaml:4:1: error: invalid YAML: did not find expected ',' or ']'"],
    );
}

#[test]
fn name_must_match_the_file_name() {
    check(
        &[("clusters/lab.yaml", CLUSTER), ("vm/lab/other.yaml", VM)],
        &[
            "vm/lab/other.yaml: error: metadata.name: `web` does not match the file name `other`; metadata.name must equal the file name without .yaml",
        ],
    );
}

#[test]
fn duplicate_manifests_are_rejected() {
    check(
        &[
            ("clusters/lab.yaml", CLUSTER),
            ("vm/lab/web.yaml", VM),
            ("vm/lab/web.yml", VM),
        ],
        &[
            "vm/lab/web.yml: error: metadata.name: `web` is already defined by vm/lab/web.yaml (same kind and cluster); remove one of them",
        ],
    );
}

#[test]
fn shapes_of_the_tree_are_checked() {
    check(
        &[
            ("clusters/lab.yaml", CLUSTER),
            ("vm/stray.yaml", VM),
            ("vm/lab/notes.txt", "hello"),
            ("vm/lab/two.yaml", "a: 1\n---\nb: 2\n"),
            ("vm/lab/empty.yaml", ""),
            ("vm/nowhere/web.yaml", VM),
        ],
        &[
            "vm/lab/empty.yaml: error: the file is empty; expected one manifest",
            "vm/lab/notes.txt: warning: ignored: only .yaml and .yml files are read here",
            "vm/lab/two.yaml: error: the file holds several YAML documents; put one manifest per file",
            "vm/nowhere: error: no cluster file clusters/nowhere.yaml for the manifests in vm/nowhere/",
            "vm/stray.yaml: error: manifests live in vm/<cluster>/<name>.yaml; move this file into a cluster folder",
        ],
    );
}

#[test]
fn cluster_files_are_checked_field_by_field() {
    check(
        &[(
            "clusters/lab.yaml",
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec:\n  endpoint: ftp://x\n  tls: {fingerprint: 'zz'}\n  options: {write-concurrency: 0, colour: red}\n",
        )],
        &[
            "clusters/lab.yaml: error: spec.endpoint: `ftp://x` is not `sim:`, `https://host:8006` or `http://host:port`",
            "clusters/lab.yaml: error: spec.options.colour: unknown field; expected one of: write-concurrency, read-concurrency, task-timeout-seconds, max-passes",
            "clusters/lab.yaml: error: spec.options.write-concurrency: expected an integer from 1 to 64",
            "clusters/lab.yaml: error: spec.tls.fingerprint: expected a SHA-256 fingerprint: 32 hex bytes separated by `:`",
        ],
    );
}

#[test]
fn real_clusters_need_a_token() {
    check(
        &[(
            "clusters/lab.yaml",
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec: {endpoint: 'https://pve:8006'}\n",
        )],
        &[
            "clusters/lab.yaml: error: spec.token: a real cluster needs an API token: token: {id: USER@REALM!ID, secret: {env: VAR}}",
        ],
    );
}

#[cfg(unix)]
#[test]
fn symlinks_leading_outside_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.yaml"), VM).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("clusters")).unwrap();
    std::fs::write(dir.path().join("clusters/lab.yaml"), CLUSTER).unwrap();
    std::fs::create_dir_all(dir.path().join("vm/lab")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.yaml"),
        dir.path().join("vm/lab/web.yaml"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("templatevm")).unwrap();
    let (repo, diags) = load(dir.path(), &["vm", "templatevm"]);
    let got: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    assert!(repo.manifests.is_empty(), "{:?}", repo.manifests);
    assert_eq!(
        got,
        [
            "templatevm: error: refused: this folder leads outside the repository (symlink or `..`); proxops only reads inside the repository",
            "vm/lab/web.yaml: error: refused: this path leads outside the repository (symlink or `..`); proxops only reads inside the repository",
        ]
    );
}

#[test]
fn fingerprints_are_normalised() {
    let lower = "ab:".repeat(31) + "ab";
    assert_eq!(
        crate::cluster::normalise_fingerprint(&lower),
        Some("AB:".repeat(31) + "AB")
    );
    assert_eq!(
        crate::cluster::normalise_fingerprint(&"ab".repeat(32)),
        Some("AB:".repeat(31) + "AB")
    );
    assert_eq!(crate::cluster::normalise_fingerprint("ab:cd"), None);
}
