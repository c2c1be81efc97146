//! Execute a cluster plan: objects as a DAG (an object waits for the objects it references),
//! each object's actions in order, each call in order; mutating calls take a per-node permit
//! (write concurrency), async tasks are polled to completion, requests are repeated only
//! when that is safe, and one object's failure never abandons independent objects.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use proxops_pve::Client;
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Action, Call, Operation};
use tokio::sync::{Semaphore, watch};

use proxops_core::ObjectId;

use crate::error::{ActionError, Aftermath, CallError, CallFailure};
use crate::plan::{ClusterPlan, ObjectRef};
use call::{Permit, changed_since_plan, run_call, run_restore, write_permit};

mod call;

/// Progress of an apply, for the CLI to render.
#[derive(Debug, Clone)]
pub enum Event {
    /// A pass starts with this many actions.
    Pass {
        pass: u32,
        actions: usize,
    },
    ActionStarted {
        object: ObjectRef,
        summary: String,
    },
    ActionDone {
        object: ObjectRef,
        summary: String,
        error: Option<String>,
    },
    Blocked {
        object: ObjectRef,
        by: ObjectId,
    },
    /// A call's task ended OK but with warnings (PVE's `WARNINGS: n`, e.g. the failed start of
    /// a create with `start=1`): what PVE warned about, from the task's log. The action counts
    /// as done; what it did not do shows up in the verifying re-plan.
    Warned {
        object: ObjectRef,
        summary: String,
        warnings: Vec<String>,
    },
    /// A write found the config changed since it was read (`checksum mismatch`, as a 500 or
    /// as a failed task): nothing was written; the object is planned again.
    Stale {
        object: ObjectRef,
        summary: String,
    },
    /// PVE handed a call to its HA manager, which carries it out later: the action waits
    /// (bounded by the task timeout) until the guest really is where or how it asked.
    Waiting {
        object: ObjectRef,
        summary: String,
        what: String,
    },
    /// A member of a disruption budget was not disturbed: its budget halted in this run.
    Held {
        object: ObjectRef,
        summary: String,
        budget: String,
    },
    /// A member's health gate ran out (or its change failed): its budget halts, no later
    /// member is disturbed in this run.
    Halted {
        object: ObjectRef,
        halt: crate::rollout::Halt,
    },
}

/// Receives progress events; must be cheap.
pub trait Reporter: Send + Sync {
    fn event(&self, event: Event);
}

/// A reporter that drops every event.
#[derive(Debug, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn event(&self, _event: Event) {}
}

/// How an object's actions ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Done,
    Failed(ActionError),
    /// Not run: this dependency did not converge.
    Blocked(ObjectId),
}

/// One object's result: its status, what it changed, and the stop-required actions that
/// failed (so a later run does not stop the guest again for the same change).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub object: ObjectRef,
    pub status: Status,
    /// The actions that completed, in order.
    pub done: Vec<Action>,
    /// Sequences that stopped the guest for a change (they have a restore step) and failed;
    /// a lone shutdown is not one of them (it is the change itself).
    pub failed_stops: Vec<Action>,
    /// A sequence that stopped the guest for a change whose write found the config changed
    /// since it was read (the guest was started again; the object is planned again).
    pub stale_stop: Option<Action>,
    /// A sequence that stopped the guest for a change failed at its own restore call (the
    /// start at its end): the guest is left stopped.
    pub left_stopped: bool,
}

/// Execution limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub write_concurrency: usize,
    pub task_timeout: Duration,
}

/// Node a call is about, from its `/nodes/{node}/…` path.
fn call_node(path: &str) -> Option<&str> {
    path.strip_prefix("/nodes/")
        .and_then(|rest| rest.split('/').next())
}

/// How an object's actions ended, by node (`""` for actions on no node).
#[derive(Debug, Clone, Default)]
struct Finished {
    acted: HashSet<String>,
    failed: HashSet<String>,
}

impl Finished {
    fn failed() -> Finished {
        Finished {
            acted: HashSet::new(),
            failed: HashSet::from([String::new()]),
        }
    }

    /// Whether an object on `node` may rely on this one: nothing failed on its node, and if
    /// nothing acted on its node either (shared storage, one download for the cluster),
    /// nothing failed at all.
    fn serves(&self, node: Option<&str>) -> bool {
        match node {
            Some(n) if self.acted.contains(n) || self.failed.contains(n) => {
                !self.failed.contains(n)
            }
            _ => self.failed.is_empty(),
        }
    }
}

struct Shared {
    client: Client,
    limits: Limits,
    /// Where a secret reference's value comes from when its call is sent.
    secrets: Option<Arc<dyn SecretSource>>,
    nodes: HashMap<String, Arc<Semaphore>>,
    reporter: Arc<dyn Reporter>,
}

/// The restore calls of an action whose call `failed` failed: the kind's restore step, when
/// the failure is at or after the call that disturbed availability (that call included: a
/// stop whose answer timed out on our side may still stop the guest). A failed call that is
/// itself a restore call is not repeated.
pub fn restore_calls(action: &Action, failed: usize) -> Option<&[Call]> {
    let restore = action.restore.as_ref()?;
    let call = action.calls.get(failed)?;
    let due = failed >= restore.after as usize
        && !restore.calls.is_empty()
        && !restore.calls.contains(call);
    due.then_some(restore.calls.as_slice())
}

/// PVE's answer to a write whose `digest` no longer matches the config. Only a call that
/// carries a `digest` can get it (a download's `checksum mismatch` is the file's, a failure
/// like any other); PVE's words are read by [`CallError::is_stale_digest`].
pub fn stale_digest(call: &Call, error: &CallError) -> bool {
    call.params.iter().any(|p| p.name == "digest") && error.is_stale_digest()
}

/// Cancelled: start no new action (the one in flight finishes, with its restore).
pub type Cancel = tokio::sync::watch::Receiver<bool>;

/// Run every object's actions; returns the outcome of each object that had actions. A member
/// of a disruption budget (`lanes`) takes its budget's place before its first disturbing
/// action and gives it back after its health gate ([`crate::rollout`]).
pub async fn execute(
    client: &Client,
    plan: &ClusterPlan,
    limits: Limits,
    secrets: Option<Arc<dyn SecretSource>>,
    reporter: Arc<dyn Reporter>,
    cancel: Option<Cancel>,
    lanes: Option<Arc<crate::rollout::Lanes>>,
) -> Vec<Outcome> {
    let with_actions: Vec<_> = plan
        .objects
        .iter()
        .filter(|o| o.has_actions() && o.error.is_none())
        .collect();
    let mut nodes: HashMap<String, Arc<Semaphore>> = HashMap::new();
    for o in &with_actions {
        for c in o.proposal.actions.iter().flat_map(|a| &a.calls) {
            if let Some(node) = call_node(&c.path) {
                nodes
                    .entry(node.to_string())
                    .or_insert_with(|| Arc::new(Semaphore::new(limits.write_concurrency.max(1))));
            }
        }
    }
    let shared = Arc::new(Shared {
        client: client.clone(),
        limits,
        secrets,
        nodes,
        reporter,
    });

    // One channel per acting object: None while it runs, then which nodes it failed on.
    // Dependencies name manifest objects; an object being pruned has no manifest and may
    // share its identity with a manifest object (a template whose vmid changed), so it keeps
    // its channel to itself.
    let senders: Vec<watch::Sender<Option<Finished>>> = with_actions
        .iter()
        .map(|_| watch::channel(None).0)
        .collect();
    let done: HashMap<&ObjectId, usize> = with_actions
        .iter()
        .enumerate()
        .filter(|(_, o)| o.object.file.is_some())
        .map(|(i, o)| (&o.object.id, i))
        .collect();

    let mut tasks = tokio::task::JoinSet::new();
    for (index, o) in with_actions.iter().enumerate() {
        let waits: Vec<(ObjectId, watch::Receiver<Option<Finished>>)> = o
            .depends_on
            .iter()
            .filter_map(|d| done.get(d).map(|&i| (d, i)))
            .filter(|&(_, i)| i != index)
            .map(|(d, i)| (d.clone(), senders[i].subscribe()))
            .collect();
        let finished = senders[index].clone();
        let object = o.object.clone();
        let actions = o.proposal.actions.clone();
        let desired = o.desired.clone();
        // Only manifest objects are members (a prune candidate may share an id).
        let seat = lanes
            .as_ref()
            .filter(|_| o.object.file.is_some())
            .and_then(|l| l.seat(&o.object.id));
        let shared = shared.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let blocked = |by: ObjectId| Outcome {
                object: object.clone(),
                status: Status::Blocked(by),
                done: Vec::new(),
                failed_stops: Vec::new(),
                stale_stop: None,
                left_stopped: false,
            };
            for (dep, mut rx) in waits {
                let outcome = match rx.wait_for(Option::is_some).await {
                    Ok(v) => v.clone().unwrap_or_default(),
                    Err(_) => Finished::failed(),
                };
                if !outcome.serves(object.node.as_deref()) {
                    shared.reporter.event(Event::Blocked {
                        object: object.clone(),
                        by: dep.clone(),
                    });
                    publish(&finished, Finished::failed());
                    return (index, blocked(dep));
                }
            }
            // Actions run in order. After a failure, the object's remaining actions on that
            // node are skipped; actions on other nodes (a DiskImage's per-node downloads) go
            // on, and so does a power step after a failed update (the guest exists; a failed
            // write never keeps it from its declared power state).
            let mut outcome = Finished::default();
            let mut first_error = None;
            let mut done = Vec::new();
            let mut failed_stops = Vec::new();
            let mut stale_stop = None;
            let mut left_stopped = false;
            let mut failed_ops: Vec<(String, Operation)> = Vec::new();
            // A budget member's place, from its first disturbing action through its gate,
            // and the node that action went to.
            let mut place: Option<(crate::rollout::Place, String)> = None;
            for action in actions {
                let node = action
                    .calls
                    .iter()
                    .find_map(|c| call_node(&c.path))
                    .map(str::to_string)
                    .unwrap_or_default();
                let skip = failed_ops.iter().any(|(n, op)| {
                    (n == &node || n.is_empty())
                        && !(action.operation.is_power() && *op == Operation::Update)
                });
                if skip {
                    continue;
                }
                if let Some(seat) = &seat
                    && place.is_none()
                    && crate::rollout::disturbs(&action)
                {
                    // In budget order, at most `max-unavailable` at once; a signal while
                    // queued starts nothing (the check below).
                    let taken = match &cancel {
                        Some(c) => {
                            let mut c = c.clone();
                            tokio::select! {
                                t = seat.take() => Some(t),
                                _ = c.wait_for(|v| *v) => None,
                            }
                        }
                        None => Some(seat.take().await),
                    };
                    match taken {
                        Some(Ok(p)) => place = Some((p, node.clone())),
                        Some(Err(_halt)) => {
                            shared.reporter.event(Event::Held {
                                object: object.clone(),
                                summary: action.summary.clone(),
                                budget: seat.budget().name.clone(),
                            });
                            continue;
                        }
                        None => {}
                    }
                }
                // An action queued behind its node's write permits waits here; a signal
                // that came meanwhile starts nothing new.
                let mut held = match action.calls.first() {
                    Some(first) => write_permit(&shared, first).await,
                    None => None,
                };
                // A stop/write/start keeps its node's permit from the stop to the start (and
                // its restore): with write-concurrency 1, one guest of a node is down at a
                // time, and a signal waits for one sequence, not several interleaved.
                let sequence = if action.disturbs_availability && action.restore.is_some() {
                    held.take()
                } else {
                    None
                };
                let holding = sequence.is_some();
                if cancel.as_ref().is_some_and(|c| *c.borrow()) {
                    outcome.failed.insert(node);
                    first_error.get_or_insert(ActionError::Interrupted {
                        action: action.summary.clone(),
                    });
                    break;
                }
                shared.reporter.event(Event::ActionStarted {
                    object: object.clone(),
                    summary: action.summary.clone(),
                });
                let mut error = None;
                let mut failed_call = None;
                // Whether the check before the stop ended the action: nothing was sent, so
                // nothing is remembered as a failed stop.
                let mut unsent = false;
                // Whether a restore ran and failed: the guest may be down, which no stale
                // digest may hide.
                let mut restore_failed = false;
                if holding && let Some((call, stale)) = changed_since_plan(&shared, &action).await {
                    unsent = true;
                    // Nothing is stopped for a plan the config no longer matches (someone
                    // wrote to it, or retagged it, since it was read): the stale path below
                    // plans it again from a fresh read.
                    failed_call = Some(call);
                    error = Some(CallFailure::from(stale));
                }
                for (i, call) in action.calls.iter().enumerate() {
                    if error.is_some() {
                        break;
                    }
                    let permit = match (holding, i == 0) {
                        (true, _) => Permit::Held,
                        (false, true) => held.take().map_or(Permit::Take, Permit::Given),
                        (false, false) => Permit::Take,
                    };
                    let Err(e) = run_call(
                        &shared,
                        call,
                        &action.operation,
                        &object,
                        &action.summary,
                        permit,
                    )
                    .await
                    else {
                        continue;
                    };
                    failed_call = Some(call);
                    let aftermath = if let Some(restore) = restore_calls(&action, i) {
                        let disturbing_failed = action
                            .restore
                            .as_ref()
                            .is_some_and(|r| r.after as usize == i);
                        let aftermath =
                            run_restore(&shared, restore, &object, disturbing_failed, holding)
                                .await;
                        let restored = matches!(aftermath, Aftermath::Restored(_));
                        // The stop landed and the restart failed: the guest is down. Apply
                        // plans it once more (its start), as when the sequence's own start
                        // fails.
                        left_stopped |= !restored && !disturbing_failed;
                        restore_failed = !restored;
                        aftermath
                    } else if action
                        .restore
                        .as_ref()
                        .is_some_and(|r| i > r.after as usize && r.calls.contains(call))
                    {
                        // The start that ends the sequence failed: the write landed, the
                        // guest is stopped. Apply plans it once more (its start).
                        left_stopped = true;
                        Aftermath::LeftStopped
                    } else {
                        Aftermath::Untouched
                    };
                    error = Some(CallFailure {
                        error: e,
                        aftermath,
                    });
                    break;
                }
                if let (Some(call), Some(e)) = (failed_call, error.as_ref())
                    && stale_digest(call, &e.error)
                    && !restore_failed
                {
                    // Someone changed the config between our read and our write (or an
                    // earlier attempt of this write landed): re-plan from a fresh read
                    // instead of failing. Its remaining actions wait for that plan.
                    shared.reporter.event(Event::Stale {
                        object: object.clone(),
                        summary: action.summary.clone(),
                    });
                    // Not converged on this node: its dependents wait for the next apply
                    // rather than use what the stale plan meant to change.
                    outcome.failed.insert(node);
                    if action.disturbs_availability && action.restore.is_some() && !unsent {
                        stale_stop = Some(action);
                    }
                    break;
                }
                shared.reporter.event(Event::ActionDone {
                    object: object.clone(),
                    summary: action.summary.clone(),
                    error: error.as_ref().map(ToString::to_string),
                });
                match error {
                    Some(e) => {
                        outcome.failed.insert(node.clone());
                        failed_ops.push((node, action.operation.clone()));
                        first_error.get_or_insert(ActionError::Call {
                            action: action.summary.clone(),
                            cause: e,
                        });
                        if action.disturbs_availability && action.restore.is_some() && !unsent {
                            failed_stops.push(action);
                        }
                    }
                    None => {
                        outcome.acted.insert(node);
                        done.push(action);
                    }
                }
            }
            if let (Some(seat), Some((place, node))) = (&seat, place) {
                gate(
                    &shared,
                    seat,
                    &object,
                    desired.as_deref(),
                    &node,
                    first_error.as_ref(),
                    cancel.as_ref(),
                )
                .await;
                drop(place);
            }
            publish(&finished, outcome);
            let status = match first_error {
                Some(e) => Status::Failed(e),
                None => Status::Done,
            };
            (
                index,
                Outcome {
                    object,
                    status,
                    done,
                    failed_stops,
                    stale_stop,
                    left_stopped,
                },
            )
        });
    }
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.push(r.expect("executor task panicked"));
    }
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, o)| o).collect()
}

/// The end of a budget member's disturbance, before its place is given back: a member whose
/// change failed halts its budget at once; one that was interrupted does not wait; otherwise,
/// when it is to run, it must pass its budget's health gate within the gate's bound (reported
/// as [`Event::Waiting`]), or its budget halts.
async fn gate(
    shared: &Shared,
    seat: &crate::rollout::Seat,
    object: &ObjectRef,
    desired: Option<&str>,
    node: &str,
    error: Option<&ActionError>,
    cancel: Option<&Cancel>,
) {
    use crate::rollout::Halt;
    let budget = seat.budget();
    let halt = |check: String, detail: String| {
        let halt = Halt {
            budget: budget.name.clone(),
            guest: object.id.name.clone(),
            check,
            detail,
        };
        seat.halt(halt.clone());
        shared.reporter.event(Event::Halted {
            object: object.clone(),
            halt,
        });
    };
    match error {
        Some(ActionError::Interrupted { .. }) => return,
        Some(e) => return halt("change failed".into(), e.to_string()),
        None => {}
    }
    // A disturbing action addressed to no node (through HA): the guest's own node.
    let node = match node {
        "" => object.node.as_deref().unwrap_or_default(),
        n => n,
    };
    let Some(wanted) =
        crate::rollout::gate_for(object.resource.as_deref(), node, desired, &budget.health)
    else {
        return;
    };
    shared.reporter.event(Event::Waiting {
        object: object.clone(),
        summary: format!("health gate of budget {}", budget.name),
        what: wanted.describe(),
    });
    let waited = crate::settle::healthy(&shared.client, &wanted, budget.health.timeout);
    let result = match cancel {
        Some(c) => {
            let mut c = c.clone();
            tokio::select! {
                r = waited => Some(r),
                _ = c.wait_for(|v| *v) => None,
            }
        }
        None => Some(waited.await),
    };
    if let Some(Err(unhealthy)) = result {
        halt(
            unhealthy.check.to_string(),
            format!("{}, still after {} s", unhealthy.seen, unhealthy.seconds),
        );
    }
}

/// Publish how an object ended to the objects that wait for it. `send_replace` stores the
/// value even while nobody is subscribed: a dependency can finish before its dependent has
/// subscribed (the spawning loop is preempted), and `send` would then drop the value and
/// leave the dependent waiting forever.
fn publish(tx: &watch::Sender<Option<Finished>>, outcome: Finished) {
    tx.send_replace(Some(outcome));
}

#[cfg(test)]
mod tests;
