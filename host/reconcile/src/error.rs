//! Why one object could not be planned, or why its actions did not all happen: typed, so
//! callers tell the cases apart, and each message names its cause once (the object is named
//! by whoever shows the error, never inside it).

use proxops_core::ObjectId;

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

/// Why an object's actions stopped: the action (its summary) and the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActionError {
    /// A call failed (PVE's answer or the task's exit status, and what the restore did).
    #[error("{action}: {cause}")]
    Call { action: String, cause: String },
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
