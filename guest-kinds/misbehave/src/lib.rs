//! A test-only kind that misbehaves on request, so the runtime's limits and sandbox can be
//! tested with a component built by the same pipeline as the real kinds. It is built by
//! host/guests but never embedded in the proxops binary (tests load it with
//! `PROXOPS_TEST_KINDS`).
//!
//! Two ways to ask:
//! - `validate(word)`, where the input is a bare word (runtime unit tests);
//! - a manifest (`apiVersion: proxops/test`, `kind: Misbehave`, in `misbehave/<cluster>/`)
//!   whose `spec` maps a call (`validate`, `identity`, `observe`, `plan`) to a word; the
//!   other calls behave (end to end tests).
//!
//! The words:
//! - `loop`: spins forever (deadline); `wait`: waits for the clock to pass one second
//!   (the guest clock is frozen: deadline);
//! - `alloc`: allocates 1 MiB at a time until refused; `alloc3g`: asks for 3 GiB of linear
//!   memory at once (memory cap);
//! - `big`: answers with a 64 MiB document (output cap);
//! - `panic`: panics with the message `misbehave: asked to panic`;
//! - `stdout`, `stderr`: prints 10,000 lines to that stream (bounded log);
//! - `stdin`: reads stdin to its end and reports the byte count;
//! - `sleep`: sleeps for an hour (guest sleeps end at once) and reports it;
//! - `file`, `env`, `socket`: tries the capability and reports what happened;
//! - `clock`, `random`: reports the wall clock and random bytes (determinism);
//! - `log`: writes 10,000 log lines (bounded log);
//! - anything else: echoes the input back.
//!
//! What a behaving call reports goes into its log (`-v`) and, for `validate`, into a warning.
// Natively nothing calls into the kind (it is only ever run as a component).
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use proxops_kind_sdk::bindings::proxops::common::log;
use proxops_kind_sdk::types::{Diagnostic, Severity};
use proxops_kind_sdk::wit::{
    Guest, KindInfo, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};
use serde_json::Value;

struct Misbehave;

fn outcome<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => "allowed".to_string(),
        Err(e) => format!("denied: {e}"),
    }
}

/// Ask the host for `bytes` more linear memory in one `memory.grow`.
#[cfg(target_arch = "wasm32")]
fn grow(bytes: usize) -> usize {
    core::arch::wasm32::memory_grow::<0>(bytes / 65536)
}

#[cfg(not(target_arch = "wasm32"))]
fn grow(_bytes: usize) -> usize {
    usize::MAX
}

/// Do what `word` asks; the text is what the call reports.
fn act(word: &str) -> String {
    use std::io::{Read as _, Write as _};
    match word {
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
            "waited".into()
        }
        "alloc" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "alloc3g" => format!("memory.grow of 3 GiB answered {}", grow(3 << 30) as isize),
        "big" => "x".repeat(64 << 20),
        "panic" => panic!("misbehave: asked to panic"),
        "stdout" => {
            let mut out = std::io::stdout().lock();
            for i in 0..10_000 {
                let _ = writeln!(out, "stdout line {i}");
            }
            "printed".into()
        }
        "stderr" => {
            for i in 0..10_000 {
                eprintln!("stderr line {i}");
            }
            "printed".into()
        }
        "stdin" => {
            let mut text = String::new();
            match std::io::stdin().read_to_string(&mut text) {
                Ok(n) => format!("stdin: {n} bytes"),
                Err(e) => format!("stdin: {e}"),
            }
        }
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(3600));
            "slept an hour".into()
        }
        "file" => outcome(std::fs::read("/etc/passwd")),
        "env" => {
            let vars = std::env::vars().count();
            let args = std::env::args().count();
            format!(
                "vars={vars} args={args} home={}",
                outcome(std::env::var("HOME"))
            )
        }
        "socket" => outcome(std::net::TcpStream::connect("127.0.0.1:22")),
        "clock" => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            format!("{now}")
        }
        "random" => {
            use std::hash::{BuildHasher, RandomState};
            format!("{}", RandomState::new().hash_one(42u8))
        }
        "log" => {
            for i in 0..10_000 {
                log::log(log::Level::Info, &format!("line {i}"));
            }
            "logged".into()
        }
        other => other.to_string(),
    }
}

/// In manifest mode, the word `spec.<call>` asks for; `None` for a bare-word input.
fn word_for(desired: &str, call: &str) -> Option<String> {
    let spec: Value = serde_json::from_str(desired).ok()?;
    Some(spec.get(call)?.as_str()?.to_string())
}

/// Behave as `spec.<call>` asks (if it asks anything), logging the call as it starts
/// (`plan NAME`, so tests can count calls) and what happened.
fn behave(desired: Option<&str>, call: &str) {
    let name = desired
        .and_then(|d| serde_json::from_str::<Value>(d).ok())
        .and_then(|d| d.get("name")?.as_str().map(str::to_string));
    if let Some(name) = name {
        log::log(log::Level::Info, &format!("{call} {name}"));
    }
    if let Some(word) = desired.and_then(|d| word_for(d, call)) {
        let said = act(&word);
        log::log(log::Level::Info, &format!("{call}: {said}"));
    }
}

impl Guest for Misbehave {
    fn describe() -> KindInfo {
        KindInfo {
            kind: "Misbehave".into(),
            api_version: "proxops/test".into(),
            folder: "misbehave".into(),
            schema: "{}".into(),
            api_paths: vec!["/version".into()],
            references_kinds: Vec::new(),
        }
    }

    fn validate(input: String) -> Result<Validated, Vec<Diagnostic>> {
        let manifest = serde_json::from_str::<Value>(&input)
            .ok()
            .filter(Value::is_object);
        let Some(manifest) = manifest else {
            // A bare word.
            return Ok(Validated {
                desired: act(&input),
                warnings: Vec::new(),
            });
        };
        // The desired state: the spec's words and the object's name (its identity).
        let mut desired = match manifest.get("spec") {
            Some(Value::Object(spec)) => spec.clone(),
            _ => serde_json::Map::new(),
        };
        let name = manifest.pointer("/metadata/name").cloned();
        desired.insert("name".into(), name.unwrap_or(Value::Null));
        let desired = Value::Object(desired).to_string();
        let mut warnings = Vec::new();
        if let Some(word) = word_for(&desired, "validate") {
            let said = act(&word);
            log::log(log::Level::Info, &format!("validate: {said}"));
            warnings.push(Diagnostic {
                path: "spec.validate".into(),
                message: format!("misbehave: {said}"),
                severity: Severity::Warning,
            });
        }
        Ok(Validated { desired, warnings })
    }

    fn references(_desired: String) -> Vec<Reference> {
        Vec::new()
    }

    fn check_references(_desired: String, _resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn identity(desired: String) -> ObjectKey {
        behave(Some(&desired), "identity");
        let name = serde_json::from_str::<Value>(&desired)
            .ok()
            .and_then(|d| d.get("name")?.as_str().map(str::to_string));
        ObjectKey {
            node: None,
            space: "misbehave".into(),
            key: name.unwrap_or(desired),
            resource_id: None,
        }
    }

    fn observe(
        desired: Option<String>,
        _live: Option<String>,
        _referrers: Vec<Resolved>,
    ) -> Vec<proxops_kind_sdk::types::Call> {
        behave(desired.as_deref(), "observe");
        Vec::new()
    }

    fn plan(
        desired: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        _observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        behave(desired.as_deref(), "plan");
        Ok(Proposal {
            actions: Vec::new(),
            drift: Vec::new(),
            pending: Vec::new(),
            anomalies: Vec::new(),
        })
    }

    fn claims(_live: String) -> bool {
        false
    }

    fn adopt(_observed: Observation) -> Result<String, String> {
        Err("the misbehave kind adopts nothing".into())
    }
}

// A native build cannot link WIT export names (they contain ':'); the logic is only ever
// run as a component.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Misbehave);
