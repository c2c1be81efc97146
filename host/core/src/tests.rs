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
        &[
            "vm/lab/web.yaml:4:1: error: invalid YAML: while parsing a flow sequence, expected ',' or ']'",
        ],
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
            "templatevm: error: refused: `templatevm` leads outside the repository (a symlink to an absolute path or above the repository root); proxops only reads inside the repository",
            "vm/lab/web.yaml: error: refused: `vm/lab/web.yaml` leads outside the repository (a symlink to an absolute path or above the repository root); proxops only reads inside the repository",
        ]
    );
}

/// Like [`check`], with symlinks (`link -> target`, target relative to the link) and FIFOs
/// made after the files.
#[cfg(unix)]
fn check_special(
    files: &[(&str, &str)],
    links: &[(&str, &str)],
    fifos: &[&str],
    expected: &[&str],
) -> crate::Repo {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    for (link, target) in links {
        let link = dir.path().join(link);
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, link).unwrap();
    }
    for fifo in fifos {
        let path = dir.path().join(fifo);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
    }
    let (repo, diags) = load(dir.path(), &["vm", "templatevm"]);
    let got: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
    assert_eq!(got, expected);
    repo
}

#[cfg(unix)]
#[test]
fn symlinks_inside_the_repository_are_followed() {
    let repo = check_special(
        &[
            ("clusters/lab.yaml", CLUSTER),
            ("shared/web.yaml", VM),
            (
                "shared/tvm/golden.yaml",
                &VM.replace("VM", "TemplateVM").replace("web", "golden"),
            ),
        ],
        &[
            ("vm/lab/web.yaml", "../../shared/web.yaml"),
            ("templatevm/lab", "../shared/tvm"),
        ],
        &[],
        &[],
    );
    let files: Vec<&str> = repo.manifests.iter().map(|m| m.file.as_str()).collect();
    assert_eq!(files, ["templatevm/lab/golden.yaml", "vm/lab/web.yaml"]);
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() {
    check_special(
        &[("clusters/lab.yaml", CLUSTER)],
        &[("vm/lab/link.yaml", "pipe.yaml")],
        &["vm/lab/web.yaml", "vm/lab/pipe.yaml", "clusters/other.yaml"],
        &[
            "clusters/other.yaml: error: refused: `clusters/other.yaml` is a FIFO, not a regular file",
            "vm/lab/link.yaml: error: refused: `vm/lab/link.yaml` is a FIFO, not a regular file",
            "vm/lab/pipe.yaml: error: refused: `vm/lab/pipe.yaml` is a FIFO, not a regular file",
            "vm/lab/web.yaml: error: refused: `vm/lab/web.yaml` is a FIFO, not a regular file",
        ],
    );
}

#[cfg(unix)]
#[test]
fn files_a_cluster_file_names_stay_inside() {
    let cluster = |tls_and_sops: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: https://pve:8006\n  token: {{id: a@pam!b, secret: {{env: PVE_TOKEN}}}}\n{tls_and_sops}"
        )
    };
    // (cluster file, symlinks, expected diagnostics)
    type Case<'a> = (String, Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            cluster("  tls: {ca-file: certs/ca.pem}\n"),
            vec![],
            vec![
                "clusters/lab.yaml: error: spec.tls.ca-file: `certs/ca.pem` does not exist in the repository",
            ],
        ),
        (
            cluster("  tls: {ca-file: ../../etc/passwd}\n"),
            vec![],
            vec![
                "clusters/lab.yaml: error: spec.tls.ca-file: `../../etc/passwd` leads outside the repository (`..`); proxops only reads inside the repository",
            ],
        ),
        (
            cluster("  tls: {ca-file: /etc/passwd}\n"),
            vec![],
            vec![
                "clusters/lab.yaml: error: spec.tls.ca-file: `/etc/passwd` is absolute; give the path relative to the repository root",
            ],
        ),
        (
            cluster("  tls: {ca-file: ca.pem}\n"),
            vec![("ca.pem", "/etc/hostname")],
            vec![
                "clusters/lab.yaml: error: spec.tls.ca-file: refused: `ca.pem` leads outside the repository (a symlink to an absolute path or above the repository root); proxops only reads inside the repository",
            ],
        ),
        (
            cluster("  tls: {ca-file: ca.pem}\n"),
            vec![("ca.pem", "certs/real.pem")],
            vec![],
        ),
        (
            cluster("  sops-file: ../lab.sops.yaml\n"),
            vec![],
            vec![
                "clusters/lab.yaml: error: spec.sops-file: `../lab.sops.yaml` leads outside the repository (`..`); proxops only reads inside the repository",
            ],
        ),
        (
            cluster(""),
            vec![("secrets/lab.sops.yaml", "/etc/hostname")],
            vec![
                "clusters/lab.yaml: error: spec.sops-file: refused: `secrets/lab.sops.yaml` leads outside the repository (a symlink to an absolute path or above the repository root); proxops only reads inside the repository",
            ],
        ),
        (
            cluster("  sops-file: secrets\n"),
            vec![],
            vec![
                "clusters/lab.yaml: error: spec.sops-file: refused: `secrets` is a folder, not a regular file",
            ],
        ),
    ];
    for (text, links, expected) in cases {
        check_special(
            &[
                ("clusters/lab.yaml", &text),
                ("certs/real.pem", "PEM"),
                ("secrets/keep", ""),
            ],
            &links,
            &[],
            &expected,
        );
    }
}

#[test]
fn yaml_limits_apply_to_every_file() {
    let deep = format!("kind: VM\nspec: {}{}\n", "[".repeat(100), "]".repeat(100));
    check(
        &[
            ("clusters/lab.yaml", &format!("{CLUSTER}spec: {{}}\n")),
            (
                "vm/lab/web.yaml",
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: web}\nspec:\n  memory: 2GiB\n  memory: 64GiB\n",
            ),
            ("vm/lab/deep.yaml", &deep),
            (
                "vm/lab/big.yaml",
                &format!("a: '{}'\n", "x".repeat(crate::yaml::MAX_BYTES)),
            ),
            (
                "vm/lab/bom.yaml",
                &format!("\u{feff}{}", VM.replace("web", "bom")),
            ),
        ],
        &[
            "clusters/lab.yaml:5:1: error: spec: duplicate key `spec`; YAML keeps only the last one, so remove one of them",
            "vm/lab/big.yaml: error: refused: `vm/lab/big.yaml` is 1048582 bytes; the limit for this file is 1048576 bytes",
            &format!(
                "vm/lab/deep.yaml:2:70: error: spec{}: nesting deeper than 64 levels is refused",
                "[0]".repeat(63)
            ),
            "vm/lab/web.yaml:6:3: error: spec.memory: duplicate key `memory`; YAML keeps only the last one, so remove one of them",
        ],
    );
}

#[test]
fn endpoints_carry_no_credentials_and_no_path() {
    use crate::cluster::{Endpoint, parse_endpoint};
    let cases: &[(&str, Result<Endpoint, &str>)] = &[
        ("sim:", Ok(Endpoint::Sim)),
        (
            "https://pve01.example:8006",
            Ok(Endpoint::Https("https://pve01.example:8006".into())),
        ),
        (
            "https://PVE01.example:8006/",
            Ok(Endpoint::Https("https://pve01.example:8006".into())),
        ),
        (
            "http://10.0.0.1:8006",
            Ok(Endpoint::Http("http://10.0.0.1:8006".into())),
        ),
        (
            "https://[fe80::1]:8006",
            Ok(Endpoint::Https("https://[fe80::1]:8006".into())),
        ),
        (
            "https://user:hunter2@pve:8006/path",
            Err(
                "`https://***@pve:8006/path` has credentials in it; they would be printed and logged. Put the API token in spec.token",
            ),
        ),
        (
            "https://root@pve:8006",
            Err("`https://***@pve:8006` has credentials in it"),
        ),
        (
            "https://pve:8006/api2/json",
            Err(
                "`https://pve:8006/api2/json` has a path; give only https://host:port (proxops adds /api2/json itself)",
            ),
        ),
        ("https://pve:8006/?x=1", Err("has a query or fragment")),
        ("https://pve:8006#top", Err("has a query or fragment")),
        (
            "ftp://user:secret@pve",
            Err("`ftp://***@pve` is not `sim:`, `https://host:8006` or `http://host:port`"),
        ),
        ("https://", Err("is not `sim:`")),
        ("pve01:8006", Err("`pve01:8006` is not `sim:`")),
    ];
    for (text, want) in cases {
        match (parse_endpoint(text), want) {
            (Ok(got), Ok(want)) => assert_eq!(&got, want, "{text}"),
            (Err(got), Err(want)) => {
                assert!(got.contains(want), "{text}: {got}");
                assert!(
                    !got.contains("hunter2") && !got.contains("secret@"),
                    "{got}"
                );
            }
            (got, want) => panic!("{text}: got {got:?}, expected {want:?}"),
        }
    }
}

#[test]
fn token_variables_follow_the_pattern_or_are_allowed() {
    use crate::cluster::{ClusterFile, check_token_env};
    let cluster = |secret: &str| {
        let text = format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: https://pve:8006\n  token: {{id: a@pam!b, secret: {secret}}}\n"
        );
        let doc = crate::repo::parse_yaml("clusters/lab.yaml", &text).unwrap();
        ClusterFile::parse("clusters/lab.yaml", "lab", &doc)
    };
    let allowed = vec!["CI_PVE_TOKEN".to_string()];
    // (secret, None = accepted, Some(message prefix))
    let cases: &[(&str, Option<&str>)] = &[
        ("{env: PVE_TOKEN}", None),
        ("{env: PROXOPS_LAB_TOKEN}", None),
        ("{env: CI_PVE_TOKEN}", None),
        ("{sops: pve.token}", None),
        (
            "{env: AWS_SECRET_ACCESS_KEY}",
            Some(
                "clusters/lab.yaml: error: spec.token.secret.env: `AWS_SECRET_ACCESS_KEY` is not a token variable: its name must start with PROXOPS_ or PVE_, or be listed in proxops.yaml under allow-token-env",
            ),
        ),
        (
            "{env: PVE_}",
            Some("clusters/lab.yaml: error: spec.token.secret.env: `PVE_` is not a token variable"),
        ),
        (
            "{env: GITHUB_TOKEN}",
            Some(
                "clusters/lab.yaml: error: spec.token.secret.env: `GITHUB_TOKEN` is not a token variable",
            ),
        ),
        (
            "{env: 'PVE TOKEN'}",
            Some(
                "clusters/lab.yaml: error: spec.token.secret.env: `PVE TOKEN` is not an environment variable name",
            ),
        ),
    ];
    for (secret, want) in cases {
        let got = match cluster(secret) {
            Ok(c) => check_token_env(&c, &allowed).map(|d| d.to_string()),
            Err(d) => Some(d[0].to_string()),
        };
        match (&got, want) {
            (None, None) => {}
            (Some(got), Some(want)) => assert!(got.starts_with(want), "{secret}: {got}"),
            _ => panic!("{secret}: got {got:?}, expected {want:?}"),
        }
    }
}

#[test]
fn an_invalid_cluster_file_adds_no_second_error() {
    check(
        &[
            (
                "clusters/lab.yaml",
                "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {name: lab}\nspec: {endpoint: 'gopher://x'}\n",
            ),
            ("vm/lab/web.yaml", VM),
        ],
        &[
            "clusters/lab.yaml: error: spec.endpoint: `gopher://x` is not `sim:`, `https://host:8006` or `http://host:port`",
        ],
    );
}

#[test]
fn long_values_are_quoted_short() {
    let long = "x".repeat(5000);
    let d = crate::Diagnostic::error("f.yaml", "", format!("value `{long}` is bad; `ok`"));
    assert_eq!(
        d.message,
        format!(
            "value `{}… (4800 more characters)` is bad; `ok`",
            "x".repeat(200)
        )
    );
    let d = crate::Diagnostic::error("f.yaml", "", format!("unpaired `{long}"));
    assert_eq!(
        d.message,
        format!("unpaired `{}… (1010 more characters)", "x".repeat(3990))
    );
    // A 100,000-character YAML key is a field path of 200 characters.
    let d = crate::Diagnostic::error("f.yaml", format!("spec.{}", "k".repeat(100_000)), "bad");
    assert_eq!(
        d.path,
        format!("spec.{}… (99805 more characters)", "k".repeat(195))
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

/// A cluster file for `name` at `endpoint`.
fn cluster_at(name: &str, endpoint: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  endpoint: '{endpoint}'\n  token: {{id: 'root@pam!proxops', secret: {{env: PROXOPS_TOKEN}}}}\n"
    )
}

#[test]
fn two_cluster_files_may_not_name_one_endpoint() {
    let same = "error: spec.endpoint: names the same PVE endpoint; one PVE cluster needs exactly one cluster file, because each cluster prunes the proxops guests its manifests do not name (each would delete the other's). Move the manifests into one cluster's folders and remove the other cluster file";
    // (endpoint of a, endpoint of b, the same cluster)
    let cases = [
        ("https://pve.example:8006", "https://pve.example:8006", true),
        (
            "https://PVE.example:8006",
            "https://pve.example:8006/",
            true,
        ),
        ("https://pve.example", "https://pve.example:443", true),
        ("http://10.0.0.1:8006", "https://10.0.0.1:8006", true),
        ("https://[fd00::1]:8006", "https://[FD00::1]:8006", true),
        (
            "https://pve.example:8006",
            "https://pve.example:8007",
            false,
        ),
        (
            "https://pve1.example:8006",
            "https://pve2.example:8006",
            false,
        ),
        ("sim:", "sim:", false),
    ];
    for (a, b, shared) in cases {
        let files = [
            ("clusters/a.yaml", cluster_at("a", a)),
            ("clusters/b.yaml", cluster_at("b", b)),
        ];
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in &files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let (_, diags) = load(dir.path(), &["vm"]);
        let got: Vec<String> = diags
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.to_string())
            .collect();
        let expected: Vec<String> = if shared {
            vec![
                format!(
                    "clusters/a.yaml: {}",
                    same.replacen("names", "clusters/b.yaml names", 1)
                ),
                format!(
                    "clusters/b.yaml: {}",
                    same.replacen("names", "clusters/a.yaml names", 1)
                ),
            ]
        } else {
            Vec::new()
        };
        assert_eq!(got, expected, "{a} / {b}");
    }
}

/// The error for the stray manifest `file`.
fn stray(file: &str) -> String {
    let stem = file.rsplit('/').next().unwrap().split('.').next().unwrap();
    let parts: Vec<&str> = file.split('/').collect();
    match parts.as_slice() {
        [folder, cluster, _] if !["vm", "templatevm"].contains(folder) => format!(
            "{file}: error: this proxops manifest is in {folder}/, which no loaded kind reads (the kind folders are vm/, templatevm/), so it would be ignored and its guest pruned; move it to <kind folder>/{cluster}/{stem}.yaml, or load the kind that reads {folder}/ in proxops.yaml"
        ),
        _ => format!(
            "{file}: error: this proxops manifest is not where proxops reads manifests (<kind folder>/<cluster>/<name>.yaml, lowercase .yaml or .yml; the kind folders are vm/, templatevm/), so it would be ignored and its guest pruned; move it to <kind folder>/<cluster>/{stem}.yaml, or keep a file not meant to be applied in a folder whose name starts with `.`"
        ),
    }
}

#[test]
fn a_manifest_outside_the_read_places_is_an_error() {
    let base = [
        ("clusters/lab.yaml", CLUSTER),
        ("vm/lab/db.yaml", &*VM.replace("web", "db")),
    ];
    let cases: &[(&str, &str, Option<&str>)] = &[
        // A misspelt kind folder, the root, a subfolder of a cluster folder, a capital
        // extension, quoted values, deep below a folder.
        ("vms/lab/web.yaml", VM, Some("vms/lab/web.yaml")),
        ("web.yaml", VM, Some("web.yaml")),
        ("vm/lab/old/web.yaml", VM, Some("vm/lab/old/web.yaml")),
        ("vm/lab/web.YAML", VM, Some("vm/lab/web.YAML")),
        ("web.Yml", VM, Some("web.Yml")),
        (
            "a/b/c/web.yaml",
            "apiVersion: \"proxops/v1alpha1\"\nkind: 'TemplateVM'\n",
            Some("a/b/c/web.yaml"),
        ),
        // Not manifests, or not searched: another apiVersion, a nested key, a cluster file,
        // no kind, a hidden folder, too deep, the config folders, not YAML.
        ("deploy/job.yaml", "apiVersion: batch/v1\nkind: Job\n", None),
        (
            "notes/web.yaml",
            "spec:\n  apiVersion: proxops/v1alpha1\n  kind: VM\n",
            None,
        ),
        ("old/lab.yaml", CLUSTER, None),
        ("old/x.yaml", "apiVersion: proxops/v1alpha1\n", None),
        (".fixtures/web.yaml", VM, None),
        ("a/b/c/d/web.yaml", VM, None),
        ("policies/tests/web.yaml", VM, None),
        ("kinds/tests/web.yaml", VM, None),
        ("secrets/web.yaml", VM, None),
        ("clusters/old/web.yaml", VM, None),
        ("README.md", VM, None),
        ("vm/lab/notes.txt", VM, None),
    ];
    // Entries of a read folder that were ignored before this search, and still are.
    let ignored = ["vm/lab/notes.txt", "clusters/old"];
    for (file, text, error) in cases {
        let mut files = base.to_vec();
        files.push((file, text));
        let mut expected: Vec<String> = error.iter().map(|f| stray(f)).collect();
        for entry in ignored.iter().filter(|e| file.starts_with(*e)) {
            expected.push(format!(
                "{entry}: warning: ignored: only .yaml and .yml files are read here"
            ));
        }
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        check(&files, &expected);
    }
}

#[cfg(unix)]
#[test]
fn a_file_a_manifest_links_to_is_not_a_stray() {
    let db = VM.replace("web", "db");
    check_special(
        &[
            ("clusters/lab.yaml", CLUSTER),
            ("shared/web.yaml", VM),
            (
                "shared/tvm/golden.yaml",
                &VM.replace("VM", "TemplateVM").replace("web", "golden"),
            ),
            ("vm/lab/versions/db.yaml", &db),
            ("shared/orphan.yaml", &VM.replace("web", "orphan")),
        ],
        &[
            ("vm/lab/web.yaml", "../../shared/web.yaml"),
            ("vm/lab/db.yaml", "versions/db.yaml"),
            ("templatevm/lab", "../shared/tvm"),
        ],
        &[],
        &[
            &stray("shared/orphan.yaml"),
            "vm/lab/versions: warning: ignored: only .yaml and .yml files are read here",
        ],
    );
}

#[test]
fn a_problem_belongs_to_its_cluster_or_to_the_whole_repository() {
    let dir = tempfile::tempdir().unwrap();
    let (layout, _) = crate::load_layout(dir.path(), dir.path(), &["vm", "templatevm"]);
    let layout = layout.unwrap();
    for (file, cluster) in [
        ("clusters/lab.yaml", Some("lab")),
        ("clusters/lab.yml", Some("lab")),
        ("clusters/old/lab.yaml", None),
        ("vm/lab/web.yaml", Some("lab")),
        ("vm/lab/old/web.yaml", Some("lab")),
        ("templatevm/edge", Some("edge")),
        ("vms/lab/web.yaml", None),
        ("web.yaml", None),
        ("proxops.yaml", None),
        ("docs/lab/web.yaml", None),
    ] {
        assert_eq!(layout.cluster_of(file), cluster, "{file}");
    }
}

/// A [`crate::ReadMemo`] that knows every manifest it was given, by file and digest.
struct Known(Vec<crate::Manifest>);

impl crate::ReadMemo for Known {
    fn manifest(&self, file: &str, digest: &[u8; 32]) -> Option<crate::Manifest> {
        self.0
            .iter()
            .find(|m| m.file == file && m.digest() == Some(digest))
            .cloned()
    }
}

#[test]
fn a_memo_stands_in_for_parsing_only_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("clusters/lab.yaml", CLUSTER);
    write(
        "vm/lab/web.yaml",
        &VM.replace("{name: web}", "{name: other}"),
    );
    write("vm/lab/db.yaml", &VM.replace("web", "db"));
    let (layout, _) = crate::load_layout(dir.path(), dir.path(), &["vm"]);
    let layout = layout.unwrap();
    let (plain, _) = layout.manifests("lab");
    assert!(plain.iter().all(|m| m.digest().is_none()));
    let (first, diags) = layout.manifests_with("lab", Some(&Known(Vec::new())));
    assert!(first.iter().all(|m| m.digest().is_some()));
    let rendered = |d: &[crate::Diagnostic]| d.iter().map(|d| d.to_string()).collect::<Vec<_>>();

    // Whatever the memo holds for the same bytes is taken as read (here: another document,
    // to see that it was not parsed); the name check still runs on what it gives.
    let mut known = first.clone();
    let mut stored = known[1].store().unwrap();
    stored.json = r#"{"from":"the memo"}"#.into();
    known[1] = crate::Manifest::restore(stored).unwrap();
    let (again, again_diags) = layout.manifests_with("lab", Some(&Known(known.clone())));
    assert_eq!(again[1].file, "vm/lab/web.yaml");
    assert_eq!(again[1].json(), r#"{"from":"the memo"}"#);
    assert_eq!(again[0].json(), first[0].json());
    assert_eq!(rendered(&again_diags), rendered(&diags));
    assert_eq!(diags.len(), 1, "web.yaml states another name: {diags:?}");

    // Changed bytes are parsed again.
    write("vm/lab/web.yaml", VM);
    let (edited, edited_diags) = layout.manifests_with("lab", Some(&Known(known)));
    assert_ne!(edited[1].json(), r#"{"from":"the memo"}"#);
    assert_ne!(edited[1].digest(), first[1].digest());
    assert!(edited_diags.is_empty(), "{edited_diags:?}");
}
