//! `kind: SecurityGroup` (guest-kinds/securitygroup), loaded from its file with the grant of
//! examples/grants/securitygroup.yaml next to the Firewall kind, against the simulator's
//! `/cluster/firewall/groups`: created before the guest rule that applies it, drift repaired
//! with one `moveto`, the comment changed by PVE's `rename`, pruned (rules, then the empty
//! group); an unmarked group with a managed name reported and untouched; a grant too small
//! refused before any request; and adopt's round trip through the component against
//! `proxops sim serve`.

use proxops_pve::Method;
use serde_json::{Value, json};

use crate::support::{Lab, sha256_hex, vm};

const GROUPS: &str = "/cluster/firewall/groups";

fn wasm(package: &str) -> Vec<u8> {
    let path = proxops_guests::artifact_path(package).expect("built");
    std::fs::read(path).expect("read the kind")
}

/// `proxops.yaml` for a repository at `root`: the SecurityGroup kind with the grant of
/// examples/grants/securitygroup.yaml (edited by `edit`) and the Firewall kind with its own,
/// both pinned to this build.
fn install_in(root: &std::path::Path, edit: impl Fn(String) -> String) {
    let group = wasm("proxops-kind-securitygroup");
    let firewall = wasm("proxops-kind-firewall");
    std::fs::create_dir_all(root.join("kinds")).unwrap();
    std::fs::write(root.join("kinds/securitygroup.wasm"), &group).unwrap();
    std::fs::write(root.join("kinds/firewall.wasm"), &firewall).unwrap();
    let example = std::fs::read_to_string(
        crate::support::workspace().join("examples/grants/securitygroup.yaml"),
    )
    .expect("the grant snippet");
    let mut yaml: Vec<String> = example
        .lines()
        .map(|l| match l.trim_start().strip_prefix("sha256:") {
            Some(_) => format!("    sha256: {}", sha256_hex(&group)),
            None => l.to_string(),
        })
        .collect();
    yaml.push(format!(
        "  - file: kinds/firewall.wasm\n    sha256: {}\n{}",
        sha256_hex(&firewall),
        crate::firewall::GRANT.trim_end()
    ));
    std::fs::write(root.join("proxops.yaml"), edit(yaml.join("\n") + "\n")).unwrap();
}

fn install(lab: &Lab, edit: impl Fn(String) -> String) {
    install_in(lab.repo.path(), edit);
}

const WEBTIER: &str = "apiVersion: proxops/v1alpha1
kind: SecurityGroup
metadata: {name: webtier}
spec:
  comment: web servers
  rules:
    - {type: in, action: ACCEPT, macro: HTTPS, comment: https}
    - {type: in, action: ACCEPT, proto: tcp, dport: '80', comment: http}
    - {type: out, action: DROP, proto: tcp, dport: '25', comment: no-smtp}
";

/// The guest's firewall, applying the group on net0 after its own ssh rule.
const WEB_FW: &str = "apiVersion: proxops/v1alpha1
kind: Firewall
metadata: {name: web}
spec:
  vmid: 100
  vm: web
  options: {enable: true, policy_in: DROP}
  rules:
    - {type: in, action: ACCEPT, macro: SSH, comment: ssh}
    - {type: group, group: webtier, iface: net0, comment: web tier}
";

/// The group's comment and its rules' comments in PVE's order; `None` when it does not exist.
async fn group(lab: &Lab, name: &str) -> Option<(String, Vec<String>)> {
    group_via(&lab.client, name).await
}

async fn group_via(client: &proxops_pve::Client, name: &str) -> Option<(String, Vec<String>)> {
    let all = client.get(GROUPS, &[]).await.unwrap();
    let entry = all.as_array()?.iter().find(|g| g["group"] == name)?.clone();
    let rules = client.get(&format!("{GROUPS}/{name}"), &[]).await.unwrap();
    Some((
        entry["comment"].as_str().unwrap_or_default().to_string(),
        rules
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["comment"].as_str().unwrap_or_default().to_string())
            .collect(),
    ))
}

/// Mutations of the security groups, with their parameters: `PUT …/webtier/0 moveto=3 -> 200`.
fn group_writes(lab: &Lab) -> Vec<String> {
    lab.sim
        .requests()
        .into_iter()
        .filter(|r| r.is_mutating() && r.path.starts_with(GROUPS))
        .map(|r| {
            let params: Vec<String> = r
                .params
                .iter()
                .filter(|(k, _)| k != "digest")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            format!(
                "{} {} {} -> {}",
                r.method,
                r.path,
                params.join(" "),
                r.status
            )
            .replace("  ", " ")
        })
        .collect()
}

async fn rules_digest(lab: &Lab, path: &str) -> String {
    let list = lab.client.get(path, &[]).await.unwrap();
    list[0]["digest"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_security_group_is_created_before_the_rule_that_applies_it_repaired_and_pruned() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write("securitygroup/lab/webtier.yaml", WEBTIER);
    lab.write("firewall/lab/web.yaml", WEB_FW);
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        group(&lab, "webtier").await,
        Some((
            "web servers (proxops:webtier)".into(),
            vec!["https".into(), "http".into(), "no-smtp".into()]
        ))
    );
    // The group exists before the guest rule naming it is written (PVE would take the rule
    // anyway; its compiler would skip it until the group exists).
    let requests = lab.sim.requests();
    let at = |pred: &dyn Fn(&proxops_sim::RequestRecord) -> bool| {
        requests
            .iter()
            .position(pred)
            .expect("the request was sent")
    };
    let created = at(&|r| r.method == "POST" && r.path == GROUPS);
    let applied = at(&|r| {
        r.method == "POST"
            && r.path == "/nodes/pve01/qemu/100/firewall/rules"
            && r.params.iter().any(|(k, v)| k == "type" && v == "group")
    });
    assert!(created < applied, "the group first: {created} < {applied}");
    let guest_rules = lab
        .client
        .get("/nodes/pve01/qemu/100/firewall/rules", &[])
        .await
        .unwrap();
    assert_eq!(
        (
            &guest_rules[1]["type"],
            &guest_rules[1]["action"],
            &guest_rules[1]["iface"]
        ),
        (&json!("group"), &json!("webtier"), &json!("net0")),
        "{guest_rules}"
    );

    // Converged: a second run sends nothing, for the group and the guest rule alike.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);

    // Drift behind proxops's back: the last rule moved to the top. One move puts it back.
    let path = format!("{GROUPS}/webtier");
    let d = rules_digest(&lab, &path).await;
    lab.pve(
        Method::Put,
        &format!("{path}/2"),
        &[("moveto", "0"), ("digest", &d)],
    )
    .await;
    assert_eq!(
        group(&lab, "webtier").await.unwrap().1,
        ["no-smtp", "https", "http"]
    );
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    lab.clear();
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert_eq!(
        group_writes(&lab),
        ["PUT /cluster/firewall/groups/webtier/0 moveto=3 -> 200"],
        "{}",
        repair.stdout
    );
    assert_eq!(lab.mutations().len(), 1, "{:?}", lab.mutations());
    let moved = lab
        .sim
        .requests()
        .into_iter()
        .find(|r| r.is_mutating())
        .unwrap();
    assert!(
        moved
            .params
            .iter()
            .any(|(k, v)| k == "digest" && !v.is_empty() && *v != d),
        "bound to the list the plan read: {:?}",
        moved.params
    );
    assert_eq!(
        group(&lab, "webtier").await.unwrap().1,
        ["https", "http", "no-smtp"]
    );

    // A new comment: PVE's own form, `rename` equal to the group, the mark kept.
    lab.write(
        "securitygroup/lab/webtier.yaml",
        &WEBTIER.replace("comment: web servers", "comment: the web tier"),
    );
    lab.clear();
    let renamed = lab.run(&["apply"]).await;
    assert_eq!(renamed.code, 0, "{}\n{}", renamed.stdout, renamed.stderr);
    assert_eq!(
        group_writes(&lab),
        [
            "POST /cluster/firewall/groups group=webtier rename=webtier comment=the web tier (proxops:webtier) -> 200"
        ]
    );

    // Prune: neither the group's manifest nor a rule naming it is left. Its rules go, highest
    // position first, then the empty group (PVE deletes only an empty one).
    lab.remove("securitygroup/lab/webtier.yaml");
    lab.write(
        "firewall/lab/web.yaml",
        &WEB_FW.replace(
            "    - {type: group, group: webtier, iface: net0, comment: web tier}\n",
            "",
        ),
    );
    lab.clear();
    let prune = lab.run(&["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert_eq!(
        group_writes(&lab),
        [
            "DELETE /cluster/firewall/groups/webtier/2 -> 200",
            "DELETE /cluster/firewall/groups/webtier/1 -> 200",
            "DELETE /cluster/firewall/groups/webtier/0 -> 200",
            "DELETE /cluster/firewall/groups/webtier -> 200",
        ],
        "{}",
        prune.stdout
    );
    assert_eq!(group(&lab, "webtier").await, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unmarked_group_with_a_managed_name_is_reported_and_untouched() {
    let lab = Lab::start().await;
    install(&lab, |y| y);
    lab.pve(
        Method::Post,
        GROUPS,
        &[("group", "webtier"), ("comment", "made by hand")],
    )
    .await;
    lab.pve(
        Method::Post,
        &format!("{GROUPS}/webtier"),
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("comment", "theirs"),
            ("enable", "1"),
        ],
    )
    .await;
    // Another team's group carrying proxops's mark for another name: never claimed.
    lab.pve(
        Method::Post,
        GROUPS,
        &[("group", "copy"), ("comment", "proxops:webtier")],
    )
    .await;
    lab.write("securitygroup/lab/webtier.yaml", WEBTIER);
    lab.write("vm/lab/keep.yaml", &vm("keep", "pve01", 150, ""));
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert!(
        run.stdout
            .contains("security group webtier exists but was not created by proxops"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(group_writes(&lab).is_empty(), "{:?}", group_writes(&lab));
    assert_eq!(
        group(&lab, "webtier").await,
        Some(("made by hand".into(), vec!["theirs".into()]))
    );
    assert!(
        group(&lab, "copy").await.is_some(),
        "a foreign group is never pruned"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_security_group_kind_with_too_small_a_grant_is_refused_before_any_request() {
    let lab = Lab::start().await;
    install(&lab, |y| {
        y.lines()
            .filter(|l| !l.contains("DELETE /cluster/firewall/groups/{group}/{pos}"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    lab.write("securitygroup/lab/webtier.yaml", WEBTIER);
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("add to its grant: call DELETE /cluster/firewall/groups/{group}/{pos}"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty());
}

/// Adopt's round trip through the component, against `proxops sim serve`: a group made by hand
/// is adopted (its gap says how to hand it over), the mark is added as the gap says, and
/// `proxops plan` on the adopted manifest finds nothing to change.
#[tokio::test(flavor = "multi_thread")]
async fn an_adopted_group_plans_to_nothing_against_sim_serve() {
    use proxops_pve::Param;
    use proxops_runtime::kind::{Call, Observation, Read};
    let served = crate::served::Served::start(0).await;
    let client = &served.client;
    let post = async |path: &str, params: &[Param]| {
        client
            .request(Method::Post, path, params, false)
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    };
    post(
        GROUPS,
        &[
            Param::new("group", "webtier"),
            Param::new("comment", "web servers"),
        ],
    )
    .await;
    let path = format!("{GROUPS}/webtier");
    for (ty, rest) in [
        (
            "out",
            vec![("action", "DROP"), ("proto", "tcp"), ("dport", "25")],
        ),
        (
            "in",
            vec![
                ("action", "ACCEPT"),
                ("macro", "HTTPS"),
                ("comment", "https"),
            ],
        ),
    ] {
        let mut params = vec![Param::new("type", ty), Param::new("enable", "1")];
        params.extend(rest.into_iter().map(|(k, v)| Param::new(k, v)));
        post(&path, &params).await;
    }
    let repo = served.repo("repo");
    install_in(&repo, |y| y);

    // The kind's adopt, from the listing entry and the rules read, as the host calls it.
    let runtime = proxops_runtime::Runtime::new(proxops_runtime::RuntimeConfig {
        cache_dir: Some(crate::support::shared_cache()),
    })
    .expect("runtime");
    let mut registry = proxops_reconcile::KindRegistry::bundled(&runtime).expect("bundled");
    let settings = proxops_core::settings::load(&repo).expect("proxops.yaml");
    registry
        .load_granted(&runtime, &repo, &settings.kinds)
        .expect("the kinds load with their grants");
    let index = registry
        .route("proxops/v1alpha1", "SecurityGroup")
        .expect("the kind is loaded");
    let mut kind = registry.instance(index).expect("an instance");
    let entry = client.get(GROUPS, &[]).await.unwrap()[0].clone();
    let rules = client.get(&path, &[]).await.unwrap();
    let observation = Observation {
        live: Some(entry.to_string()),
        reads: vec![Read {
            call: Call {
                method: proxops_runtime::kind::Method::Get,
                path: path.clone(),
                params: Vec::new(),
            },
            status: 200,
            body: rules.to_string(),
        }],
    };
    let adopted = kind
        .adopt(&observation)
        .expect("the guest runs")
        .expect("adopted");
    // No hand-over gap: `proxops adopt` (the host) gives the manifest its take-over claim;
    // this test writes the kind's manifest alone, without one.
    assert!(adopted.gaps.is_empty(), "{:?}", adopted.gaps);
    let manifest: Value = serde_json::from_str(&adopted.manifest).unwrap();
    std::fs::create_dir_all(repo.join("securitygroup/lab")).unwrap();
    std::fs::write(
        repo.join("securitygroup/lab/webtier.yaml"),
        serde_yaml::to_string(&manifest).unwrap(),
    )
    .unwrap();

    // Without `metadata.adopt` and until the mark is added, plan reports the group and
    // proposes nothing for it.
    let cache = crate::served::private_cache(served.dir.path());
    let run = crate::served::finish(served.run(&["plan"], &repo, &cache)).await;
    assert!(
        run.stdout.contains("was not created by proxops"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    // The hand-over by hand (the mark added in PVE), then the round trip: nothing to change.
    post(
        GROUPS,
        &[
            Param::new("group", "webtier"),
            Param::new("rename", "webtier"),
            Param::new("comment", "web servers (proxops:webtier)"),
        ],
    )
    .await;
    let before = served.requests().await.len();
    let run =
        crate::served::finish(served.run(&["plan", "--detailed-exitcode"], &repo, &cache)).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let after = served.requests().await;
    assert!(
        after[before..].iter().all(|r| r.method == "GET"),
        "plan only reads"
    );
    assert_eq!(
        group_via(client, "webtier").await.unwrap().0,
        "web servers (proxops:webtier)"
    );
}
