//! Ownership rules, case by case: marks, targets, named objects, HA resources, offline nodes.

use super::*;
use serde_json::json;

mod named;
mod scoped;

pub(super) fn guest(tags: &str, vmid: u64) -> LiveGuest {
    LiveGuest::from_entry(&Entry::from_value(
        &json!({"id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid,
        "node": "pve01", "name": "payroll", "tags": tags}),
    ))
    .unwrap()
}

#[test]
fn a_locked_placeholder_is_reported_as_a_lock_to_wait_for() {
    let placeholder = LiveGuest::from_entry(&Entry::from_value(
        &json!({"id": "qemu/400", "type": "qemu", "vmid": 400, "node": "pve01", "lock": "create"}),
    ))
    .unwrap();
    let said = &unowned(&placeholder, None).anomalies[0].message;
    assert!(
        said.contains("VM 400 on node pve01 (no tags) is locked (create)"),
        "{said}"
    );
    assert!(said.contains("qm unlock 400"), "{said}");
    assert!(unowned(&placeholder, None).anomalies[0].locked);
    let unlocked = &unowned(&guest("", 400), None).anomalies[0];
    assert!(
        !unlocked.message.contains(" is locked ("),
        "{}",
        unlocked.message
    );
    assert!(!unlocked.locked);
}

#[test]
fn marks_tell_own_guests_from_copies() {
    for (tags, vmid, tagged, mark) in [
        ("prod", 6019, false, Mark::Missing),
        ("", 6019, false, Mark::Missing),
        ("proxops", 100, true, Mark::Missing),
        ("proxops;proxops-100", 100, true, Mark::Own),
        ("Proxops,PROXOPS-100", 100, true, Mark::Own),
        ("proxops;proxops-9000", 101, true, Mark::Other(vec![9000])),
        ("proxops-100", 100, false, Mark::Own),
        ("proxops;proxops-abc", 100, true, Mark::Missing),
    ] {
        let g = guest(tags, vmid);
        assert_eq!((g.tagged(), g.mark()), (tagged, mark), "{tags} on {vmid}");
    }
    assert!(prune_refusal(&guest("proxops;proxops-100", 100)).is_none());
    let copy = prune_refusal(&guest("proxops;proxops-9000", 101)).unwrap();
    assert!(copy.contains("copy of proxops guest 9000"), "{copy}");
}

#[test]
fn only_guests_are_guests() {
    for entry in [
        json!({"id": "node/pve01", "type": "node", "node": "pve01"}),
        json!({"id": "storage/pve01/local", "type": "storage", "node": "pve01"}),
        json!({"id": "qemu/1", "type": "qemu", "node": "pve01"}),
    ] {
        assert_eq!(
            LiveGuest::from_entry(&Entry::from_value(&entry)),
            None,
            "{entry}"
        );
    }
}

pub(super) fn call(method: Method, path: &str, params: &[(&str, &str)]) -> Action {
    Action {
        operation: Operation::Update,
        summary: String::new(),
        calls: vec![Call {
            method,
            path: path.into(),
            params: params
                .iter()
                .map(|(n, v)| Param {
                    name: n.to_string(),
                    value: v.to_string(),
                    sensitive: false,
                })
                .collect(),
        }],
        changes: Vec::new(),
        disturbs_availability: false,
        destructive: false,
        restore: None,
    }
}

#[test]
fn calls_stay_on_their_object() {
    let nodes: HashSet<String> = ["pve01".to_string(), "pve02".to_string()].into();
    // Live: 100 (own, marked), 101 (untagged), 102 (tagged, no mark), 200 (named by
    // another manifest, marked).
    let live = |v: u64| match v {
        100 => Some(guest("proxops;proxops-100", 100)),
        101 => Some(guest("prod", 101)),
        102 => Some(guest("proxops", 102)),
        200 => Some(guest("proxops;proxops-200", 200)),
        _ => None,
    };
    let named = |v: u64| (v == 200).then(|| "VM web".to_string());
    let manageable = |g: &LiveGuest| g.tagged();
    let offline: HashSet<String> = ["pve03".to_string()].into();
    let nodes: HashSet<String> = nodes.union(&offline).cloned().collect();
    // Guest 100's HA resource carries its mark; 200's does not.
    let ha_marked = |v: u64| match v {
        100 => Some(true),
        102 => Some(false),
        _ => None,
    };
    let scope = |vmid: Option<u64>, prune: bool, resource: Option<&'static str>| Scope {
        vmid,
        guest_scope: None,
        clone_sources: vec![9000],
        nodes: Box::leak(Box::new(nodes.clone())),
        offline: Box::leak(Box::new(offline.clone())),
        ha_marked: &ha_marked,
        listings: &[],
        named: &|_, _| NamedLive::Unread,
        prune,
        resource,
        guests: &live,
        named_elsewhere: &named,
        manageable: &manageable,
        pool: &|_| Ok(()),
        take_over: None,
        named_type: &|_, _| None,
    };
    use Method::*;
    let check = |s: &Scope<'_>, method, path: &str, params: &[(&str, &str)]| {
        check_calls(&[call(method, path, params)], s).map_err(|r| r.rule)
    };
    let own = scope(Some(100), false, None);
    for (method, path, params, expected) in [
        (Post, "/nodes/pve01/qemu/100/config", &[][..], Ok(())),
        (Post, "/nodes/pve03/qemu/100/config", &[], Err(Rule::Target)),
        (
            Post,
            "/nodes/pve01/qemu/100/migrate",
            &[("target", "pve02")],
            Ok(()),
        ),
        (
            Post,
            "/nodes/pve01/qemu/100/migrate",
            &[("target", "pve03")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu/100/migrate",
            &[("target", "pve09")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu/100/migrate",
            &[],
            Err(Rule::Target),
        ),
        (
            Put,
            "/cluster/ha/resources/vm%3A100",
            &[("max_restart", "2")],
            Ok(()),
        ),
        (Delete, "/cluster/ha/resources/vm%3A100", &[], Ok(())),
        (Delete, "/cluster/ha/resources/100", &[], Ok(())),
        (
            Post,
            "/cluster/ha/resources",
            &[("sid", "vm:100")],
            Err(Rule::Ownership),
        ),
        (
            Post,
            "/cluster/ha/resources/vm%3A100/migrate",
            &[("node", "pve02")],
            Ok(()),
        ),
        (
            Post,
            "/cluster/ha/resources/vm%3A100/migrate",
            &[("node", "pve03")],
            Err(Rule::Target),
        ),
        (
            Delete,
            "/cluster/ha/resources/vm%3A101",
            &[],
            Err(Rule::Target),
        ),
        (
            Post,
            "/cluster/ha/resources",
            &[("sid", "vm:0100")],
            Err(Rule::Target),
        ),
        (Post, "/cluster/ha/resources", &[], Err(Rule::Target)),
        (Get, "/nodes/pve09/qemu/7/config", &[], Ok(())),
        (Post, "/nodes/pve01/qemu/101/config", &[], Err(Rule::Target)),
        (Delete, "/nodes/pve01/qemu/6019", &[], Err(Rule::Target)),
        (
            Post,
            "/nodes/pve09/qemu/100/status/start",
            &[],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu",
            &[("vmid", "100")],
            Err(Rule::Ownership),
        ),
        (
            Post,
            "/nodes/pve01/qemu",
            &[("vmid", "6019")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu",
            &[("vmid", "0100")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu/9000/clone",
            &[("newid", "100")],
            Err(Rule::Ownership),
        ),
        (
            Post,
            "/nodes/pve01/qemu/9000/clone",
            &[("newid", "101")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu/9001/clone",
            &[("newid", "100")],
            Err(Rule::Target),
        ),
        (
            Post,
            "/nodes/pve01/qemu/9000/config",
            &[],
            Err(Rule::Target),
        ),
        (Post, "/nodes/pve02/storage/local/download-url", &[], Ok(())),
        (Post, "/nodes/pve01/qemu/0100/config", &[], Err(Rule::Path)),
        (Post, "/nodes/pve01/qemu/100x/config", &[], Err(Rule::Path)),
        (Delete, "/nodes/pve01/qemu/100", &[], Ok(())),
        (
            Delete,
            "/nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-100-disk-1",
            &[],
            Ok(()),
        ),
        (
            Delete,
            "/nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-101-disk-0",
            &[],
            Err(Rule::Volume),
        ),
        (
            Delete,
            "/nodes/pve01/storage/local/content/local%3A101%2Fvm-101-disk-0.qcow2",
            &[],
            Err(Rule::Volume),
        ),
        (
            Delete,
            "/nodes/pve01/storage/local/content/local%3Aiso%2Fother.iso",
            &[],
            Err(Rule::Volume),
        ),
        (
            Delete,
            "/nodes/pve01/storage/local/content/local-lvm%3Avm-100-disk-1",
            &[],
            Err(Rule::Volume),
        ),
    ] {
        assert_eq!(
            check(&own, method, path, params),
            expected,
            "{method:?} {path} {params:?}"
        );
    }
    // A new guest: its vmid free.
    let new = scope(Some(150), false, None);
    assert_eq!(
        check(&new, Post, "/nodes/pve01/lxc", &[("vmid", "150")]),
        Ok(())
    );
    assert_eq!(
        check(
            &new,
            Post,
            "/nodes/pve01/qemu/9000/clone",
            &[("newid", "150")]
        ),
        Ok(())
    );
    // An untagged guest the object's identity names: no write; a tagged one without its
    // mark: updates, no delete.
    let untagged = scope(Some(101), false, None);
    assert_eq!(
        check(&untagged, Put, "/nodes/pve01/lxc/101/config", &[]),
        Err(Rule::Ownership)
    );
    assert_eq!(
        check(&untagged, Post, "/nodes/pve01/lxc/101/status/stop", &[]),
        Err(Rule::Ownership)
    );
    let unmarked = scope(Some(102), false, None);
    assert_eq!(
        check(&unmarked, Put, "/nodes/pve01/qemu/102/config", &[]),
        Ok(())
    );
    // Its HA resource was made by hand: moved through HA with the guest, never changed.
    for (method, path, params, expected) in [
        (
            Put,
            "/cluster/ha/resources/vm%3A102",
            &[("state", "stopped")][..],
            Err(Rule::Ownership),
        ),
        (
            Delete,
            "/cluster/ha/resources/vm%3A102",
            &[],
            Err(Rule::Ownership),
        ),
        (
            Post,
            "/cluster/ha/resources/vm%3A102/migrate",
            &[("node", "pve02")],
            Ok(()),
        ),
    ] {
        assert_eq!(check(&unmarked, method, path, params), expected, "{path}");
    }
    // A new guest's HA resource.
    assert_eq!(
        check(&new, Post, "/cluster/ha/resources", &[("sid", "vm:150")]),
        Ok(())
    );
    assert_eq!(
        check(&unmarked, Delete, "/nodes/pve01/qemu/102", &[]),
        Err(Rule::Ownership)
    );
    // A prune needs the mark whatever the call; a guest another manifest names is no
    // prune candidate's.
    let prune = scope(Some(102), true, None);
    assert_eq!(
        check(&prune, Post, "/nodes/pve01/qemu/102/status/stop", &[]),
        Err(Rule::Ownership)
    );
    let other = scope(Some(200), true, None);
    assert_eq!(
        check(&other, Delete, "/nodes/pve01/qemu/200", &[]),
        Err(Rule::Ownership)
    );
    // A file that belongs to no guest: only its own object, deleted only by its prune.
    let iso = "/nodes/pve01/storage/local/content/local%3Aiso%2Fx.iso";
    let declared = scope(None, false, Some("local:iso/x.iso"));
    assert_eq!(check(&declared, Delete, iso, &[]), Err(Rule::Volume));
    assert_eq!(check(&declared, Put, iso, &[]), Ok(()));
    let pruned = scope(None, true, Some("local:iso/x.iso"));
    assert_eq!(check(&pruned, Delete, iso, &[]), Ok(()));
    let download_kind = scope(None, false, None);
    assert_eq!(
        check(&download_kind, Post, "/nodes/pve01/qemu/100/config", &[]),
        Err(Rule::Target)
    );
}

#[test]
fn adoption_adds_only_the_tags() {
    let g = guest("prod;web", 6019);
    let p = adopt_proposal(&g, "d1g3st");
    assert_eq!(p.actions.len(), 1);
    let c = &p.actions[0].calls[0];
    assert_eq!(c.path, "/nodes/pve01/qemu/6019/config");
    let params: Vec<(&str, &str)> = c
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(
        params,
        [
            ("tags", "prod;web;proxops;proxops-6019"),
            ("digest", "d1g3st")
        ]
    );
    assert!(!p.actions[0].disturbs_availability);
    assert!(claim_matches(
        &AdoptClaim {
            vmid: 6019,
            name: "payroll".into()
        },
        &g
    ));
    assert!(!claim_matches(
        &AdoptClaim {
            vmid: 6019,
            name: "web".into()
        },
        &g
    ));
}
