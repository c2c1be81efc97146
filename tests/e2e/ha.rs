//! HA, failover and migration through the `proxops` binary: a node fails mid-fleet (its HA
//! guests relocate, the next plan says so and repairs their drift where they are, the guests
//! left on the offline node are reported, exit 3), and a `spec.node` change migrates a VM
//! online, the VM running throughout.

use crate::support::Lab;

/// Three nodes, a shared storage `ceph` for the HA guests, a quick HA manager.
async fn lab() -> Lab {
    let mut storages = proxops_sim::default_storages();
    let mut ceph = proxops_sim::StorageConfig::new("ceph", "rbd", &["images", "rootdir"]);
    ceph.shared = true;
    storages.push(ceph);
    Lab::with(proxops_sim::SimConfig {
        nodes: vec!["pve01".into(), "pve02".into(), "pve03".into()],
        storages,
        ha_crm_delay: std::time::Duration::from_millis(100),
        ha_fence_delay: std::time::Duration::from_millis(300),
        ..proxops_sim::SimConfig::default()
    })
    .await
}

fn vm(name: &str, vmid: u32, node: &str, storage: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: {storage}, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_fails_mid_fleet_and_the_rest_converges() {
    let lab = lab().await;
    for (name, vmid, node, extra) in [
        ("web-1", 200, "pve02", "  ha: {}\n"),
        ("web-2", 201, "pve02", "  ha: {}\n"),
        ("batch", 202, "pve02", ""),
        ("db", 203, "pve01", "  ha: {}\n"),
    ] {
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(name, vmid, node, "ceph", extra),
        );
    }
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);

    lab.sim.set_node_online("pve02", false).unwrap();
    for _ in 0..200 {
        let moved = [200, 201].iter().all(|v| {
            lab.sim.guest_node(*v).is_some_and(|n| n != "pve02")
                && lab.sim.vm_status(*v).as_deref() == Some("running")
        });
        if moved {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let homes: Vec<String> = [200, 201]
        .iter()
        .map(|v| lab.sim.guest_node(*v).expect("recovered"))
        .collect();
    assert!(homes.iter().all(|n| n != "pve02"), "{homes:?}");

    // Drift on a relocated guest.
    lab.write(
        "vm/lab/web-1.yaml",
        &vm(
            "web-1",
            200,
            "pve02",
            "ceph",
            "  ha: {}\n  pve-description: moved\n",
        ),
    );
    let plan = lab.run(&["plan"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    for (name, home) in [("web-1", &homes[0]), ("web-2", &homes[1])] {
        let line =
            format!("i VM {name}: relocated by HA from pve02 to {home}; planned where it is");
        assert!(plan.stdout.contains(&line), "{line}\n{}", plan.stdout);
    }
    assert!(
        plan.stdout.contains("! VM batch:") && plan.stdout.contains("node pve02"),
        "{}",
        plan.stdout
    );
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        lab.mutations(),
        [format!("POST /nodes/{}/qemu/200/config -> 200", homes[0])]
    );
    assert!(
        lab.sim
            .requests()
            .iter()
            .all(|r| !r.path.starts_with("/nodes/pve02/")),
        "nothing was sent to the offline node"
    );
    assert_eq!(lab.config(200)["description"], "moved");
    let again = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(
        again.code, 3,
        "only the offline node's guest is left: {}",
        again.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_spec_node_change_migrates_online() {
    let lab = lab().await;
    lab.write("vm/lab/app.yaml", &vm("app", 210, "pve01", "local-lvm", ""));
    assert_eq!(lab.run(&["apply"]).await.code, 0);
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", 210, "pve03", "local-lvm", "  placement: migrate\n"),
    );
    let plan = lab.run(&["plan"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("migrate"), "{}", plan.stdout);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(
        lab.mutations(),
        ["POST /nodes/pve01/qemu/210/migrate -> 200"],
        "one task, no stop"
    );
    assert_eq!(lab.sim.guest_node(210).as_deref(), Some("pve03"));
    assert_eq!(lab.sim.vm_status(210).as_deref(), Some("running"));
    let again = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
}
