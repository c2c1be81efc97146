//! The WebAssembly runtime of proxops: the only crate that depends on wasmtime.
//!
//! One [`Runtime`] per process holds the engine (pooling allocator, epoch interruption),
//! the linkers and the on-disk cache of compiled components. Loading a component compiles it
//! once (or loads it from the cache) into an `InstancePre`; every call then runs in a store
//! with a wall-clock deadline, a memory cap, an output cap and a bounded log (which also
//! takes the guest's stdout and stderr), and WASI is linked with nothing granted. A
//! [`GuestRun`] carries one guest through one run: its budget, and the first failure, after
//! which the guest is not called again in that run.

mod cache;
mod error;
mod guest;
mod host;
pub mod kind;
mod limits;
pub mod policy;
#[doc(hidden)]
pub mod probe;
mod size;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

pub use cache::{CacheOutcome, default_cache_dir};
pub use error::{GuestError, RuntimeError};
pub use guest::{GuestRun, off_tokio};
pub use host::{GuestLog, SecretError, SecretSource};
pub use kind::{KindComponent, KindInstance};
pub use limits::Limits;
pub use policy::{PolicyComponent, PolicyInstance};

/// How often the epoch ticker advances; deadlines are counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
/// The largest linear memory any guest may have; per-guest caps are at most this.
pub const MAX_GUEST_MEMORY: usize = 512 << 20;
/// Instances that may be alive at once across all guests (pool size).
const POOL_INSTANCES: u32 = 256;

/// Settings of a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Folder for compiled components; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
}

/// The process-wide WebAssembly runtime. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    kind_linker: Linker<host::HostState>,
    policy_linker: Linker<host::HostState>,
    pooling: bool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("cache_dir", &self.cache_dir)
            .field("pooling", &self.pooling)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Build the engine (pooling allocator where the platform allows it, falling back to
    /// on-demand allocation), start the epoch ticker and define the host imports.
    pub fn new(config: RuntimeConfig) -> Result<Arc<Self>, RuntimeError> {
        let (engine, pooling) = match Engine::new(&engine_config(true)) {
            Ok(engine) => (engine, true),
            Err(e) => {
                tracing::warn!("pooling allocator unavailable ({e}); using on-demand allocation");
                let engine = Engine::new(&engine_config(false)).map_err(RuntimeError::engine)?;
                (engine, false)
            }
        };
        spawn_epoch_ticker(&engine);
        let kind_linker = kind::linker(&engine)?;
        let policy_linker = policy::linker(&engine)?;
        Ok(Arc::new(Runtime {
            engine,
            cache_dir: config.cache_dir,
            kind_linker,
            policy_linker,
            pooling,
        }))
    }

    /// Whether instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// Compile `bytes` (or load them from the cache) for the guest called `name`.
    fn compile(&self, name: &str, bytes: &[u8]) -> Result<(Component, CacheOutcome), RuntimeError> {
        cache::load_or_compile(&self.engine, self.cache_dir.as_deref(), name, bytes)
    }
}

fn engine_config(pooling: bool) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .cranelift_nan_canonicalization(true)
        .wasm_relaxed_simd(false)
        .native_unwind_info(true);
    // Developer aid: `PROXOPS_GUEST_PROFILER=perfmap` writes /tmp/perf-<pid>.map so that
    // `perf report` names guest functions instead of showing JIT addresses.
    if std::env::var("PROXOPS_GUEST_PROFILER").as_deref() == Ok("perfmap") {
        cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    if pooling {
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(POOL_INSTANCES)
            .total_core_instances(4 * POOL_INSTANCES)
            .total_memories(2 * POOL_INSTANCES)
            .total_tables(4 * POOL_INSTANCES)
            .total_stacks(POOL_INSTANCES)
            .max_memory_size(MAX_GUEST_MEMORY)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .max_core_instances_per_component(32)
            .linear_memory_keep_resident(1 << 20)
            .table_keep_resident(16 << 10);
        // A fresh instance's memory is reset when it is freed. Without PAGEMAP_SCAN the
        // whole resident megabyte is memset every time; with it (Linux >= 6.7, `Auto` falls
        // back elsewhere) only the pages the instance wrote are. Fresh instances are what
        // policies and third-party kinds get per evaluation (`proxops-bench`, guest calls).
        if std::env::var_os("PROXOPS_POOL_NO_PAGEMAP").is_none() {
            pool.pagemap_scan(wasmtime::Enabled::Auto);
        }
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    cfg
}

/// Advance the engine's epoch every [`EPOCH_TICK`] until the engine is dropped.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("proxops-epoch".into())
        .spawn(move || {
            loop {
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })
        .expect("spawn the epoch ticker thread");
}

#[cfg(test)]
mod tests;
