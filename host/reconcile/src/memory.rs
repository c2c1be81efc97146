//! What one run remembers for the next: stop-required changes that failed. A guest that was
//! stopped for a change, whose write then failed (and which was started again), is not
//! stopped again for the same unchanged change: the next plans show an anomaly instead, until
//! the manifest or the live config changes or the operator asks to retry.
//!
//! "The same change" is the action's calls without the config's `digest`: the failed sequence
//! may itself change the digest (a shutdown applies the guest's pending changes), and a write
//! planned while changes were pending carries no digest at all. The live config is judged by
//! the digest the first plan after the failure saw: a later plan against another digest means
//! someone changed the guest since, and the change is planned again.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use proxops_runtime::kind::{Action, Anomaly};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::plan::{ClusterPlan, ObjectRef, method_name};

/// Why the memory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not a proxops stop memory ({source}); delete it to start over")]
    Parse {
        path: String,
        source: serde_json::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
}

/// One remembered failure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Failure {
    /// `cluster/Kind/name` of the object.
    pub object: String,
    /// What the action was, for the anomaly.
    pub summary: String,
    /// Why it failed.
    pub error: String,
    /// When it failed (seconds since the Unix epoch).
    pub at: u64,
    /// The config digest the first plan after the failure held the action back against
    /// (`None` until then, or while the planned write carries no digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Failed stop-required actions by fingerprint, backed by a file (or by nothing).
#[derive(Debug, Default)]
pub struct StopMemory {
    path: Option<PathBuf>,
    failures: Mutex<BTreeMap<String, Failure>>,
}

/// The config digest a call of `action` was planned against, if any carries one.
fn planned_digest(action: &Action) -> Option<&str> {
    action
        .calls
        .iter()
        .flat_map(|c| &c.params)
        .find(|p| p.name == "digest")
        .map(|p| p.value.as_str())
}

/// The fingerprint of `action` of `object`: its calls (method, path, parameter names and
/// non-secret values), without the config digest (see the module documentation).
pub fn fingerprint(object: &ObjectRef, action: &Action) -> String {
    let mut h = Sha256::new();
    let id = &object.id;
    for part in [&id.cluster, &id.kind, &id.name] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    for c in &action.calls {
        h.update(method_name(c.method).as_bytes());
        h.update(c.path.as_bytes());
        for p in c.params.iter().filter(|p| p.name != "digest") {
            h.update(p.name.as_bytes());
            h.update([1]);
            if !p.sensitive {
                h.update(p.value.as_bytes());
            }
            h.update([0]);
        }
    }
    hex::encode(h.finalize())
}

impl StopMemory {
    /// A memory that lives as long as this value (tests, `--no-cache` runs).
    pub fn in_memory() -> StopMemory {
        StopMemory::default()
    }

    /// The memory kept in `path` (missing: empty).
    pub fn open(path: PathBuf) -> Result<StopMemory, MemoryError> {
        let shown = path.display().to_string();
        let failures = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| MemoryError::Parse {
                path: shown,
                source,
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(MemoryError::Read {
                    path: shown,
                    source,
                });
            }
        };
        Ok(StopMemory {
            path: Some(path),
            failures: Mutex::new(failures),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Failure>> {
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember that `action` of `object` failed with `error`.
    pub fn record(&self, object: &ObjectRef, action: &Action, error: &str) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
        self.lock().insert(
            fingerprint(object, action),
            Failure {
                object: object.id.in_cluster(),
                summary: action.summary.clone(),
                error: error.to_string(),
                at,
                digest: None,
            },
        );
    }

    /// Forget every failure of `object` (its change went through, or it was retried).
    pub fn forget(&self, object: &ObjectRef) {
        let id = object.id.in_cluster();
        self.lock().retain(|_, f| f.object != id);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replace every remembered stop-required action of `plan` with an anomaly that says what
    /// failed and how to go on; with `retry`, keep the actions (and forget their failures).
    pub fn hold_back(&self, plan: &mut ClusterPlan, retry: bool) {
        let mut failures = self.lock();
        if failures.is_empty() {
            return;
        }
        for o in &mut plan.objects {
            let mut kept = Vec::with_capacity(o.proposal.actions.len());
            for a in std::mem::take(&mut o.proposal.actions) {
                let key = fingerprint(&o.object, &a);
                if !a.disturbs_availability || !failures.contains_key(&key) {
                    kept.push(a);
                    continue;
                }
                let now = planned_digest(&a);
                let f = failures.get_mut(&key).expect("checked above");
                let live_changed =
                    matches!((&f.digest, now), (Some(seen), Some(now)) if seen != now);
                if retry || live_changed {
                    failures.remove(&key);
                    kept.push(a);
                    continue;
                }
                if f.digest.is_none() {
                    f.digest = now.map(str::to_string);
                }
                o.proposal.anomalies.push(Anomaly {
                    path: String::new(),
                    message: format!(
                        "not stopping the guest again: `{}` failed in an earlier run ({}) and nothing has changed since; fix the cause, change the manifest, or run apply with --retry-stop-required",
                        f.summary, f.error
                    ),
                    locked: false,
                });
            }
            o.proposal.actions = kept;
        }
    }

    /// Write the memory back to its file (atomically: a temp file renamed over it).
    pub fn save(&self) -> Result<(), MemoryError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let shown = path.display().to_string();
        let write = |e| MemoryError::Write {
            path: shown.clone(),
            source: e,
        };
        let failures = self.lock();
        if failures.is_empty() && !path.exists() {
            return Ok(());
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(write)?;
        }
        let text = serde_json::to_vec_pretty(&*failures).map_err(|e| write(e.into()))?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).map_err(write)?;
        std::fs::rename(&tmp, path).map_err(write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ObjectPlan;
    use proxops_runtime::kind::{Call, Method, Operation, Param, Proposal};

    fn action(digest: &str) -> Action {
        Action {
            operation: Operation::Update,
            summary: "update VM 100 with a restart: machine".into(),
            calls: vec![Call {
                method: Method::Post,
                path: "/nodes/pve01/qemu/100/config".into(),
                params: vec![Param {
                    name: "digest".into(),
                    value: digest.into(),
                    sensitive: false,
                }],
            }],
            changes: Vec::new(),
            disturbs_availability: true,
            destructive: false,
            restore: None,
        }
    }

    fn plan(a: Action) -> ClusterPlan {
        ClusterPlan {
            cluster: "lab".into(),
            rollout: Vec::new(),
            objects: vec![ObjectPlan {
                object: ObjectRef {
                    id: proxops_core::ObjectId::new("lab", "VM", "web"),
                    file: Some("vm/lab/web.yaml".into()),
                    node: Some("pve01".into()),
                    resource: Some("qemu/100".into()),
                    listings: Vec::new(),
                },
                kind_index: 0,
                desired: None,
                running: true,
                proposal: Proposal {
                    actions: vec![a],
                    drift: Vec::new(),
                    pending: Vec::new(),
                    anomalies: Vec::new(),
                },
                depends_on: Vec::new(),
                error: None,
                taking_over: false,
                sandboxed: false,
                relocated: None,
            }],
        }
    }

    #[test]
    fn a_failed_stop_is_held_back_until_something_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stops.json");
        let memory = StopMemory::open(path.clone()).unwrap();
        let p = plan(action("d1"));
        memory.record(
            &p.objects[0].object,
            &p.objects[0].proposal.actions[0],
            "boom",
        );
        memory.save().unwrap();

        // Another run reads it back and holds the same action back.
        let memory = StopMemory::open(path).unwrap();
        let mut same = plan(action("d1"));
        memory.hold_back(&mut same, false);
        assert!(same.objects[0].proposal.actions.is_empty());
        let message = &same.objects[0].proposal.anomalies[0].message;
        assert!(
            message.contains("boom") && message.contains("--retry-stop-required"),
            "{message}"
        );

        // The live config changed since (another digest): planned again, and forgotten.
        let mut changed = plan(action("d2"));
        memory.hold_back(&mut changed, false);
        assert_eq!(changed.objects[0].proposal.actions.len(), 1);
        assert!(memory.is_empty());

        // Retry: planned again, and forgotten.
        memory.record(
            &p.objects[0].object,
            &p.objects[0].proposal.actions[0],
            "boom",
        );
        let mut retried = plan(action("d1"));
        memory.hold_back(&mut retried, true);
        assert_eq!(retried.objects[0].proposal.actions.len(), 1);
        assert!(memory.is_empty());
    }

    /// The failed sequence itself may change the digest (the shutdown applied pending
    /// changes), and a write planned while changes were pending carries none: the first plan
    /// after the failure still holds it back, and binds the digest it saw.
    #[test]
    fn a_digest_changed_by_the_failed_sequence_is_not_a_live_change() {
        let memory = StopMemory::in_memory();
        let p = plan(action("before"));
        let without_digest = {
            let mut a = action("x");
            a.calls[0].params.clear();
            a
        };
        memory.record(&p.objects[0].object, &without_digest, "boom");
        for (seen, held) in [("after", true), ("after", true), ("edited", false)] {
            let mut next = plan(action(seen));
            memory.hold_back(&mut next, false);
            assert_eq!(
                next.objects[0].proposal.actions.is_empty(),
                held,
                "planned against {seen}"
            );
        }
        assert!(memory.is_empty(), "a live change forgets the failure");
    }
}
