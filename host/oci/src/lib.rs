//! Policies and kinds from an OCI registry, in the CNCF Wasm OCI artifact format: a manifest
//! whose config is `application/vnd.wasm.config.v0+json` and whose one layer is the component
//! (`application/wasm`). The sha256 pin in `proxops.yaml` stays the trust root: a pulled
//! component whose digest differs is refused, never cached, never run; a cached one is used
//! offline, without asking the registry.
//!
//! Only what proxops needs of the distribution API, over the host's reqwest and rustls:
//! pull a tagged or digested manifest and its wasm layer, push one component, anonymous or
//! token auth (`Bearer` challenges, `Basic` credentials from the environment). Signatures are
//! not checked (the pin is). Registries are reached over HTTPS with the platform's trust store;
//! a loopback registry (`localhost`, `127.0.0.1`, `[::1]`) over plain HTTP.

mod client;
mod reference;

pub use client::{Credentials, Registry};
pub use reference::Reference;

use std::path::{Path, PathBuf};

use sha2::Digest as _;

/// The config media type of a Wasm OCI artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the component layer.
pub const WASM_MEDIA_TYPE: &str = "application/wasm";
/// The OCI image manifest media type.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The largest component proxops pulls (a Python policy is about 20 MB).
pub const MAX_COMPONENT_BYTES: usize = 256 << 20;

/// What went wrong talking to a registry, or with what it sent.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(
        "`{0}` is not an OCI reference; write it as oci://REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST)"
    )]
    Reference(String),
    #[error("cannot reach {registry}: {message}")]
    Unreachable { registry: String, message: String },
    #[error("{registry} answered {status} to {what}: {message}")]
    Status {
        registry: String,
        status: u16,
        what: String,
        message: String,
    },
    #[error("{0}")]
    Artifact(String),
    #[error(
        "refused: {reference} holds a component with sha256 {actual}, but the pin is {pin}; nothing was run or cached (if it was republished on purpose, update the pin)"
    )]
    PinMismatch {
        reference: String,
        actual: String,
        pin: String,
    },
    #[error("the OCI cache {path}: {source}")]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("TLS: {0}")]
    Tls(String),
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Where the component pinned to `pin` is kept in `cache_dir` (where loading reads it).
pub fn cached_path(cache_dir: &Path, pin: &str) -> PathBuf {
    proxops_core::pin::oci_cached_path(cache_dir, pin)
}

/// The component pinned to `pin`, from `cache_dir` when it is there whole (no request), else
/// pulled from `reference`, checked against the pin, and cached. Returns its cache path and
/// whether it was pulled.
pub async fn fetch(
    reference: &Reference,
    pin: &str,
    cache_dir: &Path,
    credentials: Option<&Credentials>,
) -> Result<(PathBuf, bool), OciError> {
    let path = cached_path(cache_dir, pin);
    if let Ok(bytes) = std::fs::read(&path)
        && sha256_hex(&bytes) == pin
    {
        return Ok((path, false));
    }
    let registry = Registry::new(reference, credentials)?;
    let wasm = registry.pull(reference).await?;
    let actual = sha256_hex(&wasm);
    if actual != pin {
        return Err(OciError::PinMismatch {
            reference: reference.to_string(),
            actual,
            pin: pin.to_string(),
        });
    }
    let cache = |source| OciError::Cache {
        path: path.clone(),
        source,
    };
    let dir = path.parent().expect("a cache file has a folder");
    std::fs::create_dir_all(dir).map_err(cache)?;
    let tmp = dir.join(format!(".sha256-{pin}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, &wasm).map_err(cache)?;
    std::fs::rename(&tmp, &path).map_err(cache)?;
    Ok((path, true))
}
