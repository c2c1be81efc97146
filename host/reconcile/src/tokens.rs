//! PVE API tokens and their secrets: the request that creates one (recognised by what it does,
//! `POST /access/users/{userid}/token/{tokenid}`, never by what a kind says), where its secret
//! goes in the cluster's SOPS file, and the `secret-stored` flag the host puts into each token
//! of a user read, so a kind can see a live token whose secret proxops does not hold.
//!
//! PVE shows a token's secret once, in the creation's answer. The host takes it from there and
//! stores it with [`SecretSource::store`] before the call counts as done; the kind, the plan,
//! the log and every printed line see the call and its summary only. A secret that could not
//! be stored fails the call ([`CallError::SecretNotStored`]); the next cycle reads the token
//! with `secret-stored: false`, and the kind deletes and re-creates it.

use proxops_runtime::kind::{Call, Method};
use proxops_runtime::{SecretError, SecretSource};
use serde_json::Value;

use crate::error::CallError;
use crate::request::form::pve_view;

/// The mapping of the SOPS document the secrets go under.
pub const SOPS_PARENT: &str = "pve-tokens";

/// The key of token `full` (`user@realm!tokenid`) under [`SOPS_PARENT`]: letters, digits and
/// `-` as they are, every other byte `_` and two lowercase hex digits (`deploy@pve!ci` is
/// `deploy_40pve_21ci`), so the key is plain for SOPS and no two tokens share one.
pub fn secret_key(full: &str) -> String {
    let mut out = String::with_capacity(full.len() + 8);
    for b in full.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("_{b:02x}"));
        }
    }
    out
}

/// The dot-path of token `full`'s secret: `pve-tokens.<secret_key>`.
pub fn secret_path(full: &str) -> String {
    format!("{SOPS_PARENT}.{}", secret_key(full))
}

/// The full token id (`user@realm!tokenid`) a call creates, when it is PVE's token creation
/// (`POST /access/users/{userid}/token/{tokenid}`), read from the request's path as PVE reads it.
pub fn created_token(call: &Call) -> Option<String> {
    if call.method != Method::Post {
        return None;
    }
    match pve_view(&call.path).as_slice() {
        [a, u, user, t, token] if a == "access" && u == "users" && t == "token" => {
            Some(format!("{user}!{token}"))
        }
        _ => None,
    }
}

/// The user a read is of, when it is `GET /access/users/{userid}` (its answer lists the user's
/// tokens by id).
pub fn user_read(path: &str) -> Option<String> {
    match pve_view(path).as_slice() {
        [a, u, user] if a == "access" && u == "users" => Some(user.clone()),
        _ => None,
    }
}

/// PVE's answer to `GET /access/users/{userid}` with `secret-stored` (a boolean) in each of
/// its `tokens` entries; `None` when the answer is not an object with a `tokens` object.
pub fn with_stored_flags(
    text: &str,
    userid: &str,
    secrets: Option<&dyn SecretSource>,
) -> Option<String> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    let tokens = v.get_mut("tokens")?.as_object_mut()?;
    for (id, info) in tokens.iter_mut() {
        let stored = secrets.is_some_and(|s| s.contains(&secret_path(&format!("{userid}!{id}"))));
        if let Some(info) = info.as_object_mut() {
            info.insert("secret-stored".into(), Value::Bool(stored));
        }
    }
    Some(v.to_string())
}

/// Words for a secret source's refusal (never a value: sources put none in their errors).
fn secret_error(e: &SecretError) -> String {
    match e {
        SecretError::Missing => "no such entry".to_string(),
        SecretError::Empty => "the entry is empty".to_string(),
        SecretError::Invalid(why) => why.clone(),
    }
}

/// Before a token creation is sent: the secret must have somewhere to go (the cluster has a
/// SOPS document that opens, and the id gives a key), or the request is not sent at all.
pub fn ready_to_store(full: &str, secrets: Option<&dyn SecretSource>) -> Result<(), CallError> {
    let unsent = |why: String| {
        CallError::Unsent(format!(
            "API token {full} is not created: its secret could not be stored ({why})"
        ))
    };
    let Some(secrets) = secrets else {
        return Err(unsent(
            "this run has no SOPS document for the cluster".into(),
        ));
    };
    secrets.writable().map_err(|e| unsent(secret_error(&e)))
}

/// Takes the secret out of a token creation's answer and stores it at [`secret_path`]. The
/// answer is dropped here: nothing of it reaches a kind, a log or a report.
pub fn store_secret(
    full: &str,
    answer: Value,
    secrets: Option<&dyn SecretSource>,
) -> Result<(), CallError> {
    let failed = |why: String| CallError::SecretNotStored {
        token: full.to_string(),
        why,
    };
    let value = answer
        .get("value")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| failed("PVE's answer has no `value`".into()))?;
    // Scrubbed from every later line before anything else can print it.
    proxops_core::text::register(value).map_err(|e| failed(e.to_string()))?;
    let Some(secrets) = secrets else {
        return Err(failed(
            "this run has no SOPS document for the cluster".into(),
        ));
    };
    secrets
        .store(&[SOPS_PARENT], &secret_key(full), value)
        .map_err(|e| failed(secret_error(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_plain_and_distinct() {
        let cases = [
            ("deploy@pve!ci", "deploy_40pve_21ci"),
            ("a.b@pve!t", "a_2eb_40pve_21t"),
            ("a_b@pve!t", "a_5fb_40pve_21t"),
            ("x-y@ldap-1!tok-2", "x-y_40ldap-1_21tok-2"),
        ];
        for (full, key) in cases {
            assert_eq!(secret_key(full), key, "{full}");
            assert_eq!(secret_path(full), format!("pve-tokens.{key}"));
        }
    }

    #[test]
    fn only_the_token_creation_is_recognised() {
        let call = |method, path: &str| Call {
            method,
            path: path.into(),
            params: Vec::new(),
        };
        let cases = [
            (
                Method::Post,
                "/access/users/deploy%40pve/token/ci",
                Some("deploy@pve!ci"),
            ),
            (
                Method::Post,
                "/access/users/deploy@pve/token/ci",
                Some("deploy@pve!ci"),
            ),
            (Method::Put, "/access/users/deploy@pve/token/ci", None),
            (Method::Delete, "/access/users/deploy@pve/token/ci", None),
            (Method::Post, "/access/users", None),
            (Method::Post, "/access/users/deploy@pve/token", None),
            (Method::Post, "/access/users/deploy@pve/token/ci/x", None),
        ];
        for (method, path, want) in cases {
            assert_eq!(
                created_token(&call(method, path)).as_deref(),
                want,
                "{path}"
            );
        }
        assert_eq!(
            user_read("/access/users/deploy%40pve").as_deref(),
            Some("deploy@pve")
        );
        assert_eq!(user_read("/access/users"), None);
    }
}
