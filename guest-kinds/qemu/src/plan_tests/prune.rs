//! Planning cases: prune, a failed read, the observation reads, claims and identity.

use super::*;

#[test]
fn prune() {
    check(
        Case {
            manifest: false,
            live: Some(entry("running", false)),
            ..Case::default()
        },
        &[
            "Delete [stop] [destructive]: delete VM 100 `web-01` on pve01 (no manifest)",
            "  Post /nodes/pve01/qemu/100/status/stop",
            "  Delete /nodes/pve01/qemu/100 purge=1",
            "drift : VM 100 `web-01` on pve01 -> -",
        ],
    );
    check(
        Case {
            manifest: false,
            config: &[("protection", json!(1))],
            ..Case::default()
        },
        &["anomaly "],
    );
    let mut foreign = entry("stopped", false);
    foreign["tags"] = json!("prod");
    check(
        Case {
            manifest: false,
            live: Some(foreign),
            ..Case::default()
        },
        &["anomaly "],
    );
    check(
        Case {
            manifest: false,
            live: None,
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn failed_read_fails_closed() {
    let desired = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let obs = Observation {
        live: Some(entry("stopped", false).to_string()),
        reads: vec![Read {
            call: Call::new(Method::Get, "/nodes/pve01/qemu/100/config"),
            status: 500,
            body: "{\"message\":\"Configuration file 'nodes/pve01/qemu-server/100.conf' does not exist\\n\"}".into(),
        }],
    };
    let err = crate::plan(Flavour::Vm, Some(&desired), &[], &secrets(), &obs).unwrap_err();
    assert!(
        err[0]
            .message
            .starts_with("reading /nodes/pve01/qemu/100/config failed with HTTP 500"),
        "{}",
        err[0].message
    );
}

#[test]
fn observe_reads() {
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let show = |calls: Vec<Call>| calls.iter().map(call_line).collect::<Vec<_>>();
    assert!(crate::observe(Some(&d), None).is_empty());
    assert_eq!(
        show(crate::observe(Some(&d), Some(&entry("stopped", false)))),
        vec!["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
    let mut running = entry("running", false);
    running["node"] = json!("pve02");
    assert_eq!(
        show(crate::observe(Some(&d), Some(&running))),
        vec!["Get /nodes/pve02/qemu/100/pending []",]
    );
    assert_eq!(crate::observe(None, Some(&running)).len(), 1);
    // A container's entry (adopt asks every guest kind about every guest) reads nothing.
    let mut container = entry("running", false);
    container["type"] = json!("lxc");
    container["id"] = json!("lxc/100");
    assert!(crate::observe(None, Some(&container)).is_empty());
    assert!(crate::observe_text(None, Some(&container.to_string())).is_empty());
}

/// What the host calls (`observe_text`, which reads only the fields it needs) asks for the
/// same reads as `observe` over the full desired state and entry, whatever the texts.
#[test]
fn observe_from_texts_reads_what_observe_reads() {
    let desired = |pci: Option<Value>| {
        let mut doc = base();
        if let Some(pci) = pci {
            patch(&mut doc, "spec/hardware/pci-devices", pci);
        }
        crate::validate(Flavour::Vm, &doc, &secrets())
            .expect("test manifest is valid")
            .desired
    };
    let mapped = desired(Some(json!([{"slot": 0, "mapping": "gpu0"}])));
    let raw = desired(Some(json!([{"slot": 1, "device": "0000:01:00.0"}])));
    let plain = desired(None);
    assert!(mapped.maps_pci() && !raw.maps_pci() && !plain.maps_pci());
    let mut elsewhere = entry("running", false);
    elsewhere["node"] = json!("pve02");
    let storage = json!({"id": "storage/pve01/local", "type": "storage", "node": "pve01"});
    let entries = [
        None,
        Some(entry("stopped", false)),
        Some(entry("stopped", true)),
        Some(elsewhere),
        Some(storage),
        Some(json!("qemu/100")),
    ];
    let show = |calls: Vec<Call>| calls.iter().map(call_line).collect::<Vec<_>>();
    let mut pci_reads = 0;
    for d in [Some(&mapped), Some(&raw), Some(&plain), None] {
        let text = d.map(|d| serde_json::to_string(d).unwrap());
        for e in &entries {
            let expected = show(crate::observe(d, e.as_ref()));
            let got = show(crate::observe_text(
                text.as_deref(),
                e.as_ref().map(|e| e.to_string()).as_deref(),
            ));
            assert_eq!(got, expected, "desired {text:?}, entry {e:?}");
            pci_reads += expected
                .iter()
                .filter(|c| c.contains("mapping/pci"))
                .count();
        }
    }
    assert_eq!(
        pci_reads,
        entries.len(),
        "the mapped desired state reads the mappings"
    );
    // Texts that do not read count as absent.
    assert!(crate::observe_text(Some("{"), Some("not json")).is_empty());
    assert_eq!(
        show(crate::observe_text(
            Some("{"),
            Some(&entry("running", false).to_string())
        )),
        vec!["Get /nodes/pve01/qemu/100/pending []"]
    );
}

#[test]
fn claims_and_identity() {
    for (e, vm, tpl) in [
        (entry("running", false), true, false),
        (entry("stopped", true), false, true),
        (
            json!({"id": "qemu/101", "type": "qemu", "vmid": 101, "node": "pve01", "status": "stopped", "tags": "prod"}),
            false,
            false,
        ),
        (
            json!({"id": "qemu/102", "type": "qemu", "vmid": 102, "node": "pve01", "status": "stopped"}),
            false,
            false,
        ),
        (
            json!({"id": "lxc/103", "type": "lxc", "vmid": 103, "node": "pve01", "status": "stopped", "tags": "proxops"}),
            false,
            false,
        ),
        (
            json!({"id": "qemu/104", "type": "qemu", "vmid": 104, "node": "pve01", "template": 0, "tags": "a;Proxops"}),
            true,
            false,
        ),
    ] {
        assert_eq!(crate::claims(Flavour::Vm, &e), vm, "{e}");
        assert_eq!(crate::claims(Flavour::Template, &e), tpl, "{e}");
        // Through the kind: only entries of `/cluster/resources` are ever claimed.
        assert_eq!(crate::Vm::claims("/cluster/resources", &e), vm, "{e}");
        assert_eq!(
            crate::TemplateVm::claims("/cluster/resources", &e),
            tpl,
            "{e}"
        );
        assert!(!crate::Vm::claims("/pools", &e) && !crate::TemplateVm::claims("/pools", &e));
    }
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let k = crate::identity(&d);
    assert_eq!(
        (
            k.node.as_deref(),
            k.space.as_str(),
            k.key.as_str(),
            k.resource_id.as_deref()
        ),
        (Some("pve01"), "guest-id", "100", Some("qemu/100"))
    );
}

/// A claimed guest locked by a task is not deleted, and the anomaly says it is locked.
#[test]
fn locked_prune_candidate_is_a_locked_anomaly() {
    let mut live = entry("stopped", false);
    live["lock"] = json!("backup");
    let p = run(Case {
        manifest: false,
        live: Some(live),
        ..Case::default()
    });
    assert!(p.actions.is_empty(), "{p:?}");
    assert!(p.anomalies.len() == 1 && p.anomalies[0].locked, "{p:?}");
    assert!(
        p.anomalies[0]
            .message
            .contains("is locked (backup); not deleting it")
    );
}
