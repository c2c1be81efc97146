//! The wasmtime engine settings of proxops, in one place for the two engines that must agree:
//! the runtime's (`proxops-runtime`) and the one `host/guests/build.rs` precompiles the bundled
//! kinds with. Also the frame around a precompiled artifact, which ties it to the exact `.wasm`
//! it was compiled from (SHA-256) and lets a corrupt one be detected before wasmtime reads it
//! (CRC-32 of the payload).
//!
//! This crate is a build-dependency of `proxops-guests` as well as a dependency of the
//! runtime, so it stays small: wasmtime, sha2, crc32fast, and the feature pins in its Cargo.toml that
//! keep the build script's wasmtime the very same compiled crate as the runtime's.

use std::hash::{Hash as _, Hasher};

use sha2::{Digest, Sha256};
pub use wasmtime;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// The largest linear memory any guest may have; per-guest caps are at most this.
pub const MAX_GUEST_MEMORY: usize = 512 << 20;
/// Instances that may be alive at once across all guests (pool size).
pub const POOL_INSTANCES: u32 = 256;

/// Every engine setting that decides what compiled code looks like, plus the instance
/// allocator (the pooling allocator when `pooling`). Both the runtime and the build-time
/// precompile start from this; wasmtime refuses to load an artifact compiled under other
/// settings, so any change here only costs a compile, never a wrong load.
pub fn engine_config(pooling: bool) -> Config {
    let mut cfg = Config::new();
    cfg.epoch_interruption(true)
        .max_wasm_stack(1 << 20)
        .cranelift_nan_canonicalization(true)
        .wasm_relaxed_simd(false)
        .native_unwind_info(true);
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

/// Starts every framed precompiled artifact; the version byte changes with the layout.
const MAGIC: &[u8] = b"PROXOPS-PRECOMPILED\x03";
const DIGEST: usize = 32;
/// The payload's checksum: CRC-32, little-endian.
const CHECKSUM: usize = 4;

/// SHA-256 of wasmtime's `Engine::precompile_compatibility_hash`: wasmtime's version, the
/// target, every compiler flag (NaN canonicalization and the CPU features included),
/// tunables and wasm features. Stable across processes of the same build, so it names an
/// engine in cache keys and in a precompiled artifact's frame.
pub fn engine_digest(engine: &Engine) -> [u8; DIGEST] {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
}

/// The engine that precompiles for `target`: `config` (the runtime's settings, with on-demand
/// allocation, which does not change compiled code) for that target, with its CPU features
/// the target's baseline rather than this machine's, so the artifact runs on any CPU of it.
pub fn precompile_engine(mut config: Config, target: &str) -> Result<Engine, wasmtime::Error> {
    config.allocation_strategy(InstanceAllocationStrategy::OnDemand);
    config.target(target)?;
    Engine::new(&config)
}

/// Wrap `payload` (what `engine.precompile_component(wasm)` returned, `engine` made by
/// [`precompile_engine`] for `target`) in the frame [`unframe`] reads: magic, SHA-256 of
/// `wasm`, CRC-32 of `payload`, [`engine_digest`] of `engine`, `target`, `payload`.
///
/// The payload is checked for corruption, not forgery: a bundled kind's artifact is embedded
/// in the same binary as the code that loads it, so whoever could forge it could change that
/// code too. CRC-32 detects every burst error up to 32 bits and nearly all others, at a small
/// fraction of SHA-256's cost on the megabytes of code verified at every start (SHA-256 of
/// the payloads was 18% of the warm first plan's CPU, `bench/README.md`).
pub fn frame(wasm: &[u8], engine: &Engine, target: &str, payload: &[u8]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(MAGIC.len() + 2 * DIGEST + CHECKSUM + 2 + target.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&Sha256::digest(wasm));
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(&engine_digest(engine));
    let len = u16::try_from(target.len()).expect("a target triple is short");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// A framed artifact whose frame checked out for the `.wasm` being loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed<'a> {
    /// The target triple it was compiled for.
    pub target: &'a str,
    /// [`engine_digest`] of the engine that compiled it.
    pub engine_digest: [u8; DIGEST],
    /// What wasmtime serialized.
    pub payload: &'a [u8],
}

/// Why a framed artifact was not even handed to wasmtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("it is not a proxops precompiled artifact (no frame, or a frame of another version)")]
    NotFramed,
    #[error("it was compiled from another .wasm than the one being loaded")]
    OtherWasm,
    #[error("it is corrupt (its payload does not match the CRC-32 in its frame)")]
    Corrupt,
}

/// Read the frame of `framed`; `Ok` only if it is intact and was made for exactly `wasm`.
pub fn unframe<'a>(wasm: &[u8], framed: &'a [u8]) -> Result<Framed<'a>, FrameError> {
    let rest = framed.strip_prefix(MAGIC).ok_or(FrameError::NotFramed)?;
    let take = |rest: &'a [u8], n: usize| {
        (rest.len() >= n)
            .then(|| rest.split_at(n))
            .ok_or(FrameError::NotFramed)
    };
    let (wasm_digest, rest) = take(rest, DIGEST)?;
    let (checksum, rest) = take(rest, CHECKSUM)?;
    let (engine, rest) = take(rest, DIGEST)?;
    let (len, rest) = take(rest, 2)?;
    let (target, payload) = take(rest, usize::from(u16::from_le_bytes([len[0], len[1]])))?;
    let target = std::str::from_utf8(target).map_err(|_| FrameError::NotFramed)?;
    if Sha256::digest(wasm).as_slice() != wasm_digest {
        return Err(FrameError::OtherWasm);
    }
    if crc32fast::hash(payload).to_le_bytes() != checksum {
        return Err(FrameError::Corrupt);
    }
    Ok(Framed {
        target,
        engine_digest: engine.try_into().expect("DIGEST bytes"),
        payload,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_refuses_other_wasm_and_corruption() {
        let engine = Engine::new(&engine_config(false)).unwrap();
        let target = "x86_64-unknown-linux-gnu";
        let framed = frame(b"wasm", &engine, target, b"payload");
        let read = unframe(b"wasm", &framed).unwrap();
        assert_eq!(read.payload, b"payload");
        assert_eq!(read.target, target);
        assert_eq!(read.engine_digest, engine_digest(&engine));
        assert_eq!(unframe(b"other", &framed), Err(FrameError::OtherWasm));
        let mut flipped = framed.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(unframe(b"wasm", &flipped), Err(FrameError::Corrupt));
        assert_eq!(
            unframe(b"wasm", &framed[..MAGIC.len() + 10]),
            Err(FrameError::NotFramed)
        );
        assert_eq!(unframe(b"wasm", b"payload"), Err(FrameError::NotFramed));
    }

    #[test]
    fn the_engine_digest_tells_settings_apart_that_wasmtime_would_load_anyway() {
        // wasmtime deserializes an artifact compiled without NaN canonicalization into an
        // engine that has it (it deems the flag irrelevant); guests' determinism needs it.
        let digest = |nan: bool| {
            let mut cfg = engine_config(false);
            cfg.cranelift_nan_canonicalization(nan);
            engine_digest(&Engine::new(&cfg).unwrap())
        };
        assert_eq!(digest(true), digest(true));
        assert_ne!(digest(true), digest(false));
    }
}
