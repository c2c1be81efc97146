//! One call of an action, as the executor sends it: its node's write permit, the check of
//! the digest before a stop, the request (repeated only when that is safe, a lost create looked
//! for first), its task polled to the end (and any HA wait after it), and the restore calls run
//! when a later call fails.

use std::time::Duration;

use proxops_pve::{PveError, Upid};
use proxops_runtime::kind::{Action, Call, Method, Operation};
use tokio::sync::SemaphorePermit;

use super::{Event, Shared, call_node};
use crate::error::{Aftermath, CallError};
use crate::observe::listing;
use crate::plan::{ObjectRef, method_name};
use crate::wire::{to_pve_method, wire_params};

/// Run an action's restore calls after one of its calls failed: whether availability was
/// restored, and if not, where restoring failed.
pub(super) async fn run_restore(
    shared: &Shared,
    calls: &[Call],
    object: &ObjectRef,
    disturbing_failed: bool,
    holding: bool,
) -> Aftermath {
    let shown = |c: &Call| format!("{} {}", method_name(c.method), c.path);
    for call in calls {
        if let Err(r) = restore_call(shared, call, object, holding).await {
            return Aftermath::RestoreFailed {
                call: shown(call),
                error: Box::new(r),
                stop_failed: disturbing_failed,
            };
        }
    }
    Aftermath::Restored(calls.iter().map(shown).collect())
}

/// One restore call. A restore start is sent again while its task finds the guest's lock
/// held: the stop it follows may still be running (its answer lost, or its task past the task
/// timeout), and a start given up at once would leave the guest down once that stop ends. It
/// is repeated for at most the task timeout.
async fn restore_call(
    shared: &Shared,
    call: &Call,
    object: &ObjectRef,
    holding: bool,
) -> Result<(), CallError> {
    let began = std::time::Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        let permit = if holding { Permit::Held } else { Permit::Take };
        match run_call(shared, call, &Operation::Update, object, "restore", permit).await {
            Ok(()) => return Ok(()),
            Err(e)
                if is_start(call)
                    && e.is_lock_timeout()
                    && began.elapsed() < shared.limits.task_timeout =>
            {
                tracing::debug!("{e}; the restore start is sent again in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The write permit of `call`'s node, for a mutating call on a node of the cluster.
pub(super) async fn write_permit<'a>(
    shared: &'a Shared,
    call: &Call,
) -> Option<SemaphorePermit<'a>> {
    if call.method == Method::Get {
        return None;
    }
    let node = call_node(&call.path).and_then(|n| shared.nodes.get(n))?;
    Some(node.acquire().await.expect("semaphore open"))
}

/// Whether `call` starts a guest. A start is safe to send again: PVE refuses to start a
/// running guest ("already running"), and a running guest is what a start is for.
fn is_start(call: &Call) -> bool {
    call.method == Method::Post && call.path.ends_with("/status/start")
}

/// Before a stop/write/start stops its guest: the config write it carries is bound to the
/// digest the plan read; when the config has changed since (a write, new tags: the guest
/// may not even be ours any more), that write is returned with [`CallError::Stale`], before
/// anything is sent. A read that fails is returned as [`CallError::Unverified`] (nothing is
/// stopped on a guess).
pub(super) async fn changed_since_plan<'a>(
    shared: &Shared,
    action: &'a Action,
) -> Option<(&'a Call, CallError)> {
    let (i, call) = action
        .calls
        .iter()
        .enumerate()
        .find(|(_, c)| c.params.iter().any(|p| p.name == "digest"))?;
    if i == 0 || !call.path.ends_with("/config") {
        return None;
    }
    let planned = &call.params.iter().find(|p| p.name == "digest")?.value;
    match shared.client.get(&call.path, &[]).await {
        Ok(config) if config.get("digest").and_then(|d| d.as_str()) == Some(planned) => None,
        Ok(_) => Some((
            call,
            CallError::Stale {
                path: call.path.clone(),
            },
        )),
        Err(e) => Some((call, CallError::Unverified(Box::new(e)))),
    }
}

/// Under whose node write permit a call runs.
pub(super) enum Permit<'a> {
    /// The call takes its node's permit for itself (when it mutates).
    Take,
    /// The caller took it for this call.
    Given(SemaphorePermit<'a>),
    /// The caller holds it across the calls of a stop/write/start.
    Held,
}

/// One call, under `permit`.
pub(super) async fn run_call(
    shared: &Shared,
    call: &Call,
    operation: &Operation,
    object: &ObjectRef,
    summary: &str,
    permit: Permit<'_>,
) -> Result<(), CallError> {
    let params = wire_params(call, shared.secrets.as_deref())?;
    if call.method == Method::Get {
        return shared
            .client
            .get(&call.path, &params)
            .await
            .map(drop)
            .map_err(CallError::from);
    }
    let _permit = match permit {
        Permit::Given(p) => Some(p),
        Permit::Take => write_permit(shared, call).await,
        Permit::Held => None,
    };
    // A token creation's answer holds the token's secret, shown once: it must have a place in
    // the SOPS document before the request is sent.
    let token = crate::tokens::created_token(call);
    if let Some(full) = &token {
        crate::tokens::ready_to_store(full, shared.secrets.as_deref())?;
    }
    // A config write guarded by the digest it was planned against is safe to repeat: if the
    // first attempt landed, the repeat fails with "checksum mismatch" and the next pass
    // re-plans. So is a start (see `is_start`). Other writes are sent once.
    let guarded = is_start(call) || call.params.iter().any(|p| p.name == "digest");
    let method = to_pve_method(call.method);
    let mut result = shared
        .client
        .request(method, &call.path, &params, guarded)
        .await;
    if let Err(e) = &result
        && e.is_transient()
        && *operation == Operation::Create
        && call.method == Method::Post
        // A token whose answer was lost has lost its secret with it: the error stands, and
        // the next cycle finds the token without a stored secret.
        && token.is_none()
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
    let data = result.map_err(CallError::from)?;
    if let Some(full) = &token {
        return crate::tokens::store_secret(full, data, shared.secrets.as_deref());
    }
    let task_type = data.as_str().and_then(Upid::parse).map(|u| u.task_type);
    let wait = crate::settle::needed(
        &crate::request::form::pve_view(&call.path),
        &call.params,
        task_type.as_deref(),
    );
    if let Some(upid) = data.as_str().filter(|s| Upid::parse(s).is_some()) {
        let ended = match shared
            .client
            .wait_task(upid, shared.limits.task_timeout)
            .await
        {
            // A start repeated after its first attempt landed, or sent after someone else's:
            // the guest runs, as wanted.
            Err(e @ PveError::TaskFailed { .. }) if is_start(call) && e.is_already_running() => {
                return Ok(());
            }
            ended => ended,
        }
        .map_err(|e| match e {
            e @ PveError::TaskFailed { .. } => CallError::Task {
                method: method_name(call.method),
                path: call.path.clone(),
                error: Box::new(e),
            },
            other => CallError::from(other),
        })?;
        if ended.exitstatus.starts_with("WARNINGS") {
            // One more read, only for a task that warned: what PVE warned about.
            let warnings = match shared.client.task_warnings(upid).await {
                Ok(w) if !w.is_empty() => w,
                Ok(_) => vec![format!("the task ended {}", ended.exitstatus)],
                Err(e) => vec![format!(
                    "the task ended {}; its log could not be read: {e}",
                    ended.exitstatus
                )],
            };
            shared.reporter.event(Event::Warned {
                object: object.clone(),
                summary: summary.to_string(),
                warnings,
            });
        }
    }
    if let Some(wait) = wait {
        shared.reporter.event(Event::Waiting {
            object: object.clone(),
            summary: summary.to_string(),
            what: wait.describe(),
        });
        crate::settle::until(&shared.client, &wait, shared.limits.task_timeout)
            .await
            .map_err(|error| CallError::Unsettled {
                method: method_name(call.method),
                path: call.path.clone(),
                error,
            })?;
    }
    Ok(())
}

/// Whether the object's entry exists in its kind's listings; `None` when that cannot be known
/// (no resource id, no listing, or a read failed).
async fn exists(shared: &Shared, object: &ObjectRef) -> Option<bool> {
    let id = object.resource.as_ref()?;
    if object.listings.is_empty() {
        return None;
    }
    for (path, field) in &object.listings {
        let list = listing(&shared.client, path).await.ok()?;
        let found = list
            .iter()
            .any(|e| e.get(field).and_then(|f| f.id()).as_deref() == Some(id.as_str()));
        if found {
            return Some(true);
        }
    }
    Some(false)
}
