//! Adopting a guest with an HA resource: `spec.ha` written, and the round trip clean.

use super::*;

fn with_ha(status: &str, hastate: &str, ha: Value) -> Value {
    let mut e = entry(100, status, false, "");
    e["hastate"] = json!(hastate);
    let mut h = json!({"sid": "vm:100", "type": "vm", "digest": "h1"});
    for (k, v) in ha.as_object().unwrap() {
        h[k] = v.clone();
    }
    e["ha"] = h;
    e
}

#[test]
fn an_ha_guest_adopts_to_spec_ha_and_plans_nothing() {
    for (status, hastate, ha, want_ha, want_state, gaps) in [
        // PVE's defaults left out; the state always written.
        (
            "running",
            "started",
            json!({"state": "started", "comment": "managed by proxops (proxops-100)"}),
            json!({"state": "started"}),
            "started",
            &["smbios1", "vmgenid"][..],
        ),
        (
            "running",
            "started",
            json!({"max_restart": "1", "max_relocate": 3, "failback": 0, "comment": "proxops-100"}),
            json!({"state": "started", "max-relocate": 3, "failback": false}),
            "started",
            &["smbios1", "vmgenid"][..],
        ),
        // Not created by proxops: a gap, and plan leaves it alone.
        (
            "stopped",
            "disabled",
            json!({"state": "disabled", "max_restart": 2}),
            json!({"state": "disabled", "max-restart": 2}),
            "stopped",
            &["ha.comment", "smbios1", "vmgenid"][..],
        ),
        (
            "running",
            "ignored",
            json!({"state": "ignored", "comment": "proxops-100"}),
            json!({"state": "ignored"}),
            "started",
            &["smbios1", "vmgenid"][..],
        ),
    ] {
        let (a, p) = clean(
            Flavour::Vm,
            &with_ha(status, hastate, ha.clone()),
            &web(),
            &[],
            &sops(),
        );
        assert_eq!(a.manifest["spec"]["ha"], want_ha, "{ha}");
        assert_eq!(a.manifest["spec"]["state"], json!(want_state), "{ha}");
        assert_eq!(gap_paths(&a), gaps, "{ha}");
        assert!(p.anomalies.is_empty(), "{:?}", p.anomalies);
    }
}

/// A guest HA is about to start is adopted as started (the manifest must not contradict
/// HA); the first plan's only action is the start, which PVE routes through HA.
#[test]
fn a_guest_on_its_way_adopts_in_the_state_ha_asks_for() {
    let e = with_ha(
        "stopped",
        "request_start",
        json!({"state": "enabled", "comment": "proxops-100"}),
    );
    let (a, p) = round_trip(Flavour::Vm, &e, &web(), &[], &sops());
    assert_eq!(a.manifest["spec"]["ha"], json!({"state": "started"}));
    assert_eq!(a.manifest["spec"]["state"], json!("started"));
    assert_eq!(gap_paths(&a), ["smbios1", "status", "vmgenid"]);
    assert_eq!(p.actions.len(), 1);
    assert_eq!(
        p.actions[0].calls[0].path,
        "/nodes/pve01/qemu/100/status/start"
    );
}

#[test]
fn a_guest_without_ha_gets_no_spec_ha() {
    let (a, _) = clean(
        Flavour::Vm,
        &entry(100, "running", false, ""),
        &web(),
        &[],
        &sops(),
    );
    assert_eq!(a.manifest["spec"].get("ha"), None);
}
