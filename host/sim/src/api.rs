//! What a handler sees of a request, handler results and PVE's error envelopes (400 parameter errors, 500 handler dies, 501 unknown methods).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::faults::Drawn;
use crate::schema::Errors;

/// What a handler sees of a request.
pub(crate) struct Req {
    /// Auth id: the full token id for token auth (`root@pam!proxops`).
    pub user: String,
    pub params: BTreeMap<String, String>,
    pub faults: Drawn,
}

impl Req {
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// The items of an `array` parameter (`map=...&map=...`), none when it is absent.
    pub(crate) fn list(&self, key: &str) -> Vec<&str> {
        match self.get(key) {
            Some(v) => v.split(crate::schema::ARRAY_SEPARATOR).collect(),
            None => Vec::new(),
        }
    }

    pub(crate) fn flag(&self, key: &str) -> bool {
        self.get(key) == Some("1")
    }

    pub(crate) fn node(&self) -> &str {
        self.get("node").unwrap_or("")
    }

    pub(crate) fn vmid(&self) -> u32 {
        self.get("vmid").and_then(|v| v.parse().ok()).unwrap_or(0)
    }
}

/// A successful answer: `{"data": ...}` plus `total` where PVE adds it.
#[derive(Debug)]
pub(crate) struct Reply {
    pub data: Value,
    pub total: Option<u64>,
    /// Pre-serialised JSON for `data` (large listings); used instead of `data` when set.
    pub raw: Option<String>,
}

impl Reply {
    pub(crate) fn data(data: Value) -> Reply {
        Reply {
            data,
            total: None,
            raw: None,
        }
    }
}

/// A failed answer.
#[derive(Debug)]
pub(crate) enum ApiError {
    /// 400 "Parameter verification failed." with the errors object.
    Param(Errors),
    /// pveproxy could not reach the node a request is for (595 `No route to host`).
    Unreachable,
    /// A 400 with a message of its own and per-parameter errors (a `PVE::Exception` with `errors`).
    Invalid { message: String, errors: Errors },
    /// Any other status with a message (the reason phrase is its first line).
    Status { code: u16, message: String },
}

impl ApiError {
    /// A handler `die "text\n"`: 500 with the text, a trailing newline added as Perl's die strings carry one.
    pub(crate) fn die(message: impl Into<String>) -> ApiError {
        let mut message = message.into();
        if !message.ends_with('\n') {
            message.push('\n');
        }
        ApiError::Status { code: 500, message }
    }

    /// `raise_param_exc({key => msg})`.
    pub(crate) fn param(key: &str, message: impl Into<String>) -> ApiError {
        let mut e = Errors::new();
        e.insert(key.to_string(), message.into());
        ApiError::Param(e)
    }

    /// The error as a task's exit status shows it (pve-common `fork_worker`: the error text chomped, its newlines
    /// made spaces; a parameter exception prints as `400 Parameter verification failed.` and `key: message` lines).
    pub(crate) fn task_text(&self) -> String {
        let text = match self {
            ApiError::Param(errors) => {
                let mut text = String::from("400 Parameter verification failed.\n");
                for (key, message) in errors {
                    text.push_str(&format!("{key}: {message}\n"));
                }
                text
            }
            ApiError::Invalid { message, errors } => {
                let mut text = format!("400 {message}");
                for (key, message) in errors {
                    text.push_str(&format!("{key}: {message}\n"));
                }
                text
            }
            ApiError::Status { message, .. } => message.clone(),
            ApiError::Unreachable => "595 No route to host".to_string(),
        };
        let text = text.strip_suffix('\n').unwrap_or(&text);
        text.replace('\n', " ")
    }

    /// 501 for a method and path without a handler.
    pub(crate) fn not_implemented(method: &str, path: &str) -> ApiError {
        ApiError::Status {
            code: 501,
            message: format!("Method '{method} {path}' not implemented"),
        }
    }
}

pub(crate) type ApiResult = Result<Reply, ApiError>;

/// The configuration-file-missing error PVE gives for an unknown VMID on a node.
pub(crate) fn no_such_vm(node: &str, vmid: u32) -> ApiError {
    ApiError::die(format!(
        "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
    ))
}
