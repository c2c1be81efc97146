//! The apply lock: two applies against one cluster never run at once (they would plan
//! against the same state and overwrite each other's work). An advisory file lock per cluster,
//! taken before its plan and held to its last pass; a second apply, in another process or
//! this one, is refused before any request. Where the file lives is the caller's choice (the
//! CLI keys it on endpoint and token, in the cache folder).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// The apply locks of one process. Clusters worked on at once whose lock is the same file (two
/// cluster files naming one endpoint and token) take turns here first: the operating system's
/// lock would refuse the second as if another apply held it. The file lock is released when
/// the process ends, however it ends.
#[derive(Debug, Default)]
pub struct Locks {
    turns: std::sync::Mutex<BTreeMap<std::path::PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

/// A cluster's apply lock, held until dropped.
#[derive(Debug)]
pub struct ApplyLock {
    _file: Option<std::fs::File>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Locks {
    /// Take the apply lock of `cluster` at `path` (`None`: no lock can be kept, and none is
    /// taken): wait for this process's other cluster with the same lock file, if any, then lock
    /// the file; refused (with what to do) when another apply holds it.
    pub async fn take(&self, path: Option<PathBuf>, cluster: &str) -> Result<ApplyLock, String> {
        let Some(path) = path else {
            return Ok(ApplyLock {
                _file: None,
                _turn: None,
            });
        };
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path.clone())
            .or_default()
            .clone();
        let turn = turn.lock_owned().await;
        let shown = path.display().to_string();
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("opening the lock file {shown}: {e}"))?;
        match file.try_lock() {
            Ok(()) => Ok(ApplyLock {
                _file: Some(file),
                _turn: Some(turn),
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(format!(
                "another proxops apply holds the lock of cluster {} (lock file {shown}); not applying, no change was made. Run one apply per cluster at a time",
                cluster
            )),
            Err(std::fs::TryLockError::Error(e)) => Err(format!("locking {shown}: {e}")),
        }
    }
}
