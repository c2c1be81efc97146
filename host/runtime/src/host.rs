//! What a guest's store holds: a WASI context that grants nothing, the memory limiter, the
//! bounded log (log imports, stdout and stderr all land in it), the head of stderr (for panic
//! messages) and, when granted, the secret source.
//!
//! WASI as guests see it: no files, env, args or sockets (denied with an error the guest
//! sees), stdin empty, clocks frozen, randomness a fixed cycle, and sleeps that end at once
//! (time does not pass inside a guest, so a guest waiting for the clock spins until its
//! deadline stops it). Nothing a guest does through WASI can block the host thread.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult, subscribe};
use wasmtime_wasi::{
    Deterministic, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView,
    WasiView,
};

use crate::RuntimeError;
use crate::limits::{Limiter, Limits};

/// Bytes of stderr kept per call for the panic message.
const STDERR_HEAD: usize = 8 << 10;
/// Longest log line kept; longer lines are cut.
const LOG_LINE_MAX: usize = 1024;
/// How many bytes a guest may hand over in one stdout/stderr write.
const WRITE_PERMIT: usize = 64 << 10;

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

/// What a guest may do with the cluster's secrets (`proxops:kind/secrets`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SecretAccess {
    /// Nothing: every lookup answers `denied` (policies, kinds granted no secret).
    #[default]
    None,
    /// Values (`resolve`, `find`) and references of any secret: the bundled kinds, built from
    /// this repository's source.
    Values,
    /// References (`reference`, `matches`, `find`) of these dot-paths only, never a value: a
    /// third-party kind, with the refs its grant names.
    Refs(std::collections::BTreeSet<String>),
}

impl SecretAccess {
    /// Whether the guest may compare against the secret at `path` (`matches`).
    pub fn may_compare(&self, path: &str) -> bool {
        match self {
            SecretAccess::None => false,
            SecretAccess::Values => true,
            SecretAccess::Refs(refs) => refs.contains(path),
        }
    }

    /// Whether the guest may mint a reference to the secret at `path`: a third-party kind
    /// granted it. The bundled kinds hold values and send no reference (the host refuses one
    /// in their calls: it could only have come from a manifest's text).
    pub fn may_refer(&self, path: &str) -> bool {
        matches!(self, SecretAccess::Refs(refs) if refs.contains(path))
    }
}

/// Comparisons (`matches`, `find`) a third-party kind may ask for in one call: enough for its
/// objects' refs, too few to guess a value by trying a dictionary.
pub const COMPARISONS_PER_CALL: u32 = 32;

/// Where granted guests get secret values from (the cluster's SOPS document).
pub trait SecretSource: Send + Sync {
    fn resolve(&self, path: &str) -> Result<String, SecretError>;

    /// The dot-path of the string entry below `prefix` whose value equals `value` (adopt's
    /// match of a live value against the document; no value is handed out).
    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError>;

    /// Whether a string is stored at `path`, without handing out its value (the host's own
    /// question: is an API token's secret in the document?).
    fn contains(&self, path: &str) -> bool {
        self.resolve(path).is_ok()
    }

    /// Whether [`SecretSource::store`] can write now (the document opens and verifies): asked
    /// before a request whose answer must be stored is sent.
    fn writable(&self) -> Result<(), SecretError> {
        Err(SecretError::Invalid(
            "this secret source cannot store values".to_string(),
        ))
    }

    /// Stores `value` as the string at `parent.name` of the document (replacing a string
    /// there), for the host's own use: an API token's secret, which PVE shows once. Sources
    /// that cannot write refuse. Errors never hold the value.
    fn store(&self, parent: &[&str], name: &str, value: &str) -> Result<(), SecretError> {
        let _ = (parent, name, value);
        self.writable()
    }
}

/// Log lines one call produced, bounded: `log` imports as `<level>: <text>`, output as
/// `stdout: <line>` and `stderr: <line>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestLog {
    pub lines: Vec<String>,
    /// Lines that did not fit.
    pub dropped: usize,
}

/// The per-call sink shared by the store and the guest's stdout/stderr streams.
#[derive(Debug, Default)]
pub(crate) struct LogSink {
    pub(crate) log: GuestLog,
    cap: usize,
    /// Unfinished last line of stdout (0) and stderr (1).
    partial: [Vec<u8>; 2],
    /// The first bytes of this call's stderr.
    stderr_head: Vec<u8>,
}

impl LogSink {
    fn push(&mut self, line: String) {
        if self.log.lines.len() >= self.cap {
            self.log.dropped += 1;
            return;
        }
        self.log.lines.push(cut(line));
    }

    fn write(&mut self, stream: usize, mut bytes: &[u8]) {
        if stream == 1 && self.stderr_head.len() < STDERR_HEAD {
            let room = STDERR_HEAD - self.stderr_head.len();
            self.stderr_head
                .extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
        while let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            self.extend_partial(stream, &bytes[..nl]);
            self.end_line(stream);
            bytes = &bytes[nl + 1..];
        }
        self.extend_partial(stream, bytes);
    }

    fn extend_partial(&mut self, stream: usize, bytes: &[u8]) {
        // Keep one byte more than a line holds, so that `cut` marks the line as cut.
        let room = (LOG_LINE_MAX + 1).saturating_sub(self.partial[stream].len());
        self.partial[stream].extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    fn end_line(&mut self, stream: usize) {
        let bytes = std::mem::take(&mut self.partial[stream]);
        let name = if stream == 0 { "stdout" } else { "stderr" };
        self.push(format!("{name}: {}", String::from_utf8_lossy(&bytes)));
    }

    /// The call ended: flush unfinished lines and hand the log over.
    pub(crate) fn finish(&mut self) -> GuestLog {
        for stream in 0..2 {
            if !self.partial[stream].is_empty() {
                self.end_line(stream);
            }
        }
        std::mem::take(&mut self.log)
    }

    pub(crate) fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr_head).into_owned()
    }

    fn begin(&mut self) {
        let cap = self.cap;
        *self = LogSink {
            cap,
            ..LogSink::default()
        };
    }
}

/// `line` cut to [`LOG_LINE_MAX`] bytes (on a character boundary), marked with `…`.
fn cut(mut line: String) -> String {
    if line.len() > LOG_LINE_MAX {
        let mut at = LOG_LINE_MAX;
        while !line.is_char_boundary(at) {
            at -= 1;
        }
        line.truncate(at);
        line.push('…');
    }
    line
}

fn lock(sink: &Mutex<LogSink>) -> MutexGuard<'_, LogSink> {
    sink.lock().unwrap_or_else(|e| e.into_inner())
}

/// A guest's stdout or stderr: every write goes into the call's bounded log.
#[derive(Clone)]
struct Captured {
    sink: Arc<Mutex<LogSink>>,
    /// 0 stdout, 1 stderr.
    stream: usize,
}

impl IsTerminal for Captured {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Captured {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Captured {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Captured {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        lock(&self.sink).write(self.stream, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl tokio::io::AsyncWrite for Captured {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        lock(&self.sink).write(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

pub(crate) struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) sink: Arc<Mutex<LogSink>>,
    pub(crate) secrets: Option<Arc<dyn SecretSource>>,
    pub(crate) secret_access: SecretAccess,
    /// Comparisons (`matches`, `find`) made in the current call.
    pub(crate) comparisons: u32,
    /// Secret lookups the guest made in the current call (granted or not): a call that made
    /// none is a function of its inputs and the component alone.
    pub(crate) secret_lookups: u32,
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
        let sink = Arc::new(Mutex::new(LogSink {
            cap: limits.log_lines,
            ..LogSink::default()
        }));
        let out = |stream| Captured {
            sink: sink.clone(),
            stream,
        };
        // WasiCtxBuilder grants nothing by default: no preopened dirs, no env, no args,
        // stdin empty, sockets and name lookup denied. We replace the clocks and randomness
        // and send stdout and stderr into the bounded log.
        let wasi = WasiCtxBuilder::new()
            .stdout(out(0))
            .stderr(out(1))
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
            sink,
            secrets,
            secret_access: SecretAccess::None,
            comparisons: 0,
            secret_lookups: 0,
        }
    }

    /// Forget what the previous call left behind.
    pub(crate) fn begin_call(&mut self) {
        lock(&self.sink).begin();
        self.limiter.refused = false;
        self.secret_lookups = 0;
        self.comparisons = 0;
    }

    /// The call ended: its log.
    pub(crate) fn finish_call(&mut self) -> GuestLog {
        lock(&self.sink).finish()
    }

    /// What the guest wrote to stderr in this call (panic messages land here).
    pub(crate) fn stderr_text(&self) -> String {
        lock(&self.sink).stderr_text()
    }

    pub(crate) fn push_log(&mut self, level: &str, message: &str) {
        let mut sink = lock(&self.sink);
        if sink.log.lines.len() >= sink.cap {
            sink.log.dropped += 1;
            return;
        }
        sink.push(format!("{level}: {message}"));
    }
}

/// A sleep that is over as soon as it starts: guest time does not pass.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl Pollable for Elapsed {
    async fn ready(&mut self) {}
}

fn elapsed_pollable(
    mut store: StoreContextMut<'_, HostState>,
) -> wasmtime::Result<(Resource<DynPollable>,)> {
    let table = &mut store.data_mut().table;
    let sleep = table.push(Elapsed)?;
    Ok((subscribe(table, sleep)?,))
}

/// Link WASI with nothing granted, then replace the monotonic clock's sleeps with sleeps that
/// end at once (wasmtime-wasi's would block the calling thread for real, out of reach of the
/// call's deadline).
pub(crate) fn add_wasi(linker: &mut Linker<HostState>) -> Result<(), RuntimeError> {
    let link = |e: wasmtime::Error| RuntimeError::Link(format!("{e:#}"));
    wasmtime_wasi::p2::add_to_linker_sync(linker).map_err(link)?;
    linker.allow_shadowing(true);
    let mut clock = linker
        .instance("wasi:clocks/monotonic-clock@0.2.12")
        .map_err(link)?;
    clock
        .func_wrap("subscribe-duration", |store, (_,): (u64,)| {
            elapsed_pollable(store)
        })
        .map_err(link)?;
    clock
        .func_wrap("subscribe-instant", |store, (_,): (u64,)| {
            elapsed_pollable(store)
        })
        .map_err(link)?;
    linker.allow_shadowing(false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(cap: usize) -> LogSink {
        LogSink {
            cap,
            ..LogSink::default()
        }
    }

    #[test]
    fn output_is_split_into_bounded_lines() {
        let check = |writes: &[(usize, &[u8])], cap: usize, lines: &[&str], dropped: usize| {
            let mut s = sink(cap);
            for (stream, bytes) in writes {
                s.write(*stream, bytes);
            }
            let log = s.finish();
            assert_eq!(log.lines, lines, "{writes:?}");
            assert_eq!(log.dropped, dropped, "{writes:?}");
        };
        check(&[(0, b"a\nb")], 10, &["stdout: a", "stdout: b"], 0);
        check(&[(1, b"he"), (1, b"llo\n")], 10, &["stderr: hello"], 0);
        check(&[(0, b"x"), (1, b"y")], 10, &["stdout: x", "stderr: y"], 0);
        check(&[(0, b"1\n2\n3\n4\n")], 2, &["stdout: 1", "stdout: 2"], 2);
        check(&[(0, b"\n")], 10, &["stdout: "], 0);
        check(&[], 10, &[], 0);
    }

    #[test]
    fn long_lines_are_cut_and_stderr_head_is_bounded() {
        let mut s = sink(10);
        let long = vec![b'x'; 10 * LOG_LINE_MAX];
        for _ in 0..10 {
            s.write(1, &long);
        }
        assert_eq!(s.stderr_text().len(), STDERR_HEAD);
        let log = s.finish();
        assert_eq!(log.lines.len(), 1);
        assert!(log.lines[0].ends_with('…'));
        assert!(log.lines[0].len() <= LOG_LINE_MAX + '…'.len_utf8());
    }
}
