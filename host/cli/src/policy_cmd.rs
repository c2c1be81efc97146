//! `proxops policy test` (run one policy against a manifest or a plan, like `kwctl run` or
//! `opa test`) and `proxops policy new` (scaffold a policy crate).

use crate::output::{self, errln, outln};
use crate::scaffold;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Subcommand;
use proxops_core::settings::{GuestBudget, Mode, PolicyEntry, Scope};
use proxops_reconcile::policy::{
    LoadedPolicy, ManifestInput, PolicyReport, PolicySet, actions_from_plan_json,
};
use proxops_runtime::Runtime;
use serde_json::Value;

/// Exit codes of `proxops policy test` (documented in docs/policies.md).
pub mod exit {
    /// The policy allows (warnings included).
    pub const ALLOW: u8 = 0;
    /// The policy could not be run: unreadable input, invalid settings, or the policy
    /// trapped, ran out of time or memory (in a real run that counts as a deny).
    pub const ERROR: u8 = 1;
    /// The policy denies.
    pub const DENY: u8 = 2;
}

const COMMON_WIT: &str = include_str!("../../../wit/common/0.1.0/common.wit");
const POLICY_WIT: &str = include_str!("../../../wit/policy/0.1.0/policy.wit");

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Run a policy on a manifest or a plan and print its verdict.
    #[command(
        after_help = "Exit status: 0 allow (or warn), 2 deny, 1 error (bad input, invalid \
        settings, or the policy trapped or ran out of time or memory). With --suite: 0 when \
        every test passes, 1 otherwise.\n\n\
        Examples:\n  \
        proxops policy test limits.wasm --settings limits.yaml --manifest vm/lab/web-01.yaml\n  \
        proxops plan repo --json > plan.json\n  \
        proxops policy test approve.wasm --plan plan.json --manifest vm/lab/web-01.yaml\n  \
        proxops policy test --suite policy-tests.yaml"
    )]
    Test {
        /// The policy component (.wasm); with --suite, instead of the suite's `policy:`.
        #[arg(required_unless_present = "suite")]
        wasm: Option<PathBuf>,
        /// The policy's settings, a YAML or JSON mapping (default: `{}`).
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// A manifest to check (repeatable). With --plan, manifests give the planned objects
        /// their documents (matched by kind and name).
        #[arg(
            long = "manifest",
            value_name = "FILE",
            required_unless_present_any = ["plan", "suite"]
        )]
        manifests: Vec<PathBuf>,
        /// A plan as written by `proxops plan --json`.
        #[arg(long, value_name = "FILE")]
        plan: Option<PathBuf>,
        /// Cluster of the manifests [default: the folder a manifest is in, as in a repository].
        #[arg(long)]
        cluster: Option<String>,
        /// Run a suite of declarative tests (YAML: fixtures and the verdict expected of
        /// each) instead of one check; see docs/policies.md.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["manifests", "plan", "settings", "cluster"])]
        suite: Option<PathBuf>,
        /// Print the verdict as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Publish a policy (or kind) component to an OCI registry as a Wasm OCI artifact, and
    /// print the `proxops.yaml` entry that pins it.
    #[command(
        after_help = "Credentials, when the registry wants them: PROXOPS_REGISTRY_USERNAME and \
        PROXOPS_REGISTRY_PASSWORD. A loopback registry (localhost, 127.0.0.1) is reached over \
        plain HTTP, any other over HTTPS.\n\n\
        Example:\n  proxops policy push require-owner.wasm oci://ghcr.io/acme/policies/require-owner:1.0.0"
    )]
    Push {
        /// The component (.wasm).
        wasm: PathBuf,
        /// Where: oci://REGISTRY/REPOSITORY:TAG.
        reference: String,
    },
    /// Create a policy project (Rust, Python or TypeScript) that builds to a .wasm with one
    /// command, with a test suite.
    #[command(
        after_help = "Examples:\n  proxops policy new require-owner && cd require-owner && \
        cargo build --release --target wasm32-wasip2\n  \
        proxops policy new require-owner --lang python && cd require-owner && ./build.sh\n  \
        proxops policy new require-owner --lang typescript && cd require-owner && npm install && npm run build"
    )]
    New {
        /// Policy name: lower-case letters, digits and `-`.
        name: String,
        /// Folder to create [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The language to write the policy in.
        #[arg(long, value_enum, default_value = "rust")]
        lang: crate::policy_langs::Lang,
    },
}

/// Run a `proxops policy …` command.
pub fn run(runtime: &Runtime, command: PolicyCommand) -> anyhow::Result<u8> {
    match command {
        PolicyCommand::Test {
            suite: Some(suite),
            wasm,
            json,
            ..
        } => crate::policy_suite::run(runtime, &suite, wasm.as_deref(), json),
        PolicyCommand::Test {
            wasm,
            settings,
            manifests,
            plan,
            cluster,
            json,
            suite: None,
        } => run_test(
            runtime,
            &TestOptions {
                wasm: wasm.expect("clap requires it without --suite"),
                settings,
                manifests,
                plan,
                cluster,
                json,
            },
        ),
        PolicyCommand::Push { .. } => unreachable!("main runs push on its async runtime"),
        PolicyCommand::New { name, dir, lang } if lang != crate::policy_langs::Lang::Rust => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let created = crate::policy_langs::scaffold(lang, &name, &dir)?;
            outln!(
                "Created policy `{name}` ({}) in {}",
                lang.as_str(),
                created.display()
            );
            outln!("{}", crate::policy_langs::next_steps(lang, &name, &created));
            Ok(exit::ALLOW)
        }
        PolicyCommand::New { name, dir, .. } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let created = scaffold(&name, &dir)?;
            outln!("Created policy crate `{name}` in {}", created.display());
            outln!(
                "Next:\n  cd {}\n  cargo test\n  cargo build --release --target wasm32-wasip2\n  \
                 proxops policy test --suite tests/policy-tests.yaml\n  \
                 sha256sum target/wasm32-wasip2/release/{}.wasm",
                created.display(),
                name.replace('-', "_")
            );
            Ok(exit::ALLOW)
        }
    }
}

/// What `proxops policy test` runs.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    pub wasm: PathBuf,
    pub settings: Option<PathBuf>,
    pub manifests: Vec<PathBuf>,
    pub plan: Option<PathBuf>,
    pub cluster: Option<String>,
    pub json: bool,
}

/// Load the policy, validate its settings, run `check-manifest` on every manifest (or
/// `check-plan` on every cluster of the plan), print the verdict and return the exit code.
pub fn run_test(runtime: &Runtime, opts: &TestOptions) -> anyhow::Result<u8> {
    let (policy, report) = match evaluate(runtime, opts) {
        Ok(r) => r,
        Err(Failure::Input(e)) => return Err(e),
        Err(Failure::Diagnostics(diags)) => {
            for d in &diags {
                errln!("{d}");
            }
            if opts.json {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(
                        &serde_json::json!({"verdict": "error", "diagnostics": diags})
                    )?
                );
            }
            return Ok(exit::ERROR);
        }
    };
    let failed = report.findings.iter().any(|f| f.failed);
    let verdict = if failed { "error" } else { report.verdict() };
    let info = policy.info();
    if opts.json {
        let out = serde_json::json!({
            "policy": {"name": info.name, "version": info.version, "file": policy.file, "sha256": policy.sha256()},
            "verdict": verdict,
            "findings": report.findings,
        });
        output::json(&out)?;
    } else {
        outln!(
            "policy {} {} ({}, sha256 {})",
            info.name,
            info.version,
            policy.file,
            policy.sha256()
        );
        outln!("verdict: {verdict}");
        output::out!("{report}");
        if failed {
            outln!("  (in enforce mode a failing policy counts as a deny)");
        }
    }
    Ok(if failed {
        exit::ERROR
    } else if report.blocks() {
        exit::DENY
    } else {
        exit::ALLOW
    })
}

pub(crate) enum Failure {
    /// Bad command-line input: a file that cannot be read or parsed.
    Input(anyhow::Error),
    /// The policy or its settings were refused.
    Diagnostics(Vec<proxops_core::Diagnostic>),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Input(e)
    }
}

fn evaluate(
    runtime: &Runtime,
    opts: &TestOptions,
) -> Result<(LoadedPolicy, PolicyReport), Failure> {
    let (settings, settings_file) = match &opts.settings {
        None => (Value::Object(Default::default()), String::from("settings")),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let value: Option<Value> = serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not YAML or JSON", path.display()))?;
            let value = value.unwrap_or_else(|| Value::Object(Default::default()));
            if !value.is_object() {
                return Err(
                    anyhow::anyhow!("{}: expected a mapping of settings", path.display()).into(),
                );
            }
            (value, path.display().to_string())
        }
    };
    let policy = load(runtime, &opts.wasm, settings, &settings_file)?;
    let report = check(
        &policy,
        &opts.manifests,
        opts.plan.as_deref(),
        opts.cluster.as_deref(),
    )?;
    Ok((policy, report))
}

/// Load the policy at `wasm` with `settings` (checked against its schema and by its own
/// `validate-settings`, diagnostics pointing into `settings_file`), as a run would, in
/// enforce mode.
pub(crate) fn load(
    runtime: &Runtime,
    wasm: &Path,
    settings: Value,
    settings_file: &str,
) -> Result<LoadedPolicy, Failure> {
    let bytes = std::fs::read(wasm).with_context(|| format!("cannot read {}", wasm.display()))?;
    let entry = PolicyEntry {
        index: 0,
        name: None,
        file: wasm.display().to_string(),
        sha256: String::new(),
        settings,
        mode: Mode::Enforce,
        scope: Scope::default(),
    };
    LoadedPolicy::from_wasm(runtime, &bytes, &entry, settings_file, "")
        .map_err(Failure::Diagnostics)
}

/// Run `check-manifest` on every manifest, or `check-plan` on every cluster of the plan (the
/// manifests giving planned objects their documents), through the same evaluation as
/// plan/apply: the same PolicySet calls, the default budget.
pub(crate) fn check(
    policy: &LoadedPolicy,
    manifests: &[PathBuf],
    plan: Option<&Path>,
    cluster: Option<&str>,
) -> Result<PolicyReport, Failure> {
    let set = PolicySet::from_policies(vec![policy.clone()], GuestBudget::default().policy);
    let mut inputs = Vec::new();
    for path in manifests {
        inputs.push(read_manifest(path, cluster)?);
    }
    Ok(match plan {
        None => set.check_manifest_inputs(&inputs),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let clusters = actions_from_plan_json(&text, &inputs)
                .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let mut report = PolicyReport::default();
            for (cluster, actions) in clusters {
                report.extend(set.check_actions(&cluster, &actions));
            }
            report
        }
    })
}

fn read_manifest(path: &Path, cluster: Option<&str>) -> anyhow::Result<ManifestInput> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file = path.display().to_string();
    let document =
        proxops_core::repo::parse_yaml(&file, &text).map_err(|d| anyhow::anyhow!("{d}"))?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let folder = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|s| s.to_string_lossy().into_owned());
    Ok(ManifestInput {
        cluster: cluster
            .map(str::to_string)
            .or(folder)
            .unwrap_or_else(|| "default".into()),
        kind: document
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        name: document
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or(stem),
        file,
        document: document.to_string(),
    })
}

/// Write a policy crate named `name` into `dir` (which must not exist or be empty): a
/// standalone crate (its own workspace) with the proxops WIT copied in, a small working
/// policy with tests, and a README. Returns `dir`.
pub fn scaffold(name: &str, dir: &Path) -> anyhow::Result<PathBuf> {
    scaffold::check_target("policy", name, dir)?;
    let mut files: Vec<(&str, String)> = vec![
        ("Cargo.toml", scaffold::cargo_toml(name, "the rules")),
        ("src/lib.rs", LIB_RS.replace("{{name}}", name)),
        ("wit/common/common.wit", COMMON_WIT.to_string()),
        ("wit/policy/policy.wit", POLICY_WIT.to_string()),
        (
            "README.md",
            README
                .replace("{{ship}}", crate::policy_langs::SHIP)
                .replace("{{name}}", name)
                .replace("{{file}}", &name.replace('-', "_")),
        ),
        ("settings.yaml", "label: owner\n".to_string()),
        (".gitignore", "/target\n".to_string()),
    ];
    files.extend(crate::policy_langs::suite(&format!(
        "target/wasm32-wasip2/release/{}.wasm",
        name.replace('-', "_")
    )));
    scaffold::write_files(dir, &files)
}

const LIB_RS: &str = r##"//! `{{name}}`: a proxops site policy. It requires every manifest to carry a label (by
//! default `owner`), so that every VM has someone to ask.
//!
//! Build: `cargo build --release --target wasm32-wasip2`
//! Test:  `cargo test` (the rules run natively), then
//!        `proxops policy test target/wasm32-wasip2/release/<crate>.wasm --settings settings.yaml --manifest some-vm.yaml`

use serde_json::Value;

wit_bindgen::generate!({
    path: ["wit/common", "wit/policy"],
    world: "proxops:policy/policy",
    generate_all,
});

use exports::proxops::policy::checker::{
    ActionView, Guest, ManifestView, PolicyInfo, Verdict, Violation,
};
use proxops::common::types::{Diagnostic, Severity};

/// JSON Schema (2020-12) of the settings; proxops checks settings against it at load.
const SCHEMA: &str = r#"{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "label": {"type": "string", "minLength": 1, "description": "Label every manifest must carry."}
  }
}"#;

/// The settings, read from the JSON text proxops passes to every call.
fn label(settings: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(settings).map_err(|e| e.to_string())?;
    match v.get("label") {
        None => Ok("owner".to_string()),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        Some(_) => Err("label must be a non-empty string".to_string()),
    }
}

/// The rule, as a plain function so that native tests cover it.
pub fn check(document: &Value, label: &str) -> Verdict {
    let value = document
        .pointer("/metadata/labels")
        .and_then(|l| l.get(label))
        .and_then(Value::as_str)
        .unwrap_or("");
    if value.trim().is_empty() {
        Verdict::Deny(vec![Violation {
            path: format!("metadata.labels.{label}"),
            message: format!("every manifest needs the label `{label}`"),
        }])
    } else {
        Verdict::Allow
    }
}

pub struct Policy;

impl Guest for Policy {
    fn metadata() -> PolicyInfo {
        PolicyInfo {
            name: "{{name}}".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            settings_schema: SCHEMA.to_string(),
            description: "every manifest carries an owner label".to_string(),
        }
    }

    fn validate_settings(settings: String) -> Result<(), Vec<Diagnostic>> {
        label(&settings).map(|_| ()).map_err(|message| {
            vec![Diagnostic {
                path: "label".to_string(),
                message,
                severity: Severity::Error,
            }]
        })
    }

    fn check_manifest(manifest: ManifestView, settings: String) -> Verdict {
        let document: Value = serde_json::from_str(&manifest.document).unwrap_or(Value::Null);
        match label(&settings) {
            Ok(label) => check(&document, &label),
            Err(message) => Verdict::Deny(vec![Violation { path: String::new(), message }]),
        }
    }

    /// Plans are not this policy's business. A plan finding names its object in its path:
    /// `Kind/name` or `Kind/name:field`, e.g. `VM/web-01:memory`.
    fn check_plan(_actions: Vec<ActionView>, _settings: String) -> Verdict {
        Verdict::Allow
    }
}

// Only the component exports the WIT names (a native cdylib cannot: they contain `:`).
#[cfg(target_arch = "wasm32")]
export!(Policy);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cases() {
        let cases = [
            (json!({"metadata": {"labels": {"owner": "ops"}}}), true),
            (json!({"metadata": {"labels": {"owner": " "}}}), false),
            (json!({"metadata": {"name": "web"}}), false),
        ];
        for (doc, allowed) in cases {
            assert_eq!(matches!(check(&doc, "owner"), Verdict::Allow), allowed, "{doc}");
        }
        assert!(Policy::validate_settings(r#"{"label": ""}"#.to_string()).is_err());
        assert!(Policy::validate_settings("{}".to_string()).is_ok());
    }
}
"##;

const README: &str = r#"# {{name}}

A proxops site policy (world `proxops:policy/policy`, WIT in `wit/`).

    cargo test
    cargo build --release --target wasm32-wasip2
    proxops policy test target/wasm32-wasip2/release/{{file}}.wasm --settings settings.yaml --manifest path/to/vm.yaml
    proxops policy test --suite tests/policy-tests.yaml   # the declarative tests
    sha256sum target/wasm32-wasip2/release/{{file}}.wasm

{{ship}}
See the proxops policy author's guide (docs/policies.md) for the world, modes and limits.
"#;

/// Build a scaffolded guest crate (`proxops policy new`, `proxops kind new`) for
/// wasm32-wasip2 outside the workspace, offline first. `false` (with a note) when its
/// dependencies can be fetched neither from the cargo cache nor from crates.io; a build
/// error panics.
#[cfg(test)]
pub(crate) fn build_scaffold(krate: &Path) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let build = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.current_dir(krate)
            .args(["build", "--release", "--target", "wasm32-wasip2"]);
        if offline {
            cmd.arg("--offline");
        }
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "CARGO_PRIMARY_PACKAGE",
            "CARGO_MANIFEST_DIR",
        ] {
            cmd.env_remove(var);
        }
        cmd.output().expect("run cargo")
    };
    let mut out = build(true);
    if !out.status.success() {
        out = build(false);
    }
    if out.status.success() {
        return true;
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("failed to download")
        || stderr.contains("failed to get")
        || stderr.contains("failed to query replaced source")
    {
        errln!("skipped: cannot fetch the scaffold's dependencies:\n{stderr}");
        return false;
    }
    panic!("the scaffold does not build:\n{stderr}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaffold_refuses_a_non_empty_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("x"), "").unwrap();
        assert!(scaffold("p", dir.path()).is_err());
        assert!(scaffold("Bad", &dir.path().join("new")).is_err());
    }

    /// The scaffold builds for wasm32-wasip2 outside the workspace, and the component it
    /// builds is a policy the runtime loads and that answers. Needs crates.io or a cargo
    /// cache holding wit-bindgen and serde_json; skipped (with a note) when neither works.
    #[test]
    fn scaffold_builds_a_working_policy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let krate = dir.path().join("require-owner");
        scaffold("require-owner", &krate).expect("scaffold");
        if !build_scaffold(&krate) {
            return;
        }
        let wasm = krate.join("target/wasm32-wasip2/release/require_owner.wasm");
        let runtime = Runtime::new(proxops_runtime::RuntimeConfig::default()).expect("runtime");
        let manifest = dir.path().join("web.yaml");
        std::fs::write(
            &manifest,
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: web}\nspec: {}\n",
        )
        .unwrap();
        let opts = TestOptions {
            wasm: wasm.clone(),
            settings: Some(krate.join("settings.yaml")),
            manifests: vec![manifest.clone()],
            ..TestOptions::default()
        };
        let Ok((policy, report)) = evaluate(&runtime, &opts) else {
            panic!("the scaffolded policy does not load");
        };
        assert_eq!(policy.info().name, "require-owner");
        assert!(report.blocks(), "{report:?}");
        assert_eq!(report.findings[0].path, "metadata.labels.owner");
        assert_eq!(run_test(&runtime, &opts).expect("runs"), exit::DENY);
        std::fs::write(
            &manifest,
            "kind: VM\nmetadata: {name: web, labels: {owner: ops}}\n",
        )
        .unwrap();
        assert_eq!(run_test(&runtime, &opts).expect("runs"), exit::ALLOW);
        // The suite the scaffold ships passes against the policy it builds.
        let suite = krate.join("tests/policy-tests.yaml");
        assert_eq!(
            crate::policy_suite::run(&runtime, &suite, None, false).expect("runs"),
            exit::ALLOW
        );
    }

    fn built(package: &str) -> PathBuf {
        PathBuf::from(proxops_guests::artifact_path(package).expect("built"))
    }

    #[test]
    fn test_command_exit_codes() {
        let runtime = Runtime::new(proxops_runtime::RuntimeConfig::default()).expect("runtime");
        let dir = tempfile::tempdir().expect("tempdir");
        let vm = dir.path().join("lab").join("web-01.yaml");
        std::fs::create_dir_all(vm.parent().unwrap()).unwrap();
        std::fs::write(
            &vm,
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata: {name: web-01}\nspec: {tags: [prod], memory: 2GiB}\n",
        )
        .unwrap();
        let settings = dir.path().join("s.yaml");
        let opts = |wasm: &str, settings_yaml: Option<&str>| {
            if let Some(s) = settings_yaml {
                std::fs::write(&settings, s).unwrap();
            }
            TestOptions {
                wasm: built(wasm),
                settings: settings_yaml.map(|_| settings.clone()),
                manifests: vec![vm.clone()],
                ..TestOptions::default()
            }
        };
        let prot = "proxops-policy-require-protection-prod";
        assert_eq!(run_test(&runtime, &opts(prot, None)).unwrap(), exit::DENY);
        assert_eq!(
            run_test(&runtime, &opts(prot, Some("tags: [critical]\n"))).unwrap(),
            exit::ALLOW
        );
        // Invalid settings (schema): an error, not a verdict.
        assert_eq!(
            run_test(&runtime, &opts(prot, Some("tags: []\n"))).unwrap(),
            exit::ERROR
        );
        // A failing policy is an error here; in a run it counts as a deny.
        let bad = "proxops-policy-misbehave";
        assert_eq!(
            run_test(&runtime, &opts(bad, Some("manifest: panic\n"))).unwrap(),
            exit::ERROR
        );
        assert_eq!(
            run_test(&runtime, &opts(bad, Some("manifest: warn\n"))).unwrap(),
            exit::ALLOW
        );
        // The cluster comes from the manifest's folder, as in a repository.
        let limits = "proxops-policy-resource-limits";
        let o = opts(
            limits,
            Some("rules: [{clusters: [lab], max-memory: 1GiB}]\n"),
        );
        assert_eq!(run_test(&runtime, &o).unwrap(), exit::DENY);
        let o = TestOptions {
            cluster: Some("prod".into()),
            ..o
        };
        assert_eq!(run_test(&runtime, &o).unwrap(), exit::ALLOW);
        // A plan, with the manifest giving the object its document.
        let plan = dir.path().join("plan.json");
        std::fs::write(
            &plan,
            serde_json::json!([{"cluster": "lab", "objects": [{"kind": "VM", "name": "web-01",
                "file": "vm/lab/web-01.yaml", "running": true,
                "actions": [{"operation": "delete", "summary": "delete VM 101",
                             "destructive": true, "requires_stop": true, "changes": []}]}]}])
            .to_string(),
        )
        .unwrap();
        let o = TestOptions {
            plan: Some(plan),
            ..opts("proxops-policy-approve-destructive", None)
        };
        assert_eq!(run_test(&runtime, &o).unwrap(), exit::DENY);
        // Unreadable input is an Err (exit 1 through main).
        let o = TestOptions {
            manifests: vec![dir.path().join("missing.yaml")],
            ..opts(prot, None)
        };
        assert!(run_test(&runtime, &o).is_err());
    }
}
