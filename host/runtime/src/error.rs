//! Errors of the runtime: loading a component, and a guest call that failed.

use std::path::PathBuf;
use std::time::Duration;

/// A call into a guest that did not return normally. Every variant names the guest and the
/// call; the instance is discarded and the next call gets a fresh one.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum GuestError {
    #[error("guest `{guest}`: {call} exceeded its deadline of {deadline:?} and was stopped")]
    Deadline {
        guest: String,
        call: &'static str,
        deadline: Duration,
    },
    #[error(
        "guest `{guest}`: {call} exceeded its memory limit of {limit} bytes; raise the guest's memory limit if this is expected"
    )]
    Memory {
        guest: String,
        call: &'static str,
        limit: usize,
    },
    #[error("guest `{guest}`: {call} returned {size} bytes, more than its output limit of {limit}")]
    OutputTooLarge {
        guest: String,
        call: &'static str,
        size: usize,
        limit: usize,
    },
    #[error("guest `{guest}`: {call} panicked: {message}")]
    Panic {
        guest: String,
        call: &'static str,
        message: String,
    },
    #[error("guest `{guest}`: {call} trapped: {message}")]
    Trap {
        guest: String,
        call: &'static str,
        message: String,
    },
    #[error("guest `{guest}`: could not instantiate: {message}")]
    Instantiate { guest: String, message: String },
    #[error(
        "guest `{guest}`: {call} used up the guest's budget of {budget:?} for this run and was stopped"
    )]
    Budget {
        guest: String,
        call: &'static str,
        budget: Duration,
    },
    /// The guest already failed in this run (one cycle of one cluster): it is not called
    /// again, and every later call answers with the first failure.
    #[error("guest `{guest}`: {call} not called, the guest already failed in this run: {first}")]
    Stopped {
        guest: String,
        call: &'static str,
        first: Box<GuestError>,
    },
}

impl GuestError {
    /// The failure that stopped the guest: itself, or the first failure of a stopped guest.
    pub fn first(&self) -> &GuestError {
        match self {
            GuestError::Stopped { first, .. } => first,
            other => other,
        }
    }

    /// Whether this failure stops the guest for the rest of the run: a trap, a deadline,
    /// the memory cap, a used-up budget or a failed instantiation. An oversized answer
    /// does not (the instance is fine, only that answer is refused).
    pub fn stops_the_guest(&self) -> bool {
        !matches!(self, GuestError::OutputTooLarge { .. })
    }
}

/// Loading a component or building the runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot create the WebAssembly engine: {0}")]
    Engine(String),
    #[error("cannot link host imports: {0}")]
    Link(String),
    #[error(
        "guest `{guest}` is not a valid proxops component: {message}. Build it for wasm32-wasip2 against the proxops WIT (wit/)"
    )]
    Compile { guest: String, message: String },
    #[error(
        "guest `{guest}` was built for {found}, but this proxops runs {supported}; rebuild it against wit/kind/{} (or use a proxops that supports {found})",
        supported.trim_start_matches("proxops:kind@")
    )]
    Contract {
        guest: String,
        found: String,
        supported: String,
    },
    #[error("guest `{guest}` does not fit the {world} world: {message}")]
    World {
        guest: String,
        world: &'static str,
        message: String,
    },
    #[error("invalid limits for guest `{guest}`: {message}")]
    Limits { guest: String, message: String },
    #[error("cannot read the component {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("component cache at {path}: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Guest(#[from] GuestError),
}

impl RuntimeError {
    pub(crate) fn engine(e: impl std::fmt::Display) -> Self {
        RuntimeError::Engine(e.to_string())
    }
}
