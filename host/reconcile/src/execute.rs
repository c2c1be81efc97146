//! Execute a cluster plan: objects as a DAG (an object waits for the objects it references),
//! each object's actions in order, each call in order; mutating calls take a per-node permit
//! (write concurrency), async tasks are polled to completion, requests are repeated only
//! when that is safe, and one object's failure never abandons independent objects.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use proxops_pve::{Client, PveError, Upid};
use proxops_runtime::kind::{Action, Call, Method, Operation};
use serde_json::Value;
use tokio::sync::{Semaphore, watch};

use proxops_core::ObjectId;

use crate::error::ActionError;
use crate::observe::{resources, to_pve_method, to_pve_params};
use crate::plan::{ClusterPlan, ObjectRef, method_name};

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
    /// A write found the config changed since it was read (`checksum mismatch`, as a 500 or
    /// as a failed task): nothing was written; the object is planned again.
    Stale {
        object: ObjectRef,
        summary: String,
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
    /// Actions that need the guest stopped and failed.
    pub failed_stops: Vec<Action>,
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
    nodes: HashMap<String, Arc<Semaphore>>,
    reporter: Arc<dyn Reporter>,
}

/// A stop or shutdown of a guest (`POST …/status/stop|shutdown`).
fn is_stop(call: &Call) -> bool {
    call.method == Method::Post
        && (call.path.ends_with("/status/shutdown") || call.path.ends_with("/status/stop"))
}

/// The restore step of an action whose call `failed` failed: when a stop ran before it and
/// the action ends by starting the guest again (the declared power state the kind proposed),
/// that start. A failed write must not leave a guest down.
pub fn restore_call(action: &Action, failed: usize) -> Option<&Call> {
    // The failed call itself counts: a stop whose answer or task timed out on our side may
    // still stop the guest in PVE (the caller then starts it only if it is stopped).
    let stopped_before = action.calls[..=failed.min(action.calls.len().saturating_sub(1))]
        .iter()
        .any(is_stop);
    let last = action.calls.last()?;
    let restarts = last.method == Method::Post && last.path.ends_with("/status/start");
    (stopped_before && restarts && failed + 1 < action.calls.len()).then_some(last)
}

/// PVE's answer to a write whose `digest` no longer matches the config (a 500 on the sync
/// form, a failed task on the async one).
pub fn stale_digest(error: &str) -> bool {
    error.contains("checksum mismatch") || error.contains("config file has been modified")
}

/// Whether the guest of a `…/status/start` path is stopped now (unknown counts as stopped:
/// a start of a running guest fails harmlessly, a missed start leaves it down).
async fn guest_stopped(client: &Client, start_path: &str) -> bool {
    let Some(base) = start_path.strip_suffix("/status/start") else {
        return true;
    };
    match client.get(&format!("{base}/status/current"), &[]).await {
        Ok(v) => v.get("status").and_then(Value::as_str) != Some("running"),
        Err(_) => true,
    }
}

/// Cancelled: start no new action (the one in flight finishes, with its restore).
pub type Cancel = tokio::sync::watch::Receiver<bool>;

/// Run every object's actions; returns the outcome of each object that had actions.
pub async fn execute(
    client: &Client,
    plan: &ClusterPlan,
    limits: Limits,
    reporter: Arc<dyn Reporter>,
    cancel: Option<Cancel>,
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
        let shared = shared.clone();
        let cancel = cancel.clone();
        tasks.spawn(async move {
            let blocked = |by: ObjectId| Outcome {
                object: object.clone(),
                status: Status::Blocked(by),
                done: Vec::new(),
                failed_stops: Vec::new(),
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
            let mut failed_ops: Vec<(String, Operation)> = Vec::new();
            for action in actions {
                let node = action
                    .calls
                    .iter()
                    .find_map(|c| call_node(&c.path))
                    .map(str::to_string)
                    .unwrap_or_default();
                let skip = failed_ops.iter().any(|(n, op)| {
                    (n == &node || n.is_empty())
                        && !(action.operation == Operation::Power && *op == Operation::Update)
                });
                if skip {
                    continue;
                }
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
                for (i, call) in action.calls.iter().enumerate() {
                    let Err(e) = run_call(&shared, call, action.operation, &object).await else {
                        continue;
                    };
                    let mut e = e;
                    let restore = restore_call(&action, i);
                    // When the stop itself failed, the guest may still be running: start it
                    // only if PVE says it is stopped.
                    let needed = match restore {
                        Some(start) if is_stop(call) => {
                            guest_stopped(&shared.client, &start.path).await
                        }
                        Some(_) => true,
                        None => false,
                    };
                    if let Some(restore) = restore.filter(|_| needed) {
                        e = match run_call(&shared, restore, Operation::Power, &object).await {
                            Ok(()) => {
                                format!("{e}; the guest was started again (its declared state)")
                            }
                            Err(r) => {
                                format!("{e}; starting the guest again failed too, it is DOWN: {r}")
                            }
                        };
                    }
                    error = Some(e);
                    break;
                }
                if error.as_deref().is_some_and(stale_digest) {
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
                    break;
                }
                shared.reporter.event(Event::ActionDone {
                    object: object.clone(),
                    summary: action.summary.clone(),
                    error: error.clone(),
                });
                match error {
                    Some(e) => {
                        outcome.failed.insert(node.clone());
                        failed_ops.push((node, action.operation));
                        first_error.get_or_insert(ActionError::Call {
                            action: action.summary.clone(),
                            cause: e,
                        });
                        if action.requires_stop {
                            failed_stops.push(action);
                        }
                    }
                    None => {
                        outcome.acted.insert(node);
                        done.push(action);
                    }
                }
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

/// Publish how an object ended to the objects that wait for it. `send_replace` stores the
/// value even while nobody is subscribed: a dependency can finish before its dependent has
/// subscribed (the spawning loop is preempted), and `send` would then drop the value and
/// leave the dependent waiting forever.
fn publish(tx: &watch::Sender<Option<Finished>>, outcome: Finished) {
    tx.send_replace(Some(outcome));
}

async fn run_call(
    shared: &Shared,
    call: &Call,
    operation: Operation,
    object: &ObjectRef,
) -> Result<(), String> {
    let params = to_pve_params(call);
    if call.method == Method::Get {
        return shared
            .client
            .get(&call.path, &params)
            .await
            .map(drop)
            .map_err(|e| e.to_string());
    }
    let _permit = match call_node(&call.path).and_then(|n| shared.nodes.get(n)) {
        Some(s) => Some(s.acquire().await.expect("semaphore open")),
        None => None,
    };
    // A config write guarded by the digest it was planned against is safe to repeat: if the
    // first attempt landed, the repeat fails with "checksum mismatch" and the next pass
    // re-plans. Other writes are sent once.
    let guarded = call.params.iter().any(|p| p.name == "digest");
    let method = to_pve_method(call.method);
    let mut result = shared
        .client
        .request(method, &call.path, &params, guarded)
        .await;
    if let Err(e) = &result
        && e.is_transient()
        && operation == Operation::Create
        && call.method == Method::Post
    {
        // Did the create land although its answer was lost? Then it is done; the next
        // pass observes the new object. Sent again only when a read shows it did not land:
        // an object without a resource id, or a read that fails too, keeps the error.
        match exists(shared, object).await {
            Some(true) => return Ok(()),
            Some(false) => {
                result = shared
                    .client
                    .request(method, &call.path, &params, false)
                    .await;
            }
            None => {}
        }
    }
    let data = result.map_err(|e| e.to_string())?;
    if let Some(upid) = data.as_str().filter(|s| Upid::parse(s).is_some()) {
        shared
            .client
            .wait_task(upid, shared.limits.task_timeout)
            .await
            .map_err(|e| match e {
                PveError::TaskFailed { exitstatus, .. } => format!(
                    "{} {}: task failed: {exitstatus}",
                    method_name(call.method),
                    call.path
                ),
                other => other.to_string(),
            })?;
    }
    Ok(())
}

/// Whether the object's `/cluster/resources` entry exists; `None` when that cannot be known
/// (no resource id, or the read failed).
async fn exists(shared: &Shared, object: &ObjectRef) -> Option<bool> {
    let id = object.resource.as_ref()?;
    let list = resources(&shared.client).await.ok()?;
    Some(
        list.iter()
            .any(|e| e.get("id").and_then(Value::as_str) == Some(id.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_runtime::kind::Param;

    fn action(paths: &[&str]) -> Action {
        Action {
            operation: Operation::Update,
            summary: String::new(),
            calls: paths
                .iter()
                .map(|p| Call {
                    method: Method::Post,
                    path: p.to_string(),
                    params: Vec::<Param>::new(),
                })
                .collect(),
            changes: Vec::new(),
            requires_stop: true,
            destructive: false,
        }
    }

    #[test]
    fn a_failure_after_a_stop_restores_with_the_actions_own_start() {
        let base = "/nodes/pve01/qemu/100";
        let stop_write_start = action(&[
            &format!("{base}/status/shutdown"),
            &format!("{base}/config"),
            &format!("{base}/resize"),
            &format!("{base}/status/start"),
        ]);
        let start = |a: &Action, failed| restore_call(a, failed).map(|c| c.path.clone());
        for (failed, restores) in [(0, true), (1, true), (2, true), (3, false)] {
            assert_eq!(
                start(&stop_write_start, failed).is_some(),
                restores,
                "call {failed} failed"
            );
        }
        assert_eq!(
            start(&stop_write_start, 1).as_deref(),
            Some("/nodes/pve01/qemu/100/status/start")
        );
        // Stopped on purpose (declared stopped): nothing to restore.
        let stop_then_write = action(&[
            &format!("{base}/status/shutdown"),
            &format!("{base}/config"),
        ]);
        assert_eq!(start(&stop_then_write, 1), None);
        // No stop before the failure: the guest was never disturbed.
        let write_then_start =
            action(&[&format!("{base}/config"), &format!("{base}/status/start")]);
        assert_eq!(start(&write_then_start, 0), None);
    }

    #[tokio::test]
    async fn an_outcome_published_before_anyone_waits_is_seen() {
        let (tx, first) = watch::channel(None);
        drop(first);
        let acted = Finished {
            acted: HashSet::from(["pve01".to_string()]),
            failed: HashSet::new(),
        };
        publish(&tx, acted);
        let mut late = tx.subscribe();
        let seen = tokio::time::timeout(Duration::from_secs(5), late.wait_for(Option::is_some))
            .await
            .expect("the outcome is there for a late subscriber")
            .expect("sender alive")
            .clone()
            .expect("some outcome");
        assert!(seen.serves(Some("pve01")));
        assert!(seen.acted.contains("pve01"));
    }
}
