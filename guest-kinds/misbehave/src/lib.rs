//! A test-only kind whose `validate` misbehaves on request, so the runtime's limits and
//! sandbox can be tested with a component built by the same pipeline as the real kinds.
//! It is built by host/guests but never embedded in the proxops binary.
//!
//! `validate(input)` looks at `input` (not JSON, just a word):
//! - `loop`: spins forever (deadline);
//! - `alloc`: allocates until memory runs out (memory cap);
//! - `big`: answers with a 64 MiB document (output cap);
//! - `panic`: panics with the message `misbehave: asked to panic`;
//! - `file`, `env`, `socket`: tries the capability and reports what happened;
//! - `clock`, `random`: reports the wall clock and random bytes (determinism);
//! - `log`: writes 10,000 log lines (bounded log);
//! - anything else: echoes the input back.
// Natively nothing calls into the kind (it is only ever run as a component).
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use proxops_kind_sdk::bindings::proxops::common::log;
use proxops_kind_sdk::types::Diagnostic;
use proxops_kind_sdk::wit::{
    Guest, KindInfo, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};

struct Misbehave;

fn ok(desired: String) -> Result<Validated, Vec<Diagnostic>> {
    Ok(Validated {
        desired,
        warnings: Vec::new(),
    })
}

fn outcome<T, E: std::fmt::Display>(r: Result<T, E>) -> String {
    match r {
        Ok(_) => "allowed".to_string(),
        Err(e) => format!("denied: {e}"),
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
        match input.as_str() {
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
            "big" => ok("x".repeat(64 << 20)),
            "panic" => panic!("misbehave: asked to panic"),
            "file" => ok(outcome(std::fs::read("/etc/passwd"))),
            "env" => {
                let vars = std::env::vars().count();
                let args = std::env::args().count();
                ok(format!(
                    "vars={vars} args={args} home={}",
                    outcome(std::env::var("HOME"))
                ))
            }
            "socket" => ok(outcome(std::net::TcpStream::connect("127.0.0.1:22"))),
            "clock" => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                ok(format!("{now}"))
            }
            "random" => {
                use std::hash::{BuildHasher, RandomState};
                ok(format!("{}", RandomState::new().hash_one(42u8)))
            }
            "log" => {
                for i in 0..10_000 {
                    log::log(log::Level::Info, &format!("line {i}"));
                }
                ok("logged".into())
            }
            other => ok(other.to_string()),
        }
    }

    fn references(_desired: String) -> Vec<Reference> {
        Vec::new()
    }

    fn check_references(_desired: String, _resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn identity(desired: String) -> ObjectKey {
        ObjectKey {
            node: None,
            space: "misbehave".into(),
            key: desired,
            resource_id: None,
        }
    }

    fn observe(
        _desired: Option<String>,
        _live: Option<String>,
        _referrers: Vec<Resolved>,
    ) -> Vec<proxops_kind_sdk::types::Call> {
        Vec::new()
    }

    fn plan(
        _desired: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        _observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
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
