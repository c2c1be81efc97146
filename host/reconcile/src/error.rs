//! Why one object could not be planned, or why its actions did not all happen: typed, so
//! callers tell the cases apart, and each message names its cause once (the object is named
//! by whoever shows the error, never inside it).

use proxops_core::ObjectId;
use proxops_pve::PveError;

/// Why an object has no plan this cycle (shown as "cannot plan: …"; nothing is sent for it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The kind's guest failed (a trap, a deadline, a refused instance): its message.
    #[error("{0}")]
    Kind(String),
    /// The kind's `plan` returned diagnostics (`path: message` each).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// `observe` asked for a write.
    #[error("observe() asked for {method} {path}; only GETs may be observed")]
    ObservedWrite { method: &'static str, path: String },
    /// `observe` asked for a read outside the kind's declared calls.
    #[error("observe() asked for GET {0}, outside the kind's declared calls")]
    ObservedOutside(String),
    /// A live guest entry without node or vmid: ownership cannot be proved.
    #[error(
        "its /cluster/resources entry has no node or vmid; proxops cannot tell whether it owns the guest"
    )]
    NoIdentity,
    /// The sandbox refused one of its calls: not declared, not canonical, beyond the grant, or
    /// about a guest, volume or endpoint the object may not touch (the message names the
    /// kind, the call and the rule).
    #[error("{0}")]
    Refused(String),
    /// A task an earlier run left running may concern it (a killed apply's create, clone or
    /// download): it is left alone this run (the message names the task).
    #[error("{0}")]
    InFlight(String),
    /// An object it depends on could not be planned, or cannot serve its node.
    #[error("blocked, nothing will be sent for it: {0}")]
    Blocked(Blocker),
}

/// Why a dependency blocks its dependents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Blocker {
    #[error("{0} could not be planned")]
    NotPlanned(ObjectId),
    #[error("{id} is not available on node {node}: {why}")]
    NotOnNode {
        id: ObjectId,
        node: String,
        why: String,
    },
}

/// Why one call of an action failed, typed: the executor decides by the variant and by
/// `PveError`'s classifiers (`host/pve`, next to PVE's words), never by reading text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// PVE refused the request, or it got no answer.
    #[error("{0}")]
    Pve(Box<PveError>),
    /// The request's task ended with an error.
    #[error("{method} {path}: task failed: {}", task_words(.error))]
    Task {
        method: &'static str,
        path: String,
        error: Box<PveError>,
    },
    /// Read again before the guest was stopped, the config's digest is not the one planned
    /// (someone wrote to it or retagged it since): nothing was stopped.
    #[error(
        "GET {path}: the config changed since it was planned (its digest differs), so the guest was not stopped"
    )]
    Stale { path: String },
    /// The config could not be read again before the stop: nothing was stopped on a guess.
    #[error(
        "{0}; the config could not be read again before the stop, so the guest was not stopped"
    )]
    Unverified(Box<PveError>),
    /// Not sent: the host could not form the request (a secret reference it cannot resolve).
    #[error("{0}")]
    Unsent(String),
    /// PVE created an API token, but its secret (shown once) could not be stored in the
    /// cluster's SOPS file; the next cycle sees the token without it, and its kind deletes
    /// and re-creates it.
    #[error(
        "API token {token} was created, but its secret could not be stored in the cluster's SOPS file ({why}); the next run deletes and re-creates the token"
    )]
    SecretNotStored { token: String, why: String },
    /// PVE's HA manager accepted the request but the guest did not reach the state in time.
    #[error("{method} {path}: {error}")]
    Unsettled {
        method: &'static str,
        path: String,
        error: crate::settle::SettleError,
    },
}

fn task_words(error: &PveError) -> String {
    match error {
        PveError::TaskFailed { exitstatus, .. } => exitstatus.clone(),
        other => other.to_string(),
    }
}

impl From<PveError> for CallError {
    fn from(e: PveError) -> Self {
        CallError::Pve(Box::new(e))
    }
}

impl CallError {
    /// The config changed between the plan's read and the write: found before the stop, or
    /// PVE refused the digest the write carried. The caller knows the write carried one.
    pub fn is_stale_digest(&self) -> bool {
        match self {
            CallError::Stale { .. } => true,
            CallError::Pve(e) | CallError::Task { error: e, .. } => e.is_stale_digest(),
            CallError::Unverified(_)
            | CallError::Unsent(_)
            | CallError::Unsettled { .. }
            | CallError::SecretNotStored { .. } => false,
        }
    }

    /// PVE could not take the guest's lock in time; the request did nothing.
    pub fn is_lock_timeout(&self) -> bool {
        match self {
            CallError::Pve(e) | CallError::Task { error: e, .. } => e.is_lock_timeout(),
            _ => false,
        }
    }
}

/// What a failed call meant for its guest's availability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aftermath {
    /// No restore step was due (no stop had happened, or the action has none).
    Untouched,
    /// The restore step ran (these calls): the guest was started again.
    Restored(Vec<String>),
    /// The restore step failed too, at `call`; `stop_failed`: the failed call was the stop
    /// itself, so the guest may still be up.
    RestoreFailed {
        call: String,
        error: Box<CallError>,
        stop_failed: bool,
    },
    /// The start that ends a stop/write/start failed: the write landed, the guest is stopped.
    LeftStopped,
}

/// A call of an action failed, and what followed for its guest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}{}", aftermath_words(.aftermath))]
pub struct CallFailure {
    pub error: CallError,
    pub aftermath: Aftermath,
}

impl From<CallError> for CallFailure {
    fn from(error: CallError) -> Self {
        CallFailure {
            error,
            aftermath: Aftermath::Untouched,
        }
    }
}

fn aftermath_words(aftermath: &Aftermath) -> String {
    match aftermath {
        Aftermath::Untouched => String::new(),
        Aftermath::Restored(calls) => format!(
            "; restored: {} ran, so it was started again (its declared state)",
            calls.join(", ")
        ),
        Aftermath::RestoreFailed {
            call,
            error,
            stop_failed,
        } => {
            let state = if *stop_failed {
                "the stop itself failed, so it may still be up; check it now"
            } else {
                "it may be DOWN, check it now"
            };
            format!("; restoring failed too ({call}: {error}): {state}")
        }
        Aftermath::LeftStopped => {
            "; the guest was stopped for this change and did not start again: it may be DOWN, check it now".into()
        }
    }
}

/// What [`ActionError::StaleAgain`] says after the action's summary.
pub const STALE_AGAIN: &str = "the config changed again between proxops's read and its write, while the guest was stopped for this change (twice in this run); it was started again and is not stopped again for this change until the manifest or the live config changes or --retry-stop-required is given: find what else writes this guest's config";

/// Why an object's actions stopped: the action (its summary) and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// A call failed (PVE's answer or the task's exit status, and what the restore did).
    #[error("{action}: {cause}")]
    Call {
        action: String,
        #[source]
        cause: CallFailure,
    },
    /// A stop/write/start found the config changed a second time in one run while its guest
    /// was stopped for it: the guest was started again and is not stopped again for it.
    #[error("{action}: {STALE_AGAIN}")]
    StaleAgain { action: String },
    /// The run was interrupted before the action started.
    #[error("{action}: interrupted: not started")]
    Interrupted { action: String },
    /// PVE answered the delete, but the verifying listing still shows the guest.
    #[error("the delete of {resource} was answered, but PVE still lists it")]
    DeleteNotVerified { resource: String },
    /// Not run: an object it depends on did not converge.
    #[error("{0} did not converge")]
    Dependency(ObjectId),
    /// Not run: the kind's answer was refused (a trap, a call outside its grant or its
    /// objects) or a policy blocked it; nothing was sent.
    #[error("{action}: not run: {reason}")]
    Refused { action: String, reason: String },
}
