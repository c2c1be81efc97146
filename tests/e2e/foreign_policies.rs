//! Site policies in Python (componentize-py) and TypeScript (jco's QuickJS backend): each
//! example port is built from `policies/python` and `policies/typescript` with the scripts an
//! author uses, then asked the same questions as its Rust original
//! (`policies/require-protection-prod`) and must answer alike; each passes the shared suite;
//! the Python one denies a manifest in a real `plan`. `policy test --suite` itself is checked
//! with a suite that fails.
//!
//! Without the toolchains (`componentize-py` on PATH; `npm ci` run in policies/typescript) a
//! test is skipped with a note, except in CI (`CI=true`, as .ci/run runs, which installs
//! them) or with PROXOPS_REQUIRE_TOOLCHAINS=1, where it fails.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{Lab, proxops, sha256_hex, vm, workspace};

const PYTHON: &str = "install it with `pip install componentize-py==0.25.1`";
const TYPESCRIPT: &str = "run `npm ci` in policies/typescript (needs Node.js 20 or later)";

fn required() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
        || std::env::var("PROXOPS_REQUIRE_TOOLCHAINS").as_deref() == Ok("1")
}

/// Build the port in `lang` with its build script, once per test run; `None` (skip) when
/// the toolchain is missing outside CI.
fn port(lang: &'static str) -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    static TS: OnceLock<Option<PathBuf>> = OnceLock::new();
    let cell = if lang == "python" { &PY } else { &TS };
    cell.get_or_init(|| build(lang)).clone()
}

fn build(lang: &str) -> Option<PathBuf> {
    let root = workspace().join("policies").join(lang);
    let (present, install) = match lang {
        "python" => (
            std::process::Command::new("componentize-py")
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success()),
            PYTHON,
        ),
        _ => (
            ["jco", "tsc", "componentize-qjs"]
                .iter()
                .all(|b| root.join("node_modules/.bin").join(b).exists()),
            TYPESCRIPT,
        ),
    };
    assert!(
        present || !required(),
        "the {lang} toolchain is missing: {install}"
    );
    if !present {
        eprintln!("skipping the {lang} policy test: its toolchain is missing; {install}");
        return None;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("rpp-{lang}.wasm"));
    let source = match lang {
        "python" => root.join("require-protection-prod"),
        _ => PathBuf::from("require-protection-prod/policy.ts"),
    };
    let run = std::process::Command::new(root.join("build.sh"))
        .arg(&source)
        .arg(&out)
        .output()
        .expect("run the build script");
    assert!(
        run.status.success(),
        "{lang}: build.sh failed\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    Some(out)
}

fn rust() -> PathBuf {
    PathBuf::from(
        proxops_guests::artifact_path("proxops-policy-require-protection-prod").expect("built"),
    )
}

fn fixtures() -> PathBuf {
    workspace().join("policies/require-protection-prod/tests")
}

/// `policy test --json` on one input, as (verdict, [(severity, path, message)]): what must
/// not depend on the language.
fn answer(wasm: &Path, args: &[&str]) -> (String, Vec<(String, String, String)>) {
    let mut all = vec!["policy", "test", wasm.to_str().unwrap(), "--json"];
    all.extend_from_slice(args);
    let run = crate::support::proxops_in(&fixtures(), &crate::support::shared_cache(), &all);
    let v: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}\n{}\n{}", run.stdout, run.stderr));
    let findings = v["findings"]
        .as_array()
        .map(|f| {
            f.iter()
                .map(|f| {
                    let s = |k: &str| f[k].as_str().unwrap_or_default().to_string();
                    (s("severity"), s("path"), s("message"))
                })
                .collect()
        })
        .unwrap_or_default();
    (
        v["verdict"].as_str().unwrap_or_default().to_string(),
        findings,
    )
}

/// Inputs: manifests (with settings files) and plans, each answered by all three.
const INPUTS: &[&[&str]] = &[
    &["--manifest", "vm/lab/prod-unprotected.yaml"],
    &["--manifest", "vm/lab/prod-protection-false.yaml"],
    &["--manifest", "vm/lab/prod-protected.yaml"],
    &["--manifest", "vm/lab/prod-upper-case.yaml"],
    &["--manifest", "vm/lab/untagged.yaml"],
    &["--manifest", "templatevm/lab/prod-template.yaml"],
    &[
        "--manifest",
        "vm/lab/prod-unprotected.yaml",
        "--manifest",
        "vm/lab/untagged.yaml",
        "--manifest",
        "vm/lab/prod-upper-case.yaml",
    ],
    &[
        "--settings",
        "settings/critical-templates.yaml",
        "--manifest",
        "templatevm/lab/critical-template.yaml",
    ],
    &[
        "--settings",
        "settings/empty-tags.yaml",
        "--manifest",
        "vm/lab/untagged.yaml",
    ],
    &[
        "--settings",
        "settings/bad-tag.yaml",
        "--manifest",
        "vm/lab/untagged.yaml",
    ],
    &[
        "--settings",
        "settings/unknown-field.yaml",
        "--manifest",
        "vm/lab/untagged.yaml",
    ],
    &[
        "--plan",
        "plans/protection-off.json",
        "--manifest",
        "vm/lab/prod-protected.yaml",
    ],
    &[
        "--plan",
        "plans/protection-on.json",
        "--manifest",
        "vm/lab/prod-protected.yaml",
    ],
];

fn same_answers_as_rust(lang: &'static str) {
    let Some(port) = port(lang) else { return };
    let original = rust();
    let mut denies = 0;
    for input in INPUTS {
        let want = answer(&original, input);
        let got = answer(&port, input);
        assert_eq!(got, want, "{lang} answers {input:?} differently from Rust");
        denies += usize::from(want.0 == "deny");
    }
    // The table is not vacuous: it holds denials and allowances.
    assert!(denies >= 4 && denies < INPUTS.len(), "{denies}");

    // And the port passes the suite its original passes.
    let suite = fixtures().join("policy-tests.yaml");
    for wasm in [&original, &port] {
        let run = proxops(&[
            "policy",
            "test",
            wasm.to_str().unwrap(),
            "--suite",
            suite.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("10 passed, 0 failed"), "{}", run.stdout);
    }
}

#[test]
fn the_python_port_answers_as_the_rust_policy_does() {
    same_answers_as_rust("python");
}

#[test]
fn the_typescript_port_answers_as_the_rust_policy_does() {
    same_answers_as_rust("typescript");
}

/// The Python and the TypeScript policy in a repository's proxops.yaml, enforced: `plan`
/// denies the manifest before any request that writes.
#[tokio::test(flavor = "multi_thread")]
async fn python_and_typescript_policies_deny_a_manifest_in_plan() {
    for lang in ["python", "typescript"] {
        let Some(wasm) = port(lang) else { continue };
        let lab = Lab::start().await;
        let bytes = std::fs::read(&wasm).unwrap();
        lab.write_bytes("policies/prod.wasm", &bytes);
        lab.write(
            "proxops.yaml",
            &format!(
                "policies:\n  - file: policies/prod.wasm\n    sha256: {}\n    mode: enforce\n",
                sha256_hex(&bytes)
            ),
        );
        lab.write(
            "vm/lab/web.yaml",
            &vm("web", "pve01", 150, "  tags: [prod]\n"),
        );
        lab.clear();
        let plan = lab.run(&["plan"]).await;
        assert_eq!(plan.code, 1, "{lang}: {}\n{}", plan.stdout, plan.stderr);
        assert!(
            plan.stdout.contains(
                "policy require-protection-prod denied VM web (vm/lab/web.yaml) at spec.options.protection"
            ),
            "{lang}: {}",
            plan.stdout
        );
        assert_eq!(lab.mutations(), Vec::<String>::new(), "{lang}");
    }
}

/// A suite whose expectations are wrong fails, exit 1, with the expected and the actual
/// verdict of each failing test.
#[test]
fn a_failing_suite_prints_expected_and_actual() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = fixtures();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        format!(
            "tests:\n  - name: wrongly expects allow\n    manifest: {0}/vm/lab/prod-unprotected.yaml\n    expect: allow\n  - name: right verdict, wrong message\n    manifest: {0}/vm/lab/prod-unprotected.yaml\n    expect: deny\n    message: 'memory'\n  - name: right\n    manifest: {0}/vm/lab/untagged.yaml\n    expect: allow\n",
            fixtures.display()
        ),
    )
    .unwrap();
    let run = proxops(&[
        "policy",
        "test",
        rust().to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let out = &run.stdout;
    for line in [
        "  ✗ wrongly expects allow",
        "      verdict deny, expected allow",
        "      - expected: allow",
        "      + actual:   deny",
        "  ✗ right verdict, wrong message",
        "      no finding's message matches /memory/",
        "  ✓ right",
        "1 passed, 2 failed",
    ] {
        assert!(out.lines().any(|l| l == line), "missing `{line}`:\n{out}");
    }
    // The same as JSON for programs.
    let json = proxops(&[
        "policy",
        "test",
        rust().to_str().unwrap(),
        "--suite",
        suite.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(json.code, 1);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        (v["passed"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(v["tests"][0]["actual"], "deny");

    // A suite that names no policy and is given none is refused with the fix.
    let run = proxops(&["policy", "test", "--suite", suite.to_str().unwrap()]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("no policy to test"), "{}", run.stderr);
}

/// `policy new --lang python|typescript`: the project builds with its one command and passes
/// the suite it ships, as docs/policies.md tells a site admin.
#[test]
fn scaffolds_build_with_one_command_and_pass_their_suite() {
    for lang in ["python", "typescript"] {
        // Only with the toolchain (the port's build says whether it is there).
        if port(lang).is_none() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("require-owner");
        let run = proxops(&[
            "policy",
            "new",
            "require-owner",
            "--lang",
            lang,
            "--dir",
            project.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("policy test --suite"), "{}", run.stdout);
        let build = if lang == "python" {
            std::process::Command::new(project.join("build.sh")).output()
        } else {
            // The scaffold pins the toolchain versions policies/typescript installs: link
            // those instead of fetching them again (`npm install` in real use).
            std::os::unix::fs::symlink(
                workspace().join("policies/typescript/node_modules"),
                project.join("node_modules"),
            )
            .unwrap();
            std::process::Command::new("npm")
                .args(["run", "build", "--silent"])
                .current_dir(&project)
                .output()
        }
        .expect("run the build");
        assert!(
            build.status.success(),
            "{lang}: {}\n{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        assert!(project.join("require-owner.wasm").exists(), "{lang}");
        let suite = project.join("tests/policy-tests.yaml");
        let run = proxops(&["policy", "test", "--suite", suite.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{lang}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains("3 passed, 0 failed"),
            "{lang}: {}",
            run.stdout
        );
    }
}

/// The first use of a component compiles it into the cache and says so on stderr (a Python
/// policy takes seconds); the next run loads it from the cache, silently.
#[test]
fn the_first_compile_is_shown_once() {
    let cache = tempfile::tempdir().unwrap();
    let wasm = rust();
    let args = [
        "policy",
        "test",
        wasm.to_str().unwrap(),
        "--manifest",
        "vm/lab/untagged.yaml",
    ];
    let first = crate::support::proxops_in(&fixtures(), cache.path(), &args);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let name = wasm.file_name().unwrap().to_str().unwrap();
    assert!(
        first.stderr.contains(&format!("compiling {name} (")),
        "{}",
        first.stderr
    );
    assert!(
        first.stderr.contains(&format!("compiled {name} in ")),
        "{}",
        first.stderr
    );
    let second = crate::support::proxops_in(&fixtures(), cache.path(), &args);
    assert_eq!(second.code, 0);
    assert!(!second.stderr.contains("compil"), "{}", second.stderr);
}

/// Every example policy under policies/ ships a suite, and passes it.
#[test]
fn every_example_policy_passes_its_suite() {
    let mut ran = Vec::new();
    for entry in std::fs::read_dir(workspace().join("policies")).unwrap() {
        let dir = entry.unwrap().path();
        let suite = dir.join("tests/policy-tests.yaml");
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        if !dir.join("Cargo.toml").exists() || matches!(name.as_str(), "sdk" | "misbehave") {
            continue;
        }
        assert!(
            suite.exists(),
            "policies/{name} ships no tests/policy-tests.yaml"
        );
        let wasm = proxops_guests::artifact_path(&format!("proxops-policy-{name}"))
            .unwrap_or_else(|| panic!("policies/{name} is built"));
        let run = proxops(&["policy", "test", wasm, "--suite", suite.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{name}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(" 0 failed"), "{name}: {}", run.stdout);
        ran.push(name);
    }
    ran.sort();
    assert_eq!(
        ran,
        [
            "approve-destructive",
            "network-allowlist",
            "require-protection-prod",
            "resource-limits"
        ]
    );
}

/// The Python and TypeScript SDKs' helpers (sizes, field paths, verdicts) on the Rust SDK's
/// own test cases: policies/python/tests and policies/typescript/sdk/index.test.ts.
#[test]
fn the_sdks_read_manifests_as_the_rust_sdk_does() {
    if port("python").is_some() {
        let bindings = tempfile::tempdir().unwrap();
        let wit = workspace().join("wit");
        let generated = std::process::Command::new("componentize-py")
            .arg("-q")
            .arg("-d")
            .arg(wit.join("common/0.1.0"))
            .arg("-d")
            .arg(wit.join("policy/0.1.0"))
            .args(["-w", "proxops:policy/policy", "bindings"])
            .arg(bindings.path())
            .output()
            .expect("componentize-py bindings");
        assert!(
            generated.status.success(),
            "{}",
            String::from_utf8_lossy(&generated.stderr)
        );
        let python = workspace().join("policies/python");
        let run = std::process::Command::new("python3")
            .args(["-m", "unittest", "discover", "-s"])
            .arg(python.join("tests"))
            .env(
                "PYTHONPATH",
                format!("{}:{}", bindings.path().display(), python.display()),
            )
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output()
            .expect("python3");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success() && err.contains("Ran 4 tests"), "{err}");
    }
    // The TypeScript port's build compiled the SDK's test with it.
    if port("typescript").is_some() {
        let run = std::process::Command::new("node")
            .arg(workspace().join("policies/typescript/build/js/sdk/index.test.js"))
            .output()
            .expect("node");
        assert!(
            run.status.success(),
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(String::from_utf8_lossy(&run.stdout).contains("sdk: all checks passed"));
    }
}
