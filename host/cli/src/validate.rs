//! `proxops validate`: every problem of a repository at once, without contacting PVE.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proxops_core::Diagnostic;

use crate::context::Context;
use crate::exit;
use crate::output::outln;
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

/// Load and validate.
pub fn check(ctx: &Context, repo: &Path) -> Checked {
    let folders = ctx.kinds.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let (loaded, mut diags) = proxops_core::load(repo, &folders);
    tracing::debug!(
        "loaded {} manifests in {:?}",
        loaded.manifests.len(),
        started.elapsed()
    );
    let sops = crate::secrets::for_repo(repo, &loaded.clusters, ctx.age_identity.as_deref());
    let (catalog, mut more) =
        proxops_reconcile::validate_repo(&ctx.kinds, &loaded, &crate::secrets::sources(&sops));
    diags.append(&mut more);
    diags.sort();
    Checked {
        repo: loaded,
        catalog,
        diags,
        sops,
    }
}

pub fn run(ctx: &Context, repo: &Path, json: bool) -> anyhow::Result<u8> {
    let Checked { catalog, diags, .. } = check(ctx, repo);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    if json {
        crate::output::json(&diags)?;
    } else {
        for d in &diags {
            outln!("{d}");
        }
        let warnings = diags.len() - errors;
        if errors == 0 {
            outln!(
                "{} manifests valid ({warnings} warnings)",
                catalog.objects.len()
            );
        } else {
            outln!("{errors} errors, {warnings} warnings");
        }
    }
    Ok(if errors == 0 { exit::OK } else { exit::ERROR })
}
