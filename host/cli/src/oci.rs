//! Policies and kinds from OCI registries: before a command loads `proxops.yaml`'s guests,
//! every `file: oci://…` entry is made present in the OCI cache (pulled once, checked against
//! its sha256 pin, then used offline); `proxops policy push` publishes a component.

use std::path::{Path, PathBuf};

use proxops_core::pin::OCI_SCHEME;
use proxops_oci::{Credentials, Reference};

use crate::output::{errln, inline, outln};

/// Where pulled components are kept: `<cache>/oci/` (the component cache's folder, or the
/// default one with `--no-cache`: a pulled file is checked against its pin on every use, so it
/// is safe to keep).
pub fn cache_dir(cache: Option<&Path>) -> Option<PathBuf> {
    cache
        .map(Path::to_path_buf)
        .or_else(proxops_runtime::default_cache_dir)
}

/// Pull every `oci://` policy and kind of the repository's `proxops.yaml` that the cache does
/// not hold. `Err` lists what could not be pulled (nothing is run then); an unreadable
/// `proxops.yaml` is left to the loading that follows, which reports it with its fields.
pub async fn pull_pinned(config_root: &Path, cache: Option<&Path>) -> Result<(), Vec<String>> {
    let Ok(settings) = proxops_core::settings::load(config_root) else {
        return Ok(());
    };
    let wanted: Vec<(String, String, String)> = settings
        .policies
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("policies[{i}]"), p.file.clone(), p.sha256.clone()))
        .chain(
            settings
                .kinds
                .iter()
                .map(|k| (k.path(), k.file.clone(), k.sha256.clone())),
        )
        .filter(|(_, file, _)| file.starts_with(OCI_SCHEME))
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let Some(dir) = cache_dir(cache) else {
        return Err(vec![
            "no cache folder to pull OCI components into: set --cache-dir or PROXOPS_CACHE_DIR"
                .into(),
        ]);
    };
    proxops_core::pin::set_oci_cache_dir(dir.clone());
    let credentials = Credentials::from_env();
    let mut errors = Vec::new();
    for (at, file, pin) in wanted {
        let reference = match Reference::parse(&file) {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("proxops.yaml {at}.file: {e}"));
                continue;
            }
        };
        match proxops_oci::fetch(&reference, &pin, &dir, credentials.as_ref()).await {
            Ok((_, true)) => errln!(
                "pulled {} (sha256 {pin}) into the OCI cache",
                inline(&reference.to_string())
            ),
            Ok((_, false)) => {}
            Err(e) => errors.push(format!(
                "proxops.yaml {at}.file: cannot use {}: {e}",
                inline(&file)
            )),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// `proxops policy push FILE oci://…`: publish a component as a Wasm OCI artifact and print
/// the pin to write in `proxops.yaml`.
pub async fn push(wasm: &Path, target: &str) -> anyhow::Result<u8> {
    let bytes =
        std::fs::read(wasm).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", wasm.display()))?;
    if !bytes.starts_with(b"\0asm") {
        anyhow::bail!("{} is not a WebAssembly file", wasm.display());
    }
    let reference = Reference::parse(target)?;
    let registry = proxops_oci::Registry::new(&reference, Credentials::from_env().as_ref())?;
    let digest = registry.push(&reference, &bytes).await?;
    outln!(
        "pushed {} to {reference} (manifest {digest})",
        wasm.display()
    );
    outln!(
        "pin it in proxops.yaml:\n  - file: {reference}\n    sha256: {}",
        proxops_oci::sha256_hex(&bytes)
    );
    Ok(crate::exit::OK)
}
