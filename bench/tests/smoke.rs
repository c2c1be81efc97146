//! CI smoke test of the benchmark suite: the plan-at-scale scenario with N = 500, checking
//! the requests a no-op plan makes, exactly (they are deterministic). Never asserts on time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proxops_bench::fixture::{self, Endpoint};
use proxops_bench::{counter_delta, cycle, native::NativeQemu};
use proxops_kind_qemu::Flavour;
use proxops_reconcile::KindRegistry;
use proxops_runtime::{Runtime, RuntimeConfig};

const N: usize = 500;
const NODES: usize = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_op_plan_of_500_vms_makes_one_list_and_the_per_vm_reads() {
    proxops_sim::ensure_crypto_provider();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("proxops-cache"),
        ),
    })
    .expect("runtime");
    let wasm = KindRegistry::bundled(&runtime).expect("bundled kinds");
    let mut native = wasm.clone();
    assert!(native.register_native("VM", Arc::new(NativeQemu(Flavour::Vm))));

    let tmp = tempfile::tempdir().expect("temp dir");
    let nodes = fixture::nodes(NODES);
    let state = fixture::converged_state(&wasm, tmp.path(), N, &nodes, "started").await;
    let sim = proxops_sim::start(fixture::sim_config(
        &nodes,
        Duration::ZERO,
        Vec::new(),
        Some(state),
    ))
    .await
    .expect("simulator");
    let endpoint = Endpoint::of(&sim);
    let repo = tmp.path().join("repo");
    fixture::write_repo(&repo, N, &nodes, "started", &endpoint);
    let client = endpoint.client();

    // Every VM runs: one /pending read each (its rows carry the applied values, the pending
    // ones and the digest writes are guarded with); one cluster-wide list finds them all.
    let expected: BTreeMap<String, u64> = [
        ("GET /cluster/resources", 1),
        ("GET /nodes/{node}/qemu/{vmid}/pending", N as u64),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();

    // The memo of earlier runs changes what is parsed and asked of the kinds, never the plan
    // or its requests: once cold (it learns every manifest), once warm (it answers them).
    let memo_dir = tmp.path().join("memo");
    let runs = [
        ("component", &wasm, None),
        ("native", &native, None),
        ("component, memo learning", &wasm, Some(memo_dir.as_path())),
        ("component, memo answering", &wasm, Some(memo_dir.as_path())),
    ];
    let vm = (0..wasm.len())
        .find(|&i| wasm.get(i).info().kind == "VM")
        .expect("the VM kind");
    let mut vm_calls = Vec::new();
    let mut after_first = None;
    for (backend, registry, memo_in) in runs {
        let registry = &registry.for_run(None);
        let before = sim.counters();
        let (run, plan) = cycle::plan_cycle(registry, &client, &repo, memo_in).await;
        vm_calls.push(registry.run(vm).calls());
        after_first.get_or_insert(sim.connections());
        assert_eq!(run.objects, N, "{backend}");
        assert!(
            run.is_noop(),
            "{backend}: a converged cluster plans nothing: {:?}",
            plan.objects
                .iter()
                .find(|o| o.has_actions() || !o.proposal.drift.is_empty() || o.error.is_some())
        );
        assert_eq!(
            counter_delta(&before, &sim.counters()),
            expected,
            "{backend}: requests of a no-op plan"
        );
    }
    // The I/O floor the bench measures the cycle against makes exactly the plan's requests.
    let before = sim.counters();
    let (_, requests) = proxops_bench::floor::fetch(&client, 16).await;
    assert_eq!(requests, N + 1);
    assert_eq!(
        counter_delta(&before, &sim.counters()),
        expected,
        "the I/O floor's requests are the no-op plan's"
    );
    // Connections, as a pveproxy counts them (it allows 800 per node by default): the runs
    // share one client, which keeps its connections open from run to run instead of opening
    // new ones; it holds one per read in flight plus the ones hyper's pool opened
    // while its first connections were still in their TLS handshakes (measured 18-33 for 16
    // reads at once in a debug build, whose TLS handshakes are slow; none after that).
    let conns = sim.connections();
    assert_eq!(
        Some(conns),
        after_first,
        "no connection opened after the first run"
    );
    assert!(conns.most_open <= 3 * 16, "16 reads at a time: {conns:?}");
    // validate, references and identity (3 per VM) are answered from the memo; observe and
    // plan are asked every time.
    assert_eq!(
        vm_calls[2] - vm_calls[3],
        3 * N as u64,
        "VM kind calls without and with the memo: {vm_calls:?}"
    );
    let memo = proxops_reconcile::Memo::open(&memo_dir, &repo, &repo);
    assert_eq!(
        memo.len(),
        (N, N),
        "every manifest is remembered with its kind's answers"
    );
}

/// A library caller on a current-thread runtime can plan and apply too: guest calls run
/// inline there instead of through `block_in_place`, which panics on such a runtime.
#[tokio::test(flavor = "current_thread")]
async fn a_current_thread_runtime_plans_and_applies() {
    proxops_sim::ensure_crypto_provider();
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: Some(
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("proxops-cache"),
        ),
    })
    .expect("runtime");
    let registry = KindRegistry::bundled(&runtime).expect("bundled kinds");
    let tmp = tempfile::tempdir().expect("temp dir");
    let nodes = fixture::nodes(2);
    // Creating the fixture plans and applies through the engine.
    let state = fixture::converged_state(&registry, tmp.path(), 6, &nodes, "started").await;
    let sim = proxops_sim::start(fixture::sim_config(
        &nodes,
        Duration::ZERO,
        Vec::new(),
        Some(state),
    ))
    .await
    .expect("simulator");
    let endpoint = Endpoint::of(&sim);
    let repo = tmp.path().join("repo");
    fixture::write_repo(&repo, 6, &nodes, "started", &endpoint);
    let (run, _) = cycle::plan_cycle(&registry, &endpoint.client(), &repo, None).await;
    assert_eq!(run.objects, 6);
    assert!(run.is_noop(), "{run:?}");
}
