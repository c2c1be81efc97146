//! Named objects, case by case: the mark, the take-over claim, and a guest's `pool=`.

use super::*;

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
