//! `proxops kind new NAME`: scaffold a third-party kind crate that builds to a component of
//! `proxops:kind@0.2.1` and loads through `proxops.yaml`. The crate is standalone (its own
//! workspace, the WIT copied in), so it builds outside the proxops source tree.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::output::outln;
use crate::scaffold;

const COMMON_WIT: &str = include_str!("../../../wit/common/0.1.0/common.wit");
const KIND_WIT: &str = include_str!("../../../wit/kind/0.2.1/kind.wit");

#[derive(Debug, Subcommand)]
pub enum KindCommand {
    /// Create a kind crate to start from: a small `Pool` kind (PVE resource pools) that
    /// validates, plans and applies creates and comment updates, owned by the `proxops:<id>`
    /// mark in the pool's comment. The full kind (members, prune, adopt) is guest-kinds/pool.
    #[command(
        after_help = "Example:\n  proxops kind new pool-kind && cd pool-kind && \
        cargo build --release --target wasm32-wasip2"
    )]
    New {
        /// Crate name: lower-case letters, digits and `-`.
        name: String,
        /// Folder to create [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn run(command: &KindCommand) -> anyhow::Result<u8> {
    match command {
        KindCommand::New { name, dir } => {
            let dir = dir.clone().unwrap_or_else(|| PathBuf::from(name));
            let created = scaffold(name, &dir)?;
            outln!("Created kind crate `{name}` in {}", created.display());
            outln!(
                "Next:\n  cd {}\n  cargo test\n  cargo build --release --target wasm32-wasip2\n  \
                 sha256sum target/wasm32-wasip2/release/{}.wasm\nthen list it under `kinds:` in your repository's proxops.yaml (see its README.md)",
                created.display(),
                name.replace('-', "_")
            );
            Ok(crate::exit::OK)
        }
    }
}

/// Write a kind crate named `name` into `dir` (which must not exist or be empty).
pub fn scaffold(name: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    scaffold::check_target("kind", name, dir)?;
    let file = name.replace('-', "_");
    let files: [(&str, String); 6] = [
        ("Cargo.toml", scaffold::cargo_toml(name, "the logic")),
        ("src/lib.rs", LIB_RS.replace("{{name}}", name)),
        ("wit/common/common.wit", COMMON_WIT.to_string()),
        ("wit/kind/kind.wit", KIND_WIT.to_string()),
        (
            "README.md",
            README.replace("{{name}}", name).replace("{{file}}", &file),
        ),
        (".gitignore", "/target\n".to_string()),
    ];
    scaffold::write_files(dir, &files)
}

const LIB_RS: &str = r##"//! `{{name}}`: a proxops resource kind (`kind: Pool`): PVE resource pools, created and
//! kept at their declared comment. A starting point: replace the logic, keep the shape.
//!
//! Ownership: proxops writes a named object only when it carries proxops's mark,
//! `proxops:<id>` in its `comment` (the host checks every call). This kind writes the mark on
//! create and keeps it on update, and leaves a pool without it alone.
//!
//! Build: `cargo build --release --target wasm32-wasip2`
//! Test:  `cargo test` (the logic runs natively).

use serde_json::{Value, json};

wit_bindgen::generate!({
    path: ["wit/common", "wit/kind"],
    world: "proxops:kind/kind",
    generate_all,
});

use exports::proxops::kind::reconciler::{
    Adopted, Guest, KindInfo, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};
use proxops::common::types::{Call, Change, Diagnostic, Method, Param, Severity};
use proxops::kind::types::{Action, CallPattern, Listing, Operation};

fn error(path: &str, message: &str) -> Diagnostic {
    Diagnostic {
        path: path.into(),
        message: message.into(),
        severity: Severity::Error,
    }
}

/// Manifest -> desired state `{"poolid": …, "comment": …}`.
pub fn validate_manifest(m: &Value) -> Result<Value, Vec<Diagnostic>> {
    let mut errors = Vec::new();
    let id = m.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        errors.push(error("metadata.name", "a pool id: letters, digits, `-` and `_`"));
    }
    let spec = m.get("spec").cloned().unwrap_or(json!({}));
    if let Some(extra) = spec.as_object().and_then(|s| s.keys().find(|k| *k != "comment")) {
        errors.push(error(&format!("spec.{extra}"), "unknown field; expected: comment"));
    }
    let comment = match spec.get("comment") {
        None => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            errors.push(error("spec.comment", "expected a string"));
            ""
        }
    };
    if errors.is_empty() {
        Ok(json!({"poolid": id, "comment": comment}))
    } else {
        Err(errors)
    }
}

/// Whether `comment` carries the mark `proxops:<id>` as a token of its own.
pub fn has_mark(comment: &str, id: &str) -> bool {
    let mark = format!("proxops:{id}");
    comment.split(|c: char| c.is_whitespace() || c == '(' || c == ')').any(|t| t == mark)
}

/// The comment PVE gets: the declared one with the mark appended, or the mark alone.
pub fn marked(comment: &str, id: &str) -> String {
    match comment {
        "" => format!("proxops:{id}"),
        c if has_mark(c, id) => c.to_string(),
        c => format!("{c} (proxops:{id})"),
    }
}

/// Desired state and the pool's `/pools` entry (if any) -> actions. A live pool without the
/// mark is not proxops's: no action.
pub fn plan_pool(desired: &Value, live: Option<&Value>) -> Vec<Action> {
    let id = desired["poolid"].as_str().unwrap_or_default().to_string();
    let comment = marked(desired["comment"].as_str().unwrap_or_default(), &id);
    let param = |name: &str, value: &str| Param {
        name: name.into(),
        value: value.into(),
        sensitive: false,
    };
    let change = |old: Option<String>| Change {
        key: "comment".into(),
        old,
        new: Some(comment.clone()),
        sensitive: false,
    };
    match live {
        None => vec![Action {
            operation: Operation::Create,
            summary: format!("create pool {id}"),
            calls: vec![Call {
                method: Method::Post,
                path: "/pools".into(),
                params: vec![param("poolid", &id), param("comment", &comment)],
            }],
            changes: vec![change(None)],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }],
        Some(entry) => {
            let live_comment = entry.get("comment").and_then(Value::as_str).unwrap_or("");
            if live_comment == comment || !has_mark(live_comment, &id) {
                return Vec::new();
            }
            vec![Action {
                operation: Operation::Update,
                summary: format!("update pool {id}"),
                calls: vec![Call {
                    method: Method::Put,
                    path: "/pools".into(),
                    params: vec![param("poolid", &id), param("comment", &comment)],
                }],
                changes: vec![change(Some(live_comment.to_string()))],
                disturbs_availability: false,
                destructive: false,
                restore: None,
            }]
        }
    }
}

struct Pool;

impl Guest for Pool {
    fn describe() -> KindInfo {
        let call = |method, path: &str| CallPattern { method, path: path.into() };
        KindInfo {
            kind: "Pool".into(),
            api_version: "proxops/v1alpha1".into(),
            folder: "pool".into(),
            schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"spec": {"type": "object", "properties": {"comment": {"type": "string"}}}}
            })
            .to_string(),
            calls: vec![call(Method::Get, "/pools"), call(Method::Post, "/pools"), call(Method::Put, "/pools")],
            listings: vec![Listing { path: "/pools".into(), id_field: "poolid".into() }],
            references_kinds: Vec::new(),
            secrets: false,
            capabilities: Vec::new(),
        }
    }

    fn validate(manifest: String) -> Result<Validated, Vec<Diagnostic>> {
        let m: Value = serde_json::from_str(&manifest).map_err(|e| vec![error("", &e.to_string())])?;
        let desired = validate_manifest(&m)?;
        Ok(Validated { desired: desired.to_string(), warnings: Vec::new() })
    }

    fn references(_desired: String) -> Vec<Reference> {
        Vec::new()
    }

    fn check_references(_desired: String, _resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn identity(desired: String) -> ObjectKey {
        let d: Value = serde_json::from_str(&desired).unwrap_or_default();
        let id = d["poolid"].as_str().unwrap_or_default().to_string();
        ObjectKey { node: None, space: "pool".into(), key: id.clone(), resource_id: Some(id) }
    }

    fn observe(
        _desired: Option<String>,
        _live: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
    ) -> Vec<Call> {
        Vec::new()
    }

    fn plan(
        desired: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        let Some(desired) = desired else {
            return Ok(Proposal { actions: Vec::new(), drift: Vec::new(), pending: Vec::new(), anomalies: Vec::new() });
        };
        let desired: Value = serde_json::from_str(&desired).map_err(|e| vec![error("", &e.to_string())])?;
        let live = observed.live.and_then(|l| serde_json::from_str::<Value>(&l).ok());
        Ok(Proposal {
            actions: plan_pool(&desired, live.as_ref()),
            drift: Vec::new(),
            pending: Vec::new(),
            anomalies: Vec::new(),
        })
    }

    /// This kind never prunes (it declares no DELETE); see guest-kinds/pool for one that does.
    fn claims(_listing: String, _entry: String) -> bool {
        false
    }

    fn adopt(_observed: Observation) -> Result<Adopted, String> {
        Err("the Pool kind does not adopt live pools yet".into())
    }

    fn finally(_changed: Vec<String>) -> Vec<Action> {
        Vec::new()
    }
}

// Export names contain `:`, which a native cdylib's linker rejects: export for wasm only.
#[cfg(target_arch = "wasm32")]
export!(Pool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_then_converges() {
        let d = validate_manifest(&json!({"metadata": {"name": "db"}, "spec": {"comment": "x"}})).unwrap();
        assert!(matches!(plan_pool(&d, None)[0].operation, Operation::Create));
        assert!(plan_pool(&d, Some(&json!({"poolid": "db", "comment": "x (proxops:db)"}))).is_empty());
        // Marked: the comment is repaired. Unmarked: someone else's pool, left alone.
        assert_eq!(plan_pool(&d, Some(&json!({"poolid": "db", "comment": "y proxops:db"}))).len(), 1);
        assert!(plan_pool(&d, Some(&json!({"poolid": "db", "comment": "y"}))).is_empty());
        assert!(validate_manifest(&json!({"metadata": {"name": "db"}, "spec": {"size": 1}})).is_err());
    }
}
"##;

const README: &str = r#"# {{name}}

A proxops resource kind (contract `proxops:kind@0.2.1`, WIT in `wit/`), scaffolded by
`proxops kind new`. It manages PVE resource pools (`kind: Pool`, manifests in `pool/<cluster>/`):
it validates manifests, reads `/pools`, creates missing pools and keeps their comment. A pool is
proxops's when its comment carries the mark `proxops:<id>`: the kind writes it on create and
keeps it on update, and the host refuses any write to a pool without it (docs/kinds.md §7). It
is a starting point for the contract; proxops's `guest-kinds/pool` is the full kind (members,
prune, adopt), and `examples/container-kind` a guest kind.

Build and pin it:

    cargo test
    cargo build --release --target wasm32-wasip2
    cp target/wasm32-wasip2/release/{{file}}.wasm <your-repo>/kinds/
    sha256sum <your-repo>/kinds/{{file}}.wasm

List it in the repository's `proxops.yaml`, granting exactly what `describe()` declares:

    kinds:
      - file: kinds/{{file}}.wasm
        sha256: <the sha256sum>
        grant:
          calls: [GET /pools, POST /pools, PUT /pools]
          secrets: false

`proxops kinds --repo <your-repo>` shows it; `proxops plan <your-repo>` uses it. See
docs/kinds.md in the proxops repository for the contract and the grant model.
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaffold_refuses_bad_names_and_non_empty_folders() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("x"), "").unwrap();
        assert!(scaffold("k", dir.path()).is_err());
        assert!(scaffold("Bad", &dir.path().join("new")).is_err());
    }

    /// The scaffold builds for wasm32-wasip2 outside the workspace, and the runtime loads
    /// the component and plans with it. Needs crates.io or a cargo cache holding wit-bindgen
    /// and serde_json; skipped (with a note) when neither works.
    #[test]
    fn scaffold_builds_a_kind_the_runtime_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let krate = dir.path().join("pool-kind");
        scaffold("pool-kind", &krate).expect("scaffold");
        if !crate::policy_cmd::build_scaffold(&krate) {
            return;
        }
        let wasm = std::fs::read(krate.join("target/wasm32-wasip2/release/pool_kind.wasm"))
            .expect("the component");
        let runtime = proxops_runtime::Runtime::new(proxops_runtime::RuntimeConfig::default())
            .expect("runtime");
        let kind = runtime
            .load_kind(
                "pool-kind",
                &wasm,
                proxops_runtime::Limits::KIND,
                proxops_runtime::SecretAccess::None,
            )
            .expect("the scaffolded kind loads");
        assert_eq!(kind.info().kind, "Pool");
        assert_eq!(kind.info().listings[0].path, "/pools");
        let mut instance = kind.instance().expect("instance");
        let validated = instance
            .validate(r#"{"metadata": {"name": "db"}, "spec": {"comment": "databases"}}"#)
            .expect("called")
            .expect("valid");
        let observed = proxops_runtime::kind::Observation {
            live: None,
            reads: Vec::new(),
        };
        let plan = instance
            .plan(Some(&validated.desired), &[], &[], &observed)
            .expect("called")
            .expect("planned");
        assert_eq!(plan.actions.len(), 1);
        let call = &plan.actions[0].calls[0];
        assert_eq!(call.path, "/pools");
        let comment = call
            .params
            .iter()
            .find(|p| p.name == "comment")
            .map(|p| p.value.as_str());
        assert_eq!(
            comment,
            Some("databases (proxops:db)"),
            "the create carries the mark"
        );
    }
}
