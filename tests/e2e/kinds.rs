//! Third-party kinds end to end: loaded from a `.wasm` through `proxops.yaml`, pinned by
//! sha256 and held to their grant. Each hostile kind is contained in its own case: the host
//! stays up (a proxops exit code, never a panic), the bundled kinds plan as before, and the
//! simulator saw no mutating request unless the case applies on purpose.

use crate::support::{Lab, Run, sha256_hex, vm};

const MISBEHAVE: &str = "proxops-kind-misbehave";

fn artifact(package: &str) -> Vec<u8> {
    let path = proxops_guests::artifact_path(package).expect("guest is built");
    std::fs::read(path).expect("read the built guest")
}

/// The calls the test-only misbehave kind declares, as a grant.
const MISBEHAVE_CALLS: &str = "[GET /cluster/resources, \"POST /nodes/{node}/lxc\"]";

/// Put `wasm` into the lab repository as `kinds/<file>` and list it in proxops.yaml with
/// `grant` (YAML flow mapping) and the pin `sha256` (the file's own when `None`).
fn install_kind(lab: &Lab, file: &str, wasm: &[u8], grant: &str, sha256: Option<&str>) {
    lab.write_bytes(&format!("kinds/{file}"), wasm);
    let pin = sha256.map_or_else(|| sha256_hex(wasm), str::to_string);
    lab.write(
        "proxops.yaml",
        &format!("kinds:\n  - file: kinds/{file}\n    sha256: {pin}\n    grant: {grant}\n"),
    );
}

fn misbehave(name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/test\nkind: Misbehave\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

/// Host alive, output bounded, nothing sent.
fn contained(what: &str, run: &Run, lab: &Lab) {
    let context = format!(
        "{what}:\n--- stdout\n{}\n--- stderr\n{}",
        run.stdout, run.stderr
    );
    assert!(
        (0..=3).contains(&run.code),
        "a proxops exit code: {context}"
    );
    assert!(
        !run.stderr.lines().any(|l| l.starts_with("thread '")),
        "the host panicked: {context}"
    );
    assert!(
        run.stdout.len() + run.stderr.len() < 200 << 10,
        "bounded: {context}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{context}");
}

#[tokio::test(flavor = "multi_thread")]
async fn every_hostile_third_party_kind_is_contained_and_the_bundled_kinds_plan_on() {
    let grant = |extra: &str| format!("{{calls: {MISBEHAVE_CALLS}{extra}}}");
    // (spec of the misbehave object, grant, exit code, what the output says)
    let cases: &[(&str, String, i32, &str)] = &[
        (
            "{plan: outside}",
            grant(""),
            1,
            "POST /access/users is not among the calls the Misbehave kind declared (sandbox rule `declared`); nothing was sent",
        ),
        (
            "{plan: privileged}",
            grant(""),
            1,
            "needs the capability privileged",
        ),
        (
            "{plan: secret}",
            grant(""),
            2,
            "secret x.y: Denied: cannot use `x.y`: this kind is not granted access to it",
        ),
        (
            "{plan: loop}",
            grant(", limits: {deadline-ms: 300}"),
            1,
            "exceeded its deadline of 300ms",
        ),
        (
            "{plan: alloc}",
            grant(", limits: {memory-mib: 16}"),
            1,
            "exceeded its memory limit",
        ),
        (
            "{validate: big}",
            grant(", limits: {output-kib: 64}"),
            1,
            "more than its output limit of 65536",
        ),
        // Half a MiB of message (and a 100,000-character path): cut where the call
        // returns, so the plan prints a line of it.
        (
            "{plan: loud}",
            grant(""),
            2,
            "zzz… (523288 more characters)",
        ),
        (
            "{validate: long}",
            grant(""),
            2,
            "yyy… (523299 more characters)",
        ),
        (
            "{validate: badjson}",
            grant(""),
            1,
            "the Misbehave kind returned a desired state that is not JSON",
        ),
    ];
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    // The hostile kind's object lives in a second cluster on the same PVE: a kind failing at
    // validation stops its own cluster (fail closed), never another.
    lab.second_cluster("other");
    let wasm = artifact(MISBEHAVE);
    for (spec, grant, code, says) in cases {
        install_kind(&lab, "misbehave.wasm", &wasm, grant, None);
        lab.write("misbehave/other/m.yaml", &misbehave("m", spec));
        lab.clear();
        let run = lab.run(&["plan"]).await;
        let what = format!("spec {spec}");
        contained(&what, &run, &lab);
        assert_eq!(run.code, *code, "{what}:\n{}\n{}", run.stdout, run.stderr);
        // Plan findings are on stdout, validation warnings on stderr.
        assert!(
            run.stdout.contains(says) || run.stderr.contains(says),
            "{what}: expected {says:?} in:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        // The bundled VM kind is not affected by its neighbour.
        assert!(
            run.stdout.contains("create VM 150"),
            "{what}:\n{}",
            run.stdout
        );
    }
}

/// A kind that traps while planning one object is not trusted with any write in that run:
/// its other object, planned before or after the trap (the threads decide), gets nothing
/// sent either.
#[tokio::test(flavor = "multi_thread")]
async fn a_kind_that_fails_on_one_object_writes_to_none_of_its_objects() {
    let lab = Lab::start().await;
    install_kind(
        &lab,
        "misbehave.wasm",
        &artifact(MISBEHAVE),
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    lab.write(
        "misbehave/lab/maker.yaml",
        &misbehave("maker", "{plan: create, vmid: 995}"),
    );
    lab.write(
        "misbehave/lab/trap.yaml",
        &misbehave("trap", "{plan: panic}"),
    );
    // Without the trapping object the create is let through: the test can fail.
    let alone = std::fs::read_to_string(lab.repo.path().join("misbehave/lab/trap.yaml")).unwrap();
    lab.remove("misbehave/lab/trap.yaml");
    let plan = lab.run(&["plan"]).await;
    assert!(
        plan.stdout.contains("misbehave: create container 995"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    lab.write("misbehave/lab/trap.yaml", &alone);
    lab.clear();
    let apply = lab.run(&["apply"]).await;
    assert_eq!(apply.code, 1, "{}\n{}", apply.stdout, apply.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", apply.stdout);
    // Which object the threads plan first decides the words: the one planned before the trap
    // is failed with the kind, one planned after it is not called at all.
    assert!(
        apply.stdout.contains("none of its objects is changed")
            || apply
                .stdout
                .contains("not called, the guest already failed in this run"),
        "{}",
        apply.stdout
    );
}

/// `wasm` with each name `from` replaced by `to` (same length): the same component as a
/// build for another contract version would name its imports and exports.
fn renamed(wasm: &[u8], names: &[(&str, &str)]) -> Vec<u8> {
    let mut bytes = wasm.to_vec();
    for (from, to) in names {
        let (from, to) = (from.as_bytes(), to.as_bytes());
        assert_eq!(from.len(), to.len());
        let mut found = 0;
        let mut i = 0;
        while i + from.len() <= bytes.len() {
            if &bytes[i..i + from.len()] == from {
                bytes[i..i + from.len()].copy_from_slice(to);
                found += 1;
            }
            i += 1;
        }
        assert!(
            found > 0,
            "{} is in the component",
            String::from_utf8_lossy(from)
        );
    }
    bytes
}

/// `proxops kinds --json` of the lab's repository.
fn kinds_json(lab: &Lab) -> serde_json::Value {
    let repo = lab.repo.path().to_str().unwrap().to_string();
    let run = crate::support::proxops(&["kinds", "--json", "--repo", &repo]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).expect("JSON")
}

/// The row of `kind` in [`kinds_json`].
fn row<'r>(rows: &'r serde_json::Value, kind: &str) -> &'r serde_json::Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == kind)
        .unwrap_or_else(|| panic!("{kind} is listed: {rows}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_built_for_contract_0_2_0_loads_and_runs_on_0_2_1() {
    let built_for_0_2_0 = renamed(
        &artifact(MISBEHAVE),
        &[
            (
                "proxops:kind/reconciler@0.2.1",
                "proxops:kind/reconciler@0.2.0",
            ),
            ("proxops:kind/secrets@0.2.1", "proxops:kind/secrets@0.2.0"),
            ("proxops:kind/types@0.2.1", "proxops:kind/types@0.2.0"),
        ],
    );
    let lab = Lab::start().await;
    install_kind(
        &lab,
        "misbehave.wasm",
        &built_for_0_2_0,
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    let rows = kinds_json(&lab);
    assert_eq!(row(&rows, "Misbehave")["wit"], "proxops:kind@0.2.0");
    // Its exports answer: validate echoes the word back as a warning.
    lab.write(
        "misbehave/lab/m.yaml",
        &misbehave("m", "{validate: compatible-echo}"),
    );
    let run = lab.run(&["validate"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let out = format!("{}{}", run.stdout, run.stderr);
    assert!(out.contains("compatible-echo"), "{out}");
}

/// (component bytes, grant, pin, field in proxops.yaml, what the error says)
type RefusalCase<'a> = (&'a [u8], String, Option<&'a str>, &'a str, &'a str);

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_is_refused_at_load_when_its_pin_version_name_or_declaration_is_wrong() {
    let misbehave = artifact(MISBEHAVE);
    let calls = format!("{{calls: {MISBEHAVE_CALLS}}}");
    // A build for another contract version: the same component, its export renamed.
    let old = renamed(
        &misbehave,
        &[(
            "proxops:kind/reconciler@0.2.1",
            "proxops:kind/reconciler@0.1.0",
        )],
    );
    let vm_kind = artifact("proxops-kind-vm");
    let wrong_pin = "0".repeat(64);
    // (bytes, grant, pin, field in proxops.yaml, what the error says)
    let cases: Vec<RefusalCase> = vec![
        (
            &misbehave,
            calls.clone(),
            Some(&wrong_pin),
            "kinds[0].sha256",
            "but proxops.yaml pins 0000",
        ),
        (
            &old,
            calls.clone(),
            None,
            "kinds[0].file",
            "was built for proxops:kind@0.1.0, but this proxops runs proxops:kind@0.2.1",
        ),
        (
            &vm_kind,
            "{secrets: {vm.password: [cipassword]}, capabilities: [devices]}".into(),
            None,
            "kinds[0].file",
            "declares kind `VM`, which is already the bundled kind; a third-party kind cannot shadow another kind",
        ),
        (
            &misbehave,
            "{calls: [GET /cluster/resources]}".into(),
            None,
            "kinds[0].grant",
            "declares more than its grant, so proxops does not start; review it, and if you trust it with this, add to its grant: call POST /nodes/{node}/lxc",
        ),
    ];
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, ""));
    for (bytes, grant, pin, field, says) in cases {
        install_kind(&lab, "k.wasm", bytes, &grant, pin);
        lab.clear();
        for command in ["plan", "apply", "validate"] {
            let run = lab.run(&[command]).await;
            let what = format!("{command} with {field}");
            contained(&what, &run, &lab);
            assert_eq!(run.code, 1, "{what}:\n{}\n{}", run.stdout, run.stderr);
            assert!(
                run.stderr.contains(field) && run.stderr.contains(says),
                "{what}: expected {field} and {says:?} in:\n{}",
                run.stderr
            );
            assert!(
                run.stderr
                    .contains("cannot be loaded (no cluster was contacted)"),
                "{}",
                run.stderr
            );
        }
        assert!(
            lab.sim.requests().is_empty(),
            "nothing was read from PVE either: {:?}",
            lab.sim.requests()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_guest_two_kinds_claim_is_reported_and_never_pruned() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, "  tags: [misbehave-claim]\n"),
    );
    lab.apply().await;
    let wasm = artifact(MISBEHAVE);
    install_kind(
        &lab,
        "misbehave.wasm",
        &wasm,
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    // The manifest goes: the VM kind would prune the guest, but the misbehave kind claims it too.
    lab.remove("vm/lab/web.yaml");
    lab.write("vm/lab/other.yaml", &vm("other", "pve01", 151, ""));
    lab.clear();
    let contested = "/cluster/resources entry `qemu/150` is claimed by 2 kinds (VM, Misbehave); exactly one kind may own a live object, so nothing is pruned";
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(contested),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains(contested), "{}", run.stdout);
    assert!(
        lab.sim.vm_config(150).is_some(),
        "the contested guest is still there"
    );
    assert!(
        lab.sim.vm_config(151).is_some(),
        "the rest of the cluster converged"
    );
    assert!(
        lab.mutations().iter().all(|m| !m.contains("/150")),
        "nothing was sent for it: {:?}",
        lab.mutations()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn proxops_kinds_shows_a_granted_kind_with_its_source_pin_contract_and_grant() {
    let lab = Lab::start().await;
    let wasm = artifact(MISBEHAVE);
    install_kind(
        &lab,
        "misbehave.wasm",
        &wasm,
        &format!("{{calls: {MISBEHAVE_CALLS}, limits: {{deadline-ms: 700}}}}"),
        None,
    );
    let repo = lab.repo.path().to_str().unwrap().to_string();
    let rows = kinds_json(&lab);
    let row = row(&rows, "Misbehave");
    assert_eq!(row["source"], "file kinds/misbehave.wasm");
    assert_eq!(row["sha256"], sha256_hex(&wasm));
    assert_eq!(row["wit"], "proxops:kind@0.2.1");
    assert_eq!(row["grant"]["calls"][1], "POST /nodes/{node}/lxc");
    assert_eq!(row["grant"]["secrets"], serde_json::json!({}));
    assert_eq!(row["grant"]["limits"]["deadline-ms"], 700);
    let vm_row = self::row(&rows, "VM");
    assert_eq!(vm_row["source"], "bundled");
    assert!(vm_row["grant"].is_null());
    let table = crate::support::proxops(&["kinds", "--repo", &repo]);
    assert!(
        table
            .stdout
            .contains("Misbehave (file kinds/misbehave.wasm, sha256 "),
        "{}",
        table.stdout
    );
    assert!(
        table
            .stdout
            .contains("calls:        GET /cluster/resources, POST /nodes/{node}/lxc"),
        "{}",
        table.stdout
    );
    let schema = crate::support::proxops(&["schema", "Misbehave", "--repo", &repo]);
    assert_eq!(schema.code, 0, "{}", schema.stderr);
    let unknown = crate::support::proxops(&["schema", "Misbehave"]);
    assert_eq!(
        unknown.code, 1,
        "without the repository the kind is unknown"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kinds_finally_step_runs_once_after_its_objects_changed() {
    let lab = Lab::start().await;
    let lab_file = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
    // One pass: the misbehave object's action is the same every time it is planned.
    lab.write(
        "clusters/lab.yaml",
        &lab_file.replace("spec:\n", "spec:\n  options: {max-passes: 1}\n"),
    );
    install_kind(
        &lab,
        "misbehave.wasm",
        &artifact(MISBEHAVE),
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    lab.write("misbehave/lab/a.yaml", &misbehave("a", "{plan: read}"));
    lab.write("misbehave/lab/b.yaml", &misbehave("b", "{plan: read}"));
    let plan = lab.run(&["plan"]).await;
    assert!(
        !plan.stdout.contains("finally"),
        "plan runs no finally step: {}",
        plan.stdout
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(
        run.stdout.matches("misbehave: finally after a, b").count(),
        1,
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(run.stdout.contains("Misbehave (finally)"), "{}", run.stdout);
}

/// decisions.md, Ownership: every mutating call is about the object acted on, "for bundled and
/// third-party kinds alike": a restore step's calls, and a `finally` step's, included. A refused
/// `finally` step fails the apply (exit 1) and sends nothing.
#[tokio::test(flavor = "multi_thread")]
async fn restore_and_finally_calls_are_held_to_the_ownership_gate() {
    let lab = Lab::start().await;
    install_kind(
        &lab,
        "misbehave.wasm",
        &artifact(MISBEHAVE),
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    lab.write(
        "misbehave/lab/a.yaml",
        &misbehave("a", "{plan: restore-other}"),
    );
    lab.clear();
    for command in ["plan", "apply"] {
        let run = lab.run(&[command]).await;
        let out = format!("{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, 1, "{command}: {out}");
        assert!(
            out.contains("POST /nodes/pve01/lxc reaches guest 996, which is not this object (sandbox rule `target`)"),
            "{command}: {out}"
        );
    }
    assert_eq!(lab.mutations(), Vec::<String>::new());

    lab.remove("misbehave/lab/a.yaml");
    lab.write(
        "misbehave/lab/finally-create.yaml",
        &misbehave("finally-create", "{plan: read}"),
    );
    let run = lab.run(&["apply"]).await;
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 1, "{out}");
    assert!(
        out.contains("finally step proposed POST /nodes/pve01/lxc, which is not about one of the guests this apply changed (sandbox rule `target`)"),
        "{out}"
    );
    assert_eq!(lab.mutations(), Vec::<String>::new());
}

/// A `finally` step is held to the enforce policies as every later pass of an apply is: a
/// destructive step without an approval is not run, and the apply fails.
#[tokio::test(flavor = "multi_thread")]
async fn a_finally_step_is_held_to_the_policies() {
    let lab = Lab::start().await;
    let kind = artifact(MISBEHAVE);
    let policy = std::fs::read(
        proxops_guests::artifact_path("proxops-policy-approve-destructive").expect("built"),
    )
    .unwrap();
    lab.write_bytes("kinds/misbehave.wasm", &kind);
    lab.write_bytes("policies/approve.wasm", &policy);
    lab.write(
        "proxops.yaml",
        &format!(
            "kinds:\n  - file: kinds/misbehave.wasm\n    sha256: {}\n    grant: {{calls: {MISBEHAVE_CALLS}}}\npolicies:\n  - file: policies/approve.wasm\n    sha256: {}\n    mode: enforce\n",
            sha256_hex(&kind),
            sha256_hex(&policy)
        ),
    );
    lab.write(
        "misbehave/lab/finally-destructive.yaml",
        &misbehave("finally-destructive", "{plan: read}"),
    );
    let plan = lab.run(&["plan"]).await;
    assert_eq!(
        plan.code, 2,
        "the first plan passes: {}{}",
        plan.stdout, plan.stderr
    );
    let run = lab.run(&["apply"]).await;
    let out = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code, 1, "{out}");
    assert!(
        out.contains("(finally): finally: blocked by policy: ✗ policy approve-destructive denied"),
        "{out}"
    );
    assert!(!out.contains("cluster matches the manifests"), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_third_party_kind_gets_a_fresh_instance_for_every_object() {
    let lab = Lab::start().await;
    install_kind(
        &lab,
        "misbehave.wasm",
        &artifact(MISBEHAVE),
        &format!("{{calls: {MISBEHAVE_CALLS}}}"),
        None,
    );
    for name in ["a", "b", "c", "d", "e", "f"] {
        lab.write(
            &format!("misbehave/lab/{name}.yaml"),
            &misbehave(name, "{plan: count}"),
        );
    }
    let run = lab.run(&["plan"]).await;
    assert_eq!(
        run.stdout
            .matches("misbehave: plan call 1 in this instance")
            .count(),
        6,
        "nothing carries over from one object to the next:\n{}",
        run.stdout
    );
    assert!(!run.stdout.contains("plan call 2"), "{}", run.stdout);
}
