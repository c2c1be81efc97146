//! What kinds and policies share: a loaded component and an instance that runs calls under
//! the guest's limits, classifies traps, and replaces itself after a trap.

use std::sync::Arc;

use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};

use crate::GuestError;
use crate::cache::CacheOutcome;
use crate::host::{GuestLog, HostState, SecretSource};
use crate::limits::{Limits, MemoryLimitExceeded};
use crate::size::OutputSize;

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
    /// Whether the operator granted this guest access to secrets.
    pub(crate) secrets_granted: bool,
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
        secrets_granted: bool,
        pre: P,
    ) -> Self {
        use sha2::Digest;
        Loaded {
            name: name.to_string(),
            sha256: hex::encode(sha2::Sha256::digest(wasm)),
            size: wasm.len(),
            limits,
            secrets_granted,
            cache,
            engine: component.engine().clone(),
            pre,
        }
    }
}

/// A live instance of a guest. Calls reuse it; a trap discards it and the next call gets a
/// fresh one, so one misbehaving call never poisons the next.
pub(crate) struct Instance<W: World> {
    pub(crate) loaded: Arc<Loaded<W::Pre>>,
    live: Option<(Store<HostState>, W)>,
    log: GuestLog,
    /// Where granted secret lookups go; `None` answers every lookup `denied`.
    secrets: Option<Arc<dyn SecretSource>>,
}

impl<W: World> Instance<W> {
    pub(crate) fn new(loaded: Arc<Loaded<W::Pre>>) -> Result<Self, GuestError> {
        let mut instance = Instance {
            loaded,
            live: None,
            log: GuestLog::default(),
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
        let state = HostState::new(&loaded.limits, self.secrets.clone());
        let mut store = Store::new(&loaded.engine, state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(loaded.limits.deadline_ticks());
        let bindings =
            W::instantiate(&loaded.pre, &mut store).map_err(|e| GuestError::Instantiate {
                guest: loaded.name.clone(),
                message: format!("{e:#}"),
            })?;
        self.live = Some((store, bindings));
        Ok(())
    }

    /// Route this instance's secret lookups to `source` (the cluster being worked on). Has
    /// no effect unless the guest was granted secrets.
    pub(crate) fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        let source = source.filter(|_| self.loaded.secrets_granted);
        if let Some((store, _)) = &mut self.live {
            store.data_mut().secrets = source.clone();
        }
        self.secrets = source;
    }

    /// Run one export under the guest's limits.
    pub(crate) fn call<R: OutputSize>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&W, &mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, GuestError> {
        self.ensure_live()?;
        let limits = self.loaded.limits;
        let (store, bindings) = self.live.as_mut().expect("instance is live");
        store.data_mut().begin_call();
        store.set_epoch_deadline(limits.deadline_ticks());
        let result = f(bindings, store);
        self.log = std::mem::take(&mut store.data_mut().log);
        match result {
            Ok(value) => {
                let size = value.output_size();
                if size > limits.output {
                    // The instance is fine, but its answer is not used.
                    return Err(GuestError::OutputTooLarge {
                        guest: self.loaded.name.clone(),
                        call,
                        size,
                        limit: limits.output,
                    });
                }
                Ok(value)
            }
            Err(err) => {
                let (store, _) = self.live.take().expect("instance is live");
                Err(classify(
                    err,
                    store.data(),
                    &self.loaded.name,
                    call,
                    &limits,
                ))
            }
        }
    }

    /// The log lines of the last call.
    pub(crate) fn last_log(&self) -> &GuestLog {
        &self.log
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
            message,
        };
    }
    let mut message = format!("{err:#}");
    if !stderr.trim().is_empty() {
        message.push_str(&format!(" (guest stderr: {})", stderr.trim()));
    }
    GuestError::Trap {
        guest,
        call,
        message,
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
