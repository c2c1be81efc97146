//! Canaries: every secret source (SOPS ssh key, SOPS password, the API token from SOPS and
//! from the environment) driven through every path that prints (failing sync calls, failing
//! tasks, `-vv`, `PROXOPS_LOG=trace`, `--json`, a policy denial, 401s), with PVE quoting the
//! values raw, percent-encoded, form-encoded and JSON-escaped. No form of any value may show
//! in stdout or stderr. Also: control characters from PVE and from file names are shown
//! escaped, and secrets shorter than 8 bytes are refused naming the reference.

use proxops_sim::{FaultKind, FaultRule, SimConfig};

use crate::support::{Lab, Run, TOKEN_VAR, sha256_hex, vm, workspace};

/// Values of tests/fixtures/sops/cluster.sops.yaml.
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@laptop";
const PASSWORD: &str = "correct horse battery staple";
const TOKEN: &str = "8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d";
/// A token PVE does not know (the 401 case).
const WRONG_TOKEN: &str = "wrong-token/canary+5f1e 2d3c";

/// Percent-encoding of every byte outside `A-Za-z0-9-_.~` (PVE's `urlencoded`), with `hex`
/// formatting each escaped byte.
fn percent(s: &str, hex: fn(u8) -> String) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                hex(b)
            }
        })
        .collect()
}

fn upper(b: u8) -> String {
    format!("%{b:02X}")
}

fn lower(b: u8) -> String {
    format!("%{b:02x}")
}

/// HTML form encoding: a space is `+`.
fn form(s: &str) -> String {
    percent(s, upper).replace("%20", "+")
}

fn json(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap();
    quoted[1..quoted.len() - 1].to_string()
}

/// Every form in which a value can show: as stored, percent-encoded (upper and lower hex),
/// percent-encoded twice (PVE's `sshkeys` inside a form), form-encoded and JSON-escaped.
fn forms(value: &str) -> Vec<String> {
    let mut all = vec![
        value.to_string(),
        percent(value, upper),
        percent(value, lower),
        percent(&percent(value, upper), upper),
        form(value),
        json(value),
    ];
    all.sort();
    all.dedup();
    all
}

/// The secrets a run holds: the two SOPS values its VM references, and its API token.
fn secrets(token: Token) -> [&'static str; 3] {
    match token {
        Token::Sops => [SSH_KEY, PASSWORD, TOKEN],
        Token::Env(value) => [SSH_KEY, PASSWORD, value],
    }
}

/// A fault message that quotes every secret in every form, as a careless PVE might.
fn quoting_all(token: Token) -> String {
    let mut parts = vec!["canary: got an error".to_string()];
    for s in secrets(token) {
        parts.push(format!(
            "raw [{s}] pct [{}] form [{}] json [{}]",
            percent(s, upper),
            form(s),
            json(s)
        ));
    }
    parts.join("; ")
}

/// Occurrences of any form of any secret of the run in stdout and stderr.
fn hits(run: &Run, token: Token) -> usize {
    secrets(token)
        .iter()
        .flat_map(|s| forms(s))
        .map(|f| run.stdout.matches(&f).count() + run.stderr.matches(&f).count())
        .sum()
}

fn rule(method: &str, path: &str, kind: FaultKind) -> FaultRule {
    FaultRule {
        method: method.into(),
        path: path.into(),
        kind,
        probability: None,
        times: None,
    }
}

fn status(method: &str, path: &str, code: u16) -> FaultRule {
    rule(
        method,
        path,
        FaultKind::Status {
            code,
            message: quoting_all(Token::Sops),
        },
    )
}

/// Where the cluster file takes the API token from.
#[derive(Clone, Copy)]
enum Token {
    Sops,
    Env(&'static str),
}

struct Case {
    name: &'static str,
    token: Token,
    faults: Vec<FaultRule>,
    /// Install the misbehave policy, denying every plan.
    deny_policy: bool,
    args: &'static [&'static str],
    env: &'static [(&'static str, &'static str)],
    code: i32,
    /// Text the output must contain: the path under test was really taken.
    shows: &'static str,
    /// The password reached PVE in a request parameter (the canary was live).
    sent: bool,
}

/// A lab whose simulator knows TOKEN, with the test SOPS document and one VM whose
/// cloud-init data references the ssh key and the password.
async fn lab(token: Token) -> Lab {
    let lab = Lab::with(SimConfig {
        token: Some(format!("root@pam!proxops={TOKEN}")),
        ..SimConfig::default()
    })
    .await;
    let doc =
        std::fs::read_to_string(workspace().join("tests/fixtures/sops/cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &doc);
    let source = match token {
        Token::Sops => "{sops: pve.token}".to_string(),
        Token::Env(_) => format!("{{env: {TOKEN_VAR}}}"),
    };
    lab.write(
        "clusters/lab.yaml",
        &format!(
            "apiVersion: proxops/v1alpha1\nkind: Cluster\nmetadata: {{name: lab}}\nspec:\n  endpoint: {}\n  token: {{id: 'root@pam!proxops', secret: {source}}}\n  tls: {{fingerprint: '{}'}}\n",
            lab.sim.base_url(),
            lab.sim.fingerprint().unwrap()
        ),
    );
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-user: deploy\n    ci-password-ref: cloud-init.passwords.root\n    ssh-key-refs: [cloud-init.ssh-keys.alice]\n",
        ),
    );
    lab
}

fn deny_policy(lab: &Lab) {
    let package = "proxops-policy-misbehave";
    let wasm =
        std::fs::read(proxops_guests::artifact_path(package).expect("policy is built")).unwrap();
    lab.write_bytes("policies/misbehave.wasm", &wasm);
    lab.write(
        "proxops.yaml",
        &format!(
            "policies:\n  - file: policies/misbehave.wasm\n    sha256: {}\n    mode: enforce\n    settings: {{plan: deny}}\n",
            sha256_hex(&wasm)
        ),
    );
}

fn identity() -> String {
    workspace()
        .join("tests/fixtures/sops/TEST-ONLY-age-key.txt")
        .display()
        .to_string()
}

/// Run one case; returns the number of hits and the bytes of stdout and stderr checked
/// (asserting everything else).
async fn check(case: &Case) -> (usize, usize, usize) {
    let lab = lab(case.token).await;
    if case.deny_policy {
        deny_policy(&lab);
    }
    lab.sim.set_faults(case.faults.clone());
    let id = identity();
    let mut args = vec!["--age-identity", id.as_str()];
    args.extend_from_slice(case.args);
    let mut env = case.env.to_vec();
    if let Token::Env(value) = case.token {
        env.push((TOKEN_VAR, value));
    }
    let run = lab.run_env(&args, &env).await;
    let both = format!("{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, case.code, "{}: {both}", case.name);
    assert!(
        both.contains(case.shows),
        "{}: no {:?} in {both}",
        case.name,
        case.shows
    );
    if case.sent {
        let sent = lab
            .sim
            .requests()
            .iter()
            .any(|r| r.params.iter().any(|(_, v)| v == PASSWORD));
        assert!(sent, "{}: the password never reached PVE", case.name);
    }
    let n = hits(&run, case.token);
    if n > 0 {
        eprintln!("--- {} leaked {n} times:\n{both}", case.name);
    }
    (n, run.stdout.len(), run.stderr.len())
}

#[tokio::test(flavor = "multi_thread")]
async fn no_form_of_any_secret_reaches_stdout_or_stderr() {
    let post_any = |kind| vec![rule("POST", "*", kind)];
    let cases = [
        Case {
            name: "sync 500 quoting every secret",
            token: Token::Sops,
            faults: vec![status("POST", "*", 500)],
            deny_policy: false,
            args: &["apply"],
            env: &[],
            code: 1,
            shows: "canary: got an error",
            sent: true,
        },
        Case {
            name: "sync 400 quoting every secret, -vv",
            token: Token::Sops,
            faults: vec![status("POST", "*", 400)],
            deny_policy: false,
            args: &["-vv", "apply"],
            env: &[],
            code: 1,
            shows: "(sensitive)",
            sent: true,
        },
        Case {
            name: "failed task quoting every secret",
            token: Token::Sops,
            faults: post_any(FaultKind::FailTask {
                message: quoting_all(Token::Sops),
            }),
            deny_policy: false,
            args: &["apply"],
            env: &[],
            code: 1,
            shows: "task failed: canary: got an error",
            sent: true,
        },
        Case {
            name: "failed task quoting every secret, PROXOPS_LOG=trace",
            token: Token::Sops,
            faults: post_any(FaultKind::FailTask {
                message: quoting_all(Token::Sops),
            }),
            deny_policy: false,
            args: &["apply"],
            env: &[("PROXOPS_LOG", "trace")],
            code: 1,
            shows: "(sensitive)",
            sent: true,
        },
        Case {
            name: "read answered 500 quoting every secret, plan --json -vv",
            token: Token::Sops,
            faults: vec![status("GET", "/cluster/resources", 500)],
            deny_policy: false,
            args: &["-vv", "plan", "--json"],
            env: &[],
            code: 1,
            shows: "canary: got an error",
            sent: false,
        },
        Case {
            name: "plan --json, PROXOPS_LOG=trace",
            token: Token::Sops,
            faults: vec![],
            deny_policy: false,
            args: &["plan", "--json"],
            env: &[("PROXOPS_LOG", "trace")],
            code: 2,
            shows: "(sensitive)",
            sent: false,
        },
        Case {
            name: "policy denial, -vv",
            token: Token::Sops,
            faults: vec![],
            deny_policy: true,
            args: &["-vv", "apply"],
            env: &[],
            code: 1,
            shows: "blocked by policy",
            sent: false,
        },
        Case {
            name: "401 quoting the token",
            token: Token::Sops,
            faults: vec![status("GET", "*", 401)],
            deny_policy: false,
            args: &["-vv", "apply"],
            env: &[],
            code: 1,
            shows: "HTTP 401",
            sent: false,
        },
        Case {
            name: "token from the environment, failed task, PROXOPS_LOG=trace",
            token: Token::Env(TOKEN),
            faults: post_any(FaultKind::FailTask {
                message: quoting_all(Token::Env(TOKEN)),
            }),
            deny_policy: false,
            args: &["apply"],
            env: &[("PROXOPS_LOG", "trace")],
            code: 1,
            shows: "canary: got an error",
            sent: true,
        },
        Case {
            name: "wrong token from the environment: a real 401, PROXOPS_LOG=trace",
            token: Token::Env(WRONG_TOKEN),
            faults: vec![],
            deny_policy: false,
            args: &["apply"],
            env: &[("PROXOPS_LOG", "trace")],
            code: 1,
            shows: "401",
            sent: false,
        },
    ];
    let mut report = Vec::new();
    for case in &cases {
        report.push((case.name, check(case).await));
    }
    let total: usize = report.iter().map(|(_, (n, _, _))| n).sum();
    eprintln!("canary (case, (hits, stdout bytes, stderr bytes)): {report:#?}");
    assert_eq!(total, 0, "secrets leaked: {report:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn control_characters_from_pve_are_shown_escaped() {
    let lab = lab(Token::Sops).await;
    lab.sim.set_faults(vec![rule(
        "POST",
        "*",
        FaultKind::FailTask {
            message: "\u{1b}[2J\u{1b}[Hstorage gone\u{7}\r\u{1b}[32mApply complete".into(),
        },
    )]);
    let id = identity();
    let run = lab
        .run(&["--age-identity", id.as_str(), "-vv", "apply"])
        .await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("\\u{1b}[2J\\u{1b}[Hstorage gone\\u{7}\\u{d}\\u{1b}[32mApply complete"),
        "{}",
        run.stdout
    );
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\r']),
            "a raw control character in {name}: {text:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn file_names_with_control_characters_are_shown_escaped() {
    let lab = lab(Token::Sops).await;
    lab.write(
        "vm/lab/x\u{1b}[2J\u{7}.yaml",
        &vm("other", "pve01", 151, ""),
    );
    let id = identity();
    let run = lab.run(&["--age-identity", id.as_str(), "validate"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("vm/lab/x\\u{1b}[2J\\u{7}.yaml"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains(['\u{1b}', '\u{7}']) && !run.stderr.contains(['\u{1b}', '\u{7}']),
        "{:?}\n{:?}",
        run.stdout,
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_shorter_than_8_bytes_is_refused_naming_the_reference() {
    let lab = lab(Token::Sops).await;
    // cloud-init.passwords.quoted-number is "123".
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-password-ref: cloud-init.passwords.quoted-number\n",
        ),
    );
    lab.clear();
    let id = identity();
    for command in ["validate", "apply"] {
        let run = lab.run(&["--age-identity", id.as_str(), command]).await;
        assert_eq!(run.code, 1, "{command}: {}\n{}", run.stdout, run.stderr);
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains("cloud-init.passwords.quoted-number"))
            .unwrap_or_else(|| panic!("{command}: the reference is not named:\n{}", run.stdout));
        assert!(line.contains("shorter than 8 bytes"), "{command}: {line}");
        assert!(
            !line.contains("123"),
            "{command}: the value is shown: {line}"
        );
    }
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_token_shorter_than_8_bytes_is_refused_naming_its_variable() {
    let lab = lab(Token::Env("1234567")).await;
    lab.clear();
    let id = identity();
    let run = lab
        .run_env(
            &["--age-identity", id.as_str(), "plan"],
            &[(TOKEN_VAR, "1234567")],
        )
        .await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(TOKEN_VAR))
        .unwrap_or_else(|| panic!("the variable is not named:\n{}", run.stdout));
    assert!(line.contains("shorter than 8 bytes"), "{line}");
    assert!(!line.contains("1234567"), "the value is shown: {line}");
    assert_eq!(lab.sim.requests().len(), 0, "PVE was contacted");
}
