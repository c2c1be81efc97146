//! The example repositories a newcomer runs, run as the README says (on a copy, so the
//! checkout's simulator state is untouched): they converge, a second run changes nothing,
//! and the simulator holds what the manifests declare.

use std::path::Path;

use serde_json::Value;

use crate::support::{Run, proxops_in, shared_cache, workspace};

/// A copy of `examples/<name>` without its simulator state.
fn copy_example(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&workspace().join("examples").join(name), dir.path());
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() == ".proxops" {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn run(repo: &Path, args: &[&str]) -> Run {
    let mut all = args.to_vec();
    all.push(repo.to_str().unwrap());
    proxops_in(repo, &shared_cache(), &all)
}

/// The four kinds of examples/platform, built by this test build, copied into `repo/kinds/`
/// and pinned in its `proxops.yaml`, as the example's README says.
fn pin_platform_kinds(repo: &Path) {
    std::fs::create_dir_all(repo.join("kinds")).unwrap();
    let mut pins = std::collections::BTreeMap::new();
    for kind in ["firewall", "securitygroup", "pool", "backupjob", "access"] {
        let built = proxops_guests::artifact_path(&format!("proxops-kind-{kind}")).expect("built");
        let bytes = std::fs::read(built).unwrap();
        std::fs::write(repo.join(format!("kinds/{kind}.wasm")), &bytes).unwrap();
        pins.insert(
            format!("kinds/{kind}.wasm"),
            crate::support::sha256_hex(&bytes),
        );
    }
    let yaml = std::fs::read_to_string(repo.join("proxops.yaml")).unwrap();
    let mut file = String::new();
    let pinned: Vec<String> = yaml
        .lines()
        .map(|l| {
            if let Some(f) = l.trim_start().strip_prefix("- file: ") {
                file = f.to_string();
            }
            match l.trim_start().strip_prefix("sha256:") {
                Some(_) => format!("    sha256: {}", pins[&file]),
                None => l.to_string(),
            }
        })
        .collect();
    std::fs::write(repo.join("proxops.yaml"), pinned.join("\n") + "\n").unwrap();
}

/// The simulator's saved state of cluster `lab`: vmid -> (config, running).
fn guests(repo: &Path) -> Vec<(u64, serde_json::Map<String, Value>, bool)> {
    let text = std::fs::read_to_string(repo.join(".proxops/sim-lab.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<_> = state["vms"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(vmid, vm)| {
            (
                vmid.parse().unwrap(),
                vm["conf"].as_object().unwrap().clone(),
                vm["running"] == Value::Bool(true),
            )
        })
        .collect();
    out.sort_by_key(|(vmid, _, _)| *vmid);
    out
}

#[test]
fn the_main_command_converges_and_a_second_run_changes_nothing() {
    let repo = copy_example("homelab");
    let first = run(repo.path(), &["apply"]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains("the cluster matches the manifests"),
        "{}",
        first.stdout
    );
    let second = run(repo.path(), &["apply"]);
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    assert!(second.stdout.contains("No changes"), "{}", second.stdout);
    let plan = run(repo.path(), &["plan", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "{}{}", plan.stdout, plan.stderr);

    // Every manifest's guest exists, owned (the vmid-bound mark), with its declared name.
    let live = guests(repo.path());
    for (vmid, name) in [
        (101, "web-01"),
        (110, "app-01"),
        (201, "db-01"),
        (202, "build-runner"),
        (9000, "debian-12"),
    ] {
        let (_, conf, _) = live
            .iter()
            .find(|(v, _, _)| *v == vmid)
            .unwrap_or_else(|| panic!("guest {vmid} exists: {live:?}"));
        assert_eq!(conf["name"], name, "guest {vmid}");
        let tags = conf["tags"].as_str().unwrap();
        assert!(
            tags.split(';').any(|t| t == format!("proxops-{vmid}")),
            "guest {vmid} carries its mark: {tags}"
        );
    }
}

#[test]
fn the_showcase_warns_through_its_policy_and_writes_the_secrets_from_sops() {
    let repo = copy_example("showcase");
    let key = repo.path().join("TEST-ONLY-age-key.txt");
    let key = key.to_str().unwrap();
    let first = run(repo.path(), &["--age-identity", key, "apply"]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    // The policy warns, visibly, naming the VM and the field; warn mode stops nothing.
    assert!(
        first.stdout.contains(
            "policy require-protection-prod would deny (not enforced) [warn mode] VM api-01"
        ) && first.stdout.contains("spec.options.protection"),
        "{}",
        first.stdout
    );
    assert!(
        !first.stdout.contains("VM api-02 (vm/lab/api-02.yaml)"),
        "the protected VM passes the policy: {}",
        first.stdout
    );
    // No secret value reaches the output.
    for secret in [
        "showcase-TEST-ONLY-password",
        "ShowcaseTestOnlyKey",
        "ShowcaseCiTestOnlyKey",
    ] {
        assert!(
            !first.stdout.contains(secret) && !first.stderr.contains(secret),
            "{secret} leaked"
        );
    }

    // The simulator holds the password (hashed, as PVE stores it) and both keys from SOPS.
    let live = guests(repo.path());
    let (_, api01, running) = live.iter().find(|(v, _, _)| *v == 301).unwrap();
    assert!(running, "api-01 is started");
    assert!(
        api01["cipassword"].as_str().unwrap().starts_with("$5$"),
        "{api01:?}"
    );
    let keys = api01["sshkeys"].as_str().unwrap();
    assert!(
        keys.contains("ShowcaseTestOnlyKey%20alice%40laptop")
            && keys.contains("ShowcaseCiTestOnlyKey%20ci%40runner"),
        "{keys}"
    );
    let (_, api02, _) = live.iter().find(|(v, _, _)| *v == 302).unwrap();
    assert_eq!(api02["protection"], "1");

    // Converged: the second run changes nothing, and the warning is still shown.
    let second = run(repo.path(), &["--age-identity", key, "apply"]);
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    assert!(second.stdout.contains("No changes"), "{}", second.stdout);
    assert!(
        second.stdout.contains("require-protection-prod"),
        "{}",
        second.stdout
    );

    // Without the key, nothing is sent and the error names the SOPS file.
    let before = std::fs::read_to_string(repo.path().join(".proxops/sim-lab.json")).unwrap();
    let locked_out = run(
        repo.path(),
        &["--age-identity", "/nonexistent/key.txt", "apply"],
    );
    assert_eq!(
        locked_out.code, 1,
        "{}{}",
        locked_out.stdout, locked_out.stderr
    );
    let all = format!("{}{}", locked_out.stdout, locked_out.stderr);
    assert!(all.contains("key.txt"), "{all}");
    let after = std::fs::read_to_string(repo.path().join(".proxops/sim-lab.json")).unwrap();
    assert_eq!(
        guests_of(&before),
        guests_of(&after),
        "no guest changed without the key"
    );
}

/// The guests' configs of a saved simulator state (ignoring counters that reads advance).
fn guests_of(state: &str) -> Value {
    let state: Value = serde_json::from_str(state).unwrap();
    state["vms"].clone()
}

#[test]
fn the_containers_example_converges_with_its_third_party_kind_pinned() {
    let repo = copy_example("containers");
    // As its README says: build the kind, copy it into kinds/, pin its sha256.
    let wasm = std::fs::read(
        proxops_guests::artifact_path("proxops-kind-container").expect("the kind is built"),
    )
    .unwrap();
    std::fs::write(repo.path().join("kinds/container.wasm"), &wasm).unwrap();
    let settings = repo.path().join("proxops.yaml");
    let pinned: String = std::fs::read_to_string(&settings)
        .unwrap()
        .lines()
        .map(|l| match l.trim_start().strip_prefix("sha256:") {
            Some(_) => format!("    sha256: {}\n", crate::support::sha256_hex(&wasm)),
            None => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&settings, pinned).unwrap();

    let kinds = run(repo.path(), &["kinds", "--repo"]);
    assert_eq!(kinds.code, 0, "{}{}", kinds.stdout, kinds.stderr);
    assert!(
        kinds
            .stdout
            .contains("Container (file kinds/container.wasm"),
        "{}",
        kinds.stdout
    );
    let first = run(repo.path(), &["apply"]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let second = run(repo.path(), &["apply"]);
    assert_eq!(second.code, 0, "{}{}", second.stdout, second.stderr);
    assert!(second.stdout.contains("No changes"), "{}", second.stdout);

    let text = std::fs::read_to_string(repo.path().join(".proxops/sim-lab.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    let containers = state["lxc"].as_object().expect("containers in the state");
    for vmid in ["201", "202", "203"] {
        assert!(containers.contains_key(vmid), "CT {vmid}: {containers:?}");
    }
}

/// examples/platform: a VM with its firewall, its pool, a backup job covering the pool and
/// proxops's own API token, from an empty simulator, with the five third-party kinds built by
/// the test build and pinned as the README says; a second apply changes nothing, and the
/// token's secret is in the SOPS file, never in the output.
#[test]
fn the_platform_example_converges_from_empty_and_stays_converged() {
    let dir = copy_example("platform");
    let repo = dir.path();
    pin_platform_kinds(repo);
    let key = repo.join("TEST-ONLY-age-key.txt");
    let age = ["--age-identity", key.to_str().unwrap()];

    let first = run(repo, &[&age[..], &["apply"]].concat());
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains("the cluster matches the manifests"),
        "{}",
        first.stdout
    );
    let second = run(repo, &[&age[..], &["apply"]].concat());
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    assert!(second.stdout.contains("No changes"), "{}", second.stdout);

    // The simulator holds what the manifests declare.
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join(".proxops/sim-lab.json")).unwrap())
            .unwrap();
    let text = state.to_string();
    for expected in [
        "proxops-operator",
        "proxops@pve",
        "web-nightly",
        "ssh from the admins",
        "web tier",
        "web servers (proxops:webtier)",
    ] {
        assert!(
            text.contains(expected),
            "{expected} not in the simulator's state"
        );
    }
    assert_eq!(guests(repo).len(), 1);
    // The VM joined its pool at creation (`spec.pool`), in the first apply's one pass.
    assert_eq!(
        state["pools"]["web"]["vms"],
        serde_json::json!([100]),
        "{}",
        state["pools"]
    );

    // The token's secret: in the SOPS file (proxops's own reader), in no output.
    let ids = proxops_secrets::Identities::from_file(&key).unwrap();
    let doc =
        proxops_secrets::SopsDocument::open(&repo.join("secrets/lab.sops.yaml"), &ids).unwrap();
    let secret = doc
        .get("pve-tokens.proxops_40pve_21ci")
        .expect("the token's secret is stored")
        .to_string();
    assert!(secret.len() >= 32, "a PVE token secret (a UUID)");
    for out in [&first.stdout, &first.stderr, &second.stdout, &second.stderr] {
        assert!(!out.contains(&secret), "the secret was printed");
    }
}

/// `proxops` on `repo` with `env` set (and nothing else of the test's environment that
/// names a token), as a CI job would run it.
async fn run_with(repo: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(repo)
        .arg("--cache-dir")
        .arg(shared_cache())
        .args(args)
        .arg(repo)
        .env_remove("PROXOPS_LOG")
        .env_remove(crate::support::TOKEN_VAR)
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run proxops");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The platform example's bootstrap, as its README says, against a `proxops sim serve` child:
/// the first apply authenticates with `root@pam`'s token and creates `proxops@pve!ci`, whose
/// secret lands in the cluster's SOPS file; the cluster file then names that token and its
/// SOPS entry, and proxops plans "No changes" with it alone; a write its role does not grant
/// (`Pool.Allocate`) is PVE's 403, and nothing changes.
#[tokio::test(flavor = "multi_thread")]
async fn the_platform_bootstraps_its_own_token_root_once_then_the_token() {
    let root_secret = "b00t5trap-r00t-secret";
    let sim =
        crate::support::sim_child("bootstrap", root_secret, &["--nodes", "pve01,pve02"]).await;
    let dir = copy_example("platform");
    let repo = dir.path();
    pin_platform_kinds(repo);
    let key = repo.join("TEST-ONLY-age-key.txt");
    let age = ["--age-identity", key.to_str().unwrap()];
    let cluster = |token: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {}\n  token: {token}\n  tls: {{fingerprint: '{}'}}\n",
            sim.url, sim.fingerprint
        )
    };
    std::fs::write(
        repo.join("clusters/lab.yaml"),
        cluster("{id: 'root@pam!bootstrap', secret: {env: PROXOPS_BOOTSTRAP_TOKEN}}"),
    )
    .unwrap();

    // root@pam, once.
    let first = run_with(
        repo,
        &[&age[..], &["apply"]].concat(),
        &[("PROXOPS_BOOTSTRAP_TOKEN", root_secret)],
    )
    .await;
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let ids = proxops_secrets::Identities::from_file(&key).unwrap();
    let doc =
        proxops_secrets::SopsDocument::open(&repo.join("secrets/lab.sops.yaml"), &ids).unwrap();
    let secret = doc
        .get("pve-tokens.proxops_40pve_21ci")
        .expect("the token's secret is in the SOPS file")
        .to_string();
    assert!(!first.stdout.contains(&secret) && !first.stderr.contains(&secret));

    // Then the token, read from the SOPS file as the cluster file says; no root token around.
    std::fs::write(
        repo.join("clusters/lab.yaml"),
        cluster("{id: 'proxops@pve!ci', secret: {sops: pve-tokens.proxops_40pve_21ci}}"),
    )
    .unwrap();
    let plan = run_with(
        repo,
        &[&age[..], &["plan", "--detailed-exitcode"]].concat(),
        &[],
    )
    .await;
    assert_eq!(plan.code, 0, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);
    // The simulator knows the token and its secret: it authenticates on its own.
    let as_token = proxops_pve::Client::new(proxops_pve::ClientConfig {
        base_url: sim.url.clone(),
        token_id: "proxops@pve!ci".into(),
        token_secret: secret.clone(),
        tls: proxops_pve::TlsMode::Fingerprint(sim.fingerprint.clone()),
        timeout: std::time::Duration::from_secs(30),
    })
    .unwrap();
    as_token
        .get("/version", &[])
        .await
        .expect("the token authenticates");

    // A change the role does not grant: the pool's comment edited (its mark kept) by root.
    sim.client
        .request(
            proxops_pve::Method::Put,
            "/pools",
            &[
                proxops_pve::Param::new("poolid", "web"),
                proxops_pve::Param::new("comment", "edited (proxops:web)"),
            ],
            false,
        )
        .await
        .unwrap();
    let apply = run_with(repo, &[&age[..], &["apply"]].concat(), &[]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    let all = format!("{}{}", apply.stdout, apply.stderr);
    assert!(
        all.contains("403") && all.contains("Permission check failed (/pool/web, Pool.Allocate)"),
        "{all}"
    );
    let pools = sim
        .client
        .get("/pools", &[proxops_pve::Param::new("poolid", "web")])
        .await
        .unwrap();
    assert_eq!(pools[0]["comment"], "edited (proxops:web)", "{pools}");
    assert!(!all.contains(&secret), "the token's secret was printed");
}
