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
pub mod calls;
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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

pub use cache::{CacheOutcome, default_cache_dir};
pub use error::{GuestError, RuntimeError};
pub use guest::{GuestRun, off_tokio};
pub use host::{GuestLog, SecretAccess, SecretError, SecretSource};
pub use kind::{KindComponent, KindInstance};
pub use limits::Limits;
pub use policy::{PolicyComponent, PolicyInstance};

/// How often the epoch ticker advances; deadlines are counted in these ticks.
const EPOCH_TICK: Duration = Duration::from_millis(10);
pub use proxops_engine::MAX_GUEST_MEMORY;

/// Settings of a [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Folder for compiled components; `None` disables the disk cache.
    pub cache_dir: Option<PathBuf>,
}

/// What a [`Runtime`] says about a compile that really happens (no precompiled artifact, no
/// cache entry): before it (`took` is `None`) and after it. Components of Python or JavaScript
/// policies take seconds to compile once; the CLI shows it.
pub type CompileProgress = Box<dyn Fn(&str, usize, Option<Duration>) + Send + Sync>;

/// An engine digest for one target, or why no engine could be made for it.
type ReferenceDigest = Result<[u8; 32], String>;

/// The process-wide WebAssembly runtime. Cheap to share behind an `Arc`.
pub struct Runtime {
    engine: Engine,
    cache_dir: Option<PathBuf>,
    kind_linker: Linker<host::HostState>,
    policy_linker: Linker<host::HostState>,
    pooling: bool,
    /// [`Runtime::reference_digest`]'s results, per target.
    reference_digests: Mutex<Vec<(String, ReferenceDigest)>>,
    on_compile: std::sync::OnceLock<CompileProgress>,
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
            reference_digests: Mutex::new(Vec::new()),
            on_compile: std::sync::OnceLock::new(),
        }))
    }

    /// Call `progress(guest, bytes, None)` before each compile that really happens and
    /// `progress(guest, bytes, Some(took))` after it. Set once; later calls are ignored.
    pub fn on_compile(&self, progress: CompileProgress) {
        let _ = self.on_compile.set(progress);
    }

    /// Whether instances come from the pooling allocator.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// The compiled component of `bytes` for the guest called `name`: from `precompiled` (an
    /// artifact made at build time) when this engine accepts it, else from the disk cache,
    /// else compiled (and cached).
    fn compile(
        &self,
        name: &str,
        bytes: &[u8],
        precompiled: Option<&[u8]>,
    ) -> Result<(Component, CacheOutcome), RuntimeError> {
        if let Some(framed) = precompiled {
            let reference = |target: &str| self.reference_digest(target);
            match cache::load_precompiled(&self.engine, reference, bytes, framed) {
                Ok(component) => return Ok((component, CacheOutcome::Precompiled)),
                Err(reason) => tracing::info!(
                    guest = name,
                    "not using the precompiled component ({reason}); compiling it instead"
                ),
            }
        }
        let progress = |took: Option<Duration>| {
            if let Some(p) = self.on_compile.get() {
                p(name, bytes.len(), took);
            }
        };
        cache::load_or_compile(
            &self.engine,
            self.cache_dir.as_deref(),
            name,
            bytes,
            &progress,
        )
    }

    /// The engine digest a precompiled artifact for `target` must carry: this runtime's
    /// settings, compiled for `target` as host/guests/build.rs does. Computed once per target.
    fn reference_digest(&self, target: &str) -> ReferenceDigest {
        let mut known = self
            .reference_digests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, digest)) = known.iter().find(|(t, _)| t == target) {
            return digest.clone();
        }
        let digest = proxops_engine::precompile_engine(engine_config(false), target)
            .map(|engine| proxops_engine::engine_digest(&engine))
            .map_err(|e| format!("no engine for its target {target}: {e:#}"));
        known.push((target.to_string(), digest.clone()));
        digest
    }
}

/// The runtime's engine settings: the shared ones (`proxops_engine::engine_config`, which the
/// bundled kinds were precompiled with) plus developer aids that do not change compiled code.
fn engine_config(pooling: bool) -> Config {
    let mut cfg = proxops_engine::engine_config(pooling);
    // Developer aid: `PROXOPS_GUEST_PROFILER=perfmap` writes /tmp/perf-<pid>.map so that
    // `perf report` names guest functions instead of showing JIT addresses.
    if std::env::var("PROXOPS_GUEST_PROFILER").as_deref() == Ok("perfmap") {
        cfg.profiler(wasmtime::ProfilingStrategy::PerfMap);
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
