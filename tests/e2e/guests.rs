//! Guest containment end to end: the real binary against the simulator, with the test-only
//! `misbehave` policy and kind doing each thing a wrong or hostile guest does (panic, print,
//! read stdin, sleep, wait for the clock, open a socket, ask for 3 GiB, loop). Each case: the
//! host stays up (a proxops exit code, never 101), the guest is named in a bounded message,
//! and the simulator saw no mutating request. Fail fast is checked by counting guest calls
//! in the `-v` log, never by timing.

use crate::support::{Lab, Run, TOKEN_VAR, sha256_hex, shared_cache, vm};

const POLICY: &str = "proxops-policy-misbehave";
const KIND: &str = "proxops-kind-misbehave";

fn artifact(package: &str) -> String {
    proxops_guests::artifact_path(package)
        .expect("guest is built")
        .to_string()
}

/// Run proxops on the lab's repository with the misbehave kind loaded, `-v` on.
async fn run(lab: &Lab, args: &[&str]) -> Run {
    let token = lab.sim.token();
    let (_, secret) = token.split_once('=').expect("id=secret");
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .arg("--cache-dir")
        .arg(shared_cache())
        .arg("-v")
        .args(args)
        .arg(lab.repo.path())
        .env(TOKEN_VAR, secret)
        .env("PROXOPS_TEST_KINDS", artifact(KIND))
        .env_remove("PROXOPS_LOG")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), child)
        .await
        .expect("proxops finished within 120 s")
        .expect("run proxops");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Pin the misbehave policy in proxops.yaml with `settings`.
fn install_policy(lab: &Lab, settings: &str) {
    let wasm = std::fs::read(artifact(POLICY)).unwrap();
    std::fs::create_dir_all(lab.repo.path().join("policies")).unwrap();
    std::fs::write(lab.repo.path().join("policies/misbehave.wasm"), &wasm).unwrap();
    lab.write(
        "proxops.yaml",
        &format!(
            "policies:\n  - file: policies/misbehave.wasm\n    sha256: {}\n    settings: {settings}\n",
            sha256_hex(&wasm)
        ),
    );
}

fn misbehave_manifest(name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/test\nkind: Misbehave\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

/// What a run must show: its exit code, and a text on stdout or in the `-v` log.
#[derive(Debug, Clone, Copy)]
struct Want {
    code: i32,
    stdout: &'static str,
    stderr: &'static str,
}

const fn want(code: i32, stdout: &'static str, stderr: &'static str) -> Want {
    Want {
        code,
        stdout,
        stderr,
    }
}

fn check(what: &str, run: &Run, lab: &Lab, want: Want) {
    let context = format!(
        "{what}:\n--- stdout\n{}\n--- stderr\n{}",
        run.stdout, run.stderr
    );
    assert_eq!(run.code, want.code, "{context}");
    assert!(run.stdout.contains(want.stdout), "{context}");
    assert!(run.stderr.contains(want.stderr), "{context}");
    // A host panic starts a line; a guest's panic text only appears inside a log line.
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("thread '")),
        "the host panicked: {context}"
    );
    assert!(
        run.stdout.len() + run.stderr.len() < 200 << 10,
        "bounded output: {context}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{context}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_policy_misbehaviour_is_contained() {
    let failed = "the policy failed, counted as a deny";
    let guest = "guest `misbehave.wasm`";
    let cases: &[(&str, &str, Want)] = &[
        (
            "apply",
            "panic",
            want(
                1,
                "check-manifest panicked: misbehave-policy: asked to panic",
                guest,
            ),
        ),
        (
            "apply",
            "loop",
            want(1, "check-manifest exceeded its deadline", guest),
        ),
        (
            "apply",
            "wait",
            want(1, "check-manifest exceeded its deadline", guest),
        ),
        (
            "apply",
            "alloc3g",
            want(1, "check-manifest exceeded its memory limit", guest),
        ),
        (
            "apply",
            "alloc",
            want(1, "check-manifest exceeded its memory limit", guest),
        ),
        (
            "plan",
            "stdout",
            want(2, "", "check-manifest: stdout: stdout line 0"),
        ),
        (
            "plan",
            "stderr",
            want(2, "", "check-manifest: stderr: stderr line 0"),
        ),
        (
            "plan",
            "stdin",
            want(
                2,
                "warns VM web (vm/lab/web.yaml) at spec: stdin: 0 bytes",
                "",
            ),
        ),
        (
            "plan",
            "sleep",
            want(
                2,
                "warns VM web (vm/lab/web.yaml) at spec: slept an hour",
                "",
            ),
        ),
        (
            "plan",
            "socket",
            want(2, "warns VM web (vm/lab/web.yaml) at spec: denied:", ""),
        ),
    ];
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    for (command, what, want) in cases {
        install_policy(&lab, &format!("{{manifest: {what}, plan: {what}}}"));
        lab.clear();
        let run = run(&lab, &[command]).await;
        check(what, &run, &lab, *want);
        if want.code == 1 {
            assert!(run.stdout.contains(failed), "{what}: {}", run.stdout);
            assert_eq!(
                run.stdout.matches(failed).count(),
                1,
                "one message: {}",
                run.stdout
            );
            assert!(
                run.stdout.contains("blocked by policy"),
                "{what}: {}",
                run.stdout
            );
        }
        if matches!(*what, "stdout" | "stderr") {
            assert!(
                run.stderr.contains("more log lines not kept"),
                "{what}: {}",
                run.stderr
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_looping_policy_costs_one_deadline_for_thirty_manifests() {
    let lab = Lab::start().await;
    install_policy(&lab, "{manifest: loop}");
    for i in 0..30 {
        let name = format!("vm-{i:02}");
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(&name, "pve01", 200 + i, ""),
        );
    }
    lab.clear();
    let run = run(&lab, &["apply"]).await;
    check(
        "loop x30",
        &run,
        &lab,
        want(1, "exceeded its deadline", "guest `misbehave.wasm`"),
    );
    // The policy logs one line as each check-manifest call starts. Manifests are checked on
    // every core at once, so at most one call per core runs into the deadline (one deadline
    // of wall time); the other calls are never made.
    let calls = run.stderr.matches(": info: check-manifest vm-").count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        (1..=cores).contains(&calls),
        "{calls} calls on {cores} cores: {}",
        run.stderr
    );
    assert_eq!(
        run.stdout.matches("the policy failed").count(),
        1,
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn policy_test_and_plan_give_the_same_answer() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    for (what, text) in [
        (
            "panic",
            "check-manifest panicked: misbehave-policy: asked to panic",
        ),
        ("alloc3g", "check-manifest exceeded its memory limit"),
        ("stdin", "spec: stdin: 0 bytes"),
    ] {
        install_policy(&lab, &format!("{{manifest: {what}}}"));
        lab.write("settings.yaml", &format!("manifest: {what}\n"));
        let repo = lab.repo.path();
        let test = crate::support::proxops_in(
            repo,
            &shared_cache(),
            &[
                "policy",
                "test",
                "policies/misbehave.wasm",
                "--settings",
                "settings.yaml",
                "--manifest",
                "vm/lab/web.yaml",
            ],
        );
        let plan = run(&lab, &["plan"]).await;
        assert!(
            test.stdout.contains(text),
            "{what}: policy test:\n{}\n{}",
            test.stdout,
            test.stderr
        );
        assert!(
            plan.stdout.contains(text),
            "{what}: plan:\n{}\n{}",
            plan.stdout,
            plan.stderr
        );
        let failing = what != "stdin";
        assert_eq!(
            test.code,
            if failing { 1 } else { 0 },
            "{what}: {}",
            test.stdout
        );
        // The plan creates the VM: 2 when the policy lets it through.
        assert_eq!(
            plan.code,
            if failing { 1 } else { 2 },
            "{what}: {}",
            plan.stdout
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_misbehaviour_is_contained() {
    let guest = "guest `proxops_kind_misbehave`";
    let cases: &[(&str, &str, Want)] = &[
        (
            "plan",
            "{plan: panic}",
            want(1, "plan panicked: misbehave: asked to panic", ""),
        ),
        (
            "plan",
            "{plan: loop}",
            want(1, "plan exceeded its deadline", ""),
        ),
        (
            "plan",
            "{plan: wait}",
            want(1, "plan exceeded its deadline", ""),
        ),
        (
            "plan",
            "{observe: alloc3g}",
            want(1, "observe exceeded its memory limit", ""),
        ),
        (
            "plan",
            "{validate: panic}",
            want(1, "validate panicked: misbehave: asked to panic", ""),
        ),
        ("apply", "{plan: panic}", want(1, "plan panicked", "")),
        (
            "plan",
            "{plan: stdout}",
            want(0, "", "plan: stdout: stdout line 0"),
        ),
        (
            "plan",
            "{plan: stderr}",
            want(0, "", "plan: stderr: stderr line 0"),
        ),
        ("plan", "{plan: stdin}", want(0, "", "plan: stdin: 0 bytes")),
        ("plan", "{plan: sleep}", want(0, "", "plan: slept an hour")),
        ("plan", "{plan: socket}", want(0, "", "plan: denied:")),
        (
            "validate",
            "{validate: socket}",
            want(0, "misbehave: denied:", "validate: denied:"),
        ),
    ];
    let lab = Lab::start().await;
    for (command, spec, want) in cases {
        lab.write("misbehave/lab/odd.yaml", &misbehave_manifest("odd", spec));
        lab.clear();
        let run = run(&lab, &[command]).await;
        check(spec, &run, &lab, *want);
        if want.code == 1 {
            assert!(run.stdout.contains(guest), "{spec}: {}", run.stdout);
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_kind_is_stopped_for_the_rest_of_the_cycle() {
    let lab = Lab::start().await;
    for i in 0..30 {
        let name = format!("odd-{i:02}");
        lab.write(
            &format!("misbehave/lab/{name}.yaml"),
            &misbehave_manifest(&name, "{plan: loop}"),
        );
    }
    lab.clear();
    let run = run(&lab, &["plan"]).await;
    check(
        "kind loop x30",
        &run,
        &lab,
        want(1, "plan exceeded its deadline", ""),
    );
    // Each plan call logs `plan NAME` as it starts: at most one per worker thread got in
    // before the first deadline stopped the kind.
    let calls = run.stderr.matches(": info: plan odd-").count();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        calls >= 1 && calls <= workers,
        "{calls} calls:\n{}",
        run.stderr
    );
    // Every object still reports the failure, named.
    assert_eq!(
        run.stdout.matches("exceeded its deadline").count(),
        30,
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("already failed in this run"),
        "{}",
        run.stdout
    );
}
