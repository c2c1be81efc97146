//! The suite's scenarios, one function each: what each measures and the table rows it adds.

use super::*;

/// Section 5b: cold compile vs cache load, per bundled component.
pub(super) fn components(cache: &Path, table: &mut Table) {
    // 5b. Cold compile vs cache load, per bundled component.
    eprintln!("[1/5] components: compile vs cache load");
    for role in [Role::Kind, Role::Policy] {
        for b in proxops_guests::bundled(role) {
            let mut times = Vec::new();
            for _ in 0..2 {
                let runtime = Runtime::new(RuntimeConfig {
                    cache_dir: Some(cache.to_path_buf()),
                })
                .expect("runtime");
                let t = Instant::now();
                let outcome = match role {
                    Role::Kind => format!(
                        "{:?}",
                        runtime
                            .load_kind(
                                b.package,
                                b.bytes,
                                proxops_runtime::Limits::KIND,
                                proxops_runtime::SecretAccess::Values,
                            )
                            .expect("load")
                            .cache_outcome()
                    ),
                    _ => {
                        runtime
                            .load_policy(b.package, b.bytes, proxops_runtime::Limits::POLICY)
                            .expect("load");
                        "policy".to_string()
                    }
                };
                times.push((t.elapsed(), outcome));
            }
            // Bundled kinds also load from the artifact precompiled at build time.
            let precompiled = b.precompiled.filter(|_| role == Role::Kind).map(|framed| {
                let runtime = Runtime::new(RuntimeConfig { cache_dir: None }).expect("runtime");
                let t = Instant::now();
                let kind = runtime
                    .load_kind_precompiled(
                        b.package,
                        b.bytes,
                        Some(framed),
                        proxops_runtime::Limits::KIND,
                        proxops_runtime::SecretAccess::Values,
                    )
                    .expect("load");
                (t.elapsed(), kind.cache_outcome())
            });
            let (label, value, note) = match precompiled {
                Some((took, outcome)) => (
                    "cold compile / cache load / precompiled load",
                    format!(
                        "{:.0} ms / {:.1} ms / {:.1} ms",
                        ms(times[0].0),
                        ms(times[1].0),
                        ms(took)
                    ),
                    format!("{} then {} then {outcome:?}", times[0].1, times[1].1),
                ),
                None => (
                    "cold compile / cache load",
                    format!("{:.0} ms / {:.1} ms", ms(times[0].0), ms(times[1].0)),
                    format!("{} then {}", times[0].1, times[1].1),
                ),
            };
            table.add(
                "5 components",
                format!("{} ({} KiB): {label}", b.package, b.bytes.len() / 1024),
                value,
                note,
                None,
            );
        }
    }
}

/// Section 5: the cost of guest calls.
pub(super) async fn guest_calls(
    registry: &KindRegistry,
    cache: &Path,
    n: usize,
    table: &mut Table,
) {
    // 5. Guest call cost.
    eprintln!("[2/5] guest call cost");
    {
        let vm = registry.by_kind("VM").expect("VM kind");
        let mut inst = vm.instance().expect("instance");
        // The fixture's VM (`fixture::manifest`) as the loader hands it to the kind.
        let manifest = json!({
            "apiVersion": "proxops/v1alpha1", "kind": "VM", "metadata": {"name": "vm-00000"},
            "spec": {"node": "pve01", "vmid": 1000, "state": "started", "memory": "1GiB",
                "cpu": {"type": "host", "cores": 1},
                "disks": [{"storage": "local-lvm", "size": "4GiB"}],
                "networks": [{"model": "virtio", "bridge": "vmbr0"}]},
        });
        // Two VMs, called in turn: the kind SDK keeps the desired state it read last, and a
        // reused instance called with the same one again would not read it at all.
        let mut other = manifest.clone();
        other["metadata"]["name"] = json!("vm-00001");
        other["spec"]["vmid"] = json!(1001);
        let desired: Vec<String> = [&manifest, &other]
            .iter()
            .map(|m| {
                inst.validate(&m.to_string())
                    .expect("call")
                    .expect("valid")
                    .desired
            })
            .collect();
        let obs = Observation {
            live: None,
            reads: Vec::new(),
        };
        let measure = |fresh: bool, plan: bool, samples: usize| {
            let mut inst = vm.instance().expect("instance");
            let mut v = Vec::with_capacity(samples);
            for i in 0..samples {
                let desired = &desired[i % 2];
                let t = Instant::now();
                if fresh {
                    inst = vm.instance().expect("instance");
                }
                if plan {
                    inst.plan(Some(desired), &[], &[], &obs)
                        .expect("call")
                        .expect("plan");
                } else {
                    inst.identity(desired).expect("call");
                }
                v.push(t.elapsed().as_secs_f64() * 1e6);
            }
            median(v)
        };
        // Blocking threads (what proxops does): calls on a plain thread, never tokio's.
        let on_thread = |fresh: bool, plan: bool, samples: usize| {
            std::thread::scope(|s| s.spawn(|| measure(fresh, plan, samples)).join())
                .expect("measuring thread")
        };
        for (call, plan) in [("identity", false), ("plan (create)", true)] {
            let fresh = on_thread(true, plan, 1000);
            let reused = on_thread(false, plan, 3000);
            table.add(
                "5 guest calls",
                format!("VM {call}: fresh instance+call / reused instance+call (median)"),
                format!("{fresh:.1} us / {reused:.1} us"),
                format!("ratio {:.1}x", fresh / reused),
                None,
            );
        }
        // How WASI runs, measured: the same component on an async engine (wasmtime-wasi's
        // async bindings, calls as futures on this tokio runtime) against the blocking-thread
        // calls proxops makes. A call made from a tokio thread by the blocking design pays a
        // thread of its own (policies in plan/apply): that row too.
        let vm_wasm = proxops_guests::bundled(Role::Kind)
            .find(|b| b.package == "proxops-kind-vm")
            .expect("VM kind bundled");
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: Some(cache.to_path_buf()),
        })
        .expect("runtime");
        let probe = runtime
            .async_kind_probe(vm_wasm.bytes)
            .expect("async engine");
        let async_fresh = probe.identity_median(&desired, true, 1000).await;
        let async_reused = probe.identity_median(&desired, false, 3000).await;
        let sync_fresh = on_thread(true, false, 1000);
        let sync_reused = on_thread(false, false, 3000);
        let from_tokio = measure(true, false, 300);
        table.add(
            "5 how WASI runs",
            "VM identity, fresh instance+call: blocking thread / async on tokio (median)",
            format!(
                "{sync_fresh:.1} us / {:.1} us",
                async_fresh.as_secs_f64() * 1e6
            ),
            "choose the cheaper",
            None,
        );
        table.add(
            "5 how WASI runs",
            "VM identity, reused instance+call: blocking thread / async on tokio (median)",
            format!(
                "{sync_reused:.1} us / {:.1} us",
                async_reused.as_secs_f64() * 1e6
            ),
            "",
            None,
        );
        // A plan cycle makes five kind calls per VM (validate, references, identity, observe,
        // plan) on `available_parallelism` workers: the async engine's extra cost per call
        // (the identity call's, measured above) over the plan at scale.
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
        let extra_ms = (async_reused.as_secs_f64() * 1e6 - sync_reused) * 5.0 * n as f64
            / threads as f64
            / 1000.0;
        table.add(
            "5 how WASI runs",
            format!("projected change of the {n}-VM plan cycle with async calls"),
            format!("{extra_ms:+.0} ms"),
            "5 calls per VM, per-call difference above",
            None,
        );
        table.add(
            "5 how WASI runs",
            "VM identity, fresh instance+call from a tokio thread (own thread per call)",
            format!("{from_tokio:.1} us"),
            "policies in plan/apply",
            None,
        );
    }
}

/// Sections 3 + 5c: API economy at N = 100; process start to first plan.
pub(super) async fn first_plan(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    economy: &mut Vec<(usize, BTreeMap<String, u64>)>,
    table: &mut Table,
) {
    // 3 + 5c. API economy at N = 100; process start to first plan, cold and warm cache.
    eprintln!("[3/5] first plan (cold and warm cache) and API economy, N = 100");
    {
        let dir = tmp.path().join("n100");
        let (sim, repo) = converged(registry, &dir, 100, &fixture::nodes(PLAN_NODES)).await;
        let endpoint = Endpoint::of(&sim);
        // FIRST_RUNS cold runs (each with an empty cache folder of its own) alternated with
        // as many warm ones; the table shows the medians, since one run of a few tens of
        // milliseconds moves by as much as the machine's noise.
        let before = sim.counters();
        let mut cold_runs = Vec::new();
        let mut warm_runs = Vec::new();
        for run in 0..FIRST_RUNS {
            let cold_cache = dir.join(format!("cold-cache-{run}"));
            cold_runs.push(spawn_child("plan", &endpoint, &repo, &cold_cache, false));
            if run == 0 {
                economy.push((100, counter_delta(&before, &sim.counters())));
            }
            warm_runs.push(spawn_child("plan", &endpoint, &repo, cache, false));
        }
        for (run, _) in cold_runs.iter().chain(&warm_runs) {
            assert!(
                run["noop"].as_bool() == Some(true),
                "N=100 plan is a no-op: {run}"
            );
        }
        let cold_wall = median_duration(cold_runs.iter().map(|r| r.1).collect());
        let warm_wall = median_duration(warm_runs.iter().map(|r| r.1).collect());
        let load_ms = |runs: &[(serde_json::Value, Duration)]| {
            median(
                runs.iter()
                    .map(|r| r.0["load_ms"].as_f64().unwrap_or(0.0))
                    .collect(),
            )
        };
        let cold = &cold_runs[0].0;
        // Nothing is compiled warm: every kind is precompiled (bundled) or a cache hit.
        let ready = |run: &serde_json::Value| {
            run["cache_hits"].as_u64().unwrap_or(0) + run["precompiled"].as_u64().unwrap_or(0)
        };
        for (run, _) in &warm_runs {
            assert_eq!(
                ready(run),
                registry.len() as u64,
                "warm: every kind precompiled or from the cache: {run}"
            );
        }
        table.add(
            "5 first plan",
            format!(
                "process start -> first plan (100 VMs): cold cache / warm cache (medians of {FIRST_RUNS}, alternated)"
            ),
            format!("{:.0} ms / {:.0} ms", ms(cold_wall), ms(warm_wall)),
            format!(
                "of which loading kinds {:.0} / {:.0} ms; cold: {} of {} kinds precompiled",
                load_ms(&cold_runs),
                load_ms(&warm_runs),
                cold["precompiled"].as_u64().unwrap_or(0),
                registry.len()
            ),
            None,
        );

        let client = endpoint.client();
        let nodes = fixture::nodes(PLAN_NODES);
        let costs = proxops_bench::calls::measure(
            registry,
            &client,
            &fixture::manifest(0, &nodes, "started"),
            fixture::vmid(0),
            2000,
        )
        .await;
        for c in costs {
            table.add(
                "5 guest calls",
                format!(
                    "converged VM {}: component / native (reused, median)",
                    c.call
                ),
                format!("{:.1} us / {:.1} us", c.wasm_us, c.native_us),
                format!("{:.2}x", c.wasm_us / c.native_us),
                None,
            );
        }
    }
}

/// Section 3: requests per endpoint of each no-op plan measured above.
pub(super) fn api_economy(economy: Vec<(usize, BTreeMap<String, u64>)>, table: &mut Table) {
    for (count, counts) in &economy {
        let total: u64 = counts.values().sum();
        let per_vm = total as f64 / *count as f64;
        let resources = counts.get("GET /cluster/resources").copied().unwrap_or(0);
        table.add(
            "3 API economy",
            format!("no-op plan, N = {count}: requests"),
            format!("{total} ({per_vm:.2}/VM)"),
            "1 resources + per-VM reads",
            Some(resources == 1),
        );
        for (k, v) in counts {
            table.add("3 API economy", format!("  {k}"), v.to_string(), "", None);
        }
    }
}

/// Section 4: apply under latency.
pub(super) async fn apply_under_latency(tmp: &tempfile::TempDir, cache: &Path, table: &mut Table) {
    // 4. Apply under latency.
    eprintln!(
        "[5/5] apply: {APPLY_VMS} VMs over {APPLY_NODES} nodes, {APPLY_LATENCY_MS} ms per request, {} s per task, {APPLY_WRITE_CONCURRENCY} writes per node",
        APPLY_TASK.as_secs()
    );
    let nodes = fixture::nodes(APPLY_NODES);
    let faults = latency_on_every_request();
    let sim = proxops_sim::start(fixture::sim_config(&nodes, APPLY_TASK, faults, None))
        .await
        .expect("start the simulator");
    let endpoint = Endpoint::of(&sim);
    let repo = tmp.path().join("apply-repo");
    fixture::write_repo(&repo, APPLY_VMS, &nodes, "stopped", &endpoint);
    let (r, _) = spawn_child("apply", &endpoint, &repo, cache, false);
    assert_eq!(r["converged"].as_bool(), Some(true), "apply converges: {r}");
    let wall = r["total_ms"].as_f64().unwrap_or(0.0);
    let bound = apply_bound(&sim.requests(), APPLY_TASK);
    let ratio = wall / ms(bound.total);
    table.add(
        "4 apply",
        format!(
            "{APPLY_VMS} VMs / {APPLY_NODES} nodes, from empty: wall time ({} passes)",
            r["passes"]
        ),
        format!("{:.2} s", wall / 1000.0),
        "",
        None,
    );
    table.add(
        "4 apply",
        format!("  lower bound: {}", bound.explain),
        format!("{:.2} s", bound.total.as_secs_f64()),
        "",
        None,
    );
    table.add(
        "4 apply",
        "ratio wall / bound",
        format!("{ratio:.2}x"),
        "<= 1.2x",
        Some(ratio <= 1.2),
    );
}

/// Section 6, hostile YAML: how long the loader takes to refuse a 1 MB file built to be slow
/// to parse (deep nesting) and an oversized one, and what reading the manifests of the plan
/// at scale costs next to serde_yaml alone.
pub(super) fn hostile_yaml(table: &mut Table) {
    eprintln!("[6] hostile YAML");
    let cases = [
        ("1 MB of `[` (flow nesting)", "[".repeat(1_000_000)),
        ("1 MB of `- ` (block nesting)", "- ".repeat(500_000)),
        (
            "1,000-deep block mappings (0.5 MB)",
            (0..1_000)
                .map(|i| format!("{}a:\n", " ".repeat(i)))
                .collect::<String>(),
        ),
        (
            "1 MiB + 1 byte (size limit)",
            format!("a: '{}'\n", "x".repeat(proxops_core::yaml::MAX_BYTES)),
        ),
    ];
    for (name, text) in cases {
        let t = Instant::now();
        let refused = proxops_core::repo::parse_yaml("hostile.yaml", &text).is_err();
        let took = t.elapsed();
        table.add(
            "6 inputs",
            format!("refuse {name}"),
            format!("{:.2} ms", ms(took)),
            "< 100 ms",
            Some(refused && took < Duration::from_millis(100)),
        );
    }
    let nodes: Vec<String> = (1..=PLAN_NODES).map(|i| format!("pve{i:02}")).collect();
    let manifests: Vec<String> = (0..10_000)
        .map(|i| fixture::manifest(i, &nodes, "started"))
        .collect();
    // The reader holds the limits while it builds the values (one pass); before, an event
    // pass checked the limits and serde_yaml parsed every manifest again. Both measured here.
    let t = Instant::now();
    for m in &manifests {
        proxops_core::repo::parse_yaml("m.yaml", m).expect("fixture manifest parses");
    }
    let one_pass = t.elapsed();
    let t = Instant::now();
    for m in &manifests {
        serde_yaml::from_str::<serde_json::Value>(m).expect("serde_yaml parses the fixture");
    }
    let serde_yaml = t.elapsed();
    table.add(
        "6 inputs",
        "10,000 manifests: the reader (limits and values, one pass) / serde_yaml alone (the former second pass)",
        format!("{:.0} ms / {:.0} ms", ms(one_pass), ms(serde_yaml)),
        format!("{:.2}x", ms(one_pass) / ms(serde_yaml)),
        None,
    );
}

pub(super) struct Bound {
    total: Duration,
    explain: String,
}

/// The lower bound of an apply from the requests it made: per pass (the log splits at each
/// `GET /cluster/resources`), one resources request, the reads at the read concurrency, and
/// on the busiest node `ceil(tasks / write concurrency)` rounds of (write request + task +
/// one status request), every request costing the injected latency.
pub(super) fn apply_bound(log: &[proxops_sim::RequestRecord], task: Duration) -> Bound {
    let latency = Duration::from_millis(APPLY_LATENCY_MS);
    let mut passes: Vec<(usize, BTreeMap<String, std::collections::BTreeSet<String>>)> = Vec::new();
    for r in log {
        if r.method == "GET" && r.path == "/cluster/resources" {
            passes.push((0, BTreeMap::new()));
            continue;
        }
        let Some((reads, tasks)) = passes.last_mut() else {
            continue;
        };
        let parts: Vec<&str> = r.path.split('/').collect();
        if r.method == "GET" && parts.len() >= 5 && parts[3] == "tasks" {
            tasks
                .entry(parts[2].to_string())
                .or_default()
                .insert(parts[4].to_string());
        } else if r.method == "GET" {
            *reads += 1;
        }
    }
    let mut total = Duration::ZERO;
    let mut parts = Vec::new();
    for (reads, tasks) in &passes {
        let rounds = tasks
            .values()
            .map(|t| t.len().div_ceil(APPLY_WRITE_CONCURRENCY))
            .max()
            .unwrap_or(0);
        let read_rounds = reads.div_ceil(READ_CONCURRENCY);
        total += latency * (1 + read_rounds as u32) + (task + 2 * latency) * rounds as u32;
        parts.push(format!(
            "[{reads} reads, {} tasks, {rounds} rounds]",
            tasks.values().map(|t| t.len()).sum::<usize>()
        ));
    }
    Bound {
        total,
        explain: format!("passes {}", parts.join(" ")),
    }
}

/// Section 7, many clusters: [`MANY_CLUSTERS`] simulators of [`MANY_VMS`] converged VMs
/// each, every request delayed by [`APPLY_LATENCY_MS`]; one child plans one cluster alone
/// and all of them [`MANY_CONCURRENCY`] at a time, alternated [`MANY_ROUNDS`] times, then
/// one after another, and then applies [`MANY_NEW`] new running VMs per cluster the same
/// ways.
pub(super) async fn many_clusters(
    registry: &KindRegistry,
    tmp: &tempfile::TempDir,
    cache: &Path,
    table: &mut Table,
) {
    eprintln!(
        "[7] many clusters: {MANY_CLUSTERS} x {MANY_VMS} VMs, {APPLY_LATENCY_MS} ms per request"
    );
    let dir = tmp.path().join("many");
    let nodes = fixture::nodes(MANY_NODES);
    let state = fixture::converged_state(registry, &dir, MANY_VMS, &nodes, "started").await;
    let latency = latency_on_every_request();
    let mut sims = Vec::new();
    let mut repos = Vec::new();
    for c in 0..MANY_CLUSTERS {
        // Each simulator keeps its own copy: a simulator writes its state file back.
        let own = dir.join(format!("state-{c}.json"));
        std::fs::copy(&state, &own).expect("copy the state file");
        let sim = proxops_sim::start(fixture::sim_config(
            &nodes,
            Duration::ZERO,
            latency.clone(),
            Some(own),
        ))
        .await
        .expect("start a simulator");
        let repo = dir.join(format!("repo-{c}"));
        fixture::write_repo(&repo, MANY_VMS, &nodes, "started", &Endpoint::of(&sim));
        repos.push(repo);
        sims.push(sim);
    }
    let endpoints: Vec<Endpoint> = sims.iter().map(Endpoint::of).collect();
    let list: Vec<[&str; 4]> = endpoints
        .iter()
        .map(|e| {
            [
                e.base_url.as_str(),
                e.token_id.as_str(),
                e.token_secret.as_str(),
                e.fingerprint.as_str(),
            ]
        })
        .collect();
    let list = serde_json::to_string(&list).expect("endpoints JSON");
    let (r, _) = spawn_child_with("plan-many", &endpoints[0], &repos[0], cache, false, |cmd| {
        cmd.env(ENV_ENDPOINTS, &list)
            .arg("--concurrency")
            .arg(MANY_CONCURRENCY.to_string());
        for repo in &repos[1..] {
            cmd.arg("--repo").arg(repo);
        }
    });
    assert_eq!(
        r["noop"].as_bool(),
        Some(true),
        "every cluster is a no-op: {r}"
    );
    assert_eq!(
        r["objects"].as_u64(),
        Some((MANY_CLUSTERS * MANY_VMS) as u64)
    );
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    table.add(
        "7 many clusters",
        format!(
            "no-op plan, {MANY_CLUSTERS} x {MANY_VMS} VMs, {APPLY_LATENCY_MS} ms/request: one cluster alone / all, {MANY_CONCURRENCY} at a time (medians of {MANY_ROUNDS}, alternated) / one after another"
        ),
        format!(
            "{:.0} ms / {:.0} ms / {:.0} ms",
            f("single_ms"),
            f("concurrent_ms"),
            f("sequential_ms")
        ),
        format!(
            "all at once / one alone {:.2}x (<= 1.3x); sequential / one alone {:.2}x",
            f("concurrent_ms") / f("single_ms"),
            f("sequential_ms") / f("single_ms")
        ),
        Some(f("concurrent_ms") / f("single_ms") <= 1.3),
    );
    table.add(
        "7 many clusters",
        format!(
            "apply of {MANY_NEW} new running VMs per cluster, same clusters: one alone / all, {MANY_CONCURRENCY} at a time (medians of {MANY_ROUNDS}, alternated) / one after another"
        ),
        format!(
            "{:.0} ms / {:.0} ms / {:.0} ms",
            f("apply_single_ms"),
            f("apply_concurrent_ms"),
            f("apply_sequential_ms")
        ),
        format!(
            "all at once / one alone {:.2}x (<= 1.3x); sequential / one alone {:.2}x",
            f("apply_concurrent_ms") / f("apply_single_ms"),
            f("apply_sequential_ms") / f("apply_single_ms")
        ),
        Some(f("apply_concurrent_ms") / f("apply_single_ms") <= 1.3),
    );
    table.add(
        "7 many clusters",
        "  the last cluster's manifests validated after, in the median all-at-once plan (load + validate, one cluster after the other, overlapping the plans)",
        format!("{:.0} ms", f("validate_ms")),
        "",
        None,
    );
    table.add(
        "7 many clusters",
        "  the planning process's CPU (user + system) during the median all-at-once plan / its wall time (the 8 simulators run in the bench's own process, on the same cores)",
        format!("{:.0} ms / {:.0} ms", f("concurrent_cpu_ms"), f("concurrent_ms")),
        format!(
            "{:.2} of {} cores",
            f("concurrent_cpu_ms") / f("concurrent_ms"),
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        None,
    );
    table.add(
        "7 many clusters",
        "  peak RSS of the planning process",
        format!("{:.0} MiB", mib(f("rss") as u64)),
        "",
        None,
    );
}

/// [`APPLY_LATENCY_MS`] added to every request a simulator answers.
pub(super) fn latency_on_every_request() -> Vec<FaultRule> {
    vec![FaultRule {
        method: "*".into(),
        path: "*".into(),
        kind: FaultKind::Latency {
            ms: APPLY_LATENCY_MS,
        },
        probability: None,
        times: None,
    }]
}

/// Section 10, the apply floor: applies with instant tasks and [`APPLY_LATENCY_MS`] on every
/// request, each against the bound its own requests imply when every write slot
/// ([`APPLY_WRITE_CONCURRENCY`] per node) and every read slot ([`READ_CONCURRENCY`]) is kept
/// busy: `writes × latency / write slots + reads × latency / read slots`. For 20, 60 and 200
/// new running VMs over [`APPLY_NODES`] nodes, then a change of memory on the 200.
pub(super) async fn apply_floor(tmp: &tempfile::TempDir, cache: &Path, table: &mut Table) {
    eprintln!(
        "[10] apply floor: new running VMs over {APPLY_NODES} nodes, {APPLY_LATENCY_MS} ms per request, instant tasks"
    );
    let nodes = fixture::nodes(APPLY_NODES);
    for n in [20, 60, 200] {
        let sim = proxops_sim::start(fixture::sim_config(
            &nodes,
            Duration::ZERO,
            latency_on_every_request(),
            None,
        ))
        .await
        .expect("start the simulator");
        let endpoint = Endpoint::of(&sim);
        let repo = tmp.path().join(format!("apply-floor-{n}"));
        fixture::write_repo(&repo, n, &nodes, "started", &endpoint);
        let row =
            |what: String, r: &Value, log: &[proxops_sim::RequestRecord], table: &mut Table| {
                assert_eq!(
                    r["converged"].as_bool(),
                    Some(true),
                    "{what} converges: {r}"
                );
                let wall = r["total_ms"].as_f64().unwrap_or(0.0);
                let floor = apply_io_floor(log);
                let ratio = wall / ms(floor.total);
                table.add(
                    "10 apply floor",
                    format!("{what}: wall / floor ({})", floor.explain),
                    format!(
                        "{:.2} / {:.2} s, {ratio:.2}x",
                        wall / 1000.0,
                        floor.total.as_secs_f64()
                    ),
                    "<= 1.3x",
                    Some(ratio <= 1.3),
                );
                // The floor lets every read overlap every write; the passes cannot: each starts
                // with the listing, a write's task is polled inside its write slot, and the
                // verifying pass reads after the last write.
                let passes = apply_bound(log, Duration::ZERO);
                table.add(
                    "10 apply floor",
                    format!("  wall / the bound of its passes ({})", passes.explain),
                    format!(
                        "{:.2} s, {:.2}x",
                        passes.total.as_secs_f64(),
                        wall / ms(passes.total)
                    ),
                    "",
                    None,
                );
            };
        let (r, _) = spawn_child("apply", &endpoint, &repo, cache, false);
        row(format!("{n} new running VMs"), &r, &sim.requests(), table);
        if n == 200 {
            for i in 0..n {
                let file = repo
                    .join("vm")
                    .join(fixture::CLUSTER)
                    .join(format!("{}.yaml", fixture::vm_name(i)));
                let text = std::fs::read_to_string(&file).expect("read a manifest");
                std::fs::write(&file, text.replace("memory: 1GiB", "memory: 2GiB"))
                    .expect("write a manifest");
            }
            sim.clear_requests();
            let (r, _) = spawn_child("apply", &endpoint, &repo, cache, false);
            row(
                format!("memory of {n} running VMs changed"),
                &r,
                &sim.requests(),
                table,
            );
            // Memory is not hotpluggable in these VMs: PVE keeps it pending until a reboot.
            let state = sim.state_json();
            assert!(
                (0..n).all(
                    |i| state["vms"][fixture::vmid(i).to_string()]["pending"]["memory"] == "2048"
                ),
                "every VM has its new memory pending"
            );
        }
    }
}

/// `writes × latency / write slots + reads × latency / read slots` for the requests of `log`.
pub(super) fn apply_io_floor(log: &[proxops_sim::RequestRecord]) -> Bound {
    let latency = ms(Duration::from_millis(APPLY_LATENCY_MS));
    let reads = log.iter().filter(|r| r.method == "GET").count();
    let writes = log.len() - reads;
    let (write_slots, read_slots) = (APPLY_WRITE_CONCURRENCY * APPLY_NODES, READ_CONCURRENCY);
    let total =
        writes as f64 * latency / write_slots as f64 + reads as f64 * latency / read_slots as f64;
    Bound {
        total: Duration::from_secs_f64(total / 1000.0),
        explain: format!("{writes} writes / {write_slots} slots + {reads} reads / {read_slots}"),
    }
}
