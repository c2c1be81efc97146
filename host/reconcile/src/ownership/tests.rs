//! Ownership rules, case by case: marks, targets, named objects, HA resources, offline nodes.

use super::*;
use serde_json::json;

fn guest(tags: &str, vmid: u64) -> LiveGuest {
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

fn call(method: Method, path: &str, params: &[(&str, &str)]) -> Action {
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

/// Named objects (entries of the kind's own listings): an object reaches its own id only;
/// a create needs the id absent and carries the mark; anything else needs the mark on
/// the live object and keeps it.
#[test]
fn named_objects_need_their_mark() {
    use Method::*;
    let nodes: HashSet<String> = ["pve01".to_string()].into();
    let listings = [
        ("/cluster/ha/rules".to_string(), "rule".to_string()),
        ("/cluster/firewall/groups".to_string(), "group".to_string()),
    ];
    let live = |path: &str, id: &str| match (path, id) {
        ("/cluster/firewall/groups", "web") => NamedLive::Present {
            comment: "web tier (proxops:web)".into(),
        },
        ("/cluster/firewall/groups", "hand") => NamedLive::Present {
            comment: "made by hand".into(),
        },
        ("/cluster/firewall/groups", _) => NamedLive::Absent,
        ("/cluster/ha/rules", "mine") => NamedLive::Present {
            comment: "keep on pve01 (proxops:mine)".into(),
        },
        ("/cluster/ha/rules", "theirs") => NamedLive::Present {
            comment: "made by hand".into(),
        },
        ("/cluster/ha/rules", _) => NamedLive::Absent,
        _ => NamedLive::Unread,
    };
    let no_ha = |_: u64| None;
    let no_guest = |_: u64| None;
    let no_name = |_: u64| None;
    let any = |_: &LiveGuest| true;
    let offline = HashSet::new();
    let scope = |resource: &'static str| Scope {
        vmid: None,
        guest_scope: None,
        clone_sources: Vec::new(),
        nodes: Box::leak(Box::new(nodes.clone())),
        offline: Box::leak(Box::new(offline.clone())),
        ha_marked: &no_ha,
        listings: &listings,
        named: &live,
        prune: false,
        resource: Some(resource),
        guests: &no_guest,
        named_elsewhere: &no_name,
        manageable: &any,
        pool: &|_| Ok(()),
        take_over: None,
        named_type: &|_, _| None,
    };
    let check = |resource: &'static str, method, path: &str, params: &[(&str, &str)]| {
        check_calls(&[call(method, path, params)], &scope(resource)).map_err(|r| r.rule)
    };
    for (resource, method, path, params, expected) in [
        (
            "mine",
            Put,
            "/cluster/ha/rules/mine",
            &[("strict", "1")][..],
            Ok(()),
        ),
        ("mine", Delete, "/cluster/ha/rules/mine", &[], Ok(())),
        (
            "mine",
            Put,
            "/cluster/ha/rules/mine",
            &[("comment", "no mark")],
            Err(Rule::Ownership),
        ),
        (
            "mine",
            Put,
            "/cluster/ha/rules/mine",
            &[("delete", "comment")],
            Err(Rule::Ownership),
        ),
        (
            "mine",
            Put,
            "/cluster/ha/rules/theirs",
            &[],
            Err(Rule::Target),
        ),
        (
            "theirs",
            Put,
            "/cluster/ha/rules/theirs",
            &[],
            Err(Rule::Ownership),
        ),
        (
            "theirs",
            Delete,
            "/cluster/ha/rules/theirs",
            &[],
            Err(Rule::Ownership),
        ),
        (
            "new",
            Post,
            "/cluster/ha/rules",
            &[("rule", "new"), ("comment", "proxops:new")],
            Ok(()),
        ),
        (
            "new",
            Post,
            "/cluster/ha/rules",
            &[("rule", "new")],
            Err(Rule::Ownership),
        ),
        (
            "mine",
            Post,
            "/cluster/ha/rules",
            &[("rule", "mine"), ("comment", "proxops:mine")],
            Err(Rule::Ownership),
        ),
        (
            "new",
            Delete,
            "/cluster/ha/rules/new",
            &[],
            Err(Rule::Ownership),
        ),
        ("new", Post, "/cluster/ha/rules", &[], Err(Rule::Target)),
        // A security group's rules live inside it: a rule's comment is the rule's, so it
        // need not carry the group's mark; the group must.
        (
            "web",
            Post,
            "/cluster/firewall/groups/web",
            &[("type", "in"), ("action", "ACCEPT"), ("comment", "ssh")],
            Ok(()),
        ),
        (
            "web",
            Put,
            "/cluster/firewall/groups/web/0",
            &[("comment", "no mark"), ("moveto", "2")],
            Ok(()),
        ),
        ("web", Delete, "/cluster/firewall/groups/web/3", &[], Ok(())),
        (
            "hand",
            Post,
            "/cluster/firewall/groups/hand",
            &[("type", "in"), ("action", "ACCEPT")],
            Err(Rule::Ownership),
        ),
        (
            "hand",
            Delete,
            "/cluster/firewall/groups/hand/0",
            &[],
            Err(Rule::Ownership),
        ),
        (
            "web",
            Post,
            "/cluster/firewall/groups/hand",
            &[("type", "in"), ("action", "ACCEPT")],
            Err(Rule::Target),
        ),
        (
            "new",
            Post,
            "/cluster/firewall/groups",
            &[("group", "new"), ("comment", "proxops:new")],
            Ok(()),
        ),
        (
            "hand",
            Post,
            "/cluster/firewall/groups",
            &[("group", "hand"), ("comment", "proxops:hand")],
            Err(Rule::Ownership),
        ),
        // PVE's comment update of a group: a POST to the collection with `rename` equal to
        // the id, judged as an update (the mark kept, on a marked group); a rename to another
        // id is never proposed.
        (
            "web",
            Post,
            "/cluster/firewall/groups",
            &[
                ("group", "web"),
                ("rename", "web"),
                ("comment", "db tier (proxops:web)"),
            ],
            Ok(()),
        ),
        (
            "web",
            Post,
            "/cluster/firewall/groups",
            &[("group", "web"), ("rename", "web"), ("comment", "no mark")],
            Err(Rule::Ownership),
        ),
        (
            "hand",
            Post,
            "/cluster/firewall/groups",
            &[
                ("group", "hand"),
                ("rename", "hand"),
                ("comment", "proxops:hand"),
            ],
            Err(Rule::Ownership),
        ),
        (
            "new",
            Post,
            "/cluster/firewall/groups",
            &[("group", "new"), ("rename", "web")],
            Err(Rule::Target),
        ),
        // Not one of the kind's listings: an endpoint, judged as before (no guest).
        (
            "new",
            Post,
            "/cluster/ha/groups",
            &[("group", "new")],
            Ok(()),
        ),
    ] {
        assert_eq!(
            check(resource, method, path, params),
            expected,
            "{resource}: {method:?} {path} {params:?}"
        );
    }
}

/// A claimed take-over of an unmarked named object (`metadata.adopt: {id, comment}`): the one
/// write that sets the comment to the live one with the mark appended, in the object's own
/// update form, and nothing else; any other write, a claim that no longer matches, or a
/// delete is refused.
#[test]
fn named_take_overs_write_the_mark_alone() {
    use Method::*;
    let nodes: HashSet<String> = ["pve01".to_string()].into();
    let offline = HashSet::new();
    let listings = [
        ("/pools".to_string(), "poolid".to_string()),
        ("/cluster/backup".to_string(), "id".to_string()),
        ("/cluster/firewall/groups".to_string(), "group".to_string()),
        ("/cluster/ha/rules".to_string(), "rule".to_string()),
    ];
    let live = |path: &str, id: &str| match (path, id) {
        ("/pools", "web") => NamedLive::Present {
            comment: String::new(),
        },
        ("/cluster/backup", "nightly") | ("/cluster/firewall/groups", "hand") => {
            NamedLive::Present {
                comment: "made by hand".into(),
            }
        }
        ("/cluster/ha/rules", "keep") => NamedLive::Present {
            comment: "keep".into(),
        },
        _ => NamedLive::Absent,
    };
    let live_type = |path: &str, id: &str| {
        (path == "/cluster/ha/rules" && id == "keep").then(|| "node-affinity".to_string())
    };
    let no_ha = |_: u64| None;
    let no_name = |_: u64| None;
    let any = |_: &LiveGuest| true;
    let check = |claim: Option<(&str, Option<&str>)>,
                 resource: &str,
                 method: Method,
                 path: &str,
                 params: &[(&str, &str)]| {
        let claim = claim.map(|(id, comment)| NamedClaim {
            id: id.into(),
            comment: comment.map(str::to_string),
        });
        let scope = Scope {
            vmid: None,
            guest_scope: None,
            clone_sources: Vec::new(),
            nodes: &nodes,
            offline: &offline,
            ha_marked: &no_ha,
            listings: &listings,
            named: &live,
            prune: false,
            resource: Some(resource),
            guests: &|_| None,
            named_elsewhere: &no_name,
            manageable: &any,
            pool: &|_| Ok(()),
            take_over: claim.as_ref(),
            named_type: &live_type,
        };
        check_calls(&[call(method, path, params)], &scope).map_err(|r| r.rule)
    };
    let web = Some(("web", None));
    let nightly = Some(("nightly", Some("made by hand")));
    let hand = Some(("hand", Some("made by hand")));
    let keep = Some(("keep", Some("keep")));
    let marked = "made by hand (proxops:nightly)";
    for (claim, resource, method, path, params, expected) in [
        // The one write, in each kind's form.
        (
            web,
            "web",
            Put,
            "/pools",
            &[("poolid", "web"), ("comment", "proxops:web")][..],
            Ok(()),
        ),
        (
            nightly,
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", marked)],
            Ok(()),
        ),
        (
            hand,
            "hand",
            Post,
            "/cluster/firewall/groups",
            &[
                ("group", "hand"),
                ("rename", "hand"),
                ("comment", "made by hand (proxops:hand)"),
                ("digest", "abc"),
            ],
            Ok(()),
        ),
        (
            keep,
            "keep",
            Put,
            "/cluster/ha/rules/keep",
            &[
                ("type", "node-affinity"),
                ("comment", "keep (proxops:keep)"),
            ],
            Ok(()),
        ),
        // No claim: the unmarked object is not proxops's.
        (
            None,
            "web",
            Put,
            "/pools",
            &[("poolid", "web"), ("comment", "proxops:web")],
            Err(Rule::Ownership),
        ),
        // The claim no longer matches the live comment.
        (
            Some(("nightly", Some("by hand"))),
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", marked)],
            Err(Rule::Ownership),
        ),
        (
            Some(("web", Some("tier"))),
            "web",
            Put,
            "/pools",
            &[("poolid", "web"), ("comment", "proxops:web")],
            Err(Rule::Ownership),
        ),
        // A claim of another object.
        (
            Some(("other", Some("made by hand"))),
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", marked)],
            Err(Rule::Ownership),
        ),
        // An extra parameter.
        (
            nightly,
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", marked), ("schedule", "02:00")],
            Err(Rule::Ownership),
        ),
        (
            web,
            "web",
            Put,
            "/pools",
            &[
                ("poolid", "web"),
                ("comment", "proxops:web"),
                ("vms", "100"),
            ],
            Err(Rule::Ownership),
        ),
        (
            web,
            "web",
            Put,
            "/pools",
            &[
                ("poolid", "web"),
                ("comment", "proxops:web"),
                ("delete", "1"),
            ],
            Err(Rule::Ownership),
        ),
        // Another comment: the manifest's, or the mark alone over the live one.
        (
            nightly,
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", "nightly (proxops:nightly)")],
            Err(Rule::Ownership),
        ),
        (
            nightly,
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[("comment", "proxops:nightly")],
            Err(Rule::Ownership),
        ),
        // No comment at all.
        (
            nightly,
            "nightly",
            Put,
            "/cluster/backup/nightly",
            &[],
            Err(Rule::Ownership),
        ),
        // A rename to another id, or an HA rule's type changed.
        (
            hand,
            "hand",
            Post,
            "/cluster/firewall/groups",
            &[
                ("group", "hand"),
                ("rename", "other"),
                ("comment", "made by hand (proxops:hand)"),
            ],
            Err(Rule::Target),
        ),
        (
            keep,
            "keep",
            Put,
            "/cluster/ha/rules/keep",
            &[
                ("type", "resource-affinity"),
                ("comment", "keep (proxops:keep)"),
            ],
            Err(Rule::Ownership),
        ),
        // A write inside the object (a rule added to the group).
        (
            hand,
            "hand",
            Post,
            "/cluster/firewall/groups/hand",
            &[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("comment", "made by hand (proxops:hand)"),
            ],
            Err(Rule::Ownership),
        ),
        // Deletes still need the mark.
        (
            nightly,
            "nightly",
            Delete,
            "/cluster/backup/nightly",
            &[],
            Err(Rule::Ownership),
        ),
        (
            web,
            "web",
            Delete,
            "/pools",
            &[("poolid", "web")],
            Err(Rule::Ownership),
        ),
    ] {
        assert_eq!(
            check(claim, resource, method, path, params),
            expected,
            "{claim:?} {resource}: {method:?} {path} {params:?}"
        );
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

#[test]
fn guest_scoped_identities_name_a_guest_and_a_sub_path() {
    for (space, key, expected) in [
        ("guest:firewall", "100", Some((100, "firewall"))),
        ("guest:firewall", "0100", None),
        ("guest:firewall", "web", None),
        ("guest:", "100", None),
        ("guest:Firewall", "100", None),
        ("guest:a/b", "100", None),
        ("guest-id", "100", None),
        ("ha-rule", "100", None),
    ] {
        assert_eq!(
            guest_scope(space, key),
            expected.map(|(v, s)| (v, s.to_string())),
            "{space} {key}"
        );
    }
}

/// A guest-scoped object (a VM's firewall) is owned through its guest: it writes only below
/// its own guest's sub-path, and only while that guest carries the tag and its own mark; the
/// manifest that names the guest is expected, not a conflict.
#[test]
fn guest_scoped_objects_write_only_their_guests_sub_path() {
    let nodes: HashSet<String> = ["pve01".to_string(), "pve03".to_string()].into();
    let offline: HashSet<String> = ["pve03".to_string()].into();
    let live = |v: u64| match v {
        100 => Some(guest("proxops;proxops-100", 100)),
        101 => Some(guest("prod", 101)),
        102 => Some(guest("proxops", 102)),
        103 => Some(guest("proxops;proxops-9000", 103)),
        _ => None,
    };
    let named = |v: u64| (v == 100).then(|| "VM web".to_string());
    let any = |_: &LiveGuest| true;
    let scope = |owner: u64, created_in_run: bool| Scope {
        vmid: None,
        guest_scope: Some((owner, "firewall", created_in_run)),
        clone_sources: Vec::new(),
        nodes: Box::leak(Box::new(nodes.clone())),
        offline: Box::leak(Box::new(offline.clone())),
        ha_marked: &|_| None,
        listings: &[],
        named: &|_, _| NamedLive::Unread,
        prune: false,
        resource: None,
        guests: &live,
        named_elsewhere: &named,
        manageable: &any,
        pool: &|_| Ok(()),
        take_over: None,
        named_type: &|_, _| None,
    };
    use Method::*;
    let fw = "/nodes/pve01/qemu/100/firewall";
    for (owner, method, path, params, expected) in [
        (
            100,
            Post,
            format!("{fw}/rules"),
            &[("type", "in")][..],
            Ok(()),
        ),
        (
            100,
            Put,
            format!("{fw}/rules/3"),
            &[("moveto", "0")],
            Ok(()),
        ),
        (100, Delete, format!("{fw}/rules/0"), &[], Ok(())),
        (
            100,
            Put,
            format!("{fw}/options"),
            &[("enable", "1")],
            Ok(()),
        ),
        (
            100,
            Delete,
            format!("{fw}/ipset/admins"),
            &[("force", "1")],
            Ok(()),
        ),
        // Its own guest, outside the firewall: the config, the guest itself, its power.
        (
            100,
            Post,
            "/nodes/pve01/qemu/100/config".into(),
            &[("memory", "1")],
            Err(Rule::Target),
        ),
        (
            100,
            Delete,
            "/nodes/pve01/qemu/100".into(),
            &[],
            Err(Rule::Target),
        ),
        (
            100,
            Post,
            "/nodes/pve01/qemu/100/status/stop".into(),
            &[],
            Err(Rule::Target),
        ),
        (
            100,
            Post,
            "/nodes/pve01/qemu".into(),
            &[("vmid", "100")],
            Err(Rule::Target),
        ),
        // Another guest's firewall, the wrong guest type, an offline node.
        (
            100,
            Post,
            "/nodes/pve01/qemu/101/firewall/rules".into(),
            &[],
            Err(Rule::Target),
        ),
        (
            100,
            Put,
            "/nodes/pve01/lxc/100/firewall/options".into(),
            &[],
            Err(Rule::Target),
        ),
        (
            100,
            Post,
            "/nodes/pve03/qemu/100/firewall/rules".into(),
            &[],
            Err(Rule::Target),
        ),
        // A guest proxops does not own (untagged, tagged without its mark, a copy of another
        // proxops guest), or one that does not exist: nothing is written to its firewall.
        (
            101,
            Post,
            "/nodes/pve01/qemu/101/firewall/rules".into(),
            &[],
            Err(Rule::Ownership),
        ),
        (
            102,
            Put,
            "/nodes/pve01/qemu/102/firewall/options".into(),
            &[],
            Err(Rule::Ownership),
        ),
        (
            103,
            Put,
            "/nodes/pve01/qemu/103/firewall/options".into(),
            &[],
            Err(Rule::Ownership),
        ),
        (
            104,
            Put,
            "/nodes/pve01/qemu/104/firewall/options".into(),
            &[],
            Err(Rule::Ownership),
        ),
    ] {
        assert_eq!(
            check_calls(&[call(method, &path, params)], &scope(owner, false)).map_err(|r| r.rule),
            expected,
            "guest {owner}: {method:?} {path} {params:?}"
        );
    }
}

/// A guest that does not live yet is written only when a manifest the object depends on
/// creates it in this apply (the writes run after that manifest's); a live guest proxops does
/// not own stays refused whatever the dependency says.
#[test]
fn a_guest_created_in_this_apply_takes_its_firewall_after_it() {
    let live = |v: u64| (v == 101).then(|| guest("prod", 101));
    let nodes: HashSet<String> = ["pve01".to_string()].into();
    let any = |_: &LiveGuest| true;
    let scope = |owner: u64, created_in_run: bool| Scope {
        vmid: None,
        guest_scope: Some((owner, "firewall", created_in_run)),
        clone_sources: Vec::new(),
        nodes: Box::leak(Box::new(nodes.clone())),
        offline: Box::leak(Box::new(HashSet::new())),
        ha_marked: &|_| None,
        listings: &[],
        named: &|_, _| NamedLive::Unread,
        prune: false,
        resource: None,
        guests: &live,
        named_elsewhere: &|_| None,
        manageable: &any,
        pool: &|_| Ok(()),
        take_over: None,
        named_type: &|_, _| None,
    };
    for (owner, created_in_run, expected) in [
        (200, true, Ok(())),
        (200, false, Err(Rule::Ownership)),
        (101, true, Err(Rule::Ownership)),
    ] {
        let path = format!("/nodes/pve01/qemu/{owner}/firewall/rules");
        assert_eq!(
            check_calls(
                &[call(Method::Post, &path, &[("type", "in")])],
                &scope(owner, created_in_run)
            )
            .map_err(|r| r.rule),
            expected,
            "guest {owner}, created in this apply: {created_in_run}"
        );
    }
}

/// A guest create or clone that names a pool (`pool=`) adds the guest to that pool: allowed
/// only into a pool carrying proxops's mark, or one an object this guest depends on creates
/// in this apply; an unread `/pools` listing proves nothing. (pool's live state, created in
/// this apply, allowed)
#[test]
fn a_guest_joins_only_a_pool_proxops_owns() {
    let marked = || NamedLive::Present {
        comment: "web tier (proxops:web)".into(),
    };
    for (live, created, ok) in [
        (marked(), false, true),
        (
            NamedLive::Present {
                comment: "hand made".into(),
            },
            false,
            false,
        ),
        (
            NamedLive::Present {
                comment: "proxops:other".into(),
            },
            true,
            false,
        ),
        (NamedLive::Absent, true, true),
        (NamedLive::Absent, false, false),
        (NamedLive::Unread, true, false),
    ] {
        assert_eq!(
            pool_owned("web", live.clone(), created).is_ok(),
            ok,
            "{live:?} created {created}"
        );
    }
    // Through check_calls, by the request: a create or clone with `pool`, whatever the action
    // says; a write without `pool` never asks.
    let nodes: HashSet<String> = ["pve01".to_string()].into();
    let offline = HashSet::new();
    let template = guest("proxops;proxops-9000", 9000);
    let live = move |v: u64| (v == 9000).then(|| template.clone());
    let only_web = |id: &str| {
        pool_owned(
            id,
            if id == "web" {
                marked()
            } else {
                NamedLive::Absent
            },
            false,
        )
    };
    let scope = Scope {
        vmid: Some(100),
        guest_scope: None,
        clone_sources: vec![9000],
        nodes: &nodes,
        offline: &offline,
        ha_marked: &|_| None,
        listings: &[],
        named: &|_, _| NamedLive::Unread,
        prune: false,
        resource: Some("qemu/100"),
        guests: &live,
        named_elsewhere: &|_| None,
        manageable: &|g: &LiveGuest| g.tagged(),
        pool: &only_web,
        take_over: None,
        named_type: &|_, _| None,
    };
    use Method::*;
    for (path, params, expected) in [
        (
            "/nodes/pve01/qemu",
            vec![("vmid", "100"), ("pool", "web")],
            Ok(()),
        ),
        (
            "/nodes/pve01/qemu",
            vec![("vmid", "100"), ("pool", "ops")],
            Err(Rule::Ownership),
        ),
        ("/nodes/pve01/qemu", vec![("vmid", "100")], Ok(())),
        (
            "/nodes/pve01/qemu/9000/clone",
            vec![("newid", "100"), ("pool", "ops")],
            Err(Rule::Ownership),
        ),
        (
            "/nodes/pve01/qemu/9000/clone",
            vec![("newid", "100"), ("pool", "web")],
            Ok(()),
        ),
    ] {
        let got = check_calls(&[call(Post, path, &params)], &scope);
        assert_eq!(
            got.as_ref().map_err(|r| r.rule),
            expected.as_ref().map_err(|r| *r),
            "{path} {params:?}"
        );
        if let Err(r) = got {
            assert!(
                r.what.contains("proxops cannot prove it owns: pool"),
                "{}",
                r.what
            );
        }
    }
}
