//! Scenario `langs`: site policies in Python and TypeScript beside the Rust original
//! (require-protection-prod and its ports), in the same run: the first compile, a cached load,
//! a fresh instance with a trivial verdict, and 10,000 manifests checked (what the policy adds
//! to a 10,000-VM plan: the policy stage runs once per manifest). The ports are built with
//! their own build scripts; a language whose toolchain is missing is skipped with a note.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use proxops_core::settings::{Mode, PolicyEntry, Scope};
use proxops_reconcile::policy::{LoadedPolicy, ManifestInput, PolicySet};
use proxops_runtime::{Runtime, RuntimeConfig};

use super::{Table, ms};

const MANIFESTS: usize = 10_000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The component of the policy in `lang`, built into `out` (Rust: the bundled artifact).
fn component(lang: &str, out: &Path) -> Result<Vec<u8>, String> {
    if lang == "rust" {
        let path = proxops_guests::artifact_path("proxops-policy-require-protection-prod")
            .ok_or("the Rust policy is not built")?;
        return std::fs::read(path).map_err(|e| e.to_string());
    }
    let root = workspace().join("policies").join(lang);
    let wasm = out.join(format!("{lang}.wasm"));
    let source = if lang == "python" {
        root.join("require-protection-prod")
    } else {
        PathBuf::from("require-protection-prod/policy.ts")
    };
    let run = std::process::Command::new(root.join("build.sh"))
        .arg(&source)
        .arg(&wasm)
        .output()
        .map_err(|e| format!("build.sh: {e}"))?;
    if !run.status.success() {
        return Err(format!(
            "build.sh failed (toolchain missing? see docs/policies.md): {}",
            String::from_utf8_lossy(&run.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    std::fs::read(&wasm).map_err(|e| e.to_string())
}

fn load(runtime: &Runtime, bytes: &[u8]) -> LoadedPolicy {
    let entry = PolicyEntry {
        index: 0,
        name: None,
        file: "policy.wasm".into(),
        sha256: String::new(),
        settings: serde_json::json!({"tags": ["prod"]}),
        mode: Mode::Enforce,
        scope: Scope::default(),
    };
    LoadedPolicy::from_wasm(runtime, bytes, &entry, "proxops.yaml", "policies[0]")
        .unwrap_or_else(|d| panic!("the policy does not load: {d:?}"))
}

fn manifest(i: usize) -> ManifestInput {
    let tags = if i.is_multiple_of(3) {
        "[prod]"
    } else {
        "[web]"
    };
    ManifestInput {
        cluster: "lab".into(),
        kind: "VM".into(),
        name: format!("vm-{i:05}"),
        file: format!("vm/lab/vm-{i:05}.yaml"),
        document: format!(
            r#"{{"apiVersion":"proxops/v1alpha1","kind":"VM","metadata":{{"name":"vm-{i:05}"}},"spec":{{"node":"pve01","vmid":{},"memory":"1GiB","tags":{tags},"options":{{"protection":true}}}}}}"#,
            1000 + i
        ),
    }
}

pub(super) fn langs(tmp: &Path, table: &mut Table) {
    eprintln!("[langs] policies in Rust, Python and TypeScript");
    let inputs: Vec<ManifestInput> = (0..MANIFESTS).map(manifest).collect();
    let mut rust_check: Option<Duration> = None;
    for lang in ["rust", "python", "typescript"] {
        let bytes = match component(lang, tmp) {
            Ok(b) => b,
            Err(why) => {
                table.add(
                    "12 policy languages",
                    format!("{lang}: skipped"),
                    "-",
                    why,
                    None,
                );
                continue;
            }
        };
        let cache = tmp.join(format!("cache-{lang}"));
        let runtime = |cache: &Path| {
            Runtime::new(RuntimeConfig {
                cache_dir: Some(cache.to_path_buf()),
            })
            .expect("runtime")
        };
        let cold = runtime(&cache);
        let t = Instant::now();
        load(&cold, &bytes);
        let first = t.elapsed();
        // A new process's load: a new runtime over the warm cache.
        let warm = runtime(&cache);
        let t = Instant::now();
        let policy = load(&warm, &bytes);
        let cached = t.elapsed();
        let set = PolicySet::from_policies(vec![policy], None);
        // What a fresh instance alone costs (no call), to tell it from the evaluation.
        let component = warm
            .load_policy(lang, &bytes, proxops_runtime::Limits::POLICY)
            .expect("load");
        let mut instantiate: Vec<Duration> = (0..50)
            .map(|_| {
                let t = Instant::now();
                drop(component.instance().expect("instance"));
                t.elapsed()
            })
            .collect();
        instantiate.sort();
        // One evaluation: a fresh instance and a trivial verdict (median of 20).
        let mut one: Vec<Duration> = (0..20)
            .map(|i| {
                let t = Instant::now();
                let report = set.check_manifest_inputs(&inputs[i..=i]);
                assert!(
                    report.findings.iter().all(|f| !f.failed),
                    "{lang}: {report:?}"
                );
                t.elapsed()
            })
            .collect();
        one.sort();
        let t = Instant::now();
        let report = set.check_manifest_inputs(&inputs);
        let all = t.elapsed();
        assert!(
            report.is_empty(),
            "{lang}: every manifest is compliant: {report:?}"
        );
        let vs_rust = match rust_check {
            None => {
                rust_check = Some(all);
                String::from("the reference")
            }
            Some(r) => format!(
                "{:.1}x Rust's; adds {:.2} s over Rust to a 10,000-VM plan",
                all.as_secs_f64() / r.as_secs_f64(),
                (all.saturating_sub(r)).as_secs_f64()
            ),
        };
        table.add(
            "12 policy languages",
            format!(
                "{lang} ({:.1} MB): first compile / cached load / instantiate alone / one fresh evaluation / {MANIFESTS} manifests",
                bytes.len() as f64 / 1e6
            ),
            format!(
                "{:.0} ms / {:.1} ms / {:.2} ms / {:.2} ms / {:.0} ms",
                ms(first),
                ms(cached),
                ms(instantiate[instantiate.len() / 2]),
                ms(one[one.len() / 2]),
                ms(all)
            ),
            vs_rust,
            None,
        );
    }
}
