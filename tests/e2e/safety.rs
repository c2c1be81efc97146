//! Safety at the edges (issue: never touch what proxops does not own, never leave a guest
//! down, never report success that did not happen): each observed failure as a test against
//! the simulator, asserting on its request log and state.

use proxops_pve::Method::Post;
use proxops_sim::{FaultKind, FaultRule};

use crate::support::{Lab, requests_about, template, vm};

/// Someone else's VM: created through the API, untagged, two NICs, running.
async fn payroll(lab: &Lab, vmid: u32) {
    let id = vmid.to_string();
    lab.pve(
        Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", id.as_str()),
            ("name", "payroll"),
            ("tags", "prod"),
            ("memory", "4096"),
            ("cores", "2"),
            ("scsi0", "local-lvm:8"),
            ("net0", "virtio,bridge=vmbr0"),
            ("net1", "virtio,bridge=vmbr0"),
            ("start", "1"),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manifest_on_someone_elses_vmid_never_touches_it() {
    let lab = Lab::start().await;
    payroll(&lab, 6019).await;
    let before = lab.config(6019);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 6019, ""));
    lab.clear();

    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 3, "{}\n{}", plan.stdout, plan.stderr);
    for needle in ["payroll", "proxops does not own", "metadata.adopt", "pve01"] {
        assert!(plan.stdout.contains(needle), "{needle}:\n{}", plan.stdout);
    }
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.config(6019), before);
    assert_eq!(lab.sim.vm_status(6019).as_deref(), Some("running"));

    // The operator corrects the vmid: 6020 is created, 6019 is neither renamed nor deleted.
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 6020, ""));
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(requests_about(&lab, 6019), Vec::<String>::new());
    assert_eq!(lab.config(6019), before);
    assert_eq!(lab.config(6020)["tags"], "proxops;proxops-6020");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_templatevm_manifest_never_templates_someone_elses_running_vm() {
    let lab = Lab::start().await;
    payroll(&lab, 6019).await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 6019, "  state: stopped\n"),
    );
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.sim.vm_status(6019).as_deref(), Some("running"));
    assert!(!lab.config(6019).contains_key("template"));
}

/// A template tagged `proxops` whose mark names another vmid is a copy (a GUI clone of a
/// proxops guest, or a restore to another vmid): neither its TemplateVM manifest nor a clone
/// from it is planned.
#[tokio::test(flavor = "multi_thread")]
async fn a_copy_of_a_proxops_template_is_not_cloned_from() {
    let lab = Lab::start().await;
    lab.pve(
        Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "9000"),
            ("name", "golden"),
            ("tags", "proxops;proxops-8999"),
            ("scsi0", "local-lvm:4"),
            ("net0", "virtio,bridge=vmbr0"),
        ],
    )
    .await;
    lab.pve(Post, "/nodes/pve01/qemu/9000/template", &[]).await;
    let before = lab.config(9000);
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, "  state: stopped\n"),
    );
    lab.write(
        "vm/lab/c1.yaml",
        &vm("c1", "pve01", 501, "  clone: golden\n")
            .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", ""),
    );
    lab.clear();
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 3, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains("not cloning from it"),
        "{}",
        plan.stdout
    );
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.config(9000), before);
    assert!(lab.sim.vm_config(501).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_adopt_adds_only_the_ownership_tags_then_the_guest_is_managed() {
    let lab = Lab::start().await;
    payroll(&lab, 6019).await;
    let before = lab.config(6019);
    // The manifest differs from the guest, a restart included (machine).
    let manifest = vm(
        "payroll",
        "pve01",
        6019,
        "  memory: 4GiB\n  hardware: {machine: q35}\n",
    )
    .replace("  memory: 1GiB\n", "")
    .replace(
        "metadata: {name: payroll}",
        "metadata:\n  name: payroll\n  adopt: {vmid: 6019, name: payroll}",
    );
    // A claim that no longer matches the live guest is an anomaly, nothing more.
    lab.write(
        "vm/lab/payroll.yaml",
        &manifest.replace(
            "adopt: {vmid: 6019, name: payroll}",
            "adopt: {vmid: 6019, name: web}",
        ),
    );
    lab.clear();
    let stale = lab.run(&["apply"]).await;
    assert_eq!(stale.code, 3, "{}\n{}", stale.stdout, stale.stderr);
    assert!(stale.stdout.contains("metadata.adopt"), "{}", stale.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());

    lab.write("vm/lab/payroll.yaml", &manifest);
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("adopt VM 6019"), "{}", plan.stdout);
    assert!(!plan.stdout.contains("with a restart"), "{}", plan.stdout);
    lab.clear();
    // The apply does what the plan showed: the take-over write, nothing else, no restart.
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        lab.mutations(),
        ["POST /nodes/pve01/qemu/6019/config -> 200"],
        "an adoption writes the ownership tags and nothing else"
    );
    assert!(
        apply.stdout.contains("left for the next run"),
        "{}",
        apply.stdout
    );
    // The write is bound to the config the plan read: a guest renamed or retagged since is
    // not taken over.
    let write = lab
        .sim
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == "/nodes/pve01/qemu/6019/config")
        .expect("the take-over write");
    let names: Vec<&str> = write.params.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["tags", "digest"], "{:?}", write.params);
    let after = lab.config(6019);
    let tags: Vec<&str> = after["tags"].split(';').collect();
    assert!(
        tags.contains(&"proxops") && tags.contains(&"proxops-6019"),
        "{tags:?}"
    );
    assert_eq!(after["memory"], before["memory"]);
    assert!(!after.contains_key("machine"), "{after:?}");
    assert_eq!(lab.sim.vm_status(6019).as_deref(), Some("running"));

    // From now on the guest is managed like any other: the next plan shows the restart.
    let next = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(next.code, 2, "{}\n{}", next.stdout, next.stderr);
    assert!(next.stdout.contains("with a restart"), "{}", next.stdout);
    let managed = lab.run(&["apply"]).await;
    assert!(
        managed.code == 0 || managed.code == 3,
        "{}\n{}",
        managed.stdout,
        managed.stderr
    );
    assert_eq!(lab.config(6019)["machine"], "q35");
    assert_eq!(lab.sim.vm_status(6019).as_deref(), Some("running"));
}

/// A take-over waits while a task holds the guest (a config `lock`): PVE would refuse the
/// write, and the plan says why instead of proposing it.
#[tokio::test(flavor = "multi_thread")]
async fn a_locked_guest_is_not_taken_over_until_the_lock_clears() {
    let first = Lab::start().await;
    payroll(&first, 6019).await;
    let mut state = first.sim.state_json();
    state["vms"]["6019"]["conf"]["lock"] = "backup".into();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    std::fs::write(&file, serde_json::to_vec(&state).unwrap()).unwrap();
    let lab = Lab::with(proxops_sim::SimConfig {
        state_file: Some(file),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write(
        "vm/lab/payroll.yaml",
        &vm("payroll", "pve01", 6019, "").replace(
            "metadata: {name: payroll}",
            "metadata:\n  name: payroll\n  adopt: {vmid: 6019, name: payroll}",
        ),
    );
    lab.clear();
    for command in ["plan", "apply"] {
        let run = lab.run(&[command]).await;
        assert_eq!(run.code, 3, "{command}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("is locked (backup)")
                && run.stdout.contains("not taken over in this run"),
            "{command}: {}",
            run.stdout
        );
    }
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_needs_the_vmid_bound_mark_and_names_the_live_guest() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 110, ""));
    lab.apply().await;
    assert_eq!(lab.config(110)["tags"], "proxops;proxops-110");
    // Tagged by hand, no mark; and a copy of a proxops guest (its mark names another vmid).
    for (vmid, tags) in [(120, "proxops"), (130, "proxops;proxops-110")] {
        let id = vmid.to_string();
        lab.pve(
            Post,
            "/nodes/pve02/qemu",
            &[("vmid", id.as_str()), ("name", "copy"), ("tags", tags)],
        )
        .await;
    }
    lab.remove("vm/lab/web.yaml");
    lab.write("vm/lab/other.yaml", &vm("other", "pve01", 140, ""));
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply.stdout.contains("delete VM 110 `web`"),
        "{}",
        apply.stdout
    );
    assert!(
        apply.stdout.contains("no ownership mark"),
        "{}",
        apply.stdout
    );
    assert!(
        apply.stdout.contains("copy of proxops guest 110"),
        "{}",
        apply.stdout
    );
    assert!(lab.sim.vm_config(110).is_none(), "110 was pruned");
    assert!(lab.sim.vm_config(120).is_some() && lab.sim.vm_config(130).is_some());
    assert_eq!(requests_about(&lab, 120), Vec::<String>::new());
    assert_eq!(requests_about(&lab, 130), Vec::<String>::new());
    // Nothing is shown for the guest just deleted.
    let summary = apply.stdout.split("Apply").last().unwrap_or_default();
    assert!(!summary.contains("VM 110"), "{}", apply.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_raw_pci_device_is_an_anomaly_up_front_and_nothing_stops() {
    let lab = Lab::start().await;
    lab.write("vm/lab/gpu.yaml", &vm("gpu", "pve01", 160, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/gpu.yaml",
        &vm(
            "gpu",
            "pve01",
            160,
            "  hardware:\n    pci-devices: [{slot: 0, device: '0000:01:00.0'}]\n",
        ),
    );
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("Mapping.Use"), "{}", apply.stdout);
    assert_eq!(requests_about(&lab, 160), Vec::<String>::new());
    assert_eq!(lab.sim.vm_status(160).as_deref(), Some("running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_iso_not_placed_on_the_vms_node_blocks_the_vm_before_any_call() {
    let lab = Lab::start().await;
    lab.write(
        "iso/lab/installer.yaml",
        "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata: {name: installer}\nspec:\n  url: http://127.0.0.1:9/installer.iso\n  storage: local\n  filename: installer.iso\n  nodes: [pve01]\n",
    );
    lab.write(
        "vm/lab/web.yaml",
        &vm(
            "web",
            "pve02",
            170,
            "  hardware: {cdrom: {iso: installer}}\n",
        ),
    );
    lab.clear();
    // Validate can only warn: on shared storage one file serves every node.
    let validate = lab.run(&["validate"]).await;
    assert_eq!(validate.code, 0, "{}\n{}", validate.stdout, validate.stderr);
    let text = format!("{}{}", validate.stdout, validate.stderr);
    assert!(text.contains("is placed on pve01 only"), "{text}");
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 1, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains("not available on node pve02"),
        "{}",
        plan.stdout
    );
    // The ISO's own anomaly names the VM that needs it, not the ISO.
    assert!(
        plan.stdout
            .contains("VM `web` (spec.hardware.cdrom.iso) is on node pve02"),
        "{}",
        plan.stdout
    );
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(lab.sim.vm_config(170).is_none());
    assert_eq!(requests_about(&lab, 170), Vec::<String>::new());
    assert!(
        !lab.mutations().iter().any(|m| m.contains("/nodes/pve02/")),
        "{:?}",
        lab.mutations()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_the_cluster_does_not_have_is_refused_before_any_write() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve09", 180, ""));
    lab.clear();
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 1, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains("node pve09 is not a node of this cluster"),
        "{}",
        plan.stdout
    );
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_tell_clean_changes_attention_and_errors_apart() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 190, ""));
    let code = |r: &crate::support::Run| r.code;
    assert_eq!(code(&lab.run(&["plan", "--detailed-exitcode"]).await), 2);
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}", apply.stdout);
    assert!(
        apply
            .stdout
            .contains("Apply complete: 1 created in 1 pass;"),
        "{}",
        apply.stdout
    );
    assert_eq!(code(&lab.run(&["plan", "--detailed-exitcode"]).await), 0);
    // A refused disk shrink: nothing to apply, an anomaly: 3, and apply says so too.
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 190, "").replace("size: 4GiB", "size: 2GiB"),
    );
    let attention = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(attention.code, 3, "{}", attention.stdout);
    assert!(
        attention.stdout.contains("1 anomaly need"),
        "{}",
        attention.stdout
    );
    assert!(
        !attention.stdout.contains("matches the manifests"),
        "{}",
        attention.stdout
    );
    assert_eq!(code(&lab.run(&["apply"]).await), 3);

    let unknown = lab.run(&["apply", "--cluster", "no-such-cluster"]).await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no cluster `no-such-cluster`"),
        "{}",
        unknown.stderr
    );
    let usage = lab.run(&["plan", "--no-such-flag"]).await;
    assert_eq!(usage.code, 1, "{}", usage.stderr);

    let empty = tempfile::tempdir().unwrap();
    let run = crate::support::proxops(&["plan", empty.path().to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("no cluster files"), "{}", run.stderr);
    let run = crate::support::proxops(&["validate", empty.path().to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stdout.contains(" valid ("), "{}", run.stdout);
    assert!(run.stderr.contains("no cluster files"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn mass_prune_needs_allow_prune() {
    let lab = Lab::start().await;
    for i in 0..6 {
        lab.write(
            &format!("vm/lab/w{i}.yaml"),
            &vm(&format!("w{i}"), "pve01", 300 + i, "  state: stopped\n"),
        );
    }
    lab.apply().await;
    for i in 0..6 {
        lab.remove(&format!("vm/lab/w{i}.yaml"));
    }
    lab.write(
        "vm/lab/keep.yaml",
        &vm("keep", "pve01", 399, "  state: stopped\n"),
    );
    lab.clear();
    let held = lab.run(&["apply"]).await;
    assert_eq!(held.code, 3, "{}\n{}", held.stdout, held.stderr);
    assert!(held.stdout.contains("--allow-prune=6"), "{}", held.stdout);
    assert!(!lab.mutations().iter().any(|m| m.starts_with("DELETE")));
    let allowed = lab.run(&["apply", "--allow-prune=6"]).await;
    assert_eq!(allowed.code, 0, "{}\n{}", allowed.stdout, allowed.stderr);
    assert_eq!(
        lab.mutations()
            .iter()
            .filter(|m| m.starts_with("DELETE"))
            .count(),
        6
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_digest_is_planned_again_not_failed() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  tags: [blue]\n"),
    );
    // Once as a failed task (PVE checks the digest inside the worker), once as a 500.
    for (colour, kind) in [
        ("blue", FaultKind::FailTask {
            message: "400 Parameter verification failed.\ndigest: detected modified configuration - file changed by other user? Try again.\nchecksum mismatch (file change by other user?)".into(),
        }),
        ("green", FaultKind::Status {
            code: 500,
            message: "checksum mismatch (file change by other user?)".into(),
        }),
    ] {
        lab.write(
            "vm/lab/app.yaml",
            &vm("app", "pve01", 150, &format!("  tags: [{colour}]\n")),
        );
        lab.sim.set_faults(vec![FaultRule {
            method: "POST".into(),
            path: "/nodes/{node}/qemu/{vmid}/config".into(),
            kind,
            probability: None,
            times: Some(1),
        }]);
        let apply = lab.run(&["apply"]).await;
        assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
        assert!(apply.stdout.contains("planned again"), "{}", apply.stdout);
        let tags = lab.config(150)["tags"].clone();
        assert_eq!(tags, format!("{colour};proxops;proxops-150"));
    }
}

/// A running VM is created with `start=1`, one task. When PVE cannot start it there, the create
/// still lands (PVE only warns): the apply says what PVE warned, its verifying re-plan finds
/// the VM stopped and tries the start once more, the summary never claims it runs, and the next
/// plan proposes exactly the start.
#[tokio::test(flavor = "multi_thread")]
async fn a_create_whose_start_failed_is_reported_stopped_and_planned_as_a_start() {
    let lab = Lab::start().await;
    // The start inside the create and the apply's own start after it both fail.
    lab.sim.set_faults(vec![FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/status/start".into(),
        kind: FaultKind::FailTask {
            message: "start failed: injected".into(),
        },
        probability: None,
        times: Some(2),
    }]);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 191, ""));
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply.stdout.contains(
            "create VM 191 (web) on pve01 and start it: PVE warned: start failed: injected"
        ),
        "{}",
        apply.stdout
    );
    assert!(
        apply
            .stdout
            .contains("Apply incomplete: 1 created, 1 failed in 2 passes;"),
        "{}",
        apply.stdout
    );
    assert!(!apply.stdout.contains("started"), "{}", apply.stdout);
    // The warning of the create's task, and the failure of the start after it.
    assert_eq!(
        apply.stdout.matches("start failed: injected").count(),
        2,
        "{}",
        apply.stdout
    );
    assert_eq!(lab.sim.vm_status(191).as_deref(), Some("stopped"));
    let writes: Vec<(String, String, bool)> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating())
        .map(|r| {
            let start = r.params.iter().any(|(k, v)| k == "start" && v == "1");
            (r.method, r.path, start)
        })
        .collect();
    assert_eq!(
        writes,
        [
            ("POST".to_string(), "/nodes/pve01/qemu".to_string(), true),
            (
                "POST".to_string(),
                "/nodes/pve01/qemu/191/status/start".to_string(),
                false
            ),
        ],
        "one create with start=1, then one start of the verifying pass"
    );

    // The next plan proposes exactly the start, and sends nothing.
    lab.clear();
    let plan = lab.run(&["plan", "--json", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    let doc: serde_json::Value = serde_json::from_str(&plan.stdout).expect("plan JSON");
    let actions: Vec<(String, String)> = doc[0]["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .flat_map(|o| o["actions"].as_array().cloned().unwrap_or_default())
        .map(|a| {
            (
                a["operation"].as_str().unwrap_or_default().to_string(),
                a["summary"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [("power".to_string(), "start VM 191 on pve01".to_string())],
        "{}",
        plan.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());

    // With the fault used up, the apply starts it: one start, nothing else.
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("1 started"), "{}", again.stdout);
    assert_eq!(lab.sim.vm_status(191).as_deref(), Some("running"));
    assert_eq!(
        lab.mutations(),
        ["POST /nodes/pve01/qemu/191/status/start -> 200"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_apply_of_the_same_cluster_is_refused_and_changes_nothing() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(1500),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 192, ""));
    let mut first = lab.spawn(&["apply"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lab.mutations().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first apply sent nothing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let before = lab.mutations().len();
    let second = lab.run(&["apply"]).await;
    assert_eq!(second.code, 1, "{}\n{}", second.stdout, second.stderr);
    assert!(
        second
            .stdout
            .contains("another proxops apply holds the lock"),
        "{}",
        second.stdout
    );
    let first = first.wait().await.expect("first apply");
    assert_eq!(first.code(), Some(0));
    // The second run sent nothing of its own: the first's create and start are all there is.
    let all = lab.mutations();
    assert!(all.len() >= before);
    assert_eq!(
        all.iter()
            .filter(|m| m.starts_with("POST /nodes/pve01/qemu "))
            .count(),
        1,
        "{all:?}"
    );
    // Once the first is done, the lock is free again.
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delete_answered_but_lost_is_caught_by_the_verifying_listing() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/old.yaml",
        &vm("old", "pve01", 193, "  state: stopped\n"),
    );
    lab.write(
        "vm/lab/keep.yaml",
        &vm("keep", "pve01", 194, "  state: stopped\n"),
    );
    lab.apply().await;
    lab.remove("vm/lab/old.yaml");
    // PVE answers the delete but nothing happens (a lost write).
    lab.sim.set_faults(vec![FaultRule {
        method: "DELETE".into(),
        path: "/nodes/{node}/qemu/{vmid}".into(),
        kind: FaultKind::Status {
            code: 200,
            message: "OK".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        apply.stdout.contains("PVE still lists it"),
        "{}",
        apply.stdout
    );
    assert!(lab.sim.vm_config(193).is_some());
    // The next apply deletes it for real.
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(lab.sim.vm_config(193).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_of_a_proxops_guest_is_not_taken_over_by_a_manifest_on_its_vmid() {
    let lab = Lab::start().await;
    // A GUI clone of proxops template 9000: PVE copied its tags, mark included.
    lab.pve(
        Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "6019"),
            ("name", "payroll"),
            ("tags", "proxops;proxops-9000"),
            ("memory", "4096"),
            ("start", "1"),
        ],
    )
    .await;
    let before = lab.config(6019);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 6019, ""));
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(apply.stdout.contains("payroll"), "{}", apply.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.config(6019), before);
}
