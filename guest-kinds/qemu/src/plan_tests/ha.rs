//! Planning cases: the HA resource (`spec.ha`), a guest HA moved to another node, and migration (`spec.placement`).

use super::*;

const MARK: &str = "managed by proxops (proxops-100)";

/// The listing entry of VM 100 on `node`, with `hastate` and the host's `ha` entry when given.
fn ha_entry(status: &str, node: &str, hastate: Option<&str>, ha: Option<Value>) -> Value {
    let mut e = entry(status, false);
    e["node"] = json!(node);
    if let Some(s) = hastate {
        e["hastate"] = json!(s);
    }
    if let Some(h) = ha {
        e["ha"] = h;
    }
    e
}

/// The host's `ha` entry of vm:100 with `comment` and the options given (PVE leaves out the
/// ones it was not given).
fn ha(comment: &str, options: Value) -> Value {
    let mut h = json!({"sid": "vm:100", "type": "vm", "comment": comment, "digest": "h1"});
    for (k, v) in options.as_object().unwrap() {
        h[k] = v.clone();
    }
    h
}

#[test]
fn an_ha_resource_is_created_with_the_mark() {
    // An existing VM.
    check(
        Case {
            patches: &[("spec/ha", json!({}))],
            ..Case::default()
        },
        &[
            "Step(\"ha\"): make VM 100 an HA resource (vm:100, state stopped)",
            "  Post /cluster/ha/resources sid=vm:100 state=stopped max_restart=1 max_relocate=1 failback=1 comment=managed by proxops (proxops-100)",
            "drift spec.ha: - -> vm:100 (state stopped)",
        ],
    );
    // A new VM: created (and started) first, then the HA resource in the same proposal.
    let p = run(Case {
        live: None,
        patches: &[
            ("spec/state", json!("started")),
            ("spec/ha", json!({"max-restart": 2, "failback": false})),
        ],
        ..Case::default()
    });
    let lines = render(&p);
    assert_eq!(
        lines[0],
        "Create: create VM 100 (web-01) on pve01 and start it"
    );
    assert!(lines[1].ends_with("start=1"), "{}", lines[1]);
    assert_eq!(
        lines[2..],
        [
            "Step(\"ha\"): make VM 100 an HA resource (vm:100, state started)",
            "  Post /cluster/ha/resources sid=vm:100 state=started max_restart=2 max_relocate=1 failback=0 comment=managed by proxops (proxops-100)",
            "drift : - -> VM 100 on pve01",
            "drift spec.ha: - -> vm:100 (state started)",
        ]
    );
    // A clone gets its HA resource when the next pass configures it, not with the clone.
    let p = run(Case {
        live: None,
        patches: &[
            ("spec/clone", json!("golden")),
            ("spec/disks", Value::Null),
            ("spec/ha", json!({})),
        ],
        ..Case::default()
    });
    assert_eq!(p.actions.len(), 1);
    assert_eq!(p.actions[0].operation, Operation::Create);
}

#[test]
fn a_marked_ha_resource_is_updated_with_its_digest() {
    let live =
        |options: Value| ha_entry("stopped", "pve01", Some("stopped"), Some(ha(MARK, options)));
    // Numbers as strings or numbers, absent options as PVE's defaults: no drift.
    for options in [
        json!({"state": "stopped"}),
        json!({"state": "stopped", "max_restart": "1", "max_relocate": 1, "failback": 1}),
    ] {
        check(
            Case {
                live: Some(live(options)),
                patches: &[("spec/ha", json!({}))],
                ..Case::default()
            },
            &[],
        );
    }
    check(
        Case {
            live: Some(live(json!({"state": "stopped", "max_restart": "2"}))),
            patches: &[("spec/ha", json!({"max-restart": 3, "failback": false}))],
            ..Case::default()
        },
        &[
            "Step(\"ha\"): update HA resource vm:100: max_restart, failback",
            "  Put /cluster/ha/resources/vm:100 digest=h1 max_restart=3 failback=0",
            "drift spec.ha.max-restart: 2 -> 3",
            "drift spec.ha.failback: - -> 0",
        ],
    );
    // `enabled` is PVE's alias of `started`; `disabled` needs a stopped VM.
    check(
        Case {
            live: Some(live(json!({"state": "enabled"}))),
            patches: &[("spec/ha", json!({"state": "disabled"}))],
            ..Case::default()
        },
        &[
            "Step(\"ha\"): update HA resource vm:100: state",
            "  Put /cluster/ha/resources/vm:100 digest=h1 state=disabled",
            "drift spec.ha.state: enabled -> disabled",
        ],
    );
}

/// PVE routes the power request of an HA-managed guest through HA, which rewrites the
/// resources config: an HA write after it in the same proposal carries no digest.
#[test]
fn an_ha_write_after_a_power_action_carries_no_digest() {
    check(
        Case {
            live: Some(ha_entry(
                "running",
                "pve01",
                Some("started"),
                Some(ha(MARK, json!({"state": "started"}))),
            )),
            pending: Some(json!([])),
            patches: &[("spec/ha", json!({"state": "disabled"}))],
            ..Case::default()
        },
        &[
            "Power [stop]: shut down VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "Step(\"ha\"): update HA resource vm:100: state",
            "  Put /cluster/ha/resources/vm:100 state=disabled",
            "drift spec.state: running -> stopped",
            "drift spec.ha.state: started -> disabled",
        ],
    );
}

#[test]
fn an_ha_resource_proxops_did_not_create_is_never_written() {
    let live = |comment: &str| {
        ha_entry(
            "stopped",
            "pve01",
            Some("stopped"),
            Some(ha(comment, json!({"state": "stopped", "max_restart": 2}))),
        )
    };
    for comment in ["", "team db", "managed by proxops (proxops-1000)"] {
        // Differs: an anomaly, nothing sent.
        check(
            Case {
                live: Some(live(comment)),
                patches: &[("spec/ha", json!({}))],
                ..Case::default()
            },
            &["anomaly spec.ha"],
        );
        // Identical (e.g. just adopted): nothing to do.
        check(
            Case {
                live: Some(live(comment)),
                patches: &[("spec/ha", json!({"max-restart": 2}))],
                ..Case::default()
            },
            &[],
        );
        // Not declared: HA membership is not managed.
        check(
            Case {
                live: Some(live(comment)),
                ..Case::default()
            },
            &[],
        );
    }
    let p = run(Case {
        live: Some(live("team db")),
        patches: &[("spec/ha", json!({}))],
        ..Case::default()
    });
    assert_eq!(
        p.anomalies[0].message,
        "HA resource vm:100 was not created by proxops (its comment lacks `proxops-100`) and differs from spec.ha (max_restart); not changing it. Make spec.ha match it (`proxops adopt` writes it), or hand it to proxops by adding `proxops-100` to its comment (`ha-manager set vm:100 --comment 'managed by proxops (proxops-100)'`)"
    );
    // HA state without the host's `ha` entry: nothing written for spec.ha.
    check(
        Case {
            live: Some(ha_entry("stopped", "pve01", Some("stopped"), None)),
            patches: &[("spec/ha", json!({}))],
            ..Case::default()
        },
        &["anomaly spec.ha"],
    );
}

#[test]
fn a_marked_ha_resource_without_spec_ha_is_removed() {
    check(
        Case {
            live: Some(ha_entry(
                "stopped",
                "pve01",
                Some("stopped"),
                Some(ha(MARK, json!({"state": "stopped"}))),
            )),
            ..Case::default()
        },
        &[
            "Step(\"ha\"): remove HA resource vm:100 (spec.ha is gone; VM 100 stays as it is)",
            "  Delete /cluster/ha/resources/vm:100 purge=0",
            "drift spec.ha: vm:100 -> -",
        ],
    );
}

#[test]
fn a_guest_ha_moved_is_planned_on_its_live_node() {
    let moved = |status: &str| {
        ha_entry(
            status,
            "pve02",
            Some("started"),
            Some(ha(MARK, json!({"state": "started"}))),
        )
    };
    check(
        Case {
            live: Some(moved("running")),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/ha", json!({})),
                ("spec/memory", json!("4GiB")),
                ("spec/hardware/machine", json!("q35")),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve02 with a restart (shut down, write, start; started again if the write fails): memory, machine",
            "  Post /nodes/pve02/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve02/qemu/100/config digest=d1 memory=4096 machine=q35",
            "  Post /nodes/pve02/qemu/100/status/start",
            "drift spec.memory: 2048 -> 4096",
            "drift spec.hardware.machine: - -> q35",
        ],
    );
    check(
        Case {
            live: Some(moved("stopped")),
            patches: &[("spec/state", json!("started")), ("spec/ha", json!({}))],
            ..Case::default()
        },
        &[
            "Power: start VM 100 on pve02",
            "  Post /nodes/pve02/qemu/100/status/start",
            "drift spec.state: stopped -> started",
        ],
    );
    // Converged where HA put it: nothing, and observe reads only the config, on pve02.
    check(
        Case {
            live: Some(moved("running")),
            pending: Some(json!([])),
            patches: &[("spec/state", json!("started")), ("spec/ha", json!({}))],
            ..Case::default()
        },
        &[],
    );
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let reads: Vec<String> = crate::observe(Some(&d), Some(&moved("running")))
        .iter()
        .map(call_line)
        .collect();
    assert_eq!(reads, ["Get /nodes/pve02/qemu/100/pending []"]);
    // A guest HA is busy with: nothing until HA is done.
    for state in ["migrate", "relocate", "fence", "recovery"] {
        let mut e = moved("running");
        e["hastate"] = json!(state);
        check(
            Case {
                live: Some(e),
                pending: Some(json!([])),
                patches: &[("spec/memory", json!("4GiB"))],
                ..Case::default()
            },
            &["anomaly "],
        );
    }
}

#[test]
fn an_ha_resource_in_error_takes_only_disabled() {
    let e = ha_entry(
        "stopped",
        "pve01",
        Some("error"),
        Some(ha(MARK, json!({"state": "started"}))),
    );
    check(
        Case {
            live: Some(e.clone()),
            patches: &[("spec/ha", json!({"state": "stopped"}))],
            ..Case::default()
        },
        &["anomaly spec.ha"],
    );
    check(
        Case {
            live: Some(e),
            patches: &[("spec/ha", json!({"state": "disabled"}))],
            ..Case::default()
        },
        &[
            "Step(\"ha\"): update HA resource vm:100: state",
            "  Put /cluster/ha/resources/vm:100 digest=h1 state=disabled",
            "drift spec.ha.state: started -> disabled",
            "anomaly spec.ha",
        ],
    );
}

#[test]
fn a_guest_without_ha_elsewhere_is_an_anomaly_saying_how_to_move_it() {
    let p = run(Case {
        live: Some(ha_entry("stopped", "pve02", None, None)),
        ..Case::default()
    });
    assert!(p.actions.is_empty() && p.drift.is_empty());
    assert_eq!(
        p.anomalies[0].message,
        "VM 100 lives on node pve02, the manifest says pve01; with spec.placement: fixed proxops does not move it. Set spec.placement: migrate to let proxops migrate it to pve01, or set spec.node: pve02 to keep it where it is"
    );
    // An `ignored` HA resource is not HA-managed: HA did not put it there.
    let ignored = ha_entry(
        "stopped",
        "pve02",
        Some("ignored"),
        Some(ha(MARK, json!({"state": "ignored"}))),
    );
    check(
        Case {
            live: Some(ignored),
            ..Case::default()
        },
        &["anomaly spec.node"],
    );
}

/// PVE's precondition answer for VM 100 on pve02 with a local disk.
fn precondition(running: bool) -> Value {
    json!({
        "running": u8::from(running), "allowed_nodes": ["pve01", "pve03"], "not_allowed_nodes": {},
        "local_disks": [{"volid": "local-lvm:vm-100-disk-0", "cdrom": 0, "is_unused": 0,
            "is_cloudinit": 0, "size": 34359738368u64, "drivename": "scsi0"}],
        "local_resources": [], "mapped-resources": [], "mapped-resource-info": {},
        "has-dbus-vmstate": 1
    })
}

fn migrate_case(
    status: &str,
    precondition: Option<(u16, Value)>,
    patches: &[(&str, Value)],
) -> Vec<String> {
    let mut all = vec![("spec/placement", json!("migrate"))];
    all.extend(patches.iter().cloned());
    render(&run(Case {
        live: Some(ha_entry(status, "pve02", None, None)),
        pending: (status == "running").then(|| json!([])),
        precondition,
        patches: &all,
        ..Case::default()
    }))
}

#[test]
fn placement_migrate_plans_one_migration() {
    assert_eq!(
        migrate_case(
            "running",
            Some((200, precondition(true))),
            &[
                ("spec/state", json!("started")),
                ("spec/memory", json!("4GiB"))
            ]
        ),
        [
            "Step(\"migrate\"): migrate VM 100 from pve02 to pve01 (online, with its local disks)",
            "  Post /nodes/pve02/qemu/100/migrate target=pve01 online=1 with-local-disks=1",
            "drift spec.node: pve02 -> pve01",
        ]
    );
    // Running on shared storage only: online, no local disks.
    let mut shared = precondition(true);
    shared["local_disks"] = json!([]);
    assert_eq!(
        migrate_case(
            "running",
            Some((200, shared)),
            &[("spec/state", json!("started"))]
        )[..2],
        [
            "Step(\"migrate\"): migrate VM 100 from pve02 to pve01 (online)",
            "  Post /nodes/pve02/qemu/100/migrate target=pve01 online=1",
        ]
    );
    // Stopped: offline; PVE copies its local disks without asking.
    assert_eq!(
        migrate_case("stopped", Some((200, precondition(false))), &[])[..2],
        [
            "Step(\"migrate\"): migrate VM 100 from pve02 to pve01 (offline)",
            "  Post /nodes/pve02/qemu/100/migrate target=pve01",
        ]
    );
    // observe asks for the precondition only then.
    let mut doc = base();
    patch(&mut doc, "spec/placement", json!("migrate"));
    let d = crate::validate(Flavour::Vm, &doc, &secrets())
        .unwrap()
        .desired;
    let reads = |node: &str| {
        crate::observe(Some(&d), Some(&ha_entry("stopped", node, None, None)))
            .iter()
            .map(call_line)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        reads("pve02"),
        [
            "Get /nodes/pve02/qemu/100/config [(\"current\", \"1\", false)]",
            "Get /nodes/pve02/qemu/100/migrate [(\"target\", \"pve01\", false)]",
        ]
    );
    assert_eq!(
        reads("pve01"),
        ["Get /nodes/pve01/qemu/100/config [(\"current\", \"1\", false)]"]
    );
    let text = crate::observe_text(
        Some(&serde_json::to_string(&d).unwrap()),
        Some(&ha_entry("stopped", "pve02", None, None).to_string()),
    );
    assert_eq!(text.len(), 2);
}

#[test]
fn what_pve_would_refuse_is_an_anomaly_and_nothing_is_sent() {
    let refused = |p: Value, status: &str| {
        let lines = migrate_case(status, Some((200, p)), &[]);
        assert_eq!(
            lines,
            ["drift spec.node: pve02 -> pve01", "anomaly spec.node"]
        );
    };
    let message = |p: Option<(u16, Value)>, status: &str| {
        let mut all = vec![("spec/placement", json!("migrate"))];
        if status == "running" {
            all.push(("spec/state", json!("started")));
        }
        let prop = run(Case {
            live: Some(ha_entry(status, "pve02", None, None)),
            pending: (status == "running").then(|| json!([])),
            precondition: p,
            patches: &all,
            ..Case::default()
        });
        assert!(prop.actions.is_empty());
        prop.anomalies[0].message.clone()
    };
    let with = |patch: Value| {
        let mut p = precondition(false);
        for (k, v) in patch.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let storages = with(json!({"allowed_nodes": ["pve03"],
        "not_allowed_nodes": {"pve01": {"unavailable_storages": ["local-zfs"]}}}));
    refused(storages.clone(), "stopped");
    assert_eq!(
        message(Some((200, storages)), "stopped"),
        "VM 100 on pve02 cannot be migrated to pve01: PVE does not allow node pve01: storage local-zfs is not available on pve01; nothing is sent"
    );
    let cdrom = with(
        json!({"local_disks": [{"volid": "local:iso/debian-13.iso", "cdrom": 1, "is_unused": 0, "size": 1}]}),
    );
    refused(cdrom.clone(), "stopped");
    assert_eq!(
        message(Some((200, cdrom)), "stopped"),
        "VM 100 on pve02 cannot be migrated to pve01: its CD/DVD drive holds local:iso/debian-13.iso, an image on a local storage, which PVE refuses to migrate; set spec.hardware.cdrom.iso: none (or use an ISO on shared storage); nothing is sent"
    );
    // A local cloud-init drive is no CD/DVD image: it moves.
    let ci = with(
        json!({"local_disks": [{"volid": "local-lvm:vm-100-cloudinit", "cdrom": 1, "is_cloudinit": 1, "is_unused": 0, "size": 4}]}),
    );
    assert_eq!(migrate_case("stopped", Some((200, ci)), &[]).len(), 3);
    let devices = with(json!({"local_resources": ["hostpci0"]}));
    refused(devices.clone(), "stopped");
    assert_eq!(
        message(Some((200, devices)), "stopped"),
        "VM 100 on pve02 cannot be migrated to pve01: it uses local devices (hostpci0), which tie it to its node; PVE refuses to migrate it (use PCI resource mappings present on both nodes); nothing is sent"
    );
    let mut mapped = precondition(true);
    mapped["mapped-resources"] = json!(["hostpci0"]);
    mapped["mapped-resource-info"] = json!({"hostpci0": {"name": "gpu0"}});
    assert!(
        message(Some((200, mapped)), "running")
            .contains("it runs with mapped devices (hostpci0) that cannot migrate live")
    );
    let unknown = with(json!({"allowed_nodes": ["pve03"]}));
    refused(unknown, "stopped");
    // A failed or missing precondition read: fail closed with its message.
    assert_eq!(
        message(Some((500, json!("VM is locked (backup)"))), "stopped"),
        "VM 100 on pve02 cannot be migrated to pve01: PVE's precondition check (GET /nodes/pve02/qemu/100/migrate) failed with HTTP 500: \"VM is locked (backup)\"; nothing is sent"
    );
    assert!(message(None, "stopped").contains("is not in the observation"));
}

#[test]
fn placement_migrate_brings_an_ha_guest_home_through_ha() {
    let moved = |status: &str| {
        ha_entry(
            status,
            "pve02",
            Some("started"),
            Some(ha(MARK, json!({"state": "started"}))),
        )
    };
    let mut shared = precondition(true);
    shared["local_disks"] = json!([]);
    check(
        Case {
            live: Some(moved("running")),
            pending: Some(json!([])),
            precondition: Some((200, shared)),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/placement", json!("migrate")),
                ("spec/ha", json!({})),
            ],
            ..Case::default()
        },
        &[
            "Step(\"migrate\"): migrate VM 100 from pve02 to pve01 (through HA)",
            "  Post /cluster/ha/resources/vm:100/migrate node=pve01",
            "drift spec.node: pve02 -> pve01",
        ],
    );
    // HA migrates a running guest online without moving its local disks: refused.
    let p = run(Case {
        live: Some(moved("running")),
        pending: Some(json!([])),
        precondition: Some((200, precondition(true))),
        patches: &[
            ("spec/state", json!("started")),
            ("spec/placement", json!("migrate")),
            ("spec/ha", json!({})),
        ],
        ..Case::default()
    });
    assert!(p.actions.is_empty());
    assert!(
        p.anomalies[0].message.contains(
            "HA migrates a running VM online without moving local disks (local-lvm:vm-100-disk-0)"
        ),
        "{}",
        p.anomalies[0].message
    );
}

/// A clone's HA resource comes in the action that writes its own configuration (and starts
/// it): HA must not start it with the template's identity should that write fail.
#[test]
fn a_clone_gets_its_ha_resource_with_its_configuring_write() {
    let mut patches = super::create::clone_patches(&[("spec/state", json!("started"))]);
    patches.push(("spec/ha", json!({})));
    let p = run(Case {
        whole_config: Some(super::create::fresh_clone()),
        patches: &patches,
        ..Case::default()
    });
    assert_eq!(p.actions.len(), 1, "{:#?}", p.actions);
    let calls: Vec<&str> = p.actions[0].calls.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        calls,
        [
            "/nodes/pve01/qemu/100/config",
            "/nodes/pve01/qemu/100/status/start",
            "/cluster/ha/resources",
        ]
    );
    assert!(
        p.actions[0]
            .summary
            .ends_with(", then start it, then make VM 100 an HA resource (vm:100, state started)"),
        "{}",
        p.actions[0].summary
    );
}
