//! Hostile and careless inputs, end to end: the real binary refuses them with the file and
//! field named and sends nothing to PVE (the simulator's request log stays empty).

use crate::support::{Lab, TOKEN_VAR, proxops, vm};

/// The lab's cluster file with `spec:` lines replaced: `endpoint`, `token` and `tls` are
/// given by the case.
fn cluster(endpoint: &str, token_env: &str, tls: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {endpoint}\n  token: {{id: 'root@pam!proxops', secret: {{env: {token_env}}}}}\n  tls: {tls}\n"
    )
}

/// The fingerprint pin of the lab's own cluster file.
fn pinned(lab: &Lab) -> String {
    format!("{{fingerprint: '{}'}}", lab.sim.fingerprint().unwrap())
}

/// Plan `lab` after `prepare`, expecting exit 1, every `needles` in the output, no PVE request.
async fn refused(lab: &Lab, needles: &[&str]) -> crate::support::Run {
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    let run = lab.run(&["plan"]).await;
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 1, "{out}");
    for needle in needles {
        assert!(out.contains(needle), "missing {needle:?} in:\n{out}");
    }
    assert!(
        lab.sim.requests().is_empty(),
        "PVE was contacted: {:?}",
        lab.sim.requests()
    );
    run
}

#[tokio::test(flavor = "multi_thread")]
async fn files_named_by_a_cluster_file_stay_inside_the_repository() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("ca.pem"), "not a CA").unwrap();
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        (
            "{ca-file: ../../etc/passwd}",
            None,
            "clusters/lab.yaml: error: spec.tls.ca-file: `../../etc/passwd` leads outside the repository (`..`)",
        ),
        (
            "{ca-file: /etc/passwd}",
            None,
            "clusters/lab.yaml: error: spec.tls.ca-file: `/etc/passwd` is absolute",
        ),
        (
            "{ca-file: ca.pem}",
            Some(outside.path().join("ca.pem").display().to_string()),
            "clusters/lab.yaml: error: spec.tls.ca-file: refused: `ca.pem` leads outside the repository",
        ),
    ];
    for (tls, link, needle) in cases {
        let lab = Lab::start().await;
        lab.write(
            "clusters/lab.yaml",
            &cluster(&lab.sim.base_url(), TOKEN_VAR, tls),
        );
        if let Some(target) = link {
            std::os::unix::fs::symlink(target, lab.repo.path().join("ca.pem")).unwrap();
        }
        refused(&lab, &["Cluster lab: not planned", needle]).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sops_file_outside_the_repository_is_never_read() {
    let outside = tempfile::tempdir().unwrap();
    let doc =
        std::fs::read(crate::support::workspace().join("tests/fixtures/sops/cluster.sops.yaml"))
            .unwrap();
    std::fs::write(outside.path().join("lab.sops.yaml"), doc).unwrap();
    let lab = Lab::start().await;
    std::fs::create_dir_all(lab.repo.path().join("secrets")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("lab.sops.yaml"),
        lab.repo.path().join("secrets/lab.sops.yaml"),
    )
    .unwrap();
    refused(
        &lab,
        &["clusters/lab.yaml: error: spec.sops-file: refused: `secrets/lab.sops.yaml` leads outside the repository"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fifo_is_refused_and_symlinks_inside_work() {
    let lab = Lab::start().await;
    let fifo = lab.repo.path().join("vm/lab/pipe.yaml");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    refused(
        &lab,
        &["vm/lab/pipe.yaml: error: refused: `vm/lab/pipe.yaml` is a FIFO, not a regular file"],
    )
    .await;

    // The same repository without the FIFO, its manifest a link to a shared file: planned.
    std::fs::remove_file(&fifo).unwrap();
    lab.write("shared/web.yaml", &vm("web", "pve01", 100, ""));
    lab.remove("vm/lab/web.yaml");
    std::os::unix::fs::symlink(
        "../../shared/web.yaml",
        lab.repo.path().join("vm/lab/web.yaml"),
    )
    .unwrap();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("+ VM web"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn yaml_that_hides_or_hangs_is_refused() {
    let lab = Lab::start().await;
    // A reviewer reads 2GiB; the last key wins in serde_yaml.
    lab.write(
        "vm/lab/dup.yaml",
        &vm("dup", "pve01", 101, "")
            .replace("  memory: 1GiB\n", "  memory: 1GiB\n  memory: 64GiB\n"),
    );
    // 1 MB of nesting: refused at the 65th level, not after minutes of parsing.
    lab.write("vm/lab/deep.yaml", &"[".repeat(1_000_000));
    refused(
        &lab,
        &[
            "vm/lab/dup.yaml:8:3: error: spec.memory: duplicate key `memory`; YAML keeps only the last one, so remove one of them",
            "vm/lab/deep.yaml:1:",
            "nesting deeper than 64 levels is refused",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_byte_order_mark_is_accepted() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/web.yaml",
        &format!("\u{feff}{}", vm("web", "pve01", 100, "")),
    );
    let run = lab.run(&["validate"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("1 manifest valid (0 warnings)"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoints_with_credentials_or_a_path_are_refused_and_never_printed() {
    for (endpoint, needle) in [
        (
            "https://root:hunter2@{addr}",
            "clusters/lab.yaml: error: spec.endpoint: `https://***@{addr}` has credentials in it",
        ),
        (
            "https://{addr}/api2/json",
            "clusters/lab.yaml: error: spec.endpoint: `https://{addr}/api2/json` has a path",
        ),
    ] {
        let lab = Lab::start().await;
        let addr = lab
            .sim
            .base_url()
            .trim_start_matches("https://")
            .to_string();
        let endpoint = endpoint.replace("{addr}", &addr);
        lab.write(
            "clusters/lab.yaml",
            &cluster(&endpoint, TOKEN_VAR, &pinned(&lab)),
        );
        let run = refused(
            &lab,
            &["Cluster lab: not planned", &needle.replace("{addr}", &addr)],
        )
        .await;
        assert!(
            !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
            "{}\n{}",
            run.stdout,
            run.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_file_cannot_name_any_environment_variable() {
    let lab = Lab::start().await;
    lab.write(
        "clusters/lab.yaml",
        &cluster(&lab.sim.base_url(), "SOME_CI_SECRET", &pinned(&lab)),
    );
    refused(
        &lab,
        &["clusters/lab.yaml: error: spec.token.secret.env: `SOME_CI_SECRET` is not a token variable: its name must start with PROXOPS_ or PVE_, or be listed in proxops.yaml under allow-token-env"],
    )
    .await;
    // Allowed by name in proxops.yaml: read (here unset, so the run stops before any request).
    lab.write("proxops.yaml", "allow-token-env: [SOME_CI_SECRET]\n");
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains(
            "clusters/lab.yaml: spec.token.secret: environment variable SOME_CI_SECRET is not set"
        ),
        "{}",
        run.stdout
    );
    assert!(lab.sim.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn trusted_config_takes_clusters_and_settings_from_the_protected_checkout() {
    let lab = Lab::start().await;
    // The protected branch's checkout: the lab's real cluster file.
    let trusted = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(trusted.path().join("clusters")).unwrap();
    std::fs::copy(
        lab.repo.path().join("clusters/lab.yaml"),
        trusted.path().join("clusters/lab.yaml"),
    )
    .unwrap();
    // The pull request: a manifest, and a cluster file sending the token elsewhere, allowed
    // by its own proxops.yaml.
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write(
        "clusters/lab.yaml",
        &cluster("https://127.0.0.1:9", "SOME_CI_SECRET", "{insecure: true}"),
    );
    lab.write("proxops.yaml", "allow-token-env: [SOME_CI_SECRET]\n");
    let dir = trusted.path().display().to_string();
    let run = lab.run(&["plan", "--trusted-config", &dir]).await;
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains(&format!("Cluster lab ({})", lab.sim.base_url())),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("+ VM web"), "{}", run.stdout);
    assert!(
        !lab.sim.requests().is_empty(),
        "the trusted endpoint was used"
    );
    assert!(!run.stderr.contains("insecure"), "{}", run.stderr);

    // Validate and plan with a --trusted-config that is not a folder say so.
    let run = lab
        .run(&["validate", "--trusted-config", "/nonexistent/dir"])
        .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .contains("error: --trusted-config: `/nonexistent/dir` does not exist"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_file_is_not_a_repository() {
    for command in ["validate", "plan", "apply"] {
        let run = proxops(&[command, "examples/homelab/clusters/lab.yaml"]);
        assert_eq!(run.code, 1, "{command}: {}", run.stderr);
        assert_eq!(
            run.stderr,
            "error: `examples/homelab/clusters/lab.yaml` is a file, not a repository; give the folder that holds clusters/ and the kind folders (vm/, templatevm/, …)\n",
            "{command}"
        );
    }
}

/// A manifest moved where proxops does not read it (a misspelt kind folder, a subfolder, a
/// capital extension, the repository root) is an error, not an ignored file whose guest the
/// next apply deletes; nothing is sent to PVE.
#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_moved_out_of_its_folder_stops_the_prune() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write("vm/lab/db.yaml", &vm("db", "pve01", 101, ""));
    lab.apply().await;
    for moved in [
        "vms/lab/db.yaml",
        "vm/lab/old/db.yaml",
        "vm/lab/db.YAML",
        "db.yaml",
    ] {
        lab.remove("vm/lab/db.yaml");
        lab.write(moved, &vm("db", "pve01", 101, ""));
        lab.clear();
        let run = lab.run(&["apply"]).await;
        let out = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, 1, "{moved}: {out}");
        assert!(
            out.contains(&format!("{moved}: error: this proxops manifest "))
                && out.contains("so it would be ignored and its guest pruned"),
            "{moved}: {out}"
        );
        assert!(lab.mutations().is_empty(), "{moved}: {:?}", lab.mutations());
        assert!(lab.sim.vm_config(101).is_some(), "{moved}: db was deleted");
        lab.remove(moved);
        lab.write("vm/lab/db.yaml", &vm("db", "pve01", 101, ""));
    }
    // Back in place: nothing to do.
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
}
