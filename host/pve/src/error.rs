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
            PveError::Api {
                status, message, ..
            } => {
                matches!(status, 502..=504 | 596)
                    || (*status == 500 && message.contains("got timeout"))
            }
            _ => false,
        }
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
