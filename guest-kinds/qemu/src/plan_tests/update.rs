//! Planning cases: updates of a live VM: hot and stop-required changes, pending changes, power and kind flips, a running VM read from its pending list.

use super::*;

#[test]
fn hot_changes_on_a_running_vm() {
    // Written; PVE keeps what it cannot hot-plug pending.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/memory", json!("4GiB")),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 memory=4096",
            "drift spec.memory: 2048 -> 4096",
        ],
    );
    // Already pending with the desired value: reported, not written again.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(
                json!([{"key": "memory", "value": "2048", "pending": "4096"}, {"key": "cores", "value": 2}]),
            ),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/memory", json!("4GiB")),
            ],
            ..Case::default()
        },
        &["pending spec.memory: 2048 -> 4096"],
    );
}

/// A PCI resource mapping that does not exist, or has no device on the VM's node: PVE takes
/// the write and refuses the next start, so nothing is written or stopped for it.
#[test]
fn a_mapping_missing_on_the_node_is_neither_written_nor_stopped_for() {
    let gpu = json!([{"slot": 0, "mapping": "gpu0"}]);
    let on = |node: &str| json!([{"id": "gpu0", "map": [format!("node={node},path=0000:01:00.0,id=10de:2204")]}]);
    let stopped_for = [
        "Update [stop]: update VM 100 on pve01 with a restart (shut down, write, start; started again if the write fails): hostpci0",
        "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
        "  Post /nodes/pve01/qemu/100/config digest=d1 hostpci0=mapping=gpu0",
        "  Post /nodes/pve01/qemu/100/status/start",
        "drift spec.hardware.pci-devices[0]: - -> mapping=gpu0",
    ];
    let refused = [
        "drift spec.hardware.pci-devices[0]: - -> mapping=gpu0",
        "anomaly spec.hardware.pci-devices[0]",
    ];
    for (mappings, expected) in [
        (Some(on("pve01")), &stopped_for[..]),
        // Not read (no listing in the observation): written as before.
        (None, &stopped_for[..]),
        (Some(json!([])), &refused[..]),
        (Some(on("pve02")), &refused[..]),
        (Some(json!([{"id": "gpu0"}])), &refused[..]),
    ] {
        check(
            Case {
                live: Some(entry("running", false)),
                pending: Some(json!([])),
                patches: &[
                    ("spec/state", json!("started")),
                    ("spec/hardware/pci-devices", gpu.clone()),
                ],
                mappings: mappings.clone(),
                ..Case::default()
            },
            expected,
        );
    }
    // Nor is a VM created with it.
    check(
        Case {
            live: None,
            patches: &[("spec/hardware/pci-devices", gpu.clone())],
            mappings: Some(on("pve02")),
            ..Case::default()
        },
        &[
            "drift : - -> VM 100 on pve01",
            "anomaly spec.hardware.pci-devices[0]",
        ],
    );
}

/// The mapping is already in the config and missing from the cluster (adopted, or deleted in
/// PVE since): a start is known to fail, so a stopped VM is not started and a running one is
/// not restarted for a stop-required change; hot changes and writes to a stopped VM go on.
#[test]
fn a_missing_mapping_already_written_blocks_the_start_not_the_writes() {
    let gpu = json!([{"slot": 0, "mapping": "gpu0"}]);
    let live_gpu: &[(&str, Value)] = &[("hostpci0", json!("mapping=gpu0"))];
    // Stopped, declared started, memory changed: written, not started.
    check(
        Case {
            patches: &[
                ("spec/state", json!("started")),
                ("spec/hardware/pci-devices", gpu.clone()),
                ("spec/memory", json!("4GiB")),
            ],
            config: live_gpu,
            mappings: Some(json!([])),
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 memory=4096",
            "drift spec.memory: 2048 -> 4096",
            "drift spec.state: stopped -> started",
            "anomaly spec.hardware.pci-devices[0]",
        ],
    );
    // Running, a stop-required change: no restart.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/hardware/pci-devices", gpu.clone()),
                ("spec/hardware/machine", json!("q35")),
            ],
            config: live_gpu,
            mappings: Some(json!([])),
            ..Case::default()
        },
        &[
            "drift spec.hardware.machine: - -> q35",
            "anomaly spec.hardware.pci-devices[0]",
        ],
    );
    // The mapping exists: started as usual.
    check(
        Case {
            patches: &[
                ("spec/state", json!("started")),
                ("spec/hardware/pci-devices", gpu.clone()),
            ],
            config: live_gpu,
            mappings: Some(json!([{"id": "gpu0", "map": ["node=pve01,path=0000:01:00.0"]}])),
            ..Case::default()
        },
        &[
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.state: stopped -> started",
        ],
    );
}

#[test]
fn the_missing_mapping_anomaly_says_what_to_do() {
    let p = run(Case {
        live: Some(entry("running", false)),
        pending: Some(json!([])),
        patches: &[
            ("spec/state", json!("started")),
            (
                "spec/hardware/pci-devices",
                json!([{"slot": 0, "mapping": "gpu0"}]),
            ),
        ],
        mappings: Some(json!([{"id": "gpu0", "map": ["node=pve02,path=0000:01:00.0"]}])),
        ..Case::default()
    });
    assert_eq!(
        p.anomalies[0].message,
        "PCI resource mapping `gpu0` has no device on node pve01 (it maps pve02); PVE would accept the write and then refuse to start the guest (\"PCI device mapping not found\"), so proxops neither writes it nor stops the guest for it. Create the mapping in Datacenter -> Resource Mappings with a device on pve01, or fix the name"
    );
}

#[test]
fn stop_required_changes() {
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("started")),
                ("spec/hardware/machine", json!("q35")),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve01 with a restart (shut down, write, start; started again if the write fails): machine",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve01/qemu/100/config digest=d1 machine=q35",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.hardware.machine: - -> q35",
        ],
    );
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[
                ("spec/state", json!("stopped")),
                ("spec/hardware/bios", json!("ovmf")),
            ],
            ..Case::default()
        },
        &[
            "Power [stop]: shut down VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "Update: update VM 100 on pve01: bios",
            "  Post /nodes/pve01/qemu/100/config digest=d1 bios=ovmf",
            "drift spec.hardware.bios: - -> ovmf",
            "drift spec.state: running -> stopped",
        ],
    );
    // A pending change made behind proxops's back (cores 4, desired 2): the stop applies
    // it, so the digest is not sent and cores is written back after the stop.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "cores", "value": 2, "pending": 4}])),
            patches: &[
                ("spec/state", json!("started")),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "mapping": "gpu0"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Update [stop]: update VM 100 on pve01 with a restart (shut down, write, start; started again if the write fails): hostpci0, cores",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "  Post /nodes/pve01/qemu/100/config hostpci0=mapping=gpu0 cores=2",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.cpu.cores (pending): 4 -> 2",
            "drift spec.hardware.pci-devices[0]: - -> mapping=gpu0",
        ],
    );
    // A raw device: PVE lets only root@pam write it and proxops uses an API token, so the
    // write is known to fail: an anomaly, and nothing is stopped for it (the other pending
    // change is reverted as on any running VM).
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "cores", "value": 2, "pending": 4}])),
            patches: &[
                ("spec/state", json!("started")),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "device": "0000:01:00.0"}]),
                ),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: cores",
            "  Post /nodes/pve01/qemu/100/config digest=d1 revert=cores",
            "drift spec.cpu.cores (pending): 4 -> 2",
            "drift spec.hardware.pci-devices[0]: - -> 0000:01:00.0",
            "anomaly spec.hardware.pci-devices[0]",
        ],
    );
}

#[test]
fn pending_changes_against_desired_are_reverted() {
    // Memory raised behind proxops's back on a running VM: PVE keeps it pending; left alone
    // it would apply at the next reboot, so the pending change is reverted.
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([{"key": "memory", "value": "2048", "pending": "4096"}])),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 revert=memory",
            "drift spec.memory (pending): 4096 -> 2048",
        ],
    );
}

#[test]
fn power_and_kind_flips() {
    check(
        Case {
            live: Some(entry("stopped", false)),
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: Some(entry("stopped", false)),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.state: stopped -> started",
        ],
    );
    // Config first (applied at once on a stopped VM), then the start.
    check(
        Case {
            patches: &[
                ("spec/state", json!("started")),
                ("spec/cpu/cores", json!(4)),
            ],
            ..Case::default()
        },
        &[
            "Update: update VM 100 on pve01: cores",
            "  Post /nodes/pve01/qemu/100/config digest=d1 cores=4",
            "Power: start VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/start",
            "drift spec.cpu.cores: 2 -> 4",
            "drift spec.state: stopped -> started",
        ],
    );
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[("spec/state", json!("stopped"))],
            ..Case::default()
        },
        &[
            "Power [stop]: shut down VM 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "drift spec.state: running -> stopped",
        ],
    );
    check(
        Case {
            flavour: Flavour::Template,
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            ..Case::default()
        },
        &[
            "Power [stop]: shut down template 100 on pve01",
            "  Post /nodes/pve01/qemu/100/status/shutdown forceStop=1 timeout=180",
            "MarkTemplate [stop]: mark VM 100 on pve01 as a template",
            "  Post /nodes/pve01/qemu/100/template",
            "drift spec.state: running -> stopped",
            "drift kind: VM (template=0) -> TemplateVM (template=1)",
        ],
    );
    check(
        Case {
            flavour: Flavour::Template,
            live: Some(entry("stopped", true)),
            ..Case::default()
        },
        &[],
    );
    check(
        Case {
            live: Some(entry("stopped", true)),
            ..Case::default()
        },
        &["anomaly kind"],
    );
    let mut elsewhere = entry("stopped", false);
    elsewhere["node"] = json!("pve02");
    check(
        Case {
            live: Some(elsewhere),
            ..Case::default()
        },
        &["anomaly spec.node"],
    );
}

#[test]
fn a_running_vm_is_planned_from_its_pending_read_alone() {
    // /pending lists every applied key in `value` (and the digest), so a running VM needs no
    // config read: converged stays converged, drift is found and the write carries the digest.
    let d = crate::validate(Flavour::Vm, &base(), &secrets())
        .unwrap()
        .desired;
    let rows = |memory: &str| {
        let mut rows: Vec<Value> = live_config()
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| json!({"key": k, "value": if k == "memory" { json!(memory) } else { v.clone() }}))
            .collect();
        rows.push(json!({"key": "vmgenid", "value": "00000000-0000-4000-8000-000000000002"}));
        Value::Array(rows)
    };
    let plan = |memory: &str| {
        let obs = Observation {
            live: Some(entry("running", false).to_string()),
            reads: vec![Read {
                call: Call::new(Method::Get, "/nodes/pve01/qemu/100/pending"),
                status: 200,
                body: rows(memory).to_string(),
            }],
        };
        render(
            &crate::plan(Flavour::Vm, Some(&d), &resolve_all(&d), &secrets(), &obs)
                .expect("plan succeeds"),
        )
    };
    assert_eq!(plan("2048"), Vec::<String>::new());
    assert_eq!(
        plan("4096"),
        vec![
            "Update: update VM 100 on pve01: memory",
            "  Post /nodes/pve01/qemu/100/config digest=d1 memory=2048",
            "drift spec.memory: 4096 -> 2048",
        ]
    );
}

/// The restart action restores availability: should the shutdown (call 0) or any write after
/// it fail, the host starts the guest again. No other action carries a restore.
#[test]
fn restart_restores_the_guest() {
    let p = run(Case {
        live: Some(entry("running", false)),
        pending: Some(json!([])),
        patches: &[
            ("spec/state", json!("started")),
            ("spec/hardware/machine", json!("q35")),
        ],
        ..Case::default()
    });
    let [a] = &p.actions[..] else {
        panic!("one action: {p:?}")
    };
    let r = a.restore.as_ref().expect("a restore");
    assert_eq!(r.after, 0);
    assert!(a.calls[0].path.ends_with("/status/shutdown"));
    assert_eq!(r.calls, [a.calls.last().unwrap().clone()]);
    assert!(r.calls[0].path.ends_with("/status/start") && a.disturbs_availability);

    // A shut down for `state: stopped` is the change itself: nothing to restore.
    let p = run(Case {
        live: Some(entry("running", false)),
        pending: Some(json!([])),
        patches: &[("spec/state", json!("stopped"))],
        ..Case::default()
    });
    assert!(p.actions[0].operation.is_step("power"));
    assert!(p.actions.iter().all(|a| a.restore.is_none()), "{p:?}");
}

/// A guest locked by a task in flight (a clone being copied) is a locked anomaly, so the host
/// waits for the task; the message is unchanged.
#[test]
fn locked_guest_is_a_locked_anomaly() {
    let mut live = entry("stopped", false);
    live["lock"] = json!("clone");
    let p = run(Case {
        live: Some(live),
        ..Case::default()
    });
    let [a] = &p.anomalies[..] else {
        panic!("one anomaly: {p:?}")
    };
    assert!(a.locked, "{a:?}");
    assert!(
        a.message
            .starts_with("VM 100 on pve01 is locked (clone); not changing it this cycle."),
        "{}",
        a.message
    );
    // Other anomalies are not locks.
    let p = run(Case {
        live: Some(entry("stopped", true)),
        ..Case::default()
    });
    assert!(p.anomalies.iter().all(|a| !a.locked), "{p:?}");
}

/// `spec.extra` numbers are compared by value: PVE reads integers and numbers back in their
/// canonical form, so `0100` against a live `100` is no drift; another value is.
#[test]
fn extra_numbers_compare_by_value() {
    for (want, live, expected) in [
        (json!("0100"), json!(100), vec![]),
        (json!("1.50"), json!("1.5"), vec![]),
        (json!(256), json!("256"), vec![]),
        (
            json!("200"),
            json!(100),
            vec![
                "Update: update VM 100 on pve01: cpuunits",
                "  Post /nodes/pve01/qemu/100/config digest=d1 cpuunits=200",
                "drift spec.extra.cpuunits: 100 -> 200",
            ],
        ),
        (
            json!("0100"),
            json!("0100x"),
            vec![
                "Update: update VM 100 on pve01: cpuunits",
                "  Post /nodes/pve01/qemu/100/config digest=d1 cpuunits=0100",
                "drift spec.extra.cpuunits: 0100x -> 0100",
            ],
        ),
    ] {
        check(
            Case {
                patches: &[("spec/extra/cpuunits", want.clone())],
                config: &[("cpuunits", live.clone())],
                ..Case::default()
            },
            &expected,
        );
    }
}

/// A key only root@pam may set (`hookscript`, `vmgenid`, `parallel0`, …): a write of it is
/// known to fail under proxops's API token, so it is reported, never sent; a live value that
/// matches (an adopted VM) is fine, and other extra keys are written as before.
#[test]
fn extra_keys_only_root_may_set_are_never_written() {
    let uuid = "00000000-0000-4000-8000-000000000002";
    for (key, want, live, expected) in [
        (
            "hookscript",
            "local:snippets/hook.pl",
            None,
            vec![
                "drift spec.extra.hookscript: - -> local:snippets/hook.pl",
                "anomaly spec.extra.hookscript",
            ],
        ),
        (
            "vmgenid",
            uuid,
            Some("00000000-0000-4000-8000-000000000009"),
            vec![
                "drift spec.extra.vmgenid: 00000000-0000-4000-8000-000000000009 -> 00000000-0000-4000-8000-000000000002",
                "anomaly spec.extra.vmgenid",
            ],
        ),
        ("vmgenid", uuid, Some(uuid), vec![]),
        (
            "parallel0",
            "/dev/parport0",
            None,
            vec![
                "drift spec.extra.parallel0: - -> /dev/parport0",
                "anomaly spec.extra.parallel0",
            ],
        ),
        (
            "ostype",
            "win11",
            None,
            vec![
                "Update: update VM 100 on pve01: ostype",
                "  Post /nodes/pve01/qemu/100/config digest=d1 ostype=win11",
                "drift spec.extra.ostype: - -> win11",
            ],
        ),
    ] {
        let config: Vec<(&str, serde_json::Value)> =
            live.map(|l| (key, json!(l))).into_iter().collect();
        check(
            Case {
                patches: &[(&format!("spec/extra/{key}"), json!(want))],
                config: &config,
                ..Case::default()
            },
            &expected,
        );
    }
    // Nor is a VM created with one: PVE would refuse the whole create.
    check(
        Case {
            live: None,
            patches: &[("spec/extra/args", json!("-cpu host"))],
            ..Case::default()
        },
        &["drift : - -> VM 100 on pve01", "anomaly spec.extra.args"],
    );
}

/// A serial port on a host device: PVE lets only root@pam set one, or change one that is, so
/// it is reported, never sent; `socket` is written as before, and a live value that matches
/// (an adopted VM) is fine.
#[test]
fn serial_ports_on_host_devices_are_never_written() {
    for (want, live, expected) in [
        (
            "/dev/ttyS0",
            None,
            vec![
                "drift spec.hardware.serial0: - -> /dev/ttyS0",
                "anomaly spec.hardware.serial0",
            ],
        ),
        ("/dev/ttyS0", Some("/dev/ttyS0"), vec![]),
        (
            "socket",
            Some("/dev/ttyS1"),
            vec![
                "drift spec.hardware.serial0: /dev/ttyS1 -> socket",
                "anomaly spec.hardware.serial0",
            ],
        ),
        (
            "socket",
            None,
            vec![
                "Update: update VM 100 on pve01: serial0",
                "  Post /nodes/pve01/qemu/100/config digest=d1 serial0=socket",
                "drift spec.hardware.serial0: - -> socket",
            ],
        ),
        ("socket", Some("socket"), vec![]),
    ] {
        let config: Vec<(&str, serde_json::Value)> =
            live.map(|l| ("serial0", json!(l))).into_iter().collect();
        check(
            Case {
                patches: &[("spec/hardware/serial0", json!(want))],
                config: &config,
                ..Case::default()
            },
            &expected,
        );
    }
    // Nor is a VM created with one: PVE would refuse the whole create.
    check(
        Case {
            live: None,
            patches: &[("spec/hardware/serial0", json!("/dev/ttyS0"))],
            ..Case::default()
        },
        &[
            "drift : - -> VM 100 on pve01",
            "anomaly spec.hardware.serial0",
        ],
    );
}
