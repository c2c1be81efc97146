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
//!
//! Words that shape the answer itself, for the containment tests of third-party kinds (only in
//! manifest mode):
//! - `spec.validate: badjson`: `validate` returns a desired state that is not JSON;
//! - `spec.plan: outside`: `plan` proposes an Update action calling `POST /access/users`, a
//!   call outside anything the kind declares or any grant;
//! - `spec.plan: secret`: `plan` resolves the secret `x.y` (the kind declares no secrets) and
//!   puts the outcome in an anomaly message;
//! - `spec.plan: privileged`: `plan` proposes a Create action `POST /nodes/{node}/lxc` with
//!   `vmid=999`, `ostemplate=local:vztmpl/x.tar.zst` and `unprivileged=0`, a declared path with
//!   a parameter only the `privileged` capability allows (`{node}` is `spec.node`, else
//!   `pve01`).
//!
//! - `spec.plan: restore-other`: `plan` proposes an Update action whose only call is a read and
//!   whose restore step creates container 996 (`POST /nodes/pve01/lxc`), another object.
//! - `spec.plan: create` with `spec.vmid: N`: `plan` proposes creating the unprivileged
//!   container N on pve01, a write the ownership gate lets through (a `spec.vmid` makes the
//!   object's identity that guest's, `guest-id` N).
//!
//! `finally` proposes one read step naming the changed objects; when one of them is named
//! `finally-create` it proposes creating container 998 instead, and when one is named
//! `finally-destructive` its read step is marked destructive.
//!
//! `claims` takes every listing entry whose JSON holds the text `misbehave-claim` (a tag), so
//! a test can make it claim another kind's guest.
// Natively only the unit tests call into the kind (it is otherwise only ever run as a component).
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use proxops_kind_sdk::bindings::proxops::common::log;
use proxops_kind_sdk::kind::{KindInfo, Listing};
use proxops_kind_sdk::model::{self, Anomaly, Call, Method, Operation};
use proxops_kind_sdk::secrets::{HostSecrets, Secrets};
use proxops_kind_sdk::types::{Diagnostic, Severity};
use proxops_kind_sdk::wit::{
    Adopted, Guest, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};
use serde_json::Value;

/// The kind. It implements the WIT `Guest` directly, not `ResourceKind`, so that it can also
/// answer what no typed kind can (a desired state that is not JSON).
pub struct Misbehave;

/// The calls it declares: the listing, and creating a container (so that a privileged create
/// is refused by the parameter check, not the path check).
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/cluster/resources"),
    (Method::Post, "/nodes/{node}/lxc"),
];

/// The text in a listing entry (a tag) that makes `claims` take it.
pub const CLAIM_MARK: &str = "misbehave-claim";

/// The proposal `spec.plan` asks for with one of the answer-shaping words.
fn proposal_for(desired: &str, word: &str) -> model::Proposal {
    let mut out = model::Proposal::default();
    match word {
        "outside" => out.actions.push(model::Action {
            operation: Operation::Update,
            summary: "misbehave: create a PVE user".into(),
            calls: vec![Call::new(Method::Post, "/access/users").param("userid", "misbehave@pve")],
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }),
        "loud" => out.anomalies.push(Anomaly::new(
            "spec.".to_string() + &"p".repeat(100_000),
            "z".repeat(512 << 10),
        )),
        "secret" => {
            let said = match HostSecrets.resolve("x.y") {
                Ok(s) => format!("resolved: {}", s.expose()),
                Err(e) => format!("{e:?}: {}", e.message("x.y")),
            };
            out.anomalies.push(Anomaly::new(
                "spec.plan",
                format!("misbehave: secret x.y: {said}"),
            ));
        }
        "restore-other" => out.actions.push(model::Action {
            operation: Operation::Update,
            summary: "misbehave: read, and on failure create container 996".into(),
            calls: vec![Call::new(Method::Get, "/cluster/resources")],
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: false,
            restore: Some(model::Restore {
                after: 0,
                calls: vec![container_create(996)],
            }),
        }),
        // A harmless action (a declared GET), so that the object counts as changed and the
        // host calls `finally`.
        "read" => out.actions.push(model::Action {
            operation: Operation::Update,
            summary: "misbehave: read the cluster".into(),
            calls: vec![Call::new(Method::Get, "/cluster/resources")],
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }),
        // What this instance remembers between calls: with a fresh instance per object, every
        // object sees its own first call.
        "count" => {
            static PLANS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = PLANS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            out.anomalies.push(Anomaly::new(
                "spec.plan",
                format!("misbehave: plan call {n} in this instance"),
            ));
        }
        "create" => {
            let vmid = serde_json::from_str::<Value>(desired)
                .ok()
                .and_then(|d| d.get("vmid")?.as_u64())
                .unwrap_or(995) as u32;
            out.actions.push(model::Action {
                operation: Operation::Create,
                summary: format!("misbehave: create container {vmid} on pve01"),
                calls: vec![container_create(vmid)],
                changes: Vec::new(),
                disturbs_availability: false,
                destructive: false,
                restore: None,
            });
        }
        "privileged" => {
            let node = serde_json::from_str::<Value>(desired)
                .ok()
                .and_then(|d| d.get("node")?.as_str().map(str::to_string))
                .unwrap_or_else(|| "pve01".into());
            out.actions.push(model::Action {
                operation: Operation::Create,
                summary: format!("misbehave: create privileged container 999 on {node}"),
                calls: vec![
                    Call::new(Method::Post, format!("/nodes/{node}/lxc"))
                        .param("vmid", "999")
                        .param("ostemplate", "local:vztmpl/x.tar.zst")
                        .param("unprivileged", "0"),
                ],
                changes: Vec::new(),
                disturbs_availability: false,
                destructive: false,
                restore: None,
            });
        }
        _ => {}
    }
    out
}

/// `POST /nodes/pve01/lxc` creating the unprivileged container `vmid` (a declared call that
/// passes the grant).
fn container_create(vmid: u32) -> Call {
    Call::new(Method::Post, "/nodes/pve01/lxc")
        .param("vmid", vmid.to_string())
        .param("ostemplate", "local:vztmpl/x.tar.zst")
        .param("unprivileged", "1")
}

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
        // Within the output cap, far beyond a line: the host cuts what it shows.
        "long" => "y".repeat(512 << 10),
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
    fn describe() -> proxops_kind_sdk::wit::KindInfo {
        KindInfo {
            api_version: "proxops/test".into(),
            calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
            // Read by `id` as the host and the bundled kinds read it: one listing, one id rule
            // (the host refuses a kind that reads it by another field).
            listings: vec![Listing::new("/cluster/resources", "id")],
            ..KindInfo::new("Misbehave", "misbehave", serde_json::json!({}))
        }
        .into_wit()
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
        let mut desired = Value::Object(desired).to_string();
        let mut warnings = Vec::new();
        if word_for(&desired, "validate").as_deref() == Some("badjson") {
            log::log(
                log::Level::Info,
                "validate: a desired state that is not JSON",
            );
            desired = format!("not JSON {{{desired}");
            return Ok(Validated { desired, warnings });
        }
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
        let doc = serde_json::from_str::<Value>(&desired).ok();
        if let Some(vmid) = doc.as_ref().and_then(|d| d.get("vmid")?.as_u64()) {
            return ObjectKey {
                node: Some("pve01".into()),
                space: "guest-id".into(),
                key: vmid.to_string(),
                resource_id: Some(vmid.to_string()),
            };
        }
        let name = doc.and_then(|d| d.get("name")?.as_str().map(str::to_string));
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
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
    ) -> Vec<Call> {
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
        let word = desired
            .as_deref()
            .and_then(|d| Some((d, word_for(d, "plan")?)));
        Ok(match word {
            Some((d, word)) => proposal_for(d, &word),
            None => Proposal::default(),
        })
    }

    fn claims(_listing: String, entry: String) -> bool {
        entry.contains(CLAIM_MARK)
    }

    fn adopt(_observed: Observation) -> Result<Adopted, String> {
        Err("the misbehave kind adopts nothing".into())
    }

    /// One step after any object changed, naming them (how tests see that the host calls it).
    fn finally(changed: Vec<String>) -> Vec<model::Action> {
        if changed.is_empty() {
            return Vec::new();
        }
        let named = |n: &str| changed.iter().any(|c| c == n);
        let calls = if named("finally-create") {
            vec![container_create(998)]
        } else {
            vec![Call::new(Method::Get, "/cluster/resources")]
        };
        vec![model::Action {
            operation: Operation::step("sync"),
            summary: format!("misbehave: finally after {}", changed.join(", ")),
            calls,
            changes: Vec::new(),
            disturbs_availability: false,
            destructive: named("finally-destructive"),
            restore: None,
        }]
    }
}

// A native build cannot link WIT export names (they contain ':'); the logic is only ever
// run as a component.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Misbehave);

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(p: &model::Proposal) -> Vec<String> {
        p.actions
            .iter()
            .flat_map(|a| &a.calls)
            .map(|c| {
                // As the expectations spell them: `Post /path [("name", "value", false)]`.
                let method = match c.method {
                    Method::Get => "Get",
                    Method::Post => "Post",
                    Method::Put => "Put",
                    Method::Delete => "Delete",
                };
                let params: Vec<_> = c
                    .params
                    .iter()
                    .map(|p| (&p.name, &p.value, p.sensitive))
                    .collect();
                format!("{method} {} {params:?}", c.path)
            })
            .collect()
    }

    #[test]
    fn describes_calls_and_listing_but_no_secrets() {
        let info = Misbehave::describe();
        let calls: Vec<String> = info
            .calls
            .iter()
            .map(|c| format!("{:?} {}", c.method, c.path))
            .collect();
        assert_eq!(
            calls,
            [
                "Method::Get /cluster/resources",
                "Method::Post /nodes/{node}/lxc"
            ]
        );
        assert_eq!(info.listings[0].path, "/cluster/resources");
        assert!(!info.secrets && info.capabilities.is_empty());
        assert_eq!(info.api_version, "proxops/test");
    }

    #[test]
    fn answer_shaping_words() {
        let outside = proposal_for("{}", "outside");
        assert_eq!(
            calls(&outside),
            [r#"Post /access/users [("userid", "misbehave@pve", false)]"#]
        );
        assert_eq!(outside.actions[0].operation, Operation::Update);
        let privileged = proposal_for(r#"{"node": "pve02"}"#, "privileged");
        assert_eq!(
            calls(&privileged),
            [
                r#"Post /nodes/pve02/lxc [("vmid", "999", false), ("ostemplate", "local:vztmpl/x.tar.zst", false), ("unprivileged", "0", false)]"#
            ]
        );
        assert!(calls(&proposal_for("{}", "privileged"))[0].contains("/nodes/pve01/lxc"));
        // Natively there is no host: the lookup fails, and the anomaly says how.
        let secret = proposal_for("{}", "secret");
        assert!(secret.actions.is_empty());
        assert!(
            secret.anomalies[0]
                .message
                .starts_with("misbehave: secret x.y: Other(")
        );
        assert_eq!(proposal_for("{}", "echo"), model::Proposal::default());
    }

    #[test]
    fn claims_entries_tagged_misbehave_claim() {
        let tagged = r#"{"id": "lxc/101", "type": "lxc", "tags": "proxops;misbehave-claim"}"#;
        assert!(Misbehave::claims(
            "/cluster/resources".into(),
            tagged.into()
        ));
        assert!(!Misbehave::claims(
            "/cluster/resources".into(),
            r#"{"id": "qemu/100", "tags": "proxops"}"#.into()
        ));
    }
}
