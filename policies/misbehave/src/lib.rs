//! A test-only policy that misbehaves on request, so the host's fail-closed handling of
//! policies can be tested with a component built by the same pipeline as the real ones.
//! It is built by host/guests but never embedded in the proxops binary.
//!
//! Settings: `{"validate": WHAT, "manifest": WHAT, "plan": WHAT}`, where WHAT says what the
//! call does:
//! - `loop`: spins forever (deadline);
//! - `alloc`: allocates until memory runs out (memory cap);
//! - `panic`: panics;
//! - `file`, `env`: tries the capability and warns with what happened;
//! - `deny`, `warn`: answers with that verdict (`validate`: `deny` rejects the settings);
//! - absent or anything else: allows.

use proxops_policy_sdk::types::Diagnostic;
use proxops_policy_sdk::wit::{ActionView, Guest, ManifestView, PolicyInfo, Verdict};
use proxops_policy_sdk::{Findings, settings_error};
use serde_json::Value;

fn behaviour(settings: &str, call: &str) -> String {
    serde_json::from_str::<Value>(settings)
        .ok()
        .and_then(|v| v.get(call)?.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn outcome<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => "allowed".to_string(),
        Err(e) => format!("denied: {e}"),
    }
}

fn act(what: &str, path: &str) -> Verdict {
    let mut f = Findings::new();
    match what {
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "alloc" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "panic" => panic!("misbehave-policy: asked to panic"),
        "file" => f.warn(path, outcome(std::fs::read("/etc/passwd"))),
        "env" => f.warn(
            path,
            format!(
                "vars={} home={}",
                std::env::vars().count(),
                outcome(std::env::var("HOME"))
            ),
        ),
        "deny" => f.deny(path, "misbehave-policy: asked to deny"),
        "warn" => f.warn(path, "misbehave-policy: asked to warn"),
        _ => {}
    }
    f.verdict()
}

/// The exported component type.
pub struct Misbehave;

impl Guest for Misbehave {
    fn metadata() -> PolicyInfo {
        PolicyInfo {
            name: "misbehave".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            settings_schema: r#"{"type": "object", "properties": {"validate": {"type": "string"}, "manifest": {"type": "string"}, "plan": {"type": "string"}}, "additionalProperties": false}"#.into(),
            description: "misbehaves on request (tests only)".into(),
        }
    }

    fn validate_settings(settings: String) -> Result<(), Vec<Diagnostic>> {
        match behaviour(&settings, "validate").as_str() {
            "deny" => Err(vec![settings_error(
                "validate",
                "misbehave-policy: asked to reject its settings",
            )]),
            other => match act(other, "") {
                Verdict::Deny(_) => Err(vec![settings_error("", "unexpected")]),
                _ => Ok(()),
            },
        }
    }

    fn check_manifest(_manifest: ManifestView, settings: String) -> Verdict {
        act(&behaviour(&settings, "manifest"), "spec")
    }

    fn check_plan(actions: Vec<ActionView>, settings: String) -> Verdict {
        let path = actions
            .first()
            .map(|a| format!("{}/{}", a.kind, a.name))
            .unwrap_or_default();
        act(&behaviour(&settings, "plan"), &path)
    }
}

#[cfg(target_arch = "wasm32")]
proxops_policy_sdk::export_policy!(Misbehave);
