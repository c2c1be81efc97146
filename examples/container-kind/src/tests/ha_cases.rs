//! `spec.ha`: validation (PVE's defaults, a state that agrees with `spec.state`) and planning
//! (create with the mark, update with the digest, removal, resources proxops did not create,
//! a container HA moved or is busy with), the same cases as the VM kind's, on `ct:101`.

use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::secrets::NoSecrets;
use serde_json::{Value, json};

use super::*;
use crate::desired::{Ha, HaState};

const MARK: &str = "managed by proxops (proxops-101)";

/// The host's `ha` entry of ct:101 with `comment` and the options given (PVE leaves out the
/// ones it was not given).
fn ha(comment: &str, options: Value) -> Value {
    let mut h = json!({"sid": "ct:101", "type": "ct", "comment": comment, "digest": "h1"});
    for (k, v) in options.as_object().unwrap() {
        h[k] = v.clone();
    }
    h
}

/// The listing entry of CT 101 on `node`, with `hastate` and the host's `ha` entry when given.
fn ha_entry(status: &str, node: &str, hastate: Option<&str>, ha: Option<Value>) -> Value {
    let mut e = with(entry(status), &[("/node", json!(node))]);
    if let Some(s) = hastate {
        e["hastate"] = json!(s);
    }
    if let Some(h) = ha {
        e["ha"] = h;
    }
    e
}

/// The base manifest with `spec` edits, planned against `live` (the converged config, the
/// container in the entry's status).
fn case(spec: &[(&str, Value)], live: Value, expected: &[&str]) {
    let status = live["status"].as_str().unwrap().to_string();
    let obs = observation(Some(live), &config(), &status);
    check_plan(Some(&with(manifest(), spec)), &obs, expected);
}

/// The anomaly lines of a plan, for cases that check only that nothing is written.
fn plan_of(spec: &[(&str, Value)], live: Value) -> Proposal {
    let status = live["status"].as_str().unwrap().to_string();
    let obs = observation(Some(live), &config(), &status);
    let d = desired(&with(manifest(), spec));
    let p = ContainerKind::plan(Some(&d), &[], &[], &obs, &NoSecrets).unwrap();
    check_invariants(&p);
    p
}

fn ha_desired(spec: &[(&str, Value)]) -> Option<Ha> {
    desired(&with(manifest(), spec)).ha
}

fn diagnostics(spec: &[(&str, Value)]) -> Vec<(String, String)> {
    match ContainerKind::validate(&with(manifest(), spec), &NoSecrets) {
        Ok(v) => v.warnings,
        Err(d) => d,
    }
    .into_iter()
    .map(|d| (d.path, d.message))
    .collect()
}

fn check_diags(spec: &[(&str, Value)], expected: &[(&str, &str)]) {
    let got = diagnostics(spec);
    let got: Vec<(&str, &str)> = got.iter().map(|(p, m)| (p.as_str(), m.as_str())).collect();
    assert_eq!(got, expected);
}

#[test]
fn ha_defaults_follow_pve_and_spec_state() {
    let ha = |state, max_restart, max_relocate, failback| {
        Some(Ha {
            state,
            max_restart,
            max_relocate,
            failback,
        })
    };
    assert_eq!(ha_desired(&[]), None);
    assert_eq!(
        ha_desired(&[("/spec/ha", json!({}))]),
        ha(HaState::Started, 1, 1, true)
    );
    assert_eq!(
        ha_desired(&[("/spec/ha", json!({})), ("/spec/state", json!("stopped"))]),
        ha(HaState::Stopped, 1, 1, true)
    );
    assert_eq!(
        ha_desired(&[(
            "/spec/ha",
            json!({"state": "started", "max-restart": 3, "max-relocate": 0, "failback": false})
        )]),
        ha(HaState::Started, 3, 0, false)
    );
    for (state, power, want) in [
        ("disabled", "stopped", HaState::Disabled),
        ("ignored", "running", HaState::Ignored),
        ("ignored", "stopped", HaState::Ignored),
        ("stopped", "stopped", HaState::Stopped),
    ] {
        assert_eq!(
            ha_desired(&[
                ("/spec/ha", json!({"state": state})),
                ("/spec/state", json!(power))
            ]),
            ha(want, 1, 1, true)
        );
    }
}

#[test]
fn ha_state_must_agree_with_spec_state() {
    check_diags(
        &[
            ("/spec/ha", json!({"state": "started"})),
            ("/spec/state", json!("stopped")),
        ],
        &[(
            "spec.ha.state",
            "`started` has HA keep the container running while spec.state is `stopped`: HA would start what proxops stops. Set spec.state: running, or spec.ha.state: stopped (or leave spec.ha.state out: it follows spec.state)",
        )],
    );
    check_diags(
        &[("/spec/ha", json!({"state": "stopped"}))],
        &[(
            "spec.ha.state",
            "`stopped` has HA keep the container stopped while spec.state is `running` (the default): proxops's start would turn HA's state back to `started`. Set spec.state: stopped, or spec.ha.state: started (or leave spec.ha.state out: it follows spec.state)",
        )],
    );
    check_diags(
        &[
            ("/spec/ha", json!({"state": "disabled"})),
            ("/spec/state", json!("running")),
        ],
        &[(
            "spec.ha.state",
            "`disabled` has HA keep the container stopped while spec.state is `running` (the default): proxops's start would turn HA's state to `started`. Set spec.state: stopped with spec.ha.state: disabled, or use spec.ha.state: started",
        )],
    );
    // A wrong spec.state is its own error, not also a contradiction.
    check_diags(
        &[
            ("/spec/ha", json!({"state": "stopped"})),
            ("/spec/state", json!("started")),
        ],
        &[(
            "spec.state",
            "must be one of `running`, `stopped`, got `started`",
        )],
    );
}

#[test]
fn ha_fields_name_their_paths() {
    check_diags(
        &[("/spec/ha", json!({"state": "enabled"}))],
        &[(
            "spec.ha.state",
            "must be one of `started`, `stopped`, `disabled`, `ignored`, got `enabled`",
        )],
    );
    check_diags(
        &[("/spec/ha", json!({"max-restart": -1, "failback": "yes"}))],
        &[
            (
                "spec.ha.max-restart",
                "must be from 0 to 4294967295, got -1",
            ),
            ("spec.ha.failback", "expected true or false, got a string"),
        ],
    );
    check_diags(
        &[("/spec/ha", json!({"comment": "mine"}))],
        &[(
            "spec.ha.comment",
            "the HA resource's comment is proxops's ownership mark (`managed by proxops (proxops-<vmid>)`), written by proxops; remove it from the manifest",
        )],
    );
    check_diags(
        &[("/spec/ha", json!({"group": "g1"}))],
        &[(
            "spec.ha.group",
            "unknown field `group`; expected one of `state`, `max-restart`, `max-relocate`, `failback`",
        )],
    );
    check_diags(
        &[("/spec/ha", json!("started"))],
        &[("spec.ha", "expected a mapping, got a string")],
    );
}

#[test]
fn an_ha_resource_is_created_with_the_mark() {
    // An existing container.
    case(
        &[("/spec/ha", json!({}))],
        entry("running"),
        &[
            "step ha: make CT 101 an HA resource (ct:101, state started)",
            "  POST /cluster/ha/resources sid=ct:101 state=started max_restart=1 max_relocate=1 failback=1 comment=managed by proxops (proxops-101)",
            "drift spec.ha: - -> ct:101 (state started)",
        ],
    );
    // A new container: created (and started) first, then the HA resource in one proposal.
    check_plan(
        Some(&with(
            manifest(),
            &[("/spec/ha", json!({"max-restart": 2, "failback": false}))],
        )),
        &Observation::default(),
        &[
            "create: create CT 101 `web` on pve01 from local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst and start it",
            "  POST /nodes/pve01/lxc vmid=101 ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst hostname=web memory=1024 swap=512 cores=2 rootfs=local-lvm:8 net0=name=eth0,bridge=vmbr0,ip=dhcp,type=veth features=nesting=1 unprivileged=1 onboot=1 tags=proxops;proxops-101;web start=1",
            "step ha: make CT 101 an HA resource (ct:101, state started)",
            "  POST /cluster/ha/resources sid=ct:101 state=started max_restart=2 max_relocate=1 failback=0 comment=managed by proxops (proxops-101)",
            "drift : - -> CT 101 `web` on pve01",
            "drift spec.ha: - -> ct:101 (state started)",
        ],
    );
}

#[test]
fn a_marked_ha_resource_is_updated_with_its_digest() {
    let live =
        |options: Value| ha_entry("running", "pve01", Some("started"), Some(ha(MARK, options)));
    // Numbers as strings or numbers, absent options as PVE's defaults, `enabled` as
    // `started`: no drift.
    for options in [
        json!({}),
        json!({"state": "enabled"}),
        json!({"state": "started", "max_restart": "1", "max_relocate": 1, "failback": 1}),
    ] {
        case(&[("/spec/ha", json!({}))], live(options), &[]);
    }
    case(
        &[("/spec/ha", json!({"max-restart": 3, "failback": false}))],
        live(json!({"state": "started", "max_restart": "2"})),
        &[
            "step ha: update HA resource ct:101: max_restart, failback",
            "  PUT /cluster/ha/resources/ct:101 digest=h1 max_restart=3 failback=0",
            "drift spec.ha.max-restart: 2 -> 3",
            "drift spec.ha.failback: - -> 0",
        ],
    );
    // With the config drift of the container: two writes, each with its own digest.
    case(
        &[
            ("/spec/ha", json!({"max-relocate": 2})),
            ("/spec/memory", json!("2GiB")),
        ],
        live(json!({"state": "started"})),
        &[
            "update: update CT 101 on pve01: memory",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e memory=2048",
            "step ha: update HA resource ct:101: max_relocate",
            "  PUT /cluster/ha/resources/ct:101 digest=h1 max_relocate=2",
            "drift spec.memory: 1024 -> 2048",
            "drift spec.ha.max-relocate: - -> 2",
        ],
    );
}

/// PVE routes the power request of an HA-managed container through HA, which rewrites the
/// resources config: an HA write after it in the same proposal carries no digest.
#[test]
fn an_ha_write_after_a_power_action_carries_no_digest() {
    case(
        &[
            ("/spec/state", json!("stopped")),
            ("/spec/ha", json!({"state": "disabled"})),
        ],
        ha_entry(
            "running",
            "pve01",
            Some("started"),
            Some(ha(MARK, json!({"state": "started"}))),
        ),
        &[
            "step power: shut down CT 101 on pve01 [disturbs]",
            "  POST /nodes/pve01/lxc/101/status/shutdown forceStop=1 timeout=180",
            "step ha: update HA resource ct:101: state",
            "  PUT /cluster/ha/resources/ct:101 state=disabled",
            "drift spec.state: running -> stopped",
            "drift spec.ha.state: started -> disabled",
        ],
    );
}

#[test]
fn an_ha_resource_proxops_did_not_create_is_never_written() {
    let live = |comment: &str| {
        ha_entry(
            "running",
            "pve01",
            Some("started"),
            Some(ha(comment, json!({"state": "started", "max_restart": 2}))),
        )
    };
    for comment in ["", "team web", "managed by proxops (proxops-1010)"] {
        // Differs: an anomaly, nothing sent.
        let p = plan_of(&[("/spec/ha", json!({}))], live(comment));
        assert!(p.actions.is_empty() && p.drift.is_empty(), "{comment}");
        assert_eq!(p.anomalies.len(), 1);
        assert_eq!(p.anomalies[0].path, "spec.ha");
        // Identical: nothing to do.
        case(
            &[("/spec/ha", json!({"max-restart": 2}))],
            live(comment),
            &[],
        );
        // Not declared: HA membership is not managed.
        case(&[], live(comment), &[]);
    }
    case(
        &[("/spec/ha", json!({}))],
        live("team web"),
        &[
            "anomaly spec.ha: HA resource ct:101 was not created by proxops (its comment lacks `proxops-101`) and differs from spec.ha (max_restart); not changing it. Make spec.ha match it, or hand it to proxops by adding `proxops-101` to its comment (`ha-manager set ct:101 --comment 'managed by proxops (proxops-101)'`)",
        ],
    );
    // HA state without the host's `ha` entry: nothing written for spec.ha.
    case(
        &[("/spec/ha", json!({}))],
        ha_entry("running", "pve01", Some("started"), None),
        &[
            "anomaly spec.ha: CT 101 has HA state `started` but the observation holds no /cluster/ha/resources entry for ct:101; proxops does not write an HA resource it cannot see",
        ],
    );
}

#[test]
fn a_marked_ha_resource_without_spec_ha_is_removed() {
    case(
        &[],
        ha_entry(
            "running",
            "pve01",
            Some("started"),
            Some(ha("web; proxops-101", json!({"state": "started"}))),
        ),
        &[
            "step ha: remove HA resource ct:101 (spec.ha is gone; CT 101 stays as it is)",
            "  DELETE /cluster/ha/resources/ct:101 purge=0",
            "drift spec.ha: ct:101 -> -",
        ],
    );
}

#[test]
fn a_container_ha_moved_is_planned_on_its_live_node() {
    let moved = |status: &str| {
        ha_entry(
            status,
            "pve02",
            Some("started"),
            Some(ha(MARK, json!({"state": "started"}))),
        )
    };
    case(
        &[("/spec/ha", json!({})), ("/spec/memory", json!("2GiB"))],
        moved("running"),
        &[
            "update: update CT 101 on pve02: memory",
            "  PUT /nodes/pve02/lxc/101/config digest=0f3c9a1e memory=2048",
            "drift spec.memory: 1024 -> 2048",
        ],
    );
    case(
        &[("/spec/ha", json!({}))],
        moved("stopped"),
        &[
            "step power: start CT 101 on pve02",
            "  POST /nodes/pve02/lxc/101/status/start",
            "drift spec.state: stopped -> running",
        ],
    );
    // Converged where HA put it: nothing.
    case(&[("/spec/ha", json!({}))], moved("running"), &[]);
    // Without HA (or with an `ignored` resource, which HA does not move), another node is an
    // anomaly: someone moved it by hand.
    for (hastate, resource) in [
        (None, None),
        (Some("ignored"), Some(ha(MARK, json!({"state": "ignored"})))),
    ] {
        case(
            &[],
            ha_entry("running", "pve02", hastate, resource),
            &[
                "anomaly spec.node: CT 101 lives on node pve02, the manifest says pve01; proxops does not migrate containers (migrate it in PVE or fix the manifest)",
            ],
        );
    }
    // A container HA is busy with: nothing until HA is done.
    for (state, why) in [
        ("migrate", "is moving it to another node"),
        ("relocate", "is moving it to another node"),
        ("fence", "is fencing its node"),
        ("recovery", "is recovering it from a failed node"),
    ] {
        let mut e = moved("running");
        e["hastate"] = json!(state);
        case(
            &[("/spec/ha", json!({})), ("/spec/memory", json!("2GiB"))],
            e,
            &[&format!(
                "anomaly : CT 101 on pve02: HA {why} (HA state `{state}`); proxops changes nothing until HA is done"
            )],
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
    let anomaly = "anomaly spec.ha: HA resource ct:101 is in the error state: PVE takes no request for it but `state: disabled`. Set spec.ha.state: disabled (with spec.state: stopped), fix the cause, then set it back";
    case(
        &[
            ("/spec/state", json!("stopped")),
            ("/spec/ha", json!({"state": "stopped"})),
        ],
        e.clone(),
        &[anomaly],
    );
    case(
        &[
            ("/spec/state", json!("stopped")),
            ("/spec/ha", json!({"state": "disabled"})),
        ],
        e,
        &[
            "step ha: update HA resource ct:101: state",
            "  PUT /cluster/ha/resources/ct:101 digest=h1 state=disabled",
            "drift spec.ha.state: started -> disabled",
            anomaly,
        ],
    );
}

/// The desired state carries `spec.ha` between the host's calls (as JSON), and leaves it out
/// when the manifest has none (so older desired states read the same).
#[test]
fn the_desired_state_round_trips() {
    let d = desired(&with(
        manifest(),
        &[("/spec/ha", json!({"max-relocate": 0}))],
    ));
    let text = serde_json::to_string(&d).unwrap();
    assert!(
        text.contains(
            r#""ha":{"state":"started","max-restart":1,"max-relocate":0,"failback":true}"#
        ),
        "{text}"
    );
    assert_eq!(serde_json::from_str::<crate::Container>(&text).unwrap(), d);
    let plain = serde_json::to_string(&desired(&manifest())).unwrap();
    assert!(!plain.contains("\"ha\""), "{plain}");
}
