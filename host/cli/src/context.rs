//! What every command needs: the WebAssembly runtime and the loaded kinds.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use proxops_reconcile::KindRegistry;
use proxops_runtime::{Runtime, RuntimeConfig};

pub struct Context {
    /// Explicit age identity file for SOPS documents (`--age-identity`).
    pub age_identity: Option<PathBuf>,
    pub runtime: Arc<Runtime>,
    pub kinds: KindRegistry,
    /// Where proxops keeps what a run remembers for the next (failed stop-required changes),
    /// keyed by endpoint: the cache folder, never the repository.
    pub state_dir: Option<PathBuf>,
}

impl Context {
    pub fn new(
        cache_dir: Option<PathBuf>,
        no_cache: bool,
        age_identity: Option<PathBuf>,
    ) -> anyhow::Result<Self> {
        let cache_dir = if no_cache {
            None
        } else {
            cache_dir.or_else(proxops_runtime::default_cache_dir)
        };
        let state_dir = cache_dir
            .clone()
            .or_else(proxops_runtime::default_cache_dir)
            .map(|d| d.join("state"));
        let runtime = Runtime::new(RuntimeConfig { cache_dir })
            .context("starting the WebAssembly runtime")?;
        let kinds = KindRegistry::bundled(&runtime).context("loading the bundled kinds")?;
        Ok(Context {
            age_identity,
            runtime,
            kinds,
            state_dir,
        })
    }
}
