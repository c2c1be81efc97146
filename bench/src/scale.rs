//! The plan at scale (component and native, the memo, the `proxops plan` binary) and the
//! scale headroom measured against it.

use super::*;

/// Sections 1 + 2 + 3: plan at scale, WASM vs native.
pub(super) async fn plan_at_scale(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    n: usize,
    economy: &mut Vec<(usize, BTreeMap<String, u64>)>,
    table: &mut Table,
) -> ScaleFigures {
    // 1 + 2 + 3. Plan at scale, WASM vs native.
    eprintln!("[4/5] plan at scale: {n} VMs over {PLAN_NODES} nodes (x{PLAN_RUNS} per backend)");
    {
        let dir = tmp.path().join("scale");
        let t = Instant::now();
        let (sim, repo) = converged(registry, &dir, n, &fixture::nodes(PLAN_NODES)).await;
        eprintln!("      fixture ready in {:.1} s", t.elapsed().as_secs_f64());
        let endpoint = Endpoint::of(&sim);
        // What a `sim:` endpoint adds to a plan and a real cluster never costs: the embedded
        // simulator loading this state (from a copy: a simulator writes its file back).
        let copy = dir.join("state-copy.json");
        std::fs::copy(dir.join("state.json"), &copy).expect("copy the state file");
        let t = Instant::now();
        let again = proxops_sim::start(fixture::sim_config(
            &fixture::nodes(PLAN_NODES),
            Duration::ZERO,
            Vec::new(),
            Some(copy),
        ))
        .await
        .expect("start a simulator on the state");
        let sim_load = t.elapsed();
        drop(again);
        table.add(
            "1 plan at scale",
            format!("embedded simulator (`sim:` endpoint): start with the {n}-VM state"),
            format!("{:.0} ms", ms(sim_load)),
            "not part of a plan against a real cluster",
            None,
        );
        let mut wasm = Vec::new();
        let mut native = Vec::new();
        let mut memo = Vec::new();
        let mut floor = Vec::new();
        let with_memo = |cmd: &mut std::process::Command| {
            cmd.arg("--memo");
        };
        // The first run with the memo learns every manifest (its cycle is the one without a
        // memo, plus writing it); the measured ones find them all unchanged.
        let (learning, _) = spawn_child_with("plan", &endpoint, &repo, cache, false, with_memo);
        for run in 0..PLAN_RUNS {
            let before = sim.counters();
            let (w, _) = spawn_child("plan", &endpoint, &repo, cache, false);
            if run == 0 {
                economy.push((n, counter_delta(&before, &sim.counters())));
            }
            let (nat, _) = spawn_child("plan", &endpoint, &repo, cache, true);
            let (m, _) = spawn_child_with("plan", &endpoint, &repo, cache, false, with_memo);
            // The I/O floor, between the plans of the same round.
            let (f, _) = spawn_child("floor", &endpoint, &repo, cache, false);
            assert_eq!(
                f["requests"].as_u64(),
                Some(1 + n as u64),
                "the floor makes the no-op plan's requests: {f}"
            );
            floor.push(f);
            for r in [&w, &nat, &m] {
                assert_eq!(
                    r["noop"].as_bool(),
                    Some(true),
                    "the plan at scale is a no-op: {r}"
                );
                assert_eq!(r["objects"].as_u64(), Some(n as u64));
            }
            eprintln!(
                "      run {run}: wasm {w}\n             native {nat}\n             memo {m}"
            );
            wasm.push(w);
            native.push(nat);
            memo.push(m);
        }
        let med = |runs: &[Value], key: &str| {
            median(
                runs.iter()
                    .map(|r| r[key].as_f64().unwrap_or(0.0))
                    .collect(),
            )
        };
        let total = med(&wasm, "total_ms");
        let rss = mib(med(&wasm, "rss") as u64);
        table.add(
            "1 plan at scale",
            format!("{n} VMs / {PLAN_NODES} nodes: full plan cycle (load+validate+observe+plan)"),
            format!("{total:.0} ms"),
            "< 1000 ms",
            Some(total < 1000.0),
        );
        table.add(
            "1 plan at scale",
            "  of which load + validate",
            format!("{:.0} ms", med(&wasm, "validate_ms")),
            "",
            None,
        );
        table.add(
            "1 plan at scale",
            "  of which observe + plan (1 + reads requests)",
            format!("{:.0} ms", med(&wasm, "plan_ms")),
            "",
            None,
        );
        let (cpu, guest) = (med(&wasm, "cpu_ms"), med(&wasm, "guest_ms"));
        table.add(
            "2 wasm overhead",
            "compute: the cycle's CPU spent inside the kinds' components (validate, observe, plan calls)",
            format!("{:.0}% ({guest:.0} of {cpu:.0} ms CPU)", 100.0 * guest / cpu.max(1.0)),
            "",
            None,
        );
        let io_floor = med(&floor, "floor_ms");
        table.add(
            "1 plan at scale",
            format!("I/O floor: the no-op plan's {} requests fetched bare, same concurrency ({READ_CONCURRENCY})", n + 1),
            format!("{io_floor:.0} ms"),
            "measured in this run",
            None,
        );
        let over_floor = total / io_floor;
        table.add(
            "1 plan at scale",
            "  ratio full cycle / I/O floor",
            format!("{over_floor:.2}x"),
            "<= 1.5x",
            Some(over_floor <= 1.5),
        );
        table.add(
            "1 plan at scale",
            "  ratio observe + plan / I/O floor",
            format!("{:.2}x", med(&wasm, "plan_ms") / io_floor),
            "",
            None,
        );
        let warm = med(&memo, "total_ms");
        table.add(
            "1 plan at scale",
            "  ratio full cycle with the memo (the CLI's default from its second run) / I/O floor",
            format!("{:.2}x", warm / io_floor),
            "",
            None,
        );
        table.add(
            "1 plan at scale",
            "the same cycle again, manifests unchanged: memo of validated manifests",
            format!("{warm:.0} ms"),
            "<= 500 ms",
            Some(warm <= 500.0),
        );
        table.add(
            "1 plan at scale",
            "  of which load + validate / observe + plan",
            format!(
                "{:.0} ms / {:.0} ms",
                med(&memo, "validate_ms"),
                med(&memo, "plan_ms")
            ),
            "",
            None,
        );
        table.add(
            "1 plan at scale",
            "  the run that learns the memo (one run: no memo yet, then written)",
            format!("{:.0} ms", learning["total_ms"].as_f64().unwrap_or(0.0)),
            "",
            None,
        );
        table.add(
            "1 plan at scale",
            "  ratio without / with the memo",
            format!("{:.2}x", total / warm),
            "",
            None,
        );
        table.add(
            "1 plan at scale",
            "peak RSS (VmHWM of the planning process)",
            format!("{rss:.0} MiB"),
            "< 200 MiB",
            Some(rss < 200.0),
        );
        let ntotal = med(&native, "total_ms");
        let ratio = total / ntotal;
        table.add(
            "2 wasm overhead",
            "same plan, VM kind native: full cycle",
            format!("{ntotal:.0} ms"),
            "",
            None,
        );
        table.add(
            "2 wasm overhead",
            "  native: load + validate / observe + plan",
            format!(
                "{:.0} ms / {:.0} ms",
                med(&native, "validate_ms"),
                med(&native, "plan_ms")
            ),
            "",
            None,
        );
        table.add(
            "2 wasm overhead",
            "  native peak RSS",
            format!("{:.0} MiB", mib(med(&native, "rss") as u64)),
            "",
            None,
        );
        table.add(
            "2 wasm overhead",
            "ratio component / native (full cycle)",
            format!("{ratio:.2}x"),
            "<= 1.5x",
            Some(ratio <= 1.5),
        );

        // The same plan through the real CLI, when it is built beside the bench: its first
        // run finds the bench's memo (another build's: not used) and writes its own, which
        // the second run reads.
        match cli_plan(&endpoint, &repo, cache).zip(cli_plan(&endpoint, &repo, cache)) {
            Some((first, again)) => {
                table.add(
                    "1 plan at scale",
                    "`proxops plan` binary, same repo, simulator in another process: process start to exit (warm component cache, no memo)",
                    format!("{:.0} ms", ms(first)),
                    format!("cycle in the bench {total:.0} ms"),
                    None,
                );
                table.add(
                    "1 plan at scale",
                    "  `proxops plan` again (its memo)",
                    format!("{:.0} ms", ms(again)),
                    format!("<= 1000 ms; cycle with the memo {warm:.0} ms"),
                    Some(ms(again) <= 1000.0),
                );
            }
            None => eprintln!(
                "      (no `proxops` binary beside the bench: `cargo build --release -p proxops` adds a row)"
            ),
        }
        ScaleFigures {
            vms: n,
            total_ms: total,
            rss: med(&wasm, "rss"),
        }
    }
}

/// The plan at scale's medians, for the headroom scenario to compare against.
pub(super) struct ScaleFigures {
    vms: usize,
    total_ms: f64,
    rss: f64,
}

/// Section 8, scale headroom: the no-op plan of [`HEADROOM_VMS`] VMs over
/// [`HEADROOM_NODES`] nodes, time and peak RSS per VM against the plan at scale.
pub(super) async fn headroom(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    scale: Option<ScaleFigures>,
    table: &mut Table,
) {
    eprintln!("[8] scale headroom: {HEADROOM_VMS} VMs over {HEADROOM_NODES} nodes");
    let dir = tmp.path().join("headroom");
    let t = Instant::now();
    let (sim, repo) = converged(
        registry,
        &dir,
        HEADROOM_VMS,
        &fixture::nodes(HEADROOM_NODES),
    )
    .await;
    eprintln!("      fixture ready in {:.1} s", t.elapsed().as_secs_f64());
    let endpoint = Endpoint::of(&sim);
    let (r, _) = spawn_child("plan", &endpoint, &repo, cache, false);
    assert_eq!(
        r["noop"].as_bool(),
        Some(true),
        "the headroom plan is a no-op: {r}"
    );
    assert_eq!(r["objects"].as_u64(), Some(HEADROOM_VMS as u64));
    let total = r["total_ms"].as_f64().unwrap_or(0.0);
    let rss = r["rss"].as_f64().unwrap_or(0.0);
    // The I/O floor at this size, right after the plan.
    let (f, _) = spawn_child("floor", &endpoint, &repo, cache, false);
    assert_eq!(
        f["requests"].as_u64(),
        Some(1 + HEADROOM_VMS as u64),
        "the floor makes the no-op plan's requests: {f}"
    );
    let io_floor = f["floor_ms"].as_f64().unwrap_or(0.0);
    table.add(
        "8 headroom",
        format!(
            "{HEADROOM_VMS} VMs: full cycle / I/O floor (the same {} requests fetched bare, {READ_CONCURRENCY} at a time: {io_floor:.0} ms); observe + plan / floor",
            HEADROOM_VMS + 1
        ),
        format!(
            "{:.2}x; {:.2}x",
            total / io_floor,
            r["plan_ms"].as_f64().unwrap_or(0.0) / io_floor
        ),
        "<= 1.5x",
        Some(total / io_floor <= 1.5),
    );
    let per_vm_us = total * 1000.0 / HEADROOM_VMS as f64;
    let rss_per_vm = rss / HEADROOM_VMS as f64;
    let (time_ratio, rss_ratio) = match &scale {
        Some(s) => (
            format!(
                "{:.2}x the {}-VM plan",
                per_vm_us / (s.total_ms * 1000.0 / s.vms as f64),
                s.vms
            ),
            format!(
                "{:.2}x the {}-VM plan",
                rss_per_vm / (s.rss / s.vms as f64),
                s.vms
            ),
        ),
        None => ("(run `scale` too for the ratio)".into(), String::new()),
    };
    table.add(
        "8 headroom",
        format!("{HEADROOM_VMS} VMs / {HEADROOM_NODES} nodes: full plan cycle, per VM"),
        format!("{total:.0} ms, {per_vm_us:.1} us/VM"),
        format!("{time_ratio} (<= 1.3x)"),
        None,
    );
    table.add(
        "8 headroom",
        "  peak RSS, per VM",
        format!(
            "{:.0} MiB, {:.1} KiB/VM",
            mib(rss as u64),
            rss_per_vm / 1024.0
        ),
        format!("{rss_ratio} (<= 1.3x)"),
        None,
    );
}

/// Section 9: the no-op plan against PVE's API worker pool, modelled by the simulator (3
/// workers per node, as pveproxy and pvedaemon run, and a fixed handling time per request):
/// observe + plan as a ratio to the bound the pool implies (the listing, then each node's
/// reads, its workers at a time), at the default read concurrency and at one that fills every
/// node's workers.
pub(super) async fn worker_pool(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    table: &mut Table,
) {
    const VMS: usize = 2_000;
    const NODES: usize = 10;
    const WORKERS: usize = 3;
    const HANDLING: Duration = Duration::from_millis(2);
    eprintln!("[9] worker pool: {VMS} VMs over {NODES} nodes, {WORKERS} API workers per node");
    let dir = tmp.path().join("pool");
    let nodes = fixture::nodes(NODES);
    let state = fixture::converged_state(registry, &dir, VMS, &nodes, "started").await;
    let sim = proxops_sim::start(proxops_sim::SimConfig {
        api_workers: Some(WORKERS),
        api_handling: HANDLING,
        ..fixture::sim_config(&nodes, Duration::ZERO, Vec::new(), Some(state))
    })
    .await
    .expect("start the simulator with a worker pool");
    let repo = dir.join("repo");
    let endpoint = Endpoint::of(&sim);
    fixture::write_repo(&repo, VMS, &nodes, "started", &endpoint);
    let rounds = 1 + VMS.div_ceil(NODES).div_ceil(WORKERS);
    let bound = ms(HANDLING) * rounds as f64;
    // The bare client's time for the same requests, 16 at a time.
    let (f, _) = spawn_child_with("floor", &endpoint, &repo, cache, false, |_| {});
    table.add(
        "9 worker pool",
        format!("  the I/O floor against the pool (bare client, {READ_CONCURRENCY} at a time) / the pool's bound"),
        format!(
            "{:.0} ms, {:.2}x",
            f["floor_ms"].as_f64().unwrap_or(0.0),
            f["floor_ms"].as_f64().unwrap_or(0.0) / bound
        ),
        "",
        None,
    );
    // 0: the engine's default when `read-concurrency` is not set (3 per node).
    for reads_at_once in [READ_CONCURRENCY, WORKERS * NODES, 0] {
        let mut runs = Vec::new();
        let mut opened = Vec::new();
        for _ in 0..PLAN_RUNS {
            let before = sim.connections().accepted;
            let (r, _) = spawn_child_with("plan", &endpoint, &repo, cache, false, |cmd| {
                cmd.arg("--concurrency").arg(reads_at_once.to_string());
            });
            assert_eq!(r["noop"].as_bool(), Some(true), "a no-op plan: {r}");
            runs.push(r["plan_ms"].as_f64().unwrap_or(0.0));
            opened.push(sim.connections().accepted - before);
        }
        let plan = median(runs);
        let in_flight = if reads_at_once == 0 {
            WORKERS * NODES
        } else {
            reads_at_once
        };
        // The bare client at the same concurrency: what the pool allows in practice (its
        // handling time is a tokio sleep, which ends on the next millisecond tick or later).
        let (f, _) = spawn_child_with("floor", &endpoint, &repo, cache, false, |cmd| {
            cmd.arg("--concurrency").arg(in_flight.to_string());
        });
        let floor = f["floor_ms"].as_f64().unwrap_or(0.0);
        let ratio = plan / bound;
        table.add(
            "9 worker pool",
            format!(
                "{VMS} VMs / {NODES} nodes, {WORKERS} workers per node, {} ms per request: observe + plan at {} / the pool's bound ({bound:.0} ms)",
                ms(HANDLING),
                if reads_at_once == 0 {
                    "the default read concurrency (3 per node)".to_string()
                } else {
                    format!("{reads_at_once} reads at once")
                }
            ),
            format!("{plan:.0} ms, {ratio:.2}x"),
            "",
            None,
        );
        table.add(
            "9 worker pool",
            format!("  observe + plan / the bare client's floor against the pool, {in_flight} at once ({floor:.0} ms)"),
            format!("{:.2}x", plan / floor),
            "<= 1.3x",
            Some(plan / floor <= 1.3),
        );
        let most = opened.iter().copied().max().unwrap_or(0);
        table.add(
            "9 worker pool",
            format!("  connections each run opened (a fresh process; {in_flight} reads in flight at most)"),
            format!("{opened:?}"),
            format!("<= {} (2x in flight)", 2 * in_flight),
            Some(most <= 2 * in_flight),
        );
    }
    assert!(sim.api_most_at_once("pve01") <= WORKERS);
    drop(sim);

    // The same cluster when the entry node also routes what it proxies: each request for
    // another node holds an entry worker for PROXY first (pveproxy's routing and relay), so
    // the entry node carries 1 + VMS requests and every other node only its own reads.
    const PROXY: Duration = Duration::from_millis(1);
    let state = dir.join("state.json");
    let sim = proxops_sim::start(proxops_sim::SimConfig {
        api_workers: Some(WORKERS),
        api_handling: HANDLING,
        api_proxy: Some(PROXY),
        ..fixture::sim_config(&nodes, Duration::ZERO, Vec::new(), Some(state))
    })
    .await
    .expect("start the simulator with a worker pool and proxy routing");
    let endpoint = Endpoint::of(&sim);
    fixture::write_repo(&repo, VMS, &nodes, "started", &endpoint);
    let per_node = VMS / NODES;
    let entry_work = ms(HANDLING) * (1 + per_node) as f64 + ms(PROXY) * (VMS - per_node) as f64;
    let bound =
        (entry_work / WORKERS as f64).max(ms(HANDLING) * (1 + per_node.div_ceil(WORKERS)) as f64);
    let mut runs = Vec::new();
    for _ in 0..PLAN_RUNS {
        let (r, _) = spawn_child_with("plan", &endpoint, &repo, cache, false, |cmd| {
            cmd.arg("--concurrency").arg("0");
        });
        assert_eq!(r["noop"].as_bool(), Some(true), "a no-op plan: {r}");
        runs.push(r["plan_ms"].as_f64().unwrap_or(0.0));
    }
    let plan = median(runs);
    assert_eq!(
        sim.api_proxied() % (VMS - per_node),
        0,
        "every remote read was proxied"
    );
    let (f, _) = spawn_child_with("floor", &endpoint, &repo, cache, false, |cmd| {
        cmd.arg("--concurrency").arg((WORKERS * NODES).to_string());
    });
    let floor = f["floor_ms"].as_f64().unwrap_or(0.0);
    table.add(
        "9 worker pool",
        format!(
            "  the same with the entry node routing what it proxies ({} ms each): observe + plan at the default / the entry node's bound ({bound:.0} ms)",
            ms(PROXY)
        ),
        format!("{plan:.0} ms, {:.2}x", plan / bound),
        "",
        None,
    );
    table.add(
        "9 worker pool",
        format!(
            "  observe + plan / the bare client's floor, {} at once ({floor:.0} ms)",
            WORKERS * NODES
        ),
        format!("{:.2}x", plan / floor),
        "<= 1.3x",
        Some(plan / floor <= 1.3),
    );
}

/// Section 11, HA share: the no-op plan of N VMs (10 nodes) with 30% of them HA resources,
/// beside the same plan without HA, alternated [`PLAN_RUNS`] times in one run: the requests
/// (one more, the HA listing, whatever the share) and the time ratio (target <= 1.05x).
pub(super) async fn ha_share(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    n: usize,
    table: &mut Table,
) {
    eprintln!("[11] HA share: {n} VMs over {PLAN_NODES} nodes, 30% under HA");
    let dir = tmp.path().join("ha");
    let nodes = fixture::nodes(PLAN_NODES);
    let state = fixture::converged_state(registry, &dir, n, &nodes, "started").await;
    let mut with_ha: Value =
        serde_json::from_slice(&std::fs::read(&state).expect("read the state")).expect("JSON");
    let managed = (0..n).filter(|i| i % 10 < 3).count();
    for i in (0..n).filter(|i| i % 10 < 3) {
        with_ha["ha"]["resources"][format!("vm:{}", fixture::vmid(i))] =
            serde_json::json!({"state": "started"});
    }
    let ha_state = dir.join("state-ha.json");
    std::fs::write(&ha_state, serde_json::to_vec(&with_ha).expect("JSON")).expect("write");
    let mut runs: Vec<(Value, Value)> = Vec::new();
    let mut requests = (0, 0);
    let start = |file: PathBuf| {
        proxops_sim::start(fixture::sim_config(
            &nodes,
            Duration::ZERO,
            Vec::new(),
            Some(file),
        ))
    };
    let plain = start(state.clone()).await.expect("start the simulator");
    let ha = start(ha_state).await.expect("start the HA simulator");
    let (plain_repo, ha_repo) = (dir.join("repo-plain"), dir.join("repo-ha"));
    fixture::write_repo(&plain_repo, n, &nodes, "started", &Endpoint::of(&plain));
    fixture::write_repo(&ha_repo, n, &nodes, "started", &Endpoint::of(&ha));
    for _ in 0..PLAN_RUNS {
        let count = |sim: &Simulator| sim.counters().values().sum::<u64>();
        let before = (count(&plain), count(&ha));
        let (p, _) = spawn_child("plan", &Endpoint::of(&plain), &plain_repo, cache, false);
        let (h, _) = spawn_child("plan", &Endpoint::of(&ha), &ha_repo, cache, false);
        for r in [&p, &h] {
            assert_eq!(r["noop"].as_bool(), Some(true), "a no-op plan: {r}");
        }
        requests = (count(&plain) - before.0, count(&ha) - before.1);
        runs.push((p, h));
    }
    assert_eq!(
        requests,
        (n as u64 + 1, n as u64 + 2),
        "one HA listing more"
    );
    let med = |pick: fn(&(Value, Value)) -> &Value| {
        median(
            runs.iter()
                .map(|r| pick(r)["total_ms"].as_f64().unwrap_or(0.0))
                .collect(),
        )
    };
    let (without, with) = (med(|r| &r.0), med(|r| &r.1));
    table.add(
        "11 HA share",
        format!(
            "{n} VMs, {managed} of them HA resources: no-op plan requests without / with HA; full cycle without / with"
        ),
        format!(
            "{} / {}; {without:.0} / {with:.0} ms",
            requests.0, requests.1
        ),
        "",
        None,
    );
    table.add(
        "11 HA share",
        "  ratio with HA / without (medians, alternated)",
        format!("{:.3}x", with / without),
        "<= 1.05x",
        Some(with / without <= 1.05),
    );
}
