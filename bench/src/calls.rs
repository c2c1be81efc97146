//! Per-call cost of the kind interface for one converged VM, component vs native: where the
//! guest's share of a plan cycle goes, call by call.

use std::time::Instant;

use proxops_kind_qemu::Flavour;
use proxops_reconcile::KindRegistry;
use proxops_runtime::calls::{KindCalls, NativeKind};
use proxops_runtime::kind::{Observation, Read};

use crate::native::NativeQemu;

/// One call's median cost in microseconds, through the component and natively.
#[derive(Debug, Clone)]
pub struct CallCost {
    pub call: &'static str,
    pub wasm_us: f64,
    pub native_us: f64,
}

/// Everything a VM's calls need, taken from a live cluster once.
struct Inputs {
    manifest: String,
    desired: String,
    live: String,
    reads: Vec<Read>,
}

async fn inputs(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    manifest_yaml: &str,
    vmid: u32,
) -> Inputs {
    let manifest = proxops_core::repo::parse_yaml("bench.yaml", manifest_yaml)
        .expect("fixture manifest parses")
        .to_string();
    let index = registry
        .route(proxops_core::API_VERSION, "VM")
        .expect("VM kind");
    let mut inst = registry.instance(index).expect("instance");
    let desired = inst
        .validate(&manifest)
        .expect("call")
        .expect("valid")
        .desired;
    let live = proxops_reconcile::observe::resources(client)
        .await
        .expect("resources")
        .into_iter()
        .find(|e| e.get("vmid").and_then(|v| v.as_u64()) == Some(u64::from(vmid)))
        .expect("the VM is live")
        .text()
        .to_string();
    let calls = inst
        .observe(Some(&desired), Some(&live), &[], &[])
        .expect("observe");
    let mut reads = Vec::new();
    for call in calls {
        let params: Vec<proxops_pve::Param> = call
            .params
            .iter()
            .map(|p| proxops_pve::Param::new(p.name.clone(), p.value.clone()))
            .collect();
        let body = client.get(&call.path, &params).await.expect("read");
        reads.push(Read {
            call,
            status: 200,
            body: body.to_string(),
        });
    }
    Inputs {
        manifest,
        desired,
        live,
        reads,
    }
}

fn median_us(samples: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..samples / 10 {
        f();
    }
    let mut v: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn costs_of(inst: &mut dyn KindCalls, i: &Inputs, samples: usize) -> Vec<(&'static str, f64)> {
    let observation = Observation {
        live: Some(i.live.clone()),
        reads: i.reads.clone(),
    };
    vec![
        (
            "validate",
            median_us(samples, || {
                inst.validate(&i.manifest).expect("call").expect("valid");
            }),
        ),
        (
            "references",
            median_us(samples, || {
                inst.references(&i.desired).expect("call");
            }),
        ),
        (
            "identity",
            median_us(samples, || {
                inst.identity(&i.desired).expect("call");
            }),
        ),
        (
            "observe",
            median_us(samples, || {
                inst.observe(Some(&i.desired), Some(&i.live), &[], &[])
                    .expect("call");
            }),
        ),
        (
            "plan (converged)",
            median_us(samples, || {
                let p = inst
                    .plan(Some(&i.desired), &[], &[], &observation)
                    .expect("call")
                    .expect("plan");
                assert!(p.actions.is_empty() && p.drift.is_empty(), "converged");
            }),
        ),
    ]
}

/// Median cost of each call for VM `vmid` (whose manifest is `manifest_yaml`), on a reused
/// instance, through the component and through the native build of the same kind.
pub async fn measure(
    registry: &KindRegistry,
    client: &proxops_pve::Client,
    manifest_yaml: &str,
    vmid: u32,
    samples: usize,
) -> Vec<CallCost> {
    let inputs = inputs(registry, client, manifest_yaml, vmid).await;
    let index = registry
        .route(proxops_core::API_VERSION, "VM")
        .expect("VM kind");
    // On a plain thread, as the plan's workers call kinds (a call made on a tokio thread
    // would be moved to a thread of its own, and that would be measured too).
    let (w, n) = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut wasm = registry.instance(index).expect("instance");
                let mut native = NativeQemu(Flavour::Vm).instance();
                let w = costs_of(wasm.as_mut(), &inputs, samples);
                let n = costs_of(native.as_mut(), &inputs, samples);
                (w, n)
            })
            .join()
            .expect("measuring thread")
    });
    w.into_iter()
        .zip(n)
        .map(|((call, wasm_us), (_, native_us))| CallCost {
            call,
            wasm_us,
            native_us,
        })
        .collect()
}
