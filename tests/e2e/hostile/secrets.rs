//! Secrets and a third-party kind (`proxops:kind@0.2.1`): the kind refers to a secret and the
//! host sends its value, only into the parameters the grant names; the kind never holds a
//! value, not from `resolve`, not from a live read, not from `matches` on a ref it was not
//! granted. Judged by what reached the simulator and by what the kind itself printed.

use serde_json::{Value, json};

use super::{TEMPLATE, hostile_wasm, manifest};
use crate::support::{Lab, Run, sha256_hex, workspace};

/// `cloud-init.passwords.root` in tests/fixtures/sops/cluster.sops.yaml.
const SECRET: &str = "correct horse battery staple";
const GRANTED: &str = "cloud-init.passwords.root";
/// A secret of the same document the grant does not name: the API token.
const NOT_GRANTED: &str = "pve.token";

async fn lab() -> Lab {
    let lab = Lab::with(proxops_sim::SimConfig {
        volumes: vec![proxops_sim::VolumeSeed::new(TEMPLATE)],
        ..proxops_sim::SimConfig::default()
    })
    .await;
    let doc =
        std::fs::read_to_string(workspace().join("tests/fixtures/sops/cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &doc);
    let wasm = hostile_wasm();
    lab.write_bytes("kinds/hostile.wasm", &wasm);
    let calls: Vec<String> = super::GRANT_CALLS
        .iter()
        .map(|c| format!("\"{c}\""))
        .collect();
    lab.write(
        "proxops.yaml",
        &format!(
            "kinds:\n  - file: kinds/hostile.wasm\n    sha256: {}\n    grant:\n      calls: [{}]\n      secrets:\n        {GRANTED}: [description]\n",
            sha256_hex(&wasm),
            calls.join(", ")
        ),
    );
    lab
}

async fn run(lab: &Lab, args: &[&str]) -> Run {
    let id = workspace()
        .join("tests/fixtures/sops/TEST-ONLY-age-key.txt")
        .display()
        .to_string();
    let mut all = vec!["--age-identity", id.as_str(), "-v"];
    all.extend_from_slice(args);
    let run = lab.run(&all).await;
    assert!(
        !run.stdout.contains(SECRET) && !run.stderr.contains(SECRET),
        "the secret's value was printed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// A container `name` (vmid) created with `description` set to `value` (a puppet value).
fn create(vmid: u32, value: Value, extra: Value) -> Value {
    let mut spec = json!({
        "vmid": vmid,
        "actions": [{
            "operation": "create",
            "summary": "create the container",
            "when": "absent",
            "calls": [{"method": "POST", "path": "/nodes/pve01/lxc", "params": [
                ["vmid", vmid], ["ostemplate", TEMPLATE], ["hostname", format!("ct{vmid}")],
                ["storage", "local-lvm"], ["unprivileged", "1"], ["description", value]
            ]}]
        }]
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    spec
}

fn sent_for(lab: &Lab, vmid: u32) -> Vec<String> {
    lab.sim
        .requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .filter(|r| {
            r.path.contains(&format!("/{vmid}"))
                || r.params
                    .iter()
                    .any(|(k, v)| k == "vmid" && *v == vmid.to_string())
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kind_refers_to_secrets_and_never_holds_one() {
    let lab = lab().await;
    // The granted ref into the granted parameter; the kind echoes what it reads back.
    lab.write(
        "hostile/lab/vault.yaml",
        &manifest(
            "vault",
            &create(
                160,
                json!({"ref": GRANTED}),
                json!({"reads": ["/nodes/pve01/lxc/160/config"], "echo-reads": true}),
            ),
        ),
    );
    // An oracle on a secret the grant does not name: it learns nothing.
    lab.write(
        "hostile/lab/oracle.yaml",
        &manifest(
            "oracle",
            &create(161, json!({"matches": [NOT_GRANTED, "guess"]}), json!({})),
        ),
    );
    // Refused, nothing sent: the value itself; the ref in a parameter the grant does not name
    // for it; the ref inside a longer value.
    lab.write(
        "hostile/lab/thief.yaml",
        &manifest("thief", &create(162, json!({"value": GRANTED}), json!({}))),
    );
    let mut misplaced = create(163, json!("plain"), json!({}));
    misplaced["actions"][0]["calls"][0]["params"][2] = json!(["hostname", {"ref": GRANTED}]);
    lab.write(
        "hostile/lab/misplaced.yaml",
        &manifest("misplaced", &misplaced),
    );
    lab.write(
        "hostile/lab/smuggled.yaml",
        &manifest(
            "smuggled",
            &create(164, json!({"embed-ref": GRANTED}), json!({})),
        ),
    );

    let plan = run(&lab, &["plan"]).await;
    let out = format!("{}\n{}", plan.stdout, plan.stderr);
    assert!(
        out.contains(&format!("description=(secret {GRANTED})")),
        "the plan shows the ref, not a value:\n{out}"
    );
    assert!(
        !out.contains(proxops_core::secret_ref::MARK),
        "no token in the plan:\n{out}"
    );
    for (name, says) in [
        ("thief", "not granted access to it"),
        ("misplaced", "sandbox rule `secret`"),
        ("smuggled", "sandbox rule `secret`"),
    ] {
        assert!(
            out.lines()
                .any(|l| l.contains("Hostile") && l.contains(name) && l.contains(says)),
            "{name} is refused with {says:?}:\n{out}"
        );
    }

    lab.clear();
    let apply = run(&lab, &["apply"]).await;
    // The value reached PVE at the wire, in the one parameter granted.
    let vault = lab.sim.ct_config(160).unwrap_or_else(|| {
        panic!(
            "the container was created:\n{}\n{}",
            apply.stdout, apply.stderr
        )
    });
    assert_eq!(vault.get("description").map(String::as_str), Some(SECRET));
    assert_eq!(vault.get("hostname").map(String::as_str), Some("ct160"));
    // The oracle's answer was a refusal, sent as plain text.
    let oracle = lab
        .sim
        .ct_config(161)
        .expect("the oracle container was created");
    assert_eq!(
        oracle.get("description").map(String::as_str),
        Some("Denied")
    );
    for vmid in [162, 163, 164] {
        assert!(
            sent_for(&lab, vmid).is_empty() && lab.sim.ct_config(vmid).is_none(),
            "nothing was sent for {vmid}: {:?}\n{}",
            sent_for(&lab, vmid),
            apply.stdout
        );
    }

    // Planned again: the kind reads the container back and sees the ref's token where the
    // value is, so the object is converged and the kind printed no value.
    let again = run(&lab, &["plan"]).await;
    let echoed: Vec<&str> = again
        .stderr
        .lines()
        .filter(|l| l.contains("read /nodes/pve01/lxc/160/config"))
        .collect();
    assert!(
        echoed
            .iter()
            .any(|l| l.contains(proxops_core::secret_ref::MARK) && l.contains(GRANTED)),
        "the kind read the token in place of the value:\n{}",
        again.stderr
    );
}
