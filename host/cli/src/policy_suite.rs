//! `proxops policy test --suite FILE`: declarative tests for policy authors, as
//! `kyverno test` or `conftest verify` give them. A suite names fixtures (manifests, and plans
//! as `plan --json` writes them) and the verdict expected of each: allow, warn or deny, with a
//! message pattern and a field path. It runs the `.wasm`, so it tests a policy written in any
//! language, through the same evaluation as plan and apply. Failures print the expected and
//! the actual verdict as a diff.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use proxops_reconcile::policy::{LoadedPolicy, PolicyReport};
use proxops_runtime::Runtime;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::output::{self, errln, outln};
use crate::policy_cmd::{Failure, check, exit, load};

/// A suite file (YAML).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Suite {
    /// The policy under test, relative to the suite file (a `--suite` run given a `.wasm`
    /// argument uses that instead).
    policy: Option<PathBuf>,
    /// Settings for every test that sets none of its own.
    #[serde(default)]
    settings: Option<Value>,
    tests: Vec<Case>,
}

/// One test: its input and what the policy must answer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    /// One manifest (`check-manifest`), relative to the suite file.
    manifest: Option<PathBuf>,
    /// Several manifests; with `plan`, the documents of the planned objects.
    #[serde(default)]
    manifests: Vec<PathBuf>,
    /// A plan as `proxops plan --json` writes it (`check-plan`).
    plan: Option<PathBuf>,
    cluster: Option<String>,
    /// Settings of this test instead of the suite's.
    settings: Option<Value>,
    expect: Expected,
    /// A regular expression some finding's message must match.
    message: Option<String>,
    /// The field path some finding must name (exactly).
    path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Expected {
    Allow,
    Warn,
    Deny,
}

impl Expected {
    fn as_str(self) -> &'static str {
        match self {
            Expected::Allow => "allow",
            Expected::Warn => "warn",
            Expected::Deny => "deny",
        }
    }
}

/// What one test found.
#[derive(Debug, Serialize)]
struct Outcome {
    name: String,
    passed: bool,
    expected: Expected,
    /// `allow`, `warn`, `deny`, or `error` (the policy failed or the input was bad).
    actual: String,
    /// Why it failed, one line each (empty when it passed).
    problems: Vec<String>,
    /// The findings as `path: message`.
    findings: Vec<String>,
}

/// Run the suite at `file` (the policy from the suite, or `wasm` when given) and print the
/// outcome of every test; exit 0 when all pass, 1 otherwise.
pub fn run(runtime: &Runtime, file: &Path, wasm: Option<&Path>, json: bool) -> anyhow::Result<u8> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let suite: Suite = serde_yaml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{}: not a policy test suite: {e}", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let at = |p: &Path| base.join(p);
    let wasm = match (wasm, &suite.policy) {
        (Some(w), _) => w.to_path_buf(),
        (None, Some(p)) => at(p),
        (None, None) => anyhow::bail!(
            "{}: no policy to test: give the suite a `policy:` (a .wasm path relative to it) or pass the .wasm before --suite",
            file.display()
        ),
    };
    if suite.tests.is_empty() {
        anyhow::bail!("{}: `tests` is empty: nothing to check", file.display());
    }
    // One load per distinct settings (a component compiles once per process either way).
    let mut loaded: BTreeMap<String, Result<LoadedPolicy, Vec<String>>> = BTreeMap::new();
    let mut outcomes = Vec::new();
    for (i, case) in suite.tests.iter().enumerate() {
        let where_ = format!("{} tests[{i}] ({})", file.display(), case.name);
        let settings = case
            .settings
            .clone()
            .or_else(|| suite.settings.clone())
            .unwrap_or_else(|| Value::Object(Default::default()));
        let key = settings.to_string();
        let policy = loaded.entry(key).or_insert_with(|| {
            load(runtime, &wasm, settings, &file.display().to_string()).map_err(|f| match f {
                Failure::Input(e) => vec![format!("{e:#}")],
                Failure::Diagnostics(d) => d.iter().map(ToString::to_string).collect(),
            })
        });
        let outcome = match policy {
            Err(lines) => Outcome::error(case, lines.clone()),
            Ok(policy) => match run_case(policy, case, &at) {
                Ok(report) => Outcome::of(case, &report),
                Err(why) => Outcome::error(case, vec![format!("{where_}: {why}")]),
            },
        };
        outcomes.push(outcome);
    }
    let failed = outcomes.iter().filter(|o| !o.passed).count();
    if json {
        output::json(&serde_json::json!({
            "suite": file.display().to_string(),
            "policy": wasm.display().to_string(),
            "passed": outcomes.len() - failed,
            "failed": failed,
            "tests": outcomes,
        }))?;
    } else {
        outln!("suite {} (policy {})", file.display(), wasm.display());
        for o in &outcomes {
            o.print();
        }
        outln!("{} passed, {} failed", outcomes.len() - failed, failed);
    }
    if failed > 0 && !json {
        errln!("policy test: {failed} of {} tests failed", outcomes.len());
    }
    Ok(if failed == 0 {
        exit::ALLOW
    } else {
        exit::ERROR
    })
}

fn run_case(
    policy: &LoadedPolicy,
    case: &Case,
    at: &dyn Fn(&Path) -> PathBuf,
) -> Result<PolicyReport, String> {
    let mut manifests: Vec<PathBuf> = case.manifest.iter().map(|p| at(p)).collect();
    manifests.extend(case.manifests.iter().map(|p| at(p)));
    if manifests.is_empty() && case.plan.is_none() {
        return Err("give it a `manifest`, `manifests` or a `plan`".into());
    }
    let plan = case.plan.as_deref().map(at);
    check(policy, &manifests, plan.as_deref(), case.cluster.as_deref()).map_err(|f| match f {
        Failure::Input(e) => format!("{e:#}"),
        Failure::Diagnostics(d) => d
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}

impl Outcome {
    fn error(case: &Case, problems: Vec<String>) -> Outcome {
        Outcome {
            name: case.name.clone(),
            passed: false,
            expected: case.expect,
            actual: "error".into(),
            problems,
            findings: Vec::new(),
        }
    }

    /// Compare `report` with what `case` expects.
    fn of(case: &Case, report: &PolicyReport) -> Outcome {
        let failed = report.findings.iter().any(|f| f.failed);
        let actual = if failed { "error" } else { report.verdict() };
        let findings: Vec<String> = report
            .findings
            .iter()
            .map(|f| {
                if f.path.is_empty() {
                    f.message.clone()
                } else {
                    format!("{}: {}", f.path, f.message)
                }
            })
            .collect();
        let mut problems = Vec::new();
        if actual != case.expect.as_str() {
            problems.push(format!(
                "verdict {actual}, expected {}",
                case.expect.as_str()
            ));
        }
        if let Some(pattern) = &case.message {
            match regex::Regex::new(pattern) {
                Err(e) => problems.push(format!("`message` is not a regular expression: {e}")),
                Ok(re) if !report.findings.iter().any(|f| re.is_match(&f.message)) => {
                    problems.push(format!("no finding's message matches /{pattern}/"))
                }
                Ok(_) => {}
            }
        }
        if let Some(path) = &case.path
            && !report.findings.iter().any(|f| &f.path == path)
        {
            problems.push(format!("no finding at path `{path}`"));
        }
        Outcome {
            name: case.name.clone(),
            passed: problems.is_empty(),
            expected: case.expect,
            actual: actual.to_string(),
            problems,
            findings,
        }
    }

    /// `✓ name`, or `✗ name` and a diff of the expected and the actual verdict.
    fn print(&self) {
        if self.passed {
            outln!("  ✓ {}", output::inline(&self.name));
            return;
        }
        outln!("  ✗ {}", output::inline(&self.name));
        for p in &self.problems {
            outln!("      {}", output::inline(p));
        }
        outln!("      - expected: {}", self.expected.as_str());
        outln!("      + actual:   {}", self.actual);
        for f in &self.findings {
            outln!("      +   {}", output::inline(f));
        }
    }
}
