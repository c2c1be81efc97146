//! Measurement only (`proxops-bench`, scenario 5): the same kind component run the other way
//! WASI can run, on an async engine (`async_support`, wasmtime-wasi's async bindings, calls
//! as futures on tokio), so the choice of how guests run is made by measurement. proxops
//! itself runs guests synchronously on plain threads (see `guest.rs`); nothing else uses
//! this module.

use std::time::{Duration, Instant};

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine, Store};

use crate::host::HostState;
use crate::{Limits, Runtime, RuntimeError};

mod bindings {
    wasmtime::component::bindgen!({
        path: ["../../wit/common/0.1.0", "../../wit/kind/0.2.1"],
        world: "proxops:kind/kind",
        exports: { default: async },
        with: {
            "proxops:common/types": crate::kind::bindings::proxops::common::types,
            "proxops:common/log": crate::kind::bindings::proxops::common::log,
            "proxops:kind/secrets": crate::kind::bindings::proxops::kind::secrets,
            "proxops:kind/types": crate::kind::bindings::proxops::kind::types,
        },
    });
}

/// A kind component compiled for an async engine.
pub struct AsyncKind {
    pre: bindings::KindPre<HostState>,
    engine: Engine,
    limits: Limits,
}

impl Runtime {
    /// Compile `wasm` (a kind) for a separate async engine with the same settings as this
    /// runtime's (pooling, epoch interruption).
    pub fn async_kind_probe(&self, wasm: &[u8]) -> Result<AsyncKind, RuntimeError> {
        // wasmtime 48 supports async calls on every engine (`async_support` is a no-op).
        let cfg: Config = crate::engine_config(self.pooling());
        let engine = Engine::new(&cfg).map_err(RuntimeError::engine)?;
        crate::spawn_epoch_ticker(&engine);
        let link = |e: wasmtime::Error| RuntimeError::Link(format!("{e:#}"));
        let mut linker: Linker<HostState> = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(link)?;
        bindings::Kind::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
            .map_err(link)?;
        let component = wasmtime::component::Component::new(&engine, wasm).map_err(|e| {
            RuntimeError::Compile {
                guest: "probe".into(),
                message: format!("{e:#}"),
            }
        })?;
        let pre = linker.instantiate_pre(&component).map_err(link)?;
        let pre = bindings::KindPre::new(pre).map_err(link)?;
        Ok(AsyncKind {
            pre,
            engine,
            limits: Limits::KIND,
        })
    }
}

impl AsyncKind {
    fn store(&self) -> Store<HostState> {
        let mut store = Store::new(&self.engine, HostState::new(&self.limits, None));
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(self.limits.deadline_ticks());
        store
    }

    /// Median time of `samples` rounds of `identity`, over the `desired` states in turn: with
    /// `fresh`, each round instantiates first (a policy evaluation's cost), else one instance
    /// serves all.
    pub async fn identity_median(
        &self,
        desired: &[String],
        fresh: bool,
        samples: usize,
    ) -> Duration {
        let mut store = self.store();
        let mut kind = self
            .pre
            .instantiate_async(&mut store)
            .await
            .expect("instantiate");
        let mut times = Vec::with_capacity(samples);
        for i in 0..samples {
            // In turn: the kind SDK keeps the desired state it read last.
            let desired = &desired[i % desired.len()];
            let t = Instant::now();
            if fresh {
                store = self.store();
                kind = self
                    .pre
                    .instantiate_async(&mut store)
                    .await
                    .expect("instantiate");
            }
            kind.proxops_kind_reconciler()
                .call_identity(&mut store, desired)
                .await
                .expect("identity");
            times.push(t.elapsed());
        }
        times.sort();
        times[times.len() / 2]
    }
}
