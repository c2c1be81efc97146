//! What every command needs: the WebAssembly runtime and the loaded kinds.

use std::path::{Path, PathBuf};
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
    /// `--trusted-config DIR`: cluster files, `proxops.yaml` and the files they name come
    /// from here; only manifests come from the repository under review.
    pub trusted_config: Option<PathBuf>,
    /// The component cache folder (`None` with `--no-cache`): the memo of validated
    /// manifests is kept there too.
    cache_dir: Option<PathBuf>,
    /// The repository's memo of validated manifests, opened on first use
    /// ([`Context::memo`]); `watch` keeps it from cycle to cycle.
    memo: std::sync::OnceLock<Arc<proxops_reconcile::Memo>>,
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
        let runtime = Runtime::new(RuntimeConfig {
            cache_dir: cache_dir.clone(),
        })
        .context("starting the WebAssembly runtime")?;
        // A component compiles once into the cache; a Python or JavaScript policy takes
        // seconds, so say so rather than look stuck.
        runtime.on_compile(Box::new(|guest, bytes, took| match took {
            None => crate::output::errln!(
                "compiling {} ({:.1} MB) into the component cache; once per file and proxops build…",
                crate::output::inline(guest),
                bytes as f64 / 1e6
            ),
            Some(t) => crate::output::errln!(
                "compiled {} in {:.1}s",
                crate::output::inline(guest),
                t.as_secs_f64()
            ),
        }));
        let kinds = KindRegistry::bundled(&runtime).context("loading the bundled kinds")?;
        Ok(Context {
            age_identity,
            runtime,
            kinds,
            state_dir,
            trusted_config: None,
            cache_dir,
            memo: std::sync::OnceLock::new(),
        })
    }

    /// The memo of validated manifests of `repo` (a process works on one repository): kept
    /// in the cache folder, or in memory only with `--no-cache`.
    pub fn memo(&self, repo: &Path) -> Arc<proxops_reconcile::Memo> {
        self.memo
            .get_or_init(|| {
                Arc::new(match &self.cache_dir {
                    Some(dir) => proxops_reconcile::Memo::open(dir, repo, self.config_root(repo)),
                    None => proxops_reconcile::Memo::in_memory(),
                })
            })
            .clone()
    }

    /// Load the third-party kinds the repository's `proxops.yaml` lists (from the trusted
    /// config folder when one is given), with their grants. A repository without the file,
    /// or without `kinds:`, adds nothing.
    pub fn load_repo_kinds(&mut self, repo: &Path) -> Result<(), Vec<proxops_core::Diagnostic>> {
        let root = self.config_root(repo).to_path_buf();
        let settings = proxops_core::settings::load(&root)?;
        if settings.kinds.is_empty() {
            return Ok(());
        }
        self.kinds
            .load_granted(&self.runtime, &root, &settings.kinds)?;
        // A granted capability that reaches beyond one guest is said at every load.
        for (i, (k, _)) in self.kinds.iter().enumerate() {
            if let proxops_reconcile::grant::Trust::Granted(g) = self.kinds.trust(i) {
                for c in proxops_reconcile::grant::endpoint_capabilities(g) {
                    crate::output::errln!(
                        "warning: {}",
                        crate::inspect::capability_warning(&k.info().kind, c)
                    );
                }
            }
        }
        Ok(())
    }

    /// Where cluster files, `proxops.yaml`, policies, SOPS and CA files are read: the
    /// `--trusted-config` folder, else the repository itself.
    /// The component cache folder (`None` with `--no-cache`).
    pub fn cache_dir(&self) -> Option<PathBuf> {
        self.cache_dir.clone()
    }

    pub fn config_root<'a>(&'a self, repo: &'a Path) -> &'a Path {
        self.trusted_config.as_deref().unwrap_or(repo)
    }
}
