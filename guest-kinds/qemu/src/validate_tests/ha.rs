//! Validation cases: `spec.ha` (VM only, PVE's defaults, a state that agrees with `spec.state`) and `spec.placement`.

use super::*;
use crate::desired::{Ha, HaState, Placement};

fn desired(patches: &[(&str, Value)]) -> crate::Desired {
    let mut doc = base();
    for (p, v) in patches {
        patch(&mut doc, p, v.clone());
    }
    validate(Flavour::Vm, &doc, &secrets()).unwrap().desired
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
    assert_eq!(desired(&[]).ha, None);
    assert_eq!(
        desired(&[("spec/ha", json!({}))]).ha,
        ha(HaState::Started, 1, 1, true)
    );
    assert_eq!(
        desired(&[("spec/ha", json!({})), ("spec/state", json!("stopped"))]).ha,
        ha(HaState::Stopped, 1, 1, true)
    );
    assert_eq!(
        desired(&[(
            "spec/ha",
            json!({"state": "started", "max-restart": 3, "max-relocate": 0, "failback": false})
        )])
        .ha,
        ha(HaState::Started, 3, 0, false)
    );
    for (state, power, want) in [
        ("disabled", "stopped", HaState::Disabled),
        ("ignored", "started", HaState::Ignored),
        ("ignored", "stopped", HaState::Ignored),
    ] {
        assert_eq!(
            desired(&[
                ("spec/ha", json!({"state": state})),
                ("spec/state", json!(power))
            ])
            .ha,
            ha(want, 1, 1, true)
        );
    }
    assert_eq!(desired(&[]).placement, Placement::Fixed);
    assert_eq!(
        desired(&[("spec/placement", json!("migrate"))]).placement,
        Placement::Migrate
    );
}

#[test]
fn ha_state_must_agree_with_spec_state() {
    vm(
        &[
            ("spec/ha", json!({"state": "started"})),
            ("spec/state", json!("stopped")),
        ],
        &[(
            "spec.ha.state",
            "`started` has HA keep the VM running while spec.state is `stopped`: HA would start what proxops stops. Set spec.state: started, or spec.ha.state: stopped (or leave spec.ha.state out: it follows spec.state)",
        )],
    );
    vm(
        &[("spec/ha", json!({"state": "stopped"}))],
        &[(
            "spec.ha.state",
            "`stopped` has HA keep the VM stopped while spec.state is `started` (the default): proxops's start would turn HA's state back to `started`. Set spec.state: stopped, or spec.ha.state: started (or leave spec.ha.state out: it follows spec.state)",
        )],
    );
    vm(
        &[
            ("spec/ha", json!({"state": "disabled"})),
            ("spec/state", json!("started")),
        ],
        &[(
            "spec.ha.state",
            "`disabled` has HA keep the VM stopped while spec.state is `started` (the default): proxops's start would turn HA's state to `started`. Set spec.state: stopped with spec.ha.state: disabled, or use spec.ha.state: started",
        )],
    );
}

#[test]
fn ha_fields_name_their_paths() {
    vm(
        &[("spec/ha", json!({"state": "enabled"}))],
        &[(
            "spec.ha.state",
            "must be one of `started`, `stopped`, `disabled`, `ignored`, got `enabled`",
        )],
    );
    vm(
        &[("spec/ha", json!({"max-restart": -1, "failback": "yes"}))],
        &[
            (
                "spec.ha.max-restart",
                "must be from 0 to 4294967295, got -1",
            ),
            ("spec.ha.failback", "expected true or false, got a string"),
        ],
    );
    vm(
        &[("spec/ha", json!({"comment": "mine"}))],
        &[(
            "spec.ha.comment",
            "the HA resource's comment is proxops's ownership mark (`managed by proxops (proxops-<vmid>)`), written by proxops; remove it from the manifest",
        )],
    );
    vm(
        &[("spec/ha", json!({"group": "g1"}))],
        &[(
            "spec.ha.group",
            "unknown field `group`; expected one of `state`, `max-restart`, `max-relocate`, `failback`",
        )],
    );
    vm(
        &[("spec/ha", json!("started"))],
        &[("spec.ha", "expected a mapping, got a string")],
    );
    vm(
        &[("spec/placement", json!("move"))],
        &[(
            "spec.placement",
            "must be one of `fixed`, `migrate`, got `move`",
        )],
    );
}

#[test]
fn a_template_cannot_be_an_ha_resource() {
    check(
        Flavour::Template,
        &[("spec/ha", json!({}))],
        &[(
            "spec.ha",
            "a TemplateVM cannot be an HA resource: PVE never runs a template; remove spec.ha (give the VMs cloned from it their own spec.ha)",
        )],
    );
    // A template may move (offline).
    check(
        Flavour::Template,
        &[("spec/placement", json!("migrate"))],
        &[],
    );
}
