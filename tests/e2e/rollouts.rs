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

/// Plan shows each budget's rollout: its waves in order with the gate, in text, Markdown and
/// JSON, and the members a budget with no place blocks; `--reboot-pending` in a plan shows
/// the reboots it would run.
#[tokio::test(flavor = "multi_thread")]
async fn plan_shows_each_budgets_waves_and_gate() {
    let lab = Lab::start().await;
    let names = ["app-1", "app-2", "app-3", "app-4", "app-5", "frozen-1"];
    let write = |extra: &str| {
        for (i, name) in names.iter().enumerate() {
            lab.write(
                &format!("vm/lab/{name}.yaml"),
                &vm(name, 410 + i as u32, extra),
            );
        }
    };
    write("");
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    lab.write(
        "proxops.yaml",
        "budgets:\n  - name: app\n    select: {names: [\"app-*\"]}\n    max-unavailable: 2\n    order: name\n    health: {agent: true, uptime: 5s, timeout: 2m}\n  - {name: frozen, select: {members: [frozen-1]}, max-unavailable: 0}\n",
    );
    write("  hardware: {machine: q35}\n");
    lab.clear();

    let text = lab.run(&["plan"]).await;
    assert_eq!(text.code, 2, "{}\n{}", text.stdout, text.stderr);
    let rollout: Vec<&str> = text
        .stdout
        .lines()
        .filter(|l| l.contains("↻") || l.trim_start().starts_with("wave "))
        .collect();
    insta::assert_snapshot!("plan_rollout_text", rollout.join("\n"));

    let markdown = lab.run(&["plan", "--format", "markdown"]).await;
    let section = markdown
        .stdout
        .split("#### Rollout")
        .nth(1)
        .and_then(|s| s.split("####").next())
        .unwrap_or_default();
    insta::assert_snapshot!("plan_rollout_markdown", section.trim());

    let json = lab.run(&["plan", "--json"]).await;
    let plans: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    assert_eq!(
        plans[0]["rollout"],
        serde_json::json!([
            {
                "budget": "app",
                "max_unavailable": "2",
                "places": 2,
                "gate": "running, guest agent answers, up 5s; at most 2m",
                "waves": [["app-1", "app-2"], ["app-3", "app-4"], ["app-5"]]
            },
            {
                "budget": "frozen",
                "max_unavailable": "0",
                "places": 0,
                "gate": "running; at most 10m",
                "waves": [],
                "blocked": ["frozen-1"]
            }
        ]),
        "{}",
        json.stdout
    );
    assert!(lab.mutations().is_empty(), "plan writes nothing");
}

/// `proxops validate` checks budget membership per cluster, each problem with its file and
/// field: a guest in two budgets (also by naming one), a listed member no manifest declares,
/// a `metadata.budget` naming no budget (a malformed budget is `proxops.yaml`'s own error,
/// tested with the settings).
#[tokio::test(flavor = "multi_thread")]
async fn validate_checks_budget_membership() {
    let lab = Lab::start().await;
    let named = |name: &str, vmid: u32, budget: &str| {
        vm(name, vmid, "").replace(
            &format!("metadata: {{name: {name}}}"),
            &format!("metadata: {{name: {name}, budget: {budget}}}"),
        )
    };
    lab.write("vm/lab/db-1.yaml", &vm("db-1", 401, "  tags: [db]\n"));
    lab.write("vm/lab/db-2.yaml", &named("db-2", 402, "web"));
    lab.write("vm/lab/web-1.yaml", &vm("web-1", 403, "  tags: [db]\n"));
    lab.write("vm/lab/odd.yaml", &named("odd", 404, "nope"));
    lab.write(
        "proxops.yaml",
        "budgets:\n  - {name: db, select: {names: [\"db-*\"]}, max-unavailable: 1}\n  - {name: web, select: {tags: [db]}, max-unavailable: 1}\n  - {name: listed, select: {members: [ghost]}, max-unavailable: 1}\n",
    );
    let run = lab.run(&["validate"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = format!("{}{}", run.stdout, run.stderr);
    for (file, field, says) in [
        ("proxops.yaml", "budgets[2].select.members[0]", "`ghost`"),
        (
            "vm/lab/db-1.yaml",
            "metadata.name",
            "two disruption budgets, db and web",
        ),
        (
            "vm/lab/db-2.yaml",
            "metadata.budget",
            "two disruption budgets, db and web",
        ),
        ("vm/lab/odd.yaml", "metadata.budget", "no budget `nope`"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.contains(file) && l.contains(field) && l.contains(says)),
            "{file} {field} {says}:\n{out}"
        );
    }
}

/// The vmid a `/nodes/{node}/qemu/{vmid}/…` path names.
fn vmid_of(path: &str) -> Option<u32> {
    path.split('/').nth(4)?.parse().ok()
}

fn is_stop(r: &proxops_sim::RequestRecord) -> bool {
    r.method == "POST" && (r.path.ends_with("/status/shutdown") || r.path.ends_with("/status/stop"))
}

/// The most of `members` down at once in `log` (a stop to its start), and the stop order.
fn down_at_once(log: &[proxops_sim::RequestRecord], members: &[u32]) -> (usize, Vec<u32>) {
    let (mut down, mut most, mut order) = (Vec::new(), 0, Vec::new());
    for r in log {
        let Some(vmid) = vmid_of(&r.path).filter(|v| members.contains(v)) else {
            continue;
        };
        if is_stop(r) {
            down.push(vmid);
            order.push(vmid);
            most = most.max(down.len());
        } else if r.method == "POST" && r.path.ends_with("/status/start") {
            down.retain(|v| *v != vmid);
        }
    }
    (most, order)
}

/// `proxops apply` (a process) against `proxops sim serve` (another process, agents booting
/// in 800 ms): six VMs in a budget of one, a change that needs a stop. The simulator's own
/// request log shows no two stopped at once, and each next shutdown only after the previous
/// guest's agent answered. Then a percentage budget over ten guests: 30 % is three at once.
#[tokio::test(flavor = "multi_thread")]
async fn against_sim_serve_a_budget_rolls_one_guest_at_a_time_after_its_agent() {
    use crate::served::{Served, finish, private_cache};
    let served = Served::start_with(0, &["--agent-boot", "800"]).await;
    let repo = served.repo("repo");
    let cache = private_cache(served.dir.path());
    let write = |names: &[String], first: u32, extra: &str| {
        std::fs::create_dir_all(repo.join("vm/lab")).unwrap();
        for (i, name) in names.iter().enumerate() {
            std::fs::write(
                repo.join(format!("vm/lab/{name}.yaml")),
                vm(name, first + i as u32, extra),
            )
            .unwrap();
        }
    };
    let db: Vec<String> = (1..=6).map(|i| format!("db-{i}")).collect();
    let app: Vec<String> = (0..10).map(|i| format!("app-{i:02}")).collect();
    write(&db, 700, "");
    write(&app, 800, "");
    let run = finish(served.apply(&repo, &cache)).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    std::fs::write(
        repo.join("proxops.yaml"),
        "budgets:\n  - {name: db, select: {names: [\"db-*\"]}, max-unavailable: 1, health: {agent: true, timeout: 60s}}\n  - {name: app, select: {names: [\"app-*\"]}, max-unavailable: \"30%\"}\n",
    )
    .unwrap();
    let q35 = "  hardware: {machine: q35}\n";
    write(&db, 700, q35);
    write(&app, 800, q35);
    let before = served.requests().await.len();
    let run = finish(served.apply(&repo, &cache)).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let log: Vec<proxops_sim::RequestRecord> =
        served.requests().await.into_iter().skip(before).collect();

    let db_ids: Vec<u32> = (700..706).collect();
    let (most, order) = down_at_once(&log, &db_ids);
    assert_eq!(most, 1, "never two of the budget of one down at once");
    assert_eq!(order, db_ids, "each once, in name order");
    for pair in db_ids.windows(2) {
        let shutdown = log
            .iter()
            .position(|r| is_stop(r) && vmid_of(&r.path) == Some(pair[1]))
            .expect("stopped");
        assert!(
            log[..shutdown].iter().any(|r| r.status == 200
                && r.path == format!("/nodes/pve01/qemu/{}/agent/ping", pair[0])),
            "VM {} stopped before VM {}'s agent answered",
            pair[1],
            pair[0]
        );
    }
    let app_ids: Vec<u32> = (800..810).collect();
    let (most, order) = down_at_once(&log, &app_ids);
    assert!(
        (1..=3).contains(&most),
        "30% of 10: at most 3 at once, saw {most}"
    );
    assert_eq!(order.len(), 10, "{order:?}");
    let state = served.state().await;
    let text = state.to_string();
    assert_eq!(
        text.matches(r#""machine":"q35""#).count(),
        16,
        "every guest changed"
    );
}

/// `apply --reboot-pending` through the binary: a memory change PVE keeps pending (exit 3
/// without the flag, nothing stopped), then rolled out by reboots within the budget, one
/// guest down at a time, nothing left pending (exit 0).
#[tokio::test(flavor = "multi_thread")]
async fn apply_reboot_pending_reboots_a_budget_one_guest_at_a_time() {
    let lab = Lab::start().await;
    let names = ["db-1", "db-2", "db-3"];
    let write = |memory: &str| {
        for (i, name) in names.iter().enumerate() {
            lab.write(
                &format!("vm/lab/{name}.yaml"),
                &vm(name, 430 + i as u32, "").replace("memory: 1GiB", memory),
            );
        }
    };
    write("memory: 1GiB");
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    lab.write(
        "proxops.yaml",
        "budgets:\n  - {name: db, select: {names: [\"db-*\"]}, max-unavailable: 1, health: {agent: true, timeout: 30s}}\n",
    );
    write("memory: 2GiB");
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 3, "{}\n{}", apply.stdout, apply.stderr);
    assert!(
        !lab.sim.requests().iter().any(is_stop),
        "no reboot without the flag"
    );

    let plan = lab.run(&["plan", "--reboot-pending"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(
        plan.stdout
            .contains("reboot VM 430 on pve01 to apply its pending changes"),
        "{}",
        plan.stdout
    );
    lab.clear();
    let apply = lab.run(&["apply", "--reboot-pending"]).await;
    assert_eq!(apply.code, 0, "{}\n{}", apply.stdout, apply.stderr);
    let log = lab.sim.requests();
    let ids = [430, 431, 432];
    let (most, order) = down_at_once(&log, &ids);
    assert_eq!((most, order), (1, ids.to_vec()));
    for vmid in ids {
        assert_eq!(lab.sim.vm_config(vmid).unwrap()["memory"], "2048");
        assert_eq!(lab.sim.vm_status(vmid).as_deref(), Some("running"));
    }
}
