//! Adoption tests: data-driven live configs and a proptest, each adopted, validated and planned
//! against the same live state (plus the ownership marks the host writes at take-over), which
//! must give no action and no drift.

use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};
use proxops_kind_sdk::kind::{Adopted, ResourceKind};
use proxops_kind_sdk::model::{Observation, Proposal, Read};
use serde_json::{Map, Value, json};

use super::metadata_name;
use crate::desired::Flavour;
use crate::secrets::{MapSecrets, NoSecrets, Secrets};
use crate::{TemplateVm, Vm};

mod cases;
mod ha;
mod props;

const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIadoptA alice@h";
const KEY_B: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADadoptB bob@h";

fn sops() -> MapSecrets {
    MapSecrets::from_pairs(&[
        ("cloud-init.ssh-keys.alice", KEY_A),
        ("cloud-init.ssh-keys.bob", KEY_B),
        ("cloud-init.passwords.root", "a-long-password"),
    ])
}

fn entry(vmid: u32, status: &str, template: bool, tags: &str) -> Value {
    json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": "pve01",
        "status": status, "template": u8::from(template), "name": "x", "tags": tags})
}

/// A pending change: key, pending value (`None`: a pending delete).
type Pending<'a> = &'a [(&'a str, Option<&'a str>)];

/// `/pending` rows for `config` with `pending` laid over it, as PVE prints them.
fn pending_rows(config: &Value, pending: Pending<'_>) -> Value {
    let mut rows = Vec::new();
    for (k, v) in config.as_object().unwrap() {
        let mut row = json!({"key": k, "value": v});
        if let Some((_, p)) = pending.iter().find(|(pk, _)| pk == k) {
            match p {
                Some(p) => row["pending"] = json!(p),
                None => row["delete"] = json!(1),
            }
        }
        rows.push(row);
    }
    for (k, p) in pending {
        if config.get(*k).is_none()
            && let Some(p) = p
        {
            rows.push(json!({"key": k, "pending": p}));
        }
    }
    Value::Array(rows)
}

/// The observation answering every read `observe` asks for.
fn observation(
    desired: Option<&crate::Desired>,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
) -> Observation {
    let reads = crate::observe(desired, Some(entry))
        .into_iter()
        .map(|call| {
            let body = if call.path == crate::plan::PCI_MAPPINGS {
                // Every mapping the config names exists on the guest's node.
                let node = entry["node"].as_str().unwrap();
                let ids = config.as_object().unwrap().iter().filter_map(|(k, v)| {
                    let v = v.as_str()?;
                    let m = v.split(',').find_map(|p| p.strip_prefix("mapping="))?;
                    k.starts_with("hostpci").then(|| m.to_string())
                });
                Value::Array(
                    ids.map(
                        |id| json!({"id": id, "map": [format!("node={node},path=0000:01:00.0")]}),
                    )
                    .collect(),
                )
            } else if call.path.ends_with("/pending") {
                pending_rows(config, pending)
            } else {
                assert!(pending.is_empty(), "a stopped guest has no pending changes");
                config.clone()
            };
            Read {
                call,
                status: 200,
                body: body.to_string(),
            }
        })
        .collect();
    Observation {
        live: Some(entry.to_string()),
        reads,
    }
}

fn adopt_with(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> Result<Adopted, String> {
    let obs = observation(None, entry, config, pending);
    match flavour {
        Flavour::Vm => <Vm as ResourceKind>::adopt(&obs, secrets),
        Flavour::Template => <TemplateVm as ResourceKind>::adopt(&obs, secrets),
    }
}

fn with_marks(tags: Option<&str>, vmid: u32) -> String {
    let marks = format!("proxops;proxops-{vmid}");
    match tags {
        Some(t) if !t.is_empty() => format!("{t};{marks}"),
        _ => marks,
    }
}

/// Adopt, validate, plan against the live state with the ownership marks added; the plan.
fn round_trip(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> (Adopted, Proposal) {
    let a = adopt_with(flavour, entry, config, pending, secrets).expect("adopt succeeds");
    let d = crate::validate(flavour, &a.manifest, secrets)
        .unwrap_or_else(|e| {
            panic!(
                "adopted manifest does not validate: {e:?}\n{:#}",
                a.manifest
            )
        })
        .desired;
    let vmid = entry["vmid"].as_u64().unwrap() as u32;
    let mut live = entry.clone();
    live["tags"] = json!(with_marks(entry["tags"].as_str(), vmid));
    let mut cfg = config.clone();
    cfg["tags"] = json!(with_marks(config.get("tags").and_then(Value::as_str), vmid));
    let obs = observation(Some(&d), &live, &cfg, pending);
    let p = crate::plan(flavour, Some(&d), &[], secrets, &obs).expect("plan succeeds");
    (a, p)
}

/// Round trip that must be clean: no action, no drift; every anomaly comes with gaps.
fn clean(
    flavour: Flavour,
    entry: &Value,
    config: &Value,
    pending: Pending<'_>,
    secrets: &dyn Secrets,
) -> (Adopted, Proposal) {
    let (a, p) = round_trip(flavour, entry, config, pending, secrets);
    assert!(
        p.actions.is_empty() && p.drift.is_empty(),
        "round trip is not clean:\nmanifest {:#}\nactions {:#?}\ndrift {:#?}",
        a.manifest,
        p.actions,
        p.drift
    );
    assert!(
        p.anomalies.is_empty() || !a.gaps.is_empty(),
        "anomalies without a gap: {:#?}",
        p.anomalies
    );
    (a, p)
}

fn gap_paths(a: &Adopted) -> Vec<String> {
    a.gaps.iter().map(|g| g.path.clone()).collect()
}

fn anomaly_paths(p: &Proposal) -> Vec<String> {
    p.anomalies.iter().map(|a| a.path.clone()).collect()
}

/// A realistic VM as PVE 9.2 prints its config.
fn web() -> Value {
    json!({
        "boot": "order=scsi0;net0", "cores": 2, "cpu": "host", "digest": "d1", "memory": "2048",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "scsihw": "virtio-scsi-single", "ostype": "l26",
        "smbios1": "uuid=5d5b0f4e-0000-4000-8000-000000000001", "vmgenid": "00000000-0000-4000-8000-000000000002"
    })
}

fn with(mut base: Value, patch: Value) -> Value {
    for (k, v) in patch.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

#[test]
fn a_plain_vm_adopts_to_this_manifest() {
    let (a, p) = clean(
        Flavour::Vm,
        &entry(100, "running", false, "prod;web"),
        &with(
            web(),
            json!({"tags": "prod;web", "balloon": 1024, "description": "the web server\n"}),
        ),
        &[],
        &sops(),
    );
    assert_eq!(
        a.manifest,
        json!({
            "apiVersion": "proxops/v1alpha1", "kind": "VM", "metadata": {"name": "web-01"},
            "spec": {
                "node": "pve01", "vmid": 100, "state": "started", "pve-name": "web-01",
                "pve-description": "the web server\n", "tags": ["prod", "web"],
                "memory": "2048MiB", "cpu": {"type": "host", "cores": 2},
                "disks": [{"interface": "scsi0", "storage": "local-lvm", "size": "32GiB", "controller": "virtio-scsi-single"}],
                "networks": [{"slot": 0, "model": "virtio", "bridge": "vmbr0", "mac": "BC:24:11:5E:0A:1F"}],
                "options": {"boot-order": ["scsi0", "net0"]},
                "extra": {"balloon": "1024", "ostype": "l26"}
            }
        })
    );
    assert_eq!(gap_paths(&a), ["smbios1", "vmgenid"]);
    assert!(p.anomalies.is_empty());
}

#[test]
fn ssh_keys_become_refs_only_when_every_line_is_in_sops() {
    let cfg = |keys: &str| with(web(), json!({"sshkeys": crate::cloudinit::urlencode(keys)}));
    let refs = |a: &Adopted| a.manifest["spec"]["cloud-init-data"].clone();
    let e = entry(100, "stopped", false, "");
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("{KEY_B}\n{KEY_A}\n")),
        &[],
        &sops(),
    );
    assert_eq!(
        refs(&a),
        json!({"ssh-key-refs": ["cloud-init.ssh-keys.bob", "cloud-init.ssh-keys.alice"]})
    );
    // Extra whitespace and a duplicate line still match (PVE's key set is what counts).
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("  {KEY_A}  \n\n{KEY_A}")),
        &[],
        &sops(),
    );
    assert_eq!(
        refs(&a),
        json!({"ssh-key-refs": ["cloud-init.ssh-keys.alice"]})
    );
    // One unmatched line: the sentinel, and a gap that says why.
    let (a, _) = clean(
        Flavour::Vm,
        &e,
        &cfg(&format!("{KEY_A}\nssh-ed25519 AAAAother x@y")),
        &[],
        &sops(),
    );
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
    let g = a.gaps.iter().find(|g| g.path == "sshkeys").unwrap();
    assert!(g.reason.contains("1 of 2"), "{}", g.reason);
    // No access to secrets: the sentinel.
    let (a, _) = clean(Flavour::Vm, &e, &cfg(KEY_A), &[], &NoSecrets);
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
    // A SOPS entry nested deeper than `cloud-init.ssh-keys.<name>` is no valid ref.
    let nested = MapSecrets::from_pairs(&[("cloud-init.ssh-keys.team.alice", KEY_A)]);
    let (a, _) = clean(Flavour::Vm, &e, &cfg(KEY_A), &[], &nested);
    assert_eq!(refs(&a), json!({"ssh-keys": ["*"]}));
}

#[test]
fn names_are_dns_labels() {
    for (pve, want) in [
        (Some("web-01"), "web-01"),
        (Some("Web_01.Example.ORG"), "web-01-example-org"),
        (Some("--db  server--"), "db-server"),
        (Some("___"), "vm-7"),
        (None, "vm-7"),
        (Some(&*"a".repeat(70)), &*"a".repeat(63)),
        (Some(&*format!("{}-b", "a".repeat(62))), &*"a".repeat(62)),
    ] {
        let got = metadata_name(pve, 7);
        assert_eq!(got, want, "{pve:?}");
        assert!(proxops_kind_sdk::manifest::dns_label_problem(&got).is_none());
    }
}

#[test]
fn a_nameless_vm_gets_a_name_written() {
    // The one shape whose first plan writes: PVE has no name, the manifest must have one.
    // PVE's listing names such a guest `VM <vmid>` (qemu-server `vmstatus`).
    for listed in [json!(null), json!("VM 100")] {
        let (a, p) = round_trip(
            Flavour::Vm,
            &with(entry(100, "stopped", false, ""), json!({ "name": listed })),
            &with(web(), json!({"name": null})),
            &[],
            &sops(),
        );
        assert_eq!(a.manifest["metadata"]["name"], json!("vm-100"), "{listed}");
        assert!(gap_paths(&a).contains(&"name".to_string()), "{listed}");
        assert_eq!(p.actions.len(), 1, "{listed}");
        assert_eq!(p.drift.len(), 1, "{listed}");
        assert_eq!(p.drift[0].path, "spec.pve-name", "{listed}");
    }
}

#[test]
fn a_clone_keeps_no_foreign_ownership_mark() {
    // PVE copies tags on clone: a clone of a proxops template carries `proxops-9000`. The
    // manifest drops it (a gap says so), so the first plan rewrites the tags without it.
    let cfg = with(web(), json!({"tags": "proxops;proxops-9000;web"}));
    let (a, p) = round_trip(
        Flavour::Vm,
        &entry(100, "stopped", false, "proxops;proxops-9000;web"),
        &cfg,
        &[],
        &sops(),
    );
    assert_eq!(a.manifest["spec"]["tags"], json!(["web"]));
    assert_eq!(gap_paths(&a), ["smbios1", "tags", "vmgenid"]);
    assert_eq!(p.actions.len(), 1);
    assert_eq!(
        p.actions[0].calls[0].get("tags"),
        Some("proxops;proxops-100;web")
    );
    assert_eq!(p.drift.len(), 1);
}

#[test]
fn observe_without_a_manifest_reads_what_adopt_needs() {
    let paths = |status| {
        crate::observe(None, Some(&entry(100, status, false, "")))
            .iter()
            .map(crate::plan_tests::call_line)
            .collect::<Vec<_>>()
    };
    // A running guest: /pending (applied values, pending changes, digest, protection).
    assert_eq!(paths("running"), ["Get /nodes/pve01/qemu/100/pending []"]);
    // A stopped one has nothing pending: the applied config.
    assert_eq!(
        paths("stopped"),
        ["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
}

#[test]
fn wrong_kind_or_shape_is_an_error_naming_the_way_out() {
    let e = entry(100, "stopped", false, "");
    let t = entry(9000, "stopped", true, "");
    let err = |f, e: &Value, c: &Value| adopt_with(f, e, c, &[], &sops()).unwrap_err();
    assert!(err(Flavour::Vm, &t, &web()).contains("the TemplateVM kind adopts it"));
    assert!(err(Flavour::Template, &e, &web()).contains("the VM kind adopts it"));
    let lxc = with(e.clone(), json!({"type": "lxc", "id": "lxc/100"}));
    assert!(err(Flavour::Vm, &lxc, &web()).contains("not qemu"));
    assert!(
        err(Flavour::Vm, &e, &with(web(), json!({"net0": null}))).contains("no network interface")
    );
    assert!(
        err(
            Flavour::Vm,
            &e,
            &with(web(), json!({"net0": "virtio=BC:24:11:00:00:01"}))
        )
        .contains("on no bridge")
    );
    assert!(err(Flavour::Vm, &e, &with(web(), json!({"scsi0": null}))).contains("no disk"));
    assert!(err(Flavour::Vm, &e, &with(web(), json!({"memory": "8"}))).contains("memory"));
    let only_nic_going = observation(
        None,
        &entry(100, "running", false, ""),
        &web(),
        &[("net0", None)],
    );
    assert!(
        <Vm as ResourceKind>::adopt(&only_nic_going, &sops())
            .unwrap_err()
            .contains("no network interface")
    );
    let no_reads = Observation {
        live: Some(e.to_string()),
        reads: vec![],
    };
    assert!(
        <Vm as ResourceKind>::adopt(&no_reads, &sops())
            .unwrap_err()
            .contains("no config read")
    );
}

/// A VM in a pool: the manifest leaves spec.pool out (it names a Pool manifest) and says so in
/// a gap; its plan is clean, and with spec.pool added it stays clean.
#[test]
fn a_vm_in_a_pool_gets_a_gap_for_spec_pool() {
    let mut e = entry(100, "stopped", false, "");
    e["pool"] = json!("web");
    let (a, p) = clean(Flavour::Vm, &e, &web(), &[], &sops());
    assert!(a.manifest["spec"].get("pool").is_none(), "{:#}", a.manifest);
    let gap = a
        .gaps
        .iter()
        .find(|g| g.path == "spec.pool")
        .expect("a spec.pool gap");
    assert!(gap.reason.contains("is in pool web"), "{}", gap.reason);
    assert!(p.anomalies.is_empty(), "{:#?}", p.anomalies);
    let mut m = a.manifest.clone();
    m["spec"]["pool"] = json!("web");
    let d = crate::validate(Flavour::Vm, &m, &sops()).unwrap().desired;
    // As the first apply left it: the ownership tags added.
    let mut live = e.clone();
    live["tags"] = json!(with_marks(None, 100));
    let cfg = with(web(), json!({"tags": with_marks(None, 100)}));
    let obs = observation(Some(&d), &live, &cfg, &[]);
    let resolved = [(
        crate::Reference {
            kind: "Pool".into(),
            name: "web".into(),
            path: "spec.pool".into(),
        },
        json!({"pool": "web"}).to_string(),
    )];
    let p = crate::plan(Flavour::Vm, Some(&d), &resolved, &sops(), &obs).unwrap();
    assert!(p.actions.is_empty() && p.anomalies.is_empty(), "{p:#?}");
}
