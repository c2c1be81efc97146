//! Disruption budgets through the `proxops` binary: `proxops.yaml` budgets, a stop-required
//! change across a budget of three with the agent gate (one guest down at a time), and a
//! halt when the agents never answer (exit 3, one line naming the budget, the guest and the check; later members
//! untouched).

use crate::support::Lab;

fn vm(name: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {{name: {name}}}\nspec:\n  node: pve01\n  vmid: {vmid}\n  memory: 1GiB\n  cpu: {{type: host, cores: 1}}\n  disks:\n    - {{storage: local-lvm, size: 4GiB}}\n  networks:\n    - {{model: virtio, bridge: vmbr0}}\n  options: {{agent: true}}\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_budget_rolls_one_guest_at_a_time_and_halts_on_a_silent_agent() {
    let lab = Lab::start().await;
    for (i, name) in ["db-1", "db-2", "db-3"].iter().enumerate() {
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(name, 400 + i as u32, ""),
        );
    }
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    lab.write(
        "proxops.yaml",
        "budgets:\n  - name: db\n    select: {members: [db-1, db-2, db-3]}\n    max-unavailable: 1\n    health: {agent: true, timeout: 3s}\n",
    );
    for (i, name) in ["db-1", "db-2", "db-3"].iter().enumerate() {
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(name, 400 + i as u32, "  hardware: {machine: q35}\n"),
        );
    }
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    // One at a time: between a member's shutdown and its start, no other member's shutdown.
    let log: Vec<String> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.contains("/status/"))
        .map(|r| r.path)
        .collect();
    for pair in log.chunks(2) {
        let vmid = |p: &str| p.split('/').nth(4).unwrap_or_default().to_string();
        assert_eq!(
            vmid(&pair[0]),
            vmid(&pair[1]),
            "one guest down at a time: {log:?}"
        );
    }
    assert_eq!(log.len(), 6, "{log:?}");

    // A second change, and now every agent stays silent: the first member halts the budget.
    for (i, name) in ["db-1", "db-2", "db-3"].iter().enumerate() {
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(name, 400 + i as u32, "  hardware: {machine: i440fx}\n"),
        );
    }
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu/{vmid}/agent/ping".into(),
        kind: proxops_sim::FaultKind::Status {
            code: 500,
            message: "QEMU guest agent is not running".into(),
        },
        probability: None,
        times: None,
    }]);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    let all = format!("{}{}", apply.stdout, apply.stderr);
    assert!(
        all.contains("rollout halted: budget db"),
        "the halt is said:\n{all}"
    );
    let shutdowns: Vec<String> = lab
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/status/shutdown"))
        .map(|r| r.path)
        .collect();
    assert_eq!(
        shutdowns,
        ["/nodes/pve01/qemu/400/status/shutdown"],
        "only the first member was disturbed"
    );
    assert_eq!(
        lab.sim.vm_status(400).as_deref(),
        Some("running"),
        "left up"
    );
}
