//! `proxops validate`: every problem of a repository at once, without contacting PVE.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proxops_core::Diagnostic;

use crate::context::Context;
use crate::exit;
use crate::output::{self, errln, outln};
use crate::secrets::LazySops;

/// A loaded and validated repository.
pub struct Checked {
    pub repo: proxops_core::Repo,
    pub catalog: proxops_reconcile::Catalog,
    /// Sorted by file.
    pub diags: Vec<Diagnostic>,
    /// Each cluster's SOPS document (opened on first use).
    pub sops: BTreeMap<String, Arc<LazySops>>,
}

/// A repository up to its manifests: its cluster files and kind folders, the SOPS documents,
/// and the problems found so far (`proxops.yaml`, cluster files, token variables, folders).
pub struct Config {
    /// `None` when the repository (or the trusted config folder) cannot be opened.
    pub layout: Option<Arc<proxops_core::Layout>>,
    /// Sorted by file.
    pub diags: Vec<Diagnostic>,
    pub sops: BTreeMap<String, Arc<LazySops>>,
}

impl Config {
    /// The SOPS documents as the engine's per-cluster secret sources.
    pub fn secrets(&self) -> proxops_reconcile::Secrets {
        crate::secrets::sources(&self.sops)
    }
}

/// Read everything but the manifests. With `--trusted-config`, cluster files, `proxops.yaml`
/// and the SOPS files come from that folder and only the manifests from `repo`.
pub fn config(ctx: &Context, repo: &Path) -> Config {
    let folders = ctx.kinds.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let config = ctx.config_root(repo);
    let (layout, mut diags) = proxops_core::load_layout(repo, config, &folders);
    // Token variables: PROXOPS_*, PVE_*, or allowed by name in proxops.yaml (whose own errors
    // are reported here too, so that validate shows every problem).
    let allowed = match proxops_core::settings::load(config) {
        Ok(settings) => {
            if let Some(layout) = &layout {
                diags.extend(check_policy_scopes(ctx, &settings, &layout.clusters));
            }
            settings.token_env
        }
        Err(mut errors) => {
            errors.retain(|d| d.file == proxops_core::settings::FILE);
            diags.append(&mut errors);
            Vec::new()
        }
    };
    let clusters = layout.as_ref().map(|l| &l.clusters);
    for cluster in clusters.into_iter().flat_map(BTreeMap::values) {
        diags.extend(proxops_core::cluster::check_token_env(cluster, &allowed));
    }
    let sops = match clusters {
        Some(clusters) => crate::secrets::for_repo(config, clusters, ctx.age_identity.as_deref()),
        None => BTreeMap::new(),
    };
    diags.sort();
    Config {
        layout: layout.map(Arc::new),
        diags,
        sops,
    }
}

/// A policy scope naming a kind or a cluster this repository does not have scopes the policy
/// out of everything it was meant for (an enforce policy that never runs, a typo away): an
/// error at the entry, with the names it could mean.
fn check_policy_scopes(
    ctx: &Context,
    settings: &proxops_core::settings::RepoSettings,
    clusters: &BTreeMap<String, proxops_core::ClusterFile>,
) -> Vec<Diagnostic> {
    let file = settings
        .file
        .as_deref()
        .unwrap_or(proxops_core::settings::FILE);
    let kinds: Vec<String> = (0..ctx.kinds.len())
        .map(|k| ctx.kinds.get(k).info().kind.clone())
        .collect();
    let cluster_names: Vec<String> = clusters.keys().cloned().collect();
    let mut diags = Vec::new();
    for entry in &settings.policies {
        for (field, named, known) in [
            ("kinds", &entry.scope.kinds, &kinds),
            ("clusters", &entry.scope.clusters, &cluster_names),
        ] {
            for (i, name) in named.iter().enumerate() {
                if !known.contains(name) {
                    diags.push(Diagnostic::error(
                        file,
                        format!("{}.scope.{field}[{i}]", entry.path()),
                        format!(
                            "`{}` is not one of this repository's {field} ({}); the policy would never run for it",
                            proxops_core::diag::quote(name),
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
    }
    diags
}

/// Disruption budget membership, per cluster with manifests: a guest in two budgets, a
/// `members` name no manifest declares, a `metadata.budget` naming no budget of its
/// cluster (as plan and apply refuse them). A malformed `proxops.yaml` was reported already.
fn check_budgets(
    ctx: &Context,
    repo: &Path,
    catalog: &proxops_reconcile::Catalog,
) -> Vec<Diagnostic> {
    let Ok(settings) = proxops_core::settings::load(ctx.config_root(repo)) else {
        return Vec::new();
    };
    if settings.budgets.is_empty() && catalog.objects.iter().all(|o| o.budget.is_none()) {
        return Vec::new();
    }
    let file = settings
        .file
        .as_deref()
        .unwrap_or(proxops_core::settings::FILE);
    let mut clusters: Vec<&str> = catalog
        .objects
        .iter()
        .map(|o| o.id.cluster.as_str())
        .collect();
    clusters.sort_unstable();
    clusters.dedup();
    let mut diags = Vec::new();
    for cluster in clusters {
        let objects: Vec<proxops_reconcile::Object> = catalog
            .objects
            .iter()
            .filter(|o| o.id.cluster == cluster)
            .cloned()
            .collect();
        let (_, mut found) = proxops_reconcile::rollout::Rollout::resolve(
            &settings.budgets,
            cluster,
            &objects,
            file,
        );
        diags.append(&mut found);
    }
    diags.dedup();
    diags
}

/// Load and validate every manifest.
pub fn check(ctx: &Context, repo: &Path) -> Checked {
    let started = std::time::Instant::now();
    let Config {
        layout,
        mut diags,
        sops,
    } = config(ctx, repo);
    let mut loaded = proxops_core::Repo {
        root: repo.to_path_buf(),
        config_root: ctx.config_root(repo).to_path_buf(),
        ..Default::default()
    };
    if let Some(layout) = &layout {
        let (manifests, mut more) = layout.all_manifests();
        loaded.clusters = layout.clusters.clone();
        loaded.manifests = manifests;
        diags.append(&mut more);
    }
    tracing::debug!(
        "loaded {} manifests in {:?}",
        loaded.manifests.len(),
        started.elapsed()
    );
    let (catalog, mut more) =
        proxops_reconcile::validate_repo(&ctx.kinds, &loaded, &crate::secrets::sources(&sops));
    diags.append(&mut more);
    diags.extend(check_budgets(ctx, repo, &catalog));
    diags.sort();
    Checked {
        repo: loaded,
        catalog,
        diags,
        sops,
    }
}

pub fn run(ctx: &Context, repo: &Path, json: bool) -> anyhow::Result<u8> {
    let Checked {
        catalog,
        diags,
        repo: loaded,
        ..
    } = check(ctx, repo);
    if loaded.clusters.is_empty() && loaded.manifests.is_empty() && diags.is_empty() {
        // "0 manifests valid" would read as success for an empty or mistyped path.
        errln!(
            "error: {} holds no cluster files (clusters/*.yaml) and no manifests: nothing to validate; is it a proxops repository?",
            output::inline(&repo.display().to_string())
        );
        return Ok(exit::ERROR);
    }
    let errors = diags.iter().filter(|d| d.is_error()).count();
    if json {
        crate::output::json(&diags)?;
    } else {
        for d in &diags {
            outln!("{}", output::inline(&d.to_string()));
        }
        let warnings = crate::render::count(diags.len() - errors, "warning", "warnings");
        if errors == 0 {
            outln!(
                "{} valid ({warnings})",
                crate::render::count(catalog.objects.len(), "manifest", "manifests")
            );
        } else {
            outln!(
                "{}, {warnings}",
                crate::render::count(errors, "error", "errors")
            );
        }
    }
    Ok(if errors == 0 { exit::OK } else { exit::ERROR })
}

/// A repository argument must be a folder: `plan vm/lab/web.yaml` says so instead of failing
/// later with a message about something else.
pub fn ensure_repository(path: &Path, flag: &str) -> anyhow::Result<()> {
    proxops_core::RepoDir::open(path)
        .map(drop)
        .map_err(|e| anyhow::anyhow!("{flag}{e}"))
}
