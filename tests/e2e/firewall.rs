//! `kind: Firewall` (guest-kinds/firewall), built by the test build and loaded from its file
//! with the smallest grant that serves it, against the simulator's firewall endpoints: created
//! with its VM in one apply, drift repaired with the fewest calls (one `moveto`, not a delete
//! and a create), what the manifest drops removed, and the hostile variants: a guest proxops
//! does not own, a missing security group, a grant too small.

use proxops_pve::Method;
use serde_json::Value;

use crate::support::{Lab, sha256_hex, vm};

/// The smallest grant that serves the kind: exactly the calls it declares; no secret, no
/// capability (a guest's firewall is a plain guest write).
pub(crate) const GRANT: &str = "    grant:
      calls:
        - GET /cluster/resources
        - GET /nodes/{node}/{type}/{vmid}/firewall/options
        - PUT /nodes/{node}/{type}/{vmid}/firewall/options
        - GET /nodes/{node}/{type}/{vmid}/firewall/rules
        - POST /nodes/{node}/{type}/{vmid}/firewall/rules
        - PUT /nodes/{node}/{type}/{vmid}/firewall/rules/{pos}
        - DELETE /nodes/{node}/{type}/{vmid}/firewall/rules/{pos}
        - GET /nodes/{node}/{type}/{vmid}/firewall/aliases
        - POST /nodes/{node}/{type}/{vmid}/firewall/aliases
        - PUT /nodes/{node}/{type}/{vmid}/firewall/aliases/{name}
        - DELETE /nodes/{node}/{type}/{vmid}/firewall/aliases/{name}
        - GET /nodes/{node}/{type}/{vmid}/firewall/ipset
        - POST /nodes/{node}/{type}/{vmid}/firewall/ipset
        - GET /nodes/{node}/{type}/{vmid}/firewall/ipset/{name}
        - POST /nodes/{node}/{type}/{vmid}/firewall/ipset/{name}
        - DELETE /nodes/{node}/{type}/{vmid}/firewall/ipset/{name}
        - PUT /nodes/{node}/{type}/{vmid}/firewall/ipset/{name}/{cidr}
        - DELETE /nodes/{node}/{type}/{vmid}/firewall/ipset/{name}/{cidr}
      secrets: {}
      capabilities: []
";

/// `proxops.yaml` loading `kinds/firewall.wasm`, pinned to this build; `edit` may change it.
fn install(lab: &Lab, edit: impl Fn(String) -> String) {
    let path = proxops_guests::artifact_path("proxops-kind-firewall").expect("built");
    let wasm = std::fs::read(path).expect("read the firewall kind");
    lab.write_bytes("kinds/firewall.wasm", &wasm);
    let yaml = format!(
        "apiVersion: proxops/v1alpha1\nkinds:\n  - file: kinds/firewall.wasm\n    sha256: {}\n{GRANT}",
        sha256_hex(&wasm)
    );
    lab.write("proxops.yaml", &edit(yaml));
}

const WEB: &str = "apiVersion: proxops/v1alpha1
kind: Firewall
metadata: {name: web}
spec:
  vmid: 100
  vm: web
  options: {enable: true, policy_in: DROP, macfilter: false}
  aliases:
    - {name: office, cidr: 192.0.2.0/24, comment: head office}
  ipsets:
    - name: admins
      entries: [198.51.100.7, {cidr: 203.0.113.0/24, nomatch: true}]
  rules:
    - {type: in, action: ACCEPT, macro: SSH, source: +admins, comment: ssh}
    - {type: in, action: ACCEPT, proto: tcp, dport: '443', source: office, comment: https}
    - {type: in, action: ACCEPT, proto: icmp, comment: ping}
    - {type: out, action: DROP, proto: tcp, dport: '25', comment: no-smtp}
";

/// The comments of guest `vmid`'s rules, in PVE's order.
async fn rules(lab: &Lab, vmid: u32) -> Vec<String> {
    let list = lab
        .client
        .get(&format!("/nodes/pve01/qemu/{vmid}/firewall/rules"), &[])
        .await
        .expect("rules");
    list.as_array()
        .expect("a list")
        .iter()
        .map(|r| r["comment"].as_str().unwrap_or_default().to_string())
        .collect()
}

async fn rules_digest(lab: &Lab) -> String {
    let list = lab
        .client
        .get("/nodes/pve01/qemu/100/firewall/rules", &[])
        .await
        .unwrap();
    list[0]["digest"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_firewall_is_created_with_its_vm_repaired_with_the_fewest_calls_and_pruned() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write("firewall/lab/web.yaml", WEB);
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(rules(&lab, 100).await, ["ssh", "https", "ping", "no-smtp"]);
    let options = lab
        .client
        .get("/nodes/pve01/qemu/100/firewall/options", &[])
        .await
        .unwrap();
    assert_eq!(
        (
            &options["enable"],
            &options["policy_in"],
            &options["macfilter"]
        ),
        (&Value::from(1), &Value::from("DROP"), &Value::from(0)),
        "{options}"
    );
    let set = lab
        .client
        .get("/nodes/pve01/qemu/100/firewall/ipset/admins", &[])
        .await
        .unwrap();
    assert_eq!(set.as_array().map(Vec::len), Some(2), "{set}");

    // Converged: a second run changes nothing.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);

    // Drift behind proxops's back: the last rule moved to the top, an option changed.
    let d = rules_digest(&lab).await;
    lab.pve(
        Method::Put,
        "/nodes/pve01/qemu/100/firewall/rules/3",
        &[("moveto", "0"), ("digest", &d)],
    )
    .await;
    lab.pve(
        Method::Put,
        "/nodes/pve01/qemu/100/firewall/options",
        &[("policy_in", "ACCEPT")],
    )
    .await;
    assert_eq!(rules(&lab, 100).await, ["no-smtp", "ssh", "https", "ping"]);
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    lab.clear();
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    // One move puts the rule back (never a delete and a create), one write the option.
    assert_eq!(
        lab.mutations(),
        [
            "PUT /nodes/pve01/qemu/100/firewall/rules/0 -> 200",
            "PUT /nodes/pve01/qemu/100/firewall/options -> 200",
        ],
        "{}",
        repair.stdout
    );
    let moved = lab
        .sim
        .requests()
        .into_iter()
        .find(|r| r.path.ends_with("/rules/0"))
        .expect("the move");
    // Bound to the list the plan read (after the hand-made move), not to the one before it.
    assert!(
        moved.params.iter().any(|(k, v)| k == "moveto" && v == "4")
            && moved
                .params
                .iter()
                .any(|(k, v)| k == "digest" && !v.is_empty() && *v != d),
        "{:?}",
        moved.params
    );
    assert_eq!(rules(&lab, 100).await, ["ssh", "https", "ping", "no-smtp"]);

    // What the manifest no longer declares goes: the https rule, then the alias it named.
    lab.write(
        "firewall/lab/web.yaml",
        &WEB.replace(
            "    - {type: in, action: ACCEPT, proto: tcp, dport: '443', source: office, comment: https}\n",
            "",
        )
        .replace(
            "  aliases:\n    - {name: office, cidr: 192.0.2.0/24, comment: head office}\n",
            "",
        ),
    );
    lab.clear();
    let prune = lab.run(&["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert_eq!(
        lab.mutations(),
        [
            "DELETE /nodes/pve01/qemu/100/firewall/rules/1 -> 200",
            "DELETE /nodes/pve01/qemu/100/firewall/aliases/office -> 200",
        ],
        "{}",
        prune.stdout
    );
    assert_eq!(rules(&lab, 100).await, ["ssh", "ping", "no-smtp"]);

    // The firewall goes with its guest.
    lab.remove("firewall/lab/web.yaml");
    lab.remove("vm/lab/web.yaml");
    lab.write("vm/lab/keep.yaml", &vm("keep", "pve01", 150, ""));
    let gone = lab.run(&["apply"]).await;
    assert_eq!(gone.code, 0, "{}\n{}", gone.stdout, gone.stderr);
    let left = lab
        .client
        .get("/nodes/pve01/qemu/100/firewall/rules", &[])
        .await
        .unwrap();
    assert_eq!(left, Value::Array(Vec::new()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_firewall_of_a_guest_proxops_does_not_own_is_never_written() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    // A guest made by hand, without the `proxops` tag.
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[("vmid", "120"), ("name", "someone-elses")],
    )
    .await;
    lab.write("vm/lab/keep.yaml", &vm("keep", "pve01", 150, ""));
    lab.apply().await;
    lab.write(
        "firewall/lab/theirs.yaml",
        "apiVersion: proxops/v1alpha1\nkind: Firewall\nmetadata: {name: theirs}\nspec:\n  vmid: 120\n  options: {enable: true}\n  rules:\n    - {type: in, action: DROP, comment: all}\n",
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 3, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("proxops does not own that guest"),
        "{}",
        run.stdout
    );
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", run.stdout);
    let rules = lab
        .client
        .get("/nodes/pve01/qemu/120/firewall/rules", &[])
        .await
        .unwrap();
    assert_eq!(rules, Value::Array(Vec::new()));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_security_group_or_a_grant_too_small_stops_before_any_request() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write(
        "firewall/lab/web.yaml",
        "apiVersion: proxops/v1alpha1\nkind: Firewall\nmetadata: {name: web}\nspec:\n  vmid: 100\n  rules:\n    - {type: in, action: ACCEPT, source: office}\n    - {type: group, group: webtier}\n",
    );
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("firewall/lab/web.yaml") && said.contains("spec.rules[0].source"),
        "{said}"
    );
    assert!(said.contains("alias `office`"), "{said}");
    assert!(lab.mutations().is_empty());
    lab.write(
        "firewall/lab/web.yaml",
        "apiVersion: proxops/v1alpha1\nkind: Firewall\nmetadata: {name: web}\nspec:\n  vmid: 100\n  rules:\n    - {type: group, group: webtier}\n",
    );
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let said = format!("{}{}", run.stdout, run.stderr);
    assert!(
        said.contains("spec.rules[0].group") && said.contains("no SecurityGroup named `webtier`"),
        "{said}"
    );
    assert!(lab.mutations().is_empty());

    // The grant without one of the calls the kind declares: refused before anything is read.
    lab.write("firewall/lab/web.yaml", WEB);
    install(&lab, |y| {
        y.lines()
            .filter(|l| !l.contains("PUT /nodes/{node}/{type}/{vmid}/firewall/rules/{pos}"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "add to its grant: call PUT /nodes/{node}/{type}/{vmid}/firewall/rules/{pos}"
        ),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty());
}
