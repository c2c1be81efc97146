//! The on-disk cache of compiled components.
//!
//! An entry is named `<sha256 of the .wasm>-<sha256 of the engine's compatibility hash>.cwasm`
//! and holds a header (magic, SHA-256 of the payload) and the payload wasmtime serialized.
//! Before anything is deserialized the header and the payload hash are checked and
//! wasmtime must recognise the payload as a component; a corrupt, truncated or foreign
//! entry is discarded and rebuilt, never trusted. Entries are written to a temporary file
//! and renamed, so a crash never leaves a torn entry.
//!
//! Threat model: the cache folder is as trusted as the proxops binary (same user). The
//! checks defend against corruption, other wasmtime versions and other engine settings;
//! they are not a signature.
//!
//! Before the cache, a bundled kind's precompiled artifact (made by host/guests/build.rs and
//! embedded in the binary, as trusted as the binary) is tried: its frame must name the very
//! `.wasm` being loaded and its payload hash must match, then wasmtime must accept it for
//! this engine (version, settings, CPU features). Any refusal falls back to the cache.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::{Engine, Precompiled};

use crate::RuntimeError;

const MAGIC: &[u8] = b"PROXOPS-CWASM\x01";

/// What happened when a component was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from the artifact precompiled at build time and embedded in the binary.
    Precompiled,
    /// Loaded from a valid cache entry; nothing was compiled.
    Hit,
    /// Compiled and stored.
    Miss,
    /// A cache entry existed but failed its checks; compiled again and replaced.
    Rebuilt,
    /// No cache folder: compiled in memory.
    Disabled,
}

/// The cache folder when none is given: `$PROXOPS_CACHE_DIR`, else the user's cache folder
/// (`$XDG_CACHE_HOME/proxops/components` or `~/.cache/proxops/components`).
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PROXOPS_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    directories::ProjectDirs::from("", "", "proxops").map(|d| d.cache_dir().join("components"))
}

fn entry_path(engine: &Engine, dir: &Path, wasm: &[u8]) -> PathBuf {
    let compat = hex::encode(&proxops_engine::engine_digest(engine)[..16]);
    let digest = hex::encode(Sha256::digest(wasm));
    dir.join(format!("{digest}-{compat}.cwasm"))
}

pub(crate) fn load_or_compile(
    engine: &Engine,
    dir: Option<&Path>,
    name: &str,
    wasm: &[u8],
    progress: &dyn Fn(Option<std::time::Duration>),
) -> Result<(Component, CacheOutcome), RuntimeError> {
    let compile = || {
        progress(None);
        let started = std::time::Instant::now();
        let component = Component::new(engine, wasm).map_err(|e| RuntimeError::Compile {
            guest: name.to_string(),
            message: format!("{e:#}"),
        });
        progress(Some(started.elapsed()));
        component
    };
    let Some(dir) = dir else {
        return Ok((compile()?, CacheOutcome::Disabled));
    };
    let path = entry_path(engine, dir, wasm);
    let mut outcome = CacheOutcome::Miss;
    match std::fs::read(&path) {
        Ok(bytes) => match load_entry(engine, &bytes) {
            Some(component) => return Ok((component, CacheOutcome::Hit)),
            None => {
                tracing::warn!(path = %path.display(), "discarding a corrupt or foreign cache entry");
                outcome = CacheOutcome::Rebuilt;
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), "cannot read cache entry: {e}"),
    }
    let component = compile()?;
    let payload = component.serialize().map_err(|e| RuntimeError::Compile {
        guest: name.to_string(),
        message: format!("{e:#}"),
    })?;
    if let Err(source) = store_entry(dir, &path, &payload) {
        // A read-only or full cache must not stop the run; it only costs time.
        tracing::warn!(
            "{}",
            RuntimeError::Cache {
                path: path.clone(),
                source
            }
        );
    }
    Ok((component, outcome))
}

/// Load a precompiled artifact (framed by [`proxops_engine::frame`]) made for `wasm`, or say
/// why it cannot be used. `reference` gives the [`proxops_engine::engine_digest`] of this
/// runtime's settings compiled for a target (what the build's engine must have been).
pub(crate) fn load_precompiled(
    engine: &Engine,
    reference: impl FnOnce(&str) -> Result<[u8; 32], String>,
    wasm: &[u8],
    framed: &[u8],
) -> Result<Component, String> {
    let framed = proxops_engine::unframe(wasm, framed).map_err(|e| e.to_string())?;
    // wasmtime's own check ignores some compiler settings (NaN canonicalization among
    // them) that proxops relies on, so the whole engine is compared first.
    if reference(framed.target)? != framed.engine_digest {
        return Err(format!(
            "it was compiled for {} with other engine settings or another wasmtime",
            framed.target
        ));
    }
    if Engine::detect_precompiled(framed.payload) != Some(Precompiled::Component) {
        return Err("its payload is not a precompiled component".into());
    }
    // SAFETY: the payload is what `Engine::precompile_component` produced at build time for
    // exactly these `wasm` bytes (the frame checked its SHA-256 and the payload's CRC-32), by an engine with this
    // runtime's settings (the digest above), and wasmtime itself refuses artifacts of
    // another version or needing CPU features this machine lacks; any refusal means compiling.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, framed.payload) };
    component.map_err(|e| format!("wasmtime refused it: {e:#}"))
}

/// Check an entry and deserialize it; `None` when any check fails.
fn load_entry(engine: &Engine, bytes: &[u8]) -> Option<Component> {
    let rest = bytes.strip_prefix(MAGIC)?;
    if rest.len() < 32 {
        return None;
    }
    let (hash, payload) = rest.split_at(32);
    if Sha256::digest(payload).as_slice() != hash {
        return None;
    }
    if Engine::detect_precompiled(payload) != Some(Precompiled::Component) {
        return None;
    }
    // SAFETY: the payload was produced by `Component::serialize` of this same program (its
    // SHA-256, stored beside it by `store_entry`, matches), and wasmtime itself rejects
    // artifacts of another version or of incompatible engine settings.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, payload) };
    component.ok()
}

fn store_entry(dir: &Path, path: &Path, payload: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir)?;
    tmp.1.write_all(MAGIC)?;
    tmp.1.write_all(&Sha256::digest(payload))?;
    tmp.1.write_all(payload)?;
    tmp.1.sync_all()?;
    drop(tmp.1);
    std::fs::rename(&tmp.0, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp.0);
    })
}

/// A uniquely named temporary file in `dir` (same file system, so the rename is atomic).
fn tempfile_in(dir: &Path) -> std::io::Result<(PathBuf, std::fs::File)> {
    let unique = format!(
        ".tmp-{}-{:?}-{}",
        std::process::id(),
        std::thread::current().id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let path = dir.join(unique.replace(['(', ')'], ""));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    Ok((path, file))
}
