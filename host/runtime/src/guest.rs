//! What kinds and policies share: a loaded component, the per-run state of a guest (its
//! budget and the failure that stopped it), and an instance that runs calls under the
//! guest's limits, classifies traps, and replaces itself after a trap.
//!
//! Where calls run: on the calling thread when it is not a tokio thread, else on a scoped
//! thread of its own. wasmtime-wasi's synchronous bindings drive their I/O with
//! `block_on`, which panics on a thread that drives async tasks ("Cannot start a runtime
//! from within a runtime"); the worker threads of `proxops_reconcile::workers` are plain
//! threads, so bulk kind calls pay nothing for this.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};

use crate::cache::CacheOutcome;
use crate::host::{GuestLog, HostState, SecretAccess, SecretSource};
use crate::limits::{Limits, MemoryLimitExceeded};
use crate::size::{OutputSize, Prose};
use crate::{EPOCH_TICK, GuestError};

/// Longest failure message kept from a guest (panic text, trap description).
const MESSAGE_MAX: usize = 600;

/// A world's generated bindings, instantiable from its pre-instantiated form.
pub(crate) trait World: Sized + Send {
    type Pre: Clone + Send + Sync + 'static;
    fn instantiate(pre: &Self::Pre, store: &mut Store<HostState>) -> wasmtime::Result<Self>;
}

/// A compiled, pre-instantiated component with its identity and limits.
pub(crate) struct Loaded<P> {
    pub(crate) name: String,
    pub(crate) sha256: String,
    pub(crate) size: usize,
    pub(crate) limits: Limits,
    /// What the operator granted this guest of the cluster's secrets.
    pub(crate) secret_access: SecretAccess,
    pub(crate) cache: CacheOutcome,
    pub(crate) engine: Engine,
    pub(crate) pre: P,
}

impl<P> Loaded<P> {
    pub(crate) fn new(
        name: &str,
        wasm: &[u8],
        component: &Component,
        cache: CacheOutcome,
        limits: Limits,
        secret_access: SecretAccess,
        pre: P,
    ) -> Self {
        use sha2::Digest;
        Loaded {
            name: name.to_string(),
            sha256: hex::encode(sha2::Sha256::digest(wasm)),
            size: wasm.len(),
            limits,
            secret_access,
            cache,
            engine: component.engine().clone(),
            pre,
        }
    }
}

/// One guest in one run (one cycle of one cluster): the time its calls may still take, the
/// calls made, and the failure that stopped it. Shared by every instance of that guest in
/// the run (worker threads, fresh policy instances): a guest that trapped, timed out, ran
/// out of memory or used up its budget is not called again; each later call answers
/// [`GuestError::Stopped`] at once.
#[derive(Debug)]
pub struct GuestRun {
    budget: Option<Duration>,
    state: Mutex<RunState>,
}

#[derive(Debug, Default)]
struct RunState {
    used: Duration,
    calls: u64,
    failed: Option<GuestError>,
}

impl GuestRun {
    /// A run in which the guest's calls may take `budget` in total (`None`: no budget, each
    /// call still has its deadline).
    pub fn new(budget: Option<Duration>) -> Arc<GuestRun> {
        Arc::new(GuestRun {
            budget,
            state: Mutex::new(RunState::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Calls that entered the guest in this run.
    pub fn calls(&self) -> u64 {
        self.state().calls
    }

    /// Time the guest's calls took in this run.
    pub fn used(&self) -> Duration {
        self.state().used
    }

    /// The failure that stopped the guest, if one did.
    pub fn failure(&self) -> Option<GuestError> {
        self.state().failed.clone()
    }

    /// Refuse the call when the guest is stopped or its budget is used up; else the deadline
    /// of the call (the guest's deadline, or what is left of the budget when that is less)
    /// and whether the budget is what bounds it.
    fn admit(
        &self,
        guest: &str,
        call: &'static str,
        deadline: Duration,
    ) -> Result<(Duration, bool), GuestError> {
        let mut state = self.state();
        if let Some(first) = &state.failed {
            return Err(GuestError::Stopped {
                guest: guest.to_string(),
                call,
                first: Box::new(first.first().clone()),
            });
        }
        let Some(budget) = self.budget else {
            return Ok((deadline, false));
        };
        let left = budget.saturating_sub(state.used);
        if left < EPOCH_TICK {
            let e = GuestError::Budget {
                guest: guest.to_string(),
                call,
                budget,
            };
            state.failed = Some(e.clone());
            return Err(e);
        }
        Ok(if left < deadline {
            (left, true)
        } else {
            (deadline, false)
        })
    }

    fn record(&self, took: Duration, entered: bool, failure: Option<&GuestError>) {
        let mut state = self.state();
        state.used += took;
        state.calls += u64::from(entered);
        if let Some(e) = failure.filter(|e| e.stops_the_guest())
            && state.failed.is_none()
        {
            state.failed = Some(e.first().clone());
        }
    }
}

/// Run `f` where wasmtime-wasi's synchronous bindings may block: here, unless this thread
/// belongs to a tokio runtime, then on a scoped thread of its own. Guest calls do this on
/// their own; callers that make many calls from async code (policy checks) wrap the whole
/// batch, so that it costs one thread, not one per call.
pub fn off_tokio<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("proxops-guest".into())
            .spawn_scoped(scope, f)
            .expect("spawn a guest call thread");
        match worker.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// `text` cut to [`MESSAGE_MAX`] bytes, marked with `…`.
pub(crate) fn bounded(text: &str) -> String {
    if text.len() <= MESSAGE_MAX {
        return text.to_string();
    }
    let mut at = MESSAGE_MAX;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    format!("{}…", &text[..at])
}

/// A live instance of a guest. Calls reuse it; a trap discards it. Whether the next call
/// gets a fresh instance or a [`GuestError::Stopped`] is up to the guest's [`GuestRun`].
pub(crate) struct Instance<W: World> {
    pub(crate) loaded: Arc<Loaded<W::Pre>>,
    run: Arc<GuestRun>,
    live: Option<(Store<HostState>, W)>,
    log: GuestLog,
    /// Whether the last call looked up a secret (granted or not).
    looked_up_secrets: bool,
    /// Where granted secret lookups go; `None` answers every lookup `denied`.
    secrets: Option<Arc<dyn SecretSource>>,
}

impl<W: World + Sync> Instance<W> {
    /// An instance of `loaded` for `run`; refused at once when the guest is stopped in it.
    pub(crate) fn new(loaded: Arc<Loaded<W::Pre>>, run: Arc<GuestRun>) -> Result<Self, GuestError> {
        run.admit(&loaded.name, "instantiate", loaded.limits.deadline)?;
        let mut instance = Instance {
            loaded,
            run,
            live: None,
            log: GuestLog::default(),
            looked_up_secrets: false,
            secrets: None,
        };
        instance.ensure_live()?;
        Ok(instance)
    }

    fn ensure_live(&mut self) -> Result<(), GuestError> {
        if self.live.is_some() {
            return Ok(());
        }
        let loaded = &self.loaded;
        let mut state = HostState::new(&loaded.limits, self.secrets.clone());
        state.secret_access = loaded.secret_access.clone();
        let mut store = Store::new(&loaded.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(loaded.limits.deadline_ticks());
        match W::instantiate(&loaded.pre, &mut store) {
            Ok(bindings) => {
                self.live = Some((store, bindings));
                Ok(())
            }
            Err(e) => {
                let e = GuestError::Instantiate {
                    guest: loaded.name.clone(),
                    message: bounded(&format!("{e:#}")),
                };
                self.run.record(Duration::ZERO, false, Some(&e));
                Err(e)
            }
        }
    }

    /// Route this instance's secret lookups to `source` (the cluster being worked on). Has
    /// no effect unless the guest was granted secrets.
    pub(crate) fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        let source = source.filter(|_| self.loaded.secret_access != SecretAccess::None);
        if let Some((store, _)) = &mut self.live {
            store.data_mut().secrets = source.clone();
        }
        self.secrets = source;
    }

    /// Run one export under the guest's limits and what is left of its budget.
    pub(crate) fn call<R: OutputSize + Prose + Send>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R> + Send,
    ) -> Result<R, GuestError> {
        let limits = self.loaded.limits;
        let (deadline, by_budget) = self.run.admit(&self.loaded.name, call, limits.deadline)?;
        self.ensure_live()?;
        let (store, bindings) = self.live.as_mut().expect("instance is live");
        store.data_mut().begin_call();
        store.set_epoch_deadline(crate::limits::ticks(deadline));
        let started = Instant::now();
        let result = {
            let store = &mut *store;
            let bindings = &*bindings;
            off_tokio(move || std::panic::catch_unwind(AssertUnwindSafe(|| f(bindings, store))))
        };
        let took = started.elapsed();
        self.log = store.data_mut().finish_call();
        self.looked_up_secrets = store.data().secret_lookups > 0;
        emit_log(&self.loaded.name, call, &self.log, limits.log_lines);
        let guest = &self.loaded.name;
        let outcome = match result {
            Ok(Ok(mut value)) => {
                let size = value.output_size();
                if size > limits.output {
                    // The instance is fine, but its answer is not used.
                    Err(GuestError::OutputTooLarge {
                        guest: guest.clone(),
                        call,
                        size,
                        limit: limits.output,
                    })
                } else {
                    value.bound_prose();
                    Ok(value)
                }
            }
            Ok(Err(err)) => {
                let (store, _) = self.live.take().expect("instance is live");
                match classify(err, store.data(), guest, call, &limits) {
                    // Stopped by what was left of the budget, not by its own deadline.
                    GuestError::Deadline { .. } if by_budget => Err(GuestError::Budget {
                        guest: guest.clone(),
                        call,
                        budget: self.run.budget.unwrap_or(deadline),
                    }),
                    e => Err(e),
                }
            }
            Err(panic) => {
                // A panic in the host's side of an import: the guest is not trusted to
                // have caused it, but its instance is in an unknown state.
                self.live = None;
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(GuestError::Trap {
                    guest: guest.clone(),
                    call,
                    message: bounded(&format!("the host failed while serving the call: {text}")),
                })
            }
        };
        self.run.record(took, true, outcome.as_ref().err());
        outcome
    }

    /// The log lines of the last call.
    pub(crate) fn last_log(&self) -> &GuestLog {
        &self.log
    }

    /// Whether the last call's answer depends on nothing but its inputs and the component:
    /// it looked up no secret and logged nothing (a replayed answer would lose the log).
    pub(crate) fn last_call_replayable(&self) -> bool {
        !self.looked_up_secrets && self.log.lines.is_empty() && self.log.dropped == 0
    }
}

/// Show a call's log with `-v` (the runtime's info level).
fn emit_log(guest: &str, call: &str, log: &GuestLog, cap: usize) {
    for line in &log.lines {
        tracing::info!("guest `{guest}` {call}: {line}");
    }
    if log.dropped > 0 {
        tracing::info!(
            "guest `{guest}` {call}: {} more log lines not kept (at most {cap} per call)",
            log.dropped
        );
    }
}

fn classify(
    err: wasmtime::Error,
    state: &HostState,
    guest: &str,
    call: &'static str,
    limits: &Limits,
) -> GuestError {
    let guest = guest.to_string();
    if state.limiter.refused || err.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return GuestError::Memory {
            guest,
            call,
            limit: limits.memory,
        };
    }
    if let Some(Trap::Interrupt) = err.downcast_ref::<Trap>() {
        return GuestError::Deadline {
            guest,
            call,
            deadline: limits.deadline,
        };
    }
    let stderr = state.stderr_text();
    if let Some(message) = panic_message(&stderr) {
        return GuestError::Panic {
            guest,
            call,
            message: bounded(&message),
        };
    }
    // What trapped, without the wasm backtrace (which is for the guest's developers).
    let mut message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => err.root_cause().to_string(),
    };
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
    if let Some(last) = last {
        message.push_str(&format!(" (last stderr line: {})", last.trim()));
    }
    GuestError::Trap {
        guest,
        call,
        message: bounded(&message),
    }
}

/// The message of a Rust panic as the standard library prints it to stderr:
/// `thread '<unnamed>' panicked at src/lib.rs:1:2:\n<message>\nnote: ...`.
fn panic_message(stderr: &str) -> Option<String> {
    let start = stderr.find("panicked at ")?;
    let rest = &stderr[start + "panicked at ".len()..];
    let (location, body) = rest.split_once('\n').unwrap_or((rest, ""));
    let body = body.split("\nnote:").next().unwrap_or("").trim();
    let location = location.trim_end_matches(':');
    Some(format!("{body} (at {location})"))
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_is_extracted() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:10:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom (at src/lib.rs:10:5)")
        );
        assert_eq!(panic_message("nothing here"), None);
    }
}
