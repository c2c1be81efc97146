//! A test-only policy that misbehaves on request, so the host's fail-closed handling of
//! policies can be tested with a component built by the same pipeline as the real ones.
//! It is built by host/guests but never embedded in the proxops binary.
//!
//! Settings: `{"validate": WHAT, "manifest": WHAT, "plan": WHAT}`, where WHAT says what the
//! call does:
//! - `loop`: spins forever (deadline); `wait`: waits for the clock to pass one second (the
//!   guest clock is frozen: deadline);
//! - `alloc`: allocates 1 MiB at a time until refused; `alloc3g`: asks for 3 GiB of linear
//!   memory at once (memory cap);
//! - `panic`: panics (an `unwrap()` on `None`, as a policy author's code would);
//! - `stdout`, `stderr`: prints 10,000 lines to that stream, then allows;
//! - `stdin`, `sleep` (one hour), `file`, `env`, `socket`: tries it and warns with what
//!   happened;
//! - `deny`, `warn`: answers with that verdict (`validate`: `deny` rejects the settings);
//! - absent or anything else: allows.
//!
//! Every `check-manifest` and `check-plan` call first logs one line (`check-manifest NAME`),
//! so tests can count the calls a run made.

use proxops_policy_sdk::types::Diagnostic;
use proxops_policy_sdk::wit::{ActionView, Guest, ManifestView, PolicyInfo, Verdict};
use proxops_policy_sdk::{Findings, log, settings_error};
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

/// Ask the host for `bytes` more linear memory in one `memory.grow`.
#[cfg(target_arch = "wasm32")]
fn grow(bytes: usize) -> isize {
    core::arch::wasm32::memory_grow::<0>(bytes / 65536) as isize
}

#[cfg(not(target_arch = "wasm32"))]
fn grow(_bytes: usize) -> isize {
    -1
}

fn act(what: &str, path: &str) -> Verdict {
    use std::io::{Read as _, Write as _};
    let mut f = Findings::new();
    match what {
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "wait" => {
            let start = std::time::Instant::now();
            while start.elapsed() < std::time::Duration::from_secs(1) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        "alloc3g" => f.warn(
            path,
            format!("memory.grow of 3 GiB answered {}", grow(3 << 30)),
        ),
        "stdout" => {
            let mut out = std::io::stdout().lock();
            for i in 0..10_000 {
                let _ = writeln!(out, "stdout line {i}");
            }
        }
        "stderr" => {
            for i in 0..10_000 {
                eprintln!("stderr line {i}");
            }
        }
        "stdin" => {
            let mut text = String::new();
            let said = match std::io::stdin().read_to_string(&mut text) {
                Ok(n) => format!("stdin: {n} bytes"),
                Err(e) => format!("stdin: {e}"),
            };
            f.warn(path, said);
        }
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(3600));
            f.warn(path, "slept an hour");
        }
        "socket" => f.warn(path, outcome(std::net::TcpStream::connect("127.0.0.1:22"))),
        "alloc" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "panic" => {
            let missing: Option<&str> = std::hint::black_box(None);
            f.warn(path, missing.expect("misbehave-policy: asked to panic"));
        }
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

    fn check_manifest(manifest: ManifestView, settings: String) -> Verdict {
        log::log(
            log::Level::Info,
            &format!("check-manifest {}", manifest.name),
        );
        act(&behaviour(&settings, "manifest"), "spec")
    }

    fn check_plan(actions: Vec<ActionView>, settings: String) -> Verdict {
        log::log(
            log::Level::Info,
            &format!("check-plan {} actions", actions.len()),
        );
        let path = actions
            .first()
            .map(|a| format!("{}/{}", a.kind, a.name))
            .unwrap_or_default();
        act(&behaviour(&settings, "plan"), &path)
    }
}

#[cfg(target_arch = "wasm32")]
proxops_policy_sdk::export_policy!(Misbehave);
