//! plan and apply against the simulator: creation, idempotence, drift, fail-closed input,
//! stop-required changes, templates, ownership and prune, task failures, TLS.

use proxops_pve::Method::{Delete, Post, Put};

use crate::support::{Lab, template, vm};

#[tokio::test(flavor = "multi_thread")]
async fn create_from_empty_then_a_second_apply_changes_nothing() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 101, "  tags: [Web]\n"),
    );
    lab.write(
        "vm/lab/db.yaml",
        &vm("db", "pve02", 201, "  state: stopped\n"),
    );
    let run = lab.apply().await;
    assert!(run.stdout.contains("Apply complete"), "{}", run.stdout);

    let web = lab.config(101);
    assert_eq!(web["memory"], "1024");
    assert_eq!(web["tags"], "proxops;proxops-101;web");
    assert_eq!(web["name"], "web");
    assert!(
        web["scsi0"].starts_with("local-lvm:vm-101-disk-0"),
        "{}",
        web["scsi0"]
    );
    assert_eq!(lab.sim.vm_status(101).as_deref(), Some("running"));
    assert_eq!(lab.sim.vm_status(201).as_deref(), Some("stopped"));

    lab.clear();
    let again = lab.apply().await;
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}", plan.stdout);
    assert!(plan.stdout.contains("No changes"), "{}", plan.stdout);

    // -vv: the time of each stage, from proxops only (no HTTP library chatter), no colour
    // when stderr is not a terminal.
    let verbose = lab.run(&["-vv", "plan"]).await;
    assert_eq!(verbose.code, 0, "{}", verbose.stderr);
    for stage in [
        "loaded 2 manifests in ",
        "validated 2 manifests in ",
        "lab: listed 2 guests in ",
        "lab: the kinds named their reads for 2 objects in ",
        "lab: read 2 answers in ",
        "lab: planned 2 objects in ",
    ] {
        assert!(
            verbose.stderr.contains(stage),
            "{stage}:\n{}",
            verbose.stderr
        );
    }
    assert!(!verbose.stderr.contains("hyper"), "{}", verbose.stderr);
    assert!(!verbose.stderr.contains('\x1b'), "{}", verbose.stderr);
}

/// One drift class: a change made behind proxops's back shows in the plan as exactly the
/// expected keys, and apply puts it back.
async fn check_drift(manifest: &str, behind_the_back: &[(&str, &str)], expected_keys: &[&str]) {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", manifest);
    lab.apply().await;
    let before = lab.config(150);
    lab.pve(Put, "/nodes/pve01/qemu/150/config", behind_the_back)
        .await;

    let plan = lab.run(&["plan", "--json", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    let views: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let actions = views[0]["objects"][0]["actions"].as_array().unwrap();
    let mut keys: Vec<&str> = actions
        .iter()
        .flat_map(|a| a["changes"].as_array().unwrap())
        .map(|c| c["key"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, expected_keys, "{}", plan.stdout);

    lab.apply().await;
    let after = lab.config(150);
    for key in expected_keys {
        assert_eq!(after.get(*key), before.get(*key), "{key} not restored");
    }
    lab.clear();
    lab.apply().await;
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

const APP: &str = "  options: {onboot: true}\n  pve-description: the app\n  tags: [app]\n";

#[tokio::test(flavor = "multi_thread")]
async fn drift_memory() {
    check_drift(
        &vm("app", "pve01", 150, APP),
        &[("memory", "4096")],
        &["memory"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn drift_cores_and_onboot() {
    check_drift(
        &vm("app", "pve01", 150, APP),
        &[("cores", "4"), ("onboot", "0")],
        &["cores", "onboot"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn drift_tags_as_a_set() {
    check_drift(
        &vm("app", "pve01", 150, APP),
        &[("tags", "app;proxops;rogue")],
        &["tags"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn drift_description() {
    check_drift(
        &vm("app", "pve01", 150, APP),
        &[("description", "edited by hand")],
        &["description"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn drift_nic_bridge_keeps_the_assigned_mac() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    let net0 = lab.config(150)["net0"].clone();
    let mac = net0
        .split(',')
        .next()
        .unwrap()
        .split('=')
        .nth(1)
        .unwrap()
        .to_string();
    lab.pve(
        Put,
        "/nodes/pve01/qemu/150/config",
        &[("net0", &format!("virtio={mac},bridge=vmbr9"))],
    )
    .await;
    let plan = lab.run(&["plan"]).await;
    assert!(plan.stdout.contains("net0"), "{}", plan.stdout);
    lab.apply().await;
    assert_eq!(
        lab.config(150)["net0"],
        net0,
        "the PVE-assigned MAC must survive the repair"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unowned_keys_and_pve_normalisation_never_show() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  tags: [B, a]\n"),
    );
    lab.apply().await;
    // Keys the manifest does not own, changed by hand, and PVE's own rewrites of owned ones.
    lab.pve(
        Put,
        "/nodes/pve01/qemu/150/config",
        &[
            ("keyboard", "de"),
            ("tablet", "0"),
            ("tags", "B;proxops-150;proxops;A"),
        ],
    )
    .await;
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 0, "{}", plan.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_grown_disk_is_resized_and_a_shrink_is_an_anomaly() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "").replace("size: 4GiB", "size: 6GiB"),
    );
    lab.apply().await;
    assert!(
        lab.config(150)["scsi0"].contains("size=6G"),
        "{}",
        lab.config(150)["scsi0"]
    );

    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "").replace("size: 4GiB", "size: 2GiB"),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(run.stdout.contains("! VM app"), "{}", run.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

/// Bad input: exit 1, the message names file and field, and PVE sees no mutation at all.
async fn check_fails_closed(files: &[(&str, String)], expected: &str) {
    let lab = Lab::start().await;
    for (path, text) in files {
        lab.write(path, text);
    }
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains(expected),
        "expected `{expected}` in:\n{}",
        run.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

/// A TemplateVM cloned from the template `from` (no disks: a clone inherits them).
fn cloned_template(name: &str, vmid: u32, from: &str) -> String {
    vm(name, "pve01", vmid, &format!("  clone: {from}\n"))
        .replace("kind: VM", "kind: TemplateVM")
        .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", "")
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_closed_rules() {
    let base = |extra: &str| vm("bad", "pve01", 300, extra);
    let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
        (
            vec![(
                "vm/lab/bad.yaml",
                base("").replace("size: 4GiB}", "size: 4GiB, interface: virtio0, ssd: true}"),
            )],
            "vm/lab/bad.yaml: error: spec.disks[0].ssd",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("").replace("bridge: vmbr0}", "bridge: vmbr0, vlan: 0}"),
            )],
            "spec.networks[0].vlan",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("").replace("memory: 1GiB", "memory: 1 gig"),
            )],
            "spec.memory",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("  hardware: {efi-disk: {storage: local-lvm}}\n"),
            )],
            "spec.hardware.efi-disk",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("  hardware: {bios: ovmf, tpm: {storage: local-lvm}}\n"),
            )],
            "spec.hardware.tpm",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("  hardware: {pci-devices: [{slot: 0, device: 'zz:00.0'}]}\n"),
            )],
            "spec.hardware.pci-devices[0].device",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base(
                    "  hardware: {pci-devices: [{slot: 1, device: '0000:01:00.0'}, {slot: 1, device: '0000:02:00.0'}]}\n",
                ),
            )],
            "spec.hardware.pci-devices[1].slot",
        ),
        (
            vec![(
                "templatevm/lab/bad.yaml",
                template("bad", "pve01", 300, "  state: started\n"),
            )],
            "spec.state",
        ),
        (
            vec![
                ("vm/lab/bad.yaml", base("")),
                ("vm/lab/twin.yaml", vm("twin", "pve02", 300, "")),
            ],
            "vm/lab/twin.yaml: error: spec.vmid: vmid 300 is also claimed by vm/lab/bad.yaml (VM `bad`); VMs, templates and containers share one vmid pool per cluster",
        ),
        (
            vec![(
                "vm/lab/bad.yaml",
                base("").replace("kind: VM", "kind: Toaster"),
            )],
            "unknown kind `Toaster`",
        ),
        (
            vec![("vm/lab/bad.yaml", base("  clone: nowhere\n"))],
            "spec.clone",
        ),
        (
            vec![("vm/lab/bad.yaml", base("  colour: blue\n"))],
            "spec.colour",
        ),
        (
            // Each template would wait for the other forever: refused before any call.
            vec![
                ("templatevm/lab/a.yaml", cloned_template("a", 9001, "b")),
                ("templatevm/lab/b.yaml", cloned_template("b", 9002, "a")),
            ],
            "reference cycle TemplateVM/a -> TemplateVM/b -> TemplateVM/a",
        ),
    ];
    for (files, expected) in cases {
        // A good manifest beside the bad one must not be applied either: the cluster stops.
        let mut files = files;
        files.push(("vm/lab/good.yaml", vm("good", "pve02", 301, "")));
        check_fails_closed(&files, expected).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vmid_held_by_a_container_fails_closed() {
    let mut config = proxops_sim::SimConfig::default();
    config.lxc.push(proxops_sim::LxcConfig {
        vmid: 300,
        node: "pve02".into(),
        name: Some("ct".into()),
        running: true,
    });
    let lab = Lab::with(config).await;
    lab.write("vm/lab/bad.yaml", &vm("bad", "pve01", 300, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("vmid 300 is taken by an LXC container"),
        "{}",
        run.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_required_change_on_a_running_vm_stops_changes_and_starts() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "  hardware: {machine: q35}\n"),
    );
    let plan = lab.run(&["plan"]).await;
    assert!(plan.stdout.contains("[stop required]"), "{}", plan.stdout);
    lab.clear();
    lab.apply().await;
    let calls: Vec<String> = lab
        .mutations()
        .into_iter()
        .map(|m| m.split(" -> ").next().unwrap().to_string())
        .collect();
    assert_eq!(
        calls,
        [
            "POST /nodes/pve01/qemu/150/status/shutdown",
            "POST /nodes/pve01/qemu/150/config",
            "POST /nodes/pve01/qemu/150/status/start"
        ]
    );
    assert_eq!(lab.config(150)["machine"], "q35");
    assert_eq!(lab.sim.vm_status(150).as_deref(), Some("running"));
}

#[tokio::test(flavor = "multi_thread")]
async fn non_hotpluggable_change_on_a_running_vm_is_reported_pending_until_reboot() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "").replace("memory: 1GiB", "memory: 2GiB"),
    );
    // Pending until reboot needs a human: exit 3, and the summary says so.
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("memory pending until reboot"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("matches the manifests"),
        "{}",
        run.stdout
    );
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 3, "{}\n{}", again.stdout, again.stderr);
    assert!(
        again.stdout.contains("pending until reboot"),
        "{}",
        again.stdout
    );
    assert_eq!(
        lab.mutations(),
        Vec::<String>::new(),
        "pending must not be rewritten"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn template_is_created_and_marked_in_one_action() {
    let lab = Lab::start().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, ""),
    );
    lab.clear();
    lab.apply().await;
    let calls: Vec<String> = lab
        .mutations()
        .into_iter()
        .map(|m| m.split(" -> ").next().unwrap().to_string())
        .collect();
    assert_eq!(
        calls,
        [
            "POST /nodes/pve01/qemu",
            "POST /nodes/pve01/qemu/9000/template"
        ]
    );
    let config = lab.config(9000);
    assert_eq!(config["template"], "1");
    assert!(
        config["scsi0"].starts_with("local-lvm:base-9000-disk-0"),
        "{}",
        config["scsi0"]
    );
    assert_eq!(lab.sim.vm_status(9000).as_deref(), Some("stopped"));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_existing_vm_is_marked_as_template() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/golden.yaml",
        &vm("golden", "pve01", 9000, "  state: stopped\n"),
    );
    lab.apply().await;
    lab.remove("vm/lab/golden.yaml");
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, ""),
    );
    let plan = lab.run(&["plan"]).await;
    assert!(
        plan.stdout.contains("~ TemplateVM golden"),
        "{}",
        plan.stdout
    );
    lab.apply().await;
    assert_eq!(lab.config(9000)["template"], "1");
}

/// A template's life after its create: its config drift is corrected, a disk added to it is a
/// base volume, a disk grows, and when its manifest goes it is pruned with its volumes.
#[tokio::test(flavor = "multi_thread")]
async fn a_template_is_managed_through_its_life() {
    let lab = Lab::start().await;
    let golden = |extra: &str| template("golden", "pve01", 9000, extra);
    lab.write("templatevm/lab/golden.yaml", &golden(""));
    lab.apply().await;

    // Drift made behind proxops's back is corrected on the template.
    lab.pve(Post, "/nodes/pve01/qemu/9000/config", &[("memory", "4096")])
        .await;
    let plan = lab.run(&["plan"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout.contains("~ TemplateVM golden"),
        "{}",
        plan.stdout
    );
    lab.apply().await;
    assert_eq!(lab.config(9000)["memory"], "1024");

    // A second disk, and the first one grown.
    lab.write(
        "templatevm/lab/golden.yaml",
        &golden("").replace(
            "    - {storage: local-lvm, size: 4GiB}\n",
            "    - {storage: local-lvm, size: 6GiB}\n    - {storage: local-lvm, size: 2GiB}\n",
        ),
    );
    lab.apply().await;
    let config = lab.config(9000);
    assert_eq!(config["template"], "1");
    assert!(
        config["scsi0"].starts_with("local-lvm:base-9000-disk-0")
            && config["scsi0"].ends_with("size=6G"),
        "{config:?}"
    );
    assert!(
        config["scsi1"].starts_with("local-lvm:base-9000-disk-"),
        "a disk added to a template is a base volume: {config:?}"
    );
    let again = lab.run(&["plan"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);

    // Its manifest goes: the template and its volumes are removed.
    lab.remove("templatevm/lab/golden.yaml");
    lab.write("vm/lab/other.yaml", &vm("other", "pve02", 9100, ""));
    lab.apply().await;
    assert!(lab.sim.vm_config(9000).is_none());
    let content = lab
        .client
        .get("/nodes/pve01/storage/local-lvm/content", &[])
        .await
        .unwrap();
    assert!(
        !content.to_string().contains("-9000-"),
        "the template's volumes are freed: {content}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_manifest_matching_a_live_template_is_an_anomaly() {
    let lab = Lab::start().await;
    lab.write(
        "templatevm/lab/golden.yaml",
        &template("golden", "pve01", 9000, ""),
    );
    lab.apply().await;
    lab.remove("templatevm/lab/golden.yaml");
    lab.write("vm/lab/golden.yaml", &vm("golden", "pve01", 9000, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(run.stdout.contains("! VM golden"), "{}", run.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new());
    assert_eq!(lab.config(9000)["template"], "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn prune_deletes_tagged_vms_only_and_protection_blocks_it() {
    let lab = Lab::start().await;
    lab.write("vm/lab/old.yaml", &vm("old", "pve01", 160, ""));
    lab.write(
        "vm/lab/guarded.yaml",
        &vm("guarded", "pve01", 161, "  options: {protection: true}\n"),
    );
    lab.apply().await;
    // A VM proxops did not create (no ownership tag).
    lab.pve(
        Post,
        "/nodes/pve02/qemu",
        &[("vmid", "170"), ("name", "handmade"), ("memory", "512")],
    )
    .await;

    lab.remove("vm/lab/old.yaml");
    lab.remove("vm/lab/guarded.yaml");
    // One manifest stays: a cluster with none prunes nothing without --allow-prune.
    lab.write(
        "vm/lab/keep.yaml",
        &vm("keep", "pve01", 162, "  state: stopped\n"),
    );
    let plan = lab.run(&["plan"]).await;
    assert!(
        plan.stdout.contains("- VM old") && plan.stdout.contains("[destructive]"),
        "{}",
        plan.stdout
    );
    assert!(plan.stdout.contains("! VM guarded"), "{}", plan.stdout);
    assert!(!plan.stdout.contains("handmade"), "{}", plan.stdout);
    // The protected guest stays an anomaly: exit 3.
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(lab.sim.vm_config(160).is_none(), "old must be pruned");
    assert!(
        lab.sim.vm_config(161).is_some(),
        "protection must block the prune"
    );
    assert!(
        lab.sim.vm_config(170).is_some(),
        "an untagged VM is never touched"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_task_is_reported_with_pves_message_and_the_next_apply_converges() {
    let lab = Lab::start().await;
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu".into(),
        kind: proxops_sim::FaultKind::FailTask {
            message: "storage 'local-lvm' is full".into(),
        },
        probability: None,
        times: Some(1),
    }]);
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.write("vm/lab/other.yaml", &vm("other", "pve02", 151, ""));
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("storage 'local-lvm' is full"),
        "{}",
        run.stdout
    );
    // The independent VM went ahead.
    let created = [150, 151]
        .iter()
        .filter(|id| lab.sim.vm_config(**id).is_some())
        .count();
    assert_eq!(created, 1, "exactly one VM was created");
    lab.apply().await;
    assert!(lab.sim.vm_config(150).is_some() && lab.sim.vm_config(151).is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_wrong_fingerprint_is_refused_right_one_accepted() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    let cluster = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
    let right = lab.sim.fingerprint().unwrap();
    let wrong_pin = format!("{}AB", "AB:".repeat(31));
    lab.write("clusters/lab.yaml", &cluster.replace(&right, &wrong_pin));
    let wrong = lab.run(&["plan"]).await;
    assert_eq!(wrong.code, 1);
    assert!(
        wrong.stdout.contains("not the pinned one"),
        "{}",
        wrong.stdout
    );
    lab.write("clusters/lab.yaml", &cluster);
    let ok = lab.run(&["plan"]).await;
    assert_eq!(ok.code, 2, "{}", ok.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_of_an_unknown_vm_is_never_attempted() {
    // A manifest that is removed for a VM that is already gone plans nothing.
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    lab.pve(Post, "/nodes/pve01/qemu/150/status/stop", &[])
        .await;
    lab.pve(Delete, "/nodes/pve01/qemu/150", &[]).await;
    lab.remove("vm/lab/app.yaml");
    lab.clear();
    lab.apply().await;
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_cluster_stops_alone_and_other_clusters_go_on() {
    let lab = Lab::start().await;
    // A second cluster file for the same simulator (as if it were another cluster).
    lab.second_cluster("other");
    lab.write(
        "vm/lab/bad.yaml",
        &vm("bad", "pve01", 300, "").replace("memory: 1GiB", "memory: lots"),
    );
    lab.write("vm/lab/fine.yaml", &vm("fine", "pve01", 301, ""));
    lab.write("vm/other/ok.yaml", &vm("ok", "pve02", 302, ""));
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("Cluster lab: not planned"),
        "{}",
        run.stdout
    );
    assert!(
        lab.sim.vm_config(302).is_some(),
        "the other cluster converged"
    );
    assert!(
        lab.sim.vm_config(301).is_none(),
        "nothing of the invalid cluster was applied"
    );
}

/// Clusters are independent, so `plan` plans them at once: with every answer delayed, the
/// second cluster's listing is sent before the first cluster's config reads, and the output
/// still shows the clusters one after the other, in order.
#[tokio::test(flavor = "multi_thread")]
async fn clusters_are_planned_at_once_and_shown_in_order() {
    let lab = Lab::start().await;
    // Two clusters on one simulator (the request log is shared), each naming the live VM 150.
    lab.pve(
        Post,
        "/nodes/pve01/qemu",
        &[
            ("vmid", "150"),
            ("name", "app"),
            ("tags", "proxops;proxops-150"),
        ],
    )
    .await;
    lab.second_cluster("lab2");
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.write("vm/lab2/app.yaml", &vm("app", "pve01", 150, ""));
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "*".into(),
        path: "*".into(),
        kind: proxops_sim::FaultKind::Latency { ms: 300 },
        probability: None,
        times: None,
    }]);
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let reads: Vec<String> = lab
        .sim
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .filter(|p| p == "/cluster/resources" || p.starts_with("/nodes/pve01/qemu/150/"))
        .collect();
    assert_eq!(reads.len(), 4, "{reads:?}");
    assert_eq!(
        reads[..2],
        ["/cluster/resources", "/cluster/resources"],
        "the second cluster waited for the first: {reads:?}"
    );
    let first = run.stdout.find("Cluster lab (").expect("lab shown");
    let second = run.stdout.find("Cluster lab2 (").expect("lab2 shown");
    assert!(first < second, "{}", run.stdout);
}

/// A second cluster for `lab`'s repository: a simulator of its own (same config), named
/// `name`, its token in the environment variable [`SECOND_TOKEN`].
async fn second_cluster(
    lab: &Lab,
    name: &str,
    config: proxops_sim::SimConfig,
) -> (proxops_sim::Simulator, String) {
    let sim = proxops_sim::start(config)
        .await
        .expect("start a second simulator");
    let (id, secret) = sim.token().split_once('=').unwrap();
    let fingerprint = sim.fingerprint().expect("TLS on");
    lab.write(
        &format!("clusters/{name}.yaml"),
        &format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\nspec:\n  endpoint: {}\n  token: {{id: '{id}', secret: {{env: {SECOND_TOKEN}}}}}\n  tls: {{fingerprint: '{fingerprint}'}}\n",
            sim.base_url()
        ),
    );
    let secret = secret.to_string();
    (sim, secret)
}

const SECOND_TOKEN: &str = "PROXOPS_TEST_TOKEN_SECOND";

fn latency(ms: u64) -> Vec<proxops_sim::FaultRule> {
    vec![proxops_sim::FaultRule {
        method: "*".into(),
        path: "*".into(),
        kind: proxops_sim::FaultKind::Latency { ms },
        probability: None,
        times: None,
    }]
}

/// When the requests a simulator received since the last clear arrived: (first, last).
fn span(sim: &proxops_sim::Simulator) -> (u64, u64) {
    let at: Vec<u64> = sim.requests().iter().map(|r| r.received_us).collect();
    (
        *at.iter().min().expect("requests"),
        *at.iter().max().expect("requests"),
    )
}

/// Clusters are independent, so `apply` works on several at once (`clusters-at-once`, default
/// 8): with every answer of two simulators delayed, the second cluster's requests start before
/// the first cluster's end. With `clusters-at-once: 1` (proxops.yaml) they do not. Either way
/// each cluster's lines are shown together, in name order.
#[tokio::test(flavor = "multi_thread")]
async fn clusters_are_applied_at_once_within_the_bound_and_shown_in_order() {
    let lab = Lab::start().await;
    let (other, secret) = second_cluster(&lab, "lab2", proxops_sim::SimConfig::default()).await;
    let env = [(SECOND_TOKEN, secret.as_str())];
    for sim in [&lab.sim, &other] {
        sim.set_faults(latency(150));
    }
    let show_in_order = |stdout: &str| {
        let first = stdout.find("Cluster lab (").expect("lab shown");
        let first_done = stdout.find("Apply complete").expect("lab applied");
        let second = stdout.find("Cluster lab2 (").expect("lab2 shown");
        assert!(first < first_done && first_done < second, "{stdout}");
        assert_eq!(stdout.matches("Apply complete").count(), 2, "{stdout}");
    };

    // One at a time (proxops.yaml): the second cluster starts after the first is done.
    lab.write("proxops.yaml", "clusters-at-once: 1\n");
    lab.write(
        "vm/lab/a.yaml",
        &vm("a", "pve01", 150, "  state: stopped\n"),
    );
    lab.write(
        "vm/lab2/b.yaml",
        &vm("b", "pve01", 160, "  state: stopped\n"),
    );
    lab.clear();
    other.clear_requests();
    let run = lab.run_env(&["apply"], &env).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    show_in_order(&run.stdout);
    let (_, lab_last) = span(&lab.sim);
    let (other_first, _) = span(&other);
    assert!(
        lab_last < other_first,
        "with clusters-at-once 1, lab2 must wait for lab: lab's last request at {lab_last}, lab2's first at {other_first}"
    );

    // At once (the flag overrides the file): the two clusters' requests overlap.
    lab.write(
        "vm/lab/c.yaml",
        &vm("c", "pve01", 151, "  state: stopped\n"),
    );
    lab.write(
        "vm/lab2/d.yaml",
        &vm("d", "pve01", 161, "  state: stopped\n"),
    );
    lab.clear();
    other.clear_requests();
    let run = lab
        .run_env(&["apply", "--clusters-at-once", "2"], &env)
        .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    show_in_order(&run.stdout);
    let (lab_first, lab_last) = span(&lab.sim);
    let (other_first, other_last) = span(&other);
    assert!(
        other_first < lab_last && lab_first < other_last,
        "the clusters were applied one after the other: lab {lab_first}..{lab_last}, lab2 {other_first}..{other_last}"
    );
    assert!(lab.sim.vm_config(151).is_some() && other.vm_config(161).is_some());
}

/// SIGINT stops every cluster applied at once from starting new work: each finishes the
/// clone in flight and starts no second pass (configure, start), and the run exits 130.
#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_stops_new_work_in_every_cluster_applied_at_once() {
    let config = || proxops_sim::SimConfig {
        task_duration: std::time::Duration::from_millis(4000),
        ..proxops_sim::SimConfig::default()
    };
    let lab = Lab::with(config()).await;
    let (other, secret) = second_cluster(&lab, "lab2", config()).await;
    let env = [(SECOND_TOKEN, secret.as_str())];
    for cluster in ["lab", "lab2"] {
        lab.write(
            &format!("templatevm/{cluster}/golden.yaml"),
            &template("golden", "pve01", 9000, ""),
        );
    }
    let setup = lab.run_env(&["apply"], &env).await;
    assert_eq!(setup.code, 0, "{}\n{}", setup.stdout, setup.stderr);
    for cluster in ["lab", "lab2"] {
        lab.write(
            &format!("vm/{cluster}/app.yaml"),
            &vm("app", "pve01", 170, "  clone: golden\n")
                .replace("  disks:\n    - {storage: local-lvm, size: 4GiB}\n", ""),
        );
    }
    lab.clear();
    other.clear_requests();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .arg("--cache-dir")
        .arg(crate::support::shared_cache())
        .arg("apply")
        .arg(lab.repo.path())
        .env(crate::support::TOKEN_VAR, lab.token_secret())
        .env(SECOND_TOKEN, &secret)
        .env_remove("PROXOPS_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run proxops");
    let cloning = |sim: &proxops_sim::Simulator| {
        sim.requests()
            .iter()
            .any(|r| r.method == "POST" && r.path.ends_with("/clone"))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !(cloning(&lab.sim) && cloning(&other)) {
        assert!(
            std::time::Instant::now() < deadline,
            "both clones were not sent at once: {:?} / {:?}",
            lab.mutations(),
            other.requests()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pid = child.id().expect("running").to_string();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .expect("kill");
    assert!(kill.success());
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("proxops exits")
        .expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(130), "{stdout}");
    for sim in [&lab.sim, &other] {
        let writes: Vec<String> = sim
            .requests()
            .into_iter()
            .filter(|r| r.is_mutating())
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert_eq!(
            writes,
            ["POST /nodes/pve01/qemu/9000/clone"],
            "the clone finished, nothing new started:\n{stdout}"
        );
    }
    assert_eq!(
        stdout
            .matches("interrupted; no further action was started")
            .count(),
        2,
        "{stdout}"
    );
}
