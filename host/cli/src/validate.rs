//! `proxops validate`: every problem of a repository at once, without contacting PVE.

use std::path::Path;

use proxops_core::Diagnostic;

use crate::context::Context;
use crate::exit;

/// Load and validate; the diagnostics, sorted by file.
pub fn check(
    ctx: &Context,
    repo: &Path,
) -> (
    proxops_core::Repo,
    proxops_reconcile::Catalog,
    Vec<Diagnostic>,
) {
    let folders = ctx.kinds.folders();
    let folders: Vec<&str> = folders.iter().map(String::as_str).collect();
    let (loaded, mut diags) = proxops_core::load(repo, &folders);
    let (catalog, mut more) = proxops_reconcile::validate_repo(
        &ctx.kinds,
        &loaded,
        &proxops_reconcile::Secrets::default(),
    );
    diags.append(&mut more);
    diags.sort();
    (loaded, catalog, diags)
}

pub fn run(ctx: &Context, repo: &Path, json: bool) -> anyhow::Result<u8> {
    let (_, catalog, diags) = check(ctx, repo);
    let errors = diags.iter().filter(|d| d.is_error()).count();
    if json {
        println!("{}", serde_json::to_string_pretty(&diags)?);
    } else {
        for d in &diags {
            println!("{d}");
        }
        let warnings = diags.len() - errors;
        if errors == 0 {
            println!(
                "{} manifests valid ({warnings} warnings)",
                catalog.objects.len()
            );
        } else {
            println!("{errors} errors, {warnings} warnings");
        }
    }
    Ok(if errors == 0 { exit::OK } else { exit::ERROR })
}
