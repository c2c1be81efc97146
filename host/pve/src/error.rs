//! Errors of PVE requests, carrying PVE's own message.

use std::collections::BTreeMap;

/// A request to PVE that did not succeed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PveError {
    /// PVE answered with an error status. `message` is PVE's status-line message;
    /// `errors` holds the per-parameter messages of a 400.
    #[error("{method} {path}: HTTP {status}: {message}{}", format_errors(.errors))]
    Api {
        method: String,
        path: String,
        status: u16,
        message: String,
        errors: BTreeMap<String, String>,
    },
    /// The request did not get an answer (connection refused or reset, timeout).
    #[error("{method} {path}: {message}")]
    Transport {
        method: String,
        path: String,
        message: String,
    },
    /// The server's certificate was not the one trusted.
    #[error("TLS: {0}")]
    Tls(String),
    /// PVE's answer was not the JSON expected.
    #[error("{method} {path}: unexpected answer: {message}")]
    Decode {
        method: String,
        path: String,
        message: String,
    },
    /// A task ended with an error; `exitstatus` is PVE's text.
    #[error("task {upid} failed: {exitstatus}")]
    TaskFailed { upid: String, exitstatus: String },
    /// A task was still running when its time ran out.
    #[error("task {upid} still running after {seconds} s")]
    TaskTimeout { upid: String, seconds: u64 },
    /// Bad client settings.
    #[error("client settings: {0}")]
    Config(String),
}

fn format_errors(errors: &BTreeMap<String, String>) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = errors
        .iter()
        .map(|(k, v)| format!("{k}: {}", v.trim()))
        .collect();
    format!(" ({})", parts.join("; "))
}

impl PveError {
    /// HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            PveError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Worth repeating a request that is safe to repeat: no answer at all, a gateway error
    /// (596 is pveproxy's own: its backend did not answer), or PVE's lock timeout (the
    /// request did nothing).
    pub fn is_transient(&self) -> bool {
        match self {
            PveError::Transport { .. } => true,
            PveError::Api { status, .. } => {
                matches!(status, 502..=504 | 596) || (*status == 500 && self.is_lock_timeout())
            }
            _ => false,
        }
    }

    /// Whether PVE's own words say `what`: the message of an error answer and its
    /// per-parameter messages (a 400 names a stale `digest` there), or the exit status of a
    /// failed task (where PVE reports what a worker refused). The classifiers below read them;
    /// nothing outside this crate does.
    fn pve_says(&self, what: impl Fn(&str) -> bool) -> bool {
        match self {
            PveError::Api {
                message, errors, ..
            } => what(message) || errors.values().any(|v| what(v)),
            PveError::TaskFailed { exitstatus, .. } => what(exitstatus),
            _ => false,
        }
    }

    /// A config write refused because the config changed since the `digest` it carries was
    /// read (or an earlier attempt of the same write landed): qemu-server's `checksum mismatch
    /// (file change by other user?)`, pve-container's `detected modified configuration - file
    /// changed by other user? Try again.`, and the older `config file has been modified`; as a
    /// 500 on the synchronous form or as the exit status of the task on the asynchronous one.
    /// Only a write that carries a `digest` can get it: a download's `checksum mismatch` is
    /// the file's, and the caller knows which it sent.
    pub fn is_stale_digest(&self) -> bool {
        self.pve_says(|w| {
            w.contains("checksum mismatch")
                || w.contains("config file has been modified")
                || w.contains("detected modified configuration")
        })
    }

    /// PVE could not take the guest's config lock in time (`can't lock file
    /// '/var/lock/qemu-server/lock-100.conf' - got timeout`): the request did nothing, and
    /// the lock's holder (a stop still running) may release it soon.
    pub fn is_lock_timeout(&self) -> bool {
        self.pve_says(|w| w.contains("got timeout"))
    }

    /// A start refused because the guest runs already (`VM 100 already running`, `CT 100
    /// already running`): what the start was for.
    pub fn is_already_running(&self) -> bool {
        self.pve_says(|w| w.contains("already running"))
    }

    /// The error as it may leave the client: every registered secret
    /// ([`proxops_core::text::register`]) redacted in all its encodings, and every control
    /// character escaped (PVE's text is foreign: a message cannot move the cursor or start a
    /// line of its own). The client returns no error that has not been through this.
    pub fn cleaned(self) -> PveError {
        let clean = |s: String| proxops_core::text::clean_inline(&s).into_owned();
        match self {
            PveError::Api {
                method,
                path,
                status,
                message,
                errors,
            } => PveError::Api {
                method,
                path: clean(path),
                status,
                message: clean(message),
                errors: errors
                    .into_iter()
                    .map(|(k, v)| (clean(k), clean(v)))
                    .collect(),
            },
            PveError::Transport {
                method,
                path,
                message,
            } => PveError::Transport {
                method,
                path: clean(path),
                message: clean(message),
            },
            PveError::Tls(message) => PveError::Tls(clean(message)),
            PveError::Decode {
                method,
                path,
                message,
            } => PveError::Decode {
                method,
                path: clean(path),
                message: clean(message),
            },
            PveError::TaskFailed { upid, exitstatus } => PveError::TaskFailed {
                upid: clean(upid),
                exitstatus: clean(exitstatus),
            },
            PveError::TaskTimeout { upid, seconds } => PveError::TaskTimeout {
                upid: clean(upid),
                seconds,
            },
            PveError::Config(message) => PveError::Config(clean(message)),
        }
    }

    /// Remove every occurrence of the given secret values from the error text.
    pub fn redact(self, secrets: &[&str]) -> PveError {
        let scrub = |s: String| {
            secrets
                .iter()
                .filter(|v| !v.is_empty())
                .fold(s, |acc, v| acc.replace(v, "(sensitive)"))
        };
        match self {
            PveError::Api {
                method,
                path,
                status,
                message,
                errors,
            } => PveError::Api {
                method,
                path,
                status,
                message: scrub(message),
                errors: errors.into_iter().map(|(k, v)| (k, scrub(v))).collect(),
            },
            PveError::TaskFailed { upid, exitstatus } => PveError::TaskFailed {
                upid,
                exitstatus: scrub(exitstatus),
            },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, message: &str) -> PveError {
        PveError::Api {
            method: "GET".into(),
            path: "/nodes".into(),
            status,
            message: message.into(),
            errors: BTreeMap::new(),
        }
    }

    fn task(exitstatus: &str) -> PveError {
        PveError::TaskFailed {
            upid: "UPID:pve01:00001234:00005678:65000000:qmstart:100:root@pam:".into(),
            exitstatus: exitstatus.into(),
        }
    }

    /// PVE's own messages (qemu-server, pve-container, pve-common's lock helper), as an
    /// answer and as a task's exit status, each with what the executor must read in it.
    #[test]
    fn pve_messages_are_classified_here_and_nowhere_else() {
        // (message, stale digest, lock timeout, already running)
        let cases = [
            (
                "checksum mismatch (file change by other user?)",
                true,
                false,
                false,
            ),
            (
                "detected modified configuration - file changed by other user? Try again.",
                true,
                false,
                false,
            ),
            (
                "config file has been modified by another user",
                true,
                false,
                false,
            ),
            (
                "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
                false,
                true,
                false,
            ),
            (
                "can't lock file '/run/lock/lxc/pve-config-101.lock' - got timeout",
                false,
                true,
                false,
            ),
            ("VM 100 already running", false, false, true),
            ("CT 101 already running", false, false, true),
            ("VM 100 already exists on node 'pve01'", false, false, false),
            (
                "unable to create CT 160 - volume 'local:vztmpl/x.tar.zst' does not exist",
                false,
                false,
                false,
            ),
        ];
        for (message, stale, lock, running) in cases {
            for e in [api(500, message), task(message)] {
                assert_eq!(e.is_stale_digest(), stale, "{e}");
                assert_eq!(e.is_lock_timeout(), lock, "{e}");
                assert_eq!(e.is_already_running(), running, "{e}");
            }
        }
        // A 400 names the stale digest among its parameters' messages.
        let digest = PveError::Api {
            method: "PUT".into(),
            path: "/nodes/pve01/lxc/101/config".into(),
            status: 400,
            message: "Parameter verification failed.".into(),
            errors: BTreeMap::from([(
                "digest".to_string(),
                "detected modified configuration - file changed by other user? Try again."
                    .to_string(),
            )]),
        };
        assert!(digest.is_stale_digest() && !digest.is_lock_timeout());
        // Neither a transport failure nor a timeout on our side is PVE's word.
        let transport = PveError::Transport {
            method: "POST".into(),
            path: "/nodes/pve01/qemu/100/status/start".into(),
            message: "connection reset; already running checksum mismatch got timeout".into(),
        };
        assert!(!transport.is_stale_digest() && !transport.is_lock_timeout());
        assert!(!transport.is_already_running());
    }

    #[test]
    fn only_answers_that_did_nothing_are_transient() {
        for (status, message, transient) in [
            (502, "Bad Gateway", true),
            (503, "Service Unavailable", true),
            (504, "Gateway Timeout", true),
            (596, "Connection timed out", true),
            (
                500,
                "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
                true,
            ),
            (500, "VM 100 already exists", false),
            (500, "refusing to override existing file", false),
            (400, "Parameter verification failed.", false),
            (501, "Method not implemented", false),
        ] {
            assert_eq!(
                api(status, message).is_transient(),
                transient,
                "{status} {message}"
            );
        }
    }
}
