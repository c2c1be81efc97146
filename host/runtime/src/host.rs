//! What a guest's store holds: a WASI context that grants nothing, the memory limiter, the
//! bounded log, captured stderr (for panic messages) and, when granted, the secret source.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView,
    WasiView,
};

use crate::limits::{Limiter, Limits};

/// Bytes of stderr kept per instance: enough for a panic message.
const STDERR_CAPACITY: usize = 8 << 10;
/// Longest log line kept; longer lines are cut.
const LOG_LINE_MAX: usize = 1024;

/// Why a secret could not be given to a guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretError {
    /// No value at that path.
    Missing,
    /// The value at that path is empty.
    Empty,
    /// The path is malformed or names a non-string value.
    Invalid(String),
}

/// Where granted guests get secret values from (the cluster's SOPS document).
pub trait SecretSource: Send + Sync {
    fn resolve(&self, path: &str) -> Result<String, SecretError>;
}

/// Log lines one call produced, bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestLog {
    pub lines: Vec<String>,
    /// Lines that did not fit.
    pub dropped: usize,
}

pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) log: GuestLog,
    log_cap: usize,
    stderr: MemoryOutputPipe,
    pub(crate) secrets: Option<Arc<dyn SecretSource>>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A wall clock stopped at a fixed instant, so guest output never depends on the time.
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        // 2024-01-01T00:00:00Z.
        Duration::from_secs(1_704_067_200)
    }
}

/// A monotonic clock that never advances.
struct FixedMonotonicClock;

impl HostMonotonicClock for FixedMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        0
    }
}

/// A fixed byte cycle for both random interfaces: guests are deterministic functions of
/// their inputs, and none of them has a use for real entropy.
fn deterministic_bytes() -> Deterministic {
    let mut state: u64 = 0x5052_4f58_4f50_5300; // "PROXOPS\0"
    let bytes = (0..256)
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as u8
        })
        .collect();
    Deterministic::new(bytes)
}

impl HostState {
    pub(crate) fn new(limits: &Limits, secrets: Option<Arc<dyn SecretSource>>) -> Self {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        // WasiCtxBuilder grants nothing by default: no preopened dirs, no env, no args,
        // stdin empty, stdout discarded, sockets and name lookup denied. We only replace
        // the clocks and randomness and capture stderr for panic messages.
        let wasi = WasiCtxBuilder::new()
            .stderr(stderr.clone())
            .wall_clock(FixedWallClock)
            .monotonic_clock(FixedMonotonicClock)
            .secure_random(deterministic_bytes())
            .insecure_random(deterministic_bytes())
            .insecure_random_seed(0x0050_524f_584f_5053)
            .allow_ip_name_lookup(false)
            .allow_tcp(false)
            .allow_udp(false)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(256);
        HostState {
            wasi,
            table,
            limiter: Limiter {
                memory: limits.memory,
                refused: false,
            },
            log: GuestLog::default(),
            log_cap: limits.log_lines,
            stderr,
            secrets,
        }
    }

    /// Forget what the previous call left behind.
    pub(crate) fn begin_call(&mut self) {
        self.log = GuestLog::default();
        self.limiter.refused = false;
    }

    /// What the guest wrote to stderr so far (panic messages land here).
    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents()).into_owned()
    }

    pub(crate) fn push_log(&mut self, level: &str, message: &str) {
        if self.log.lines.len() >= self.log_cap {
            self.log.dropped += 1;
            return;
        }
        let mut line = format!("{level}: {message}");
        if line.len() > LOG_LINE_MAX {
            let mut cut = LOG_LINE_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        self.log.lines.push(line);
    }
}
