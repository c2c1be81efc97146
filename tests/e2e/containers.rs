//! The worked example of a third-party kind: `kind: Container` (examples/container-kind),
//! built by the test build, loaded from a file through `proxops.yaml` with the grant of
//! examples/containers, against the simulator's LXC endpoints: create, drift, repair and
//! prune; the vmid pool shared with VMs; privileged containers only when granted.

use proxops_pve::Method;
use serde_json::Value;

use crate::support::{Lab, sha256_hex, vm};

const TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

async fn lab() -> Lab {
    let config = proxops_sim::SimConfig::from_yaml_str(&format!(
        "nodes: [pve01, pve02]\nvolumes:\n  - {{volid: \"{TEMPLATE}\"}}\n"
    ))
    .expect("sim config");
    Lab::with(config).await
}

fn container_wasm() -> Vec<u8> {
    let path = proxops_guests::artifact_path("proxops-kind-container").expect("built");
    std::fs::read(path).expect("read the container kind")
}

/// The example repository's proxops.yaml with `kinds/container.wasm` pinned to this build;
/// `edit` may change the grant.
fn install(lab: &Lab, edit: impl Fn(String) -> String) {
    let wasm = container_wasm();
    lab.write_bytes("kinds/container.wasm", &wasm);
    let example = std::fs::read_to_string(
        crate::support::workspace().join("examples/containers/proxops.yaml"),
    )
    .expect("the example's proxops.yaml");
    let pinned: Vec<String> = example
        .lines()
        .map(|l| match l.trim_start().strip_prefix("sha256:") {
            Some(_) => format!("    sha256: {}", sha256_hex(&wasm)),
            None => l.to_string(),
        })
        .collect();
    lab.write("proxops.yaml", &edit(pinned.join("\n") + "\n"));
}

fn container(name: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: Container\nmetadata: {{name: {name}}}\nspec:\n  vmid: {vmid}\n  node: pve01\n  ostemplate: {TEMPLATE}\n  memory: 512MiB\n  rootfs: {{storage: local-lvm, size: 4GiB}}\n  nics:\n    - {{name: eth0, bridge: vmbr0, ip: dhcp}}\n{extra}"
    )
}

async fn ct_config(lab: &Lab, vmid: u32) -> Option<Value> {
    lab.client
        .get(&format!("/nodes/pve01/lxc/{vmid}/config"), &[])
        .await
        .ok()
}

async fn listed(lab: &Lab, id: &str) -> bool {
    let all = lab.client.get("/cluster/resources", &[]).await.unwrap();
    all.as_array()
        .unwrap()
        .iter()
        .any(|e| e["id"].as_str() == Some(id))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_kind_from_a_file_creates_repairs_drift_and_prunes() {
    let lab = lab().await;
    install(&lab, |y| y);
    lab.write(
        "container/lab/web.yaml",
        &container("web", 201, "  tags: [web]\n"),
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let config = ct_config(&lab, 201).await.expect("the container exists");
    assert_eq!(config["memory"], 512, "{config}");
    let tags = config["tags"].as_str().unwrap_or_default();
    for t in ["proxops", "proxops-201", "web"] {
        assert!(tags.split(';').any(|x| x == t), "tag {t} in {tags}");
    }
    assert_eq!(config["unprivileged"], 1, "{config}");
    let status = lab
        .client
        .get("/nodes/pve01/lxc/201/status/current", &[])
        .await
        .unwrap();
    assert_eq!(status["status"], "running");

    // Converged: a second run changes nothing.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);

    // Drift behind proxops's back, then repaired.
    lab.pve(
        Method::Put,
        "/nodes/pve01/lxc/201/config",
        &[("memory", "1024")],
    )
    .await;
    let plan = lab.run(&["plan", "--detailed-exitcode"]).await;
    assert_eq!(plan.code, 2, "{}\n{}", plan.stdout, plan.stderr);
    assert!(plan.stdout.contains("memory"), "{}", plan.stdout);
    lab.clear();
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert_eq!(ct_config(&lab, 201).await.unwrap()["memory"], 512);
    assert!(
        lab.mutations()
            .iter()
            .all(|m| m == "PUT /nodes/pve01/lxc/201/config -> 200")
            && lab.mutations().len() == 1,
        "one config write: {:?}",
        lab.mutations()
    );

    // Prune: the manifest goes, the container goes.
    lab.remove("container/lab/web.yaml");
    lab.write("vm/lab/keep.yaml", &vm("keep", "pve01", 150, ""));
    let prune = lab.run(&["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert!(!listed(&lab, "lxc/201").await, "{}", prune.stdout);
    assert!(listed(&lab, "qemu/150").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn containers_and_vms_share_one_vmid_pool() {
    let lab = lab().await;
    install(&lab, |y| y);
    // Two manifests on one vmid.
    lab.write("container/lab/web.yaml", &container("web", 150, ""));
    lab.write("vm/lab/db.yaml", &vm("db", "pve01", 150, ""));
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("150") && run.stdout.contains("container/lab/web.yaml"),
        "{}",
        run.stdout
    );
    assert!(lab.mutations().is_empty());

    // A live VM holds the vmid a container manifest names.
    lab.remove("vm/lab/db.yaml");
    lab.pve(
        Method::Post,
        "/nodes/pve01/qemu",
        &[("vmid", "150"), ("name", "someone-elses")],
    )
    .await;
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("vmid 150 is taken by another guest (qemu/150)"),
        "{}",
        run.stdout
    );
    assert!(lab.mutations().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_privileged_container_or_bind_mount_needs_the_grant() {
    let lab = lab().await;
    install(&lab, |y| y);
    lab.write(
        "container/lab/root.yaml",
        &container("root", 202, "  unprivileged: false\n"),
    );
    lab.clear();
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("needs the capability privileged"),
        "{}",
        run.stdout
    );
    assert!(lab.mutations().is_empty(), "{:?}", lab.mutations());

    install(&lab, |y| {
        y.replace("capabilities: []", "capabilities: [privileged]")
    });
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(
        ct_config(&lab, 202).await.unwrap()["unprivileged"],
        Value::Null
    );

    // A grant smaller than what the kind declares: refused before anything is read.
    install(&lab, |y| {
        y.lines()
            .filter(|l| !l.contains("PUT /nodes/{node}/lxc/{vmid}/config"))
            .collect::<Vec<_>>()
            .join("\n")
    });
    lab.clear();
    let run = lab.run(&["plan"]).await;
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("add to its grant: call PUT /nodes/{node}/lxc/{vmid}/config"),
        "{}",
        run.stderr
    );
    assert!(lab.sim.requests().is_empty());
}

/// A digest-guarded container write whose answer is lost is sent again; the repeat finds the
/// config changed (by the first attempt, which landed) and PVE answers with pve-container's
/// own words for a stale digest: the object is planned again, not failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_write_whose_answer_was_lost_is_planned_again_not_failed() {
    let lab = lab().await;
    install(&lab, |y| y);
    lab.write("container/lab/web.yaml", &container("web", 201, ""));
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    lab.pve(
        Method::Put,
        "/nodes/pve01/lxc/201/config",
        &[("memory", "1024")],
    )
    .await;
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "PUT".into(),
        path: "/nodes/{node}/lxc/{vmid}/config".into(),
        kind: proxops_sim::FaultKind::LoseAnswer,
        probability: None,
        times: Some(1),
    }]);
    lab.clear();
    let repair = lab.run(&["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert!(
        lab.sim.requests().iter().any(|r| r.method == "PUT"
            && r.status == 500
            && r.path == "/nodes/pve01/lxc/201/config"),
        "the repeat met the stale digest: {:?}",
        lab.mutations()
    );
    assert_eq!(ct_config(&lab, 201).await.unwrap()["memory"], 512);
}

/// `spec.ha` on a container: the kind's HA resource `ct:<vmid>` is created with the
/// ownership mark (through the example's grant), left alone when converged, changed in
/// place, and removed (the container kept) when the manifest drops `spec.ha`.
#[tokio::test(flavor = "multi_thread")]
async fn a_container_with_spec_ha_gets_its_marked_ha_resource() {
    let config = proxops_sim::SimConfig::from_yaml_str(&format!(
        "nodes: [pve01, pve02]\nvolumes:\n  - {{volid: \"{TEMPLATE}\"}}\nha_crm_delay_ms: 50\n"
    ))
    .expect("sim config");
    let lab = Lab::with(config).await;
    install(&lab, |y| y);
    lab.write(
        "container/lab/web.yaml",
        &container("web", 201, "  ha: {}\n"),
    );
    let run = lab.run(&["apply"]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let resource = |all: Value| {
        all.as_array()
            .unwrap()
            .iter()
            .find(|r| r["sid"] == "ct:201")
            .cloned()
    };
    let ha = resource(lab.client.get("/cluster/ha/resources", &[]).await.unwrap())
        .expect("the HA resource ct:201");
    assert_eq!(ha["comment"], "managed by proxops (proxops-201)", "{ha}");
    assert_eq!(ha["state"], "started", "{ha}");
    let status = lab
        .client
        .get("/nodes/pve01/lxc/201/status/current", &[])
        .await
        .unwrap();
    assert_eq!(status["status"], "running");

    // Converged: nothing to write.
    lab.clear();
    let again = lab.run(&["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);

    // An option changes: one write to the HA resource.
    lab.write(
        "container/lab/web.yaml",
        &container("web", 201, "  ha: {max-restart: 3}\n"),
    );
    lab.clear();
    let change = lab.run(&["apply"]).await;
    assert_eq!(change.code, 0, "{}\n{}", change.stdout, change.stderr);
    let writes = lab.mutations();
    assert!(
        writes.len() == 1 && writes[0].starts_with("PUT /cluster/ha/resources/"),
        "{writes:?}"
    );
    let ha = resource(lab.client.get("/cluster/ha/resources", &[]).await.unwrap()).unwrap();
    assert_eq!(ha["max_restart"].to_string().trim_matches('"'), "3", "{ha}");

    // spec.ha dropped: the resource goes, the container stays.
    lab.write("container/lab/web.yaml", &container("web", 201, ""));
    let drop = lab.run(&["apply"]).await;
    assert_eq!(drop.code, 0, "{}\n{}", drop.stdout, drop.stderr);
    assert!(
        resource(lab.client.get("/cluster/ha/resources", &[]).await.unwrap()).is_none(),
        "{}",
        drop.stdout
    );
    assert!(listed(&lab, "lxc/201").await);
}
