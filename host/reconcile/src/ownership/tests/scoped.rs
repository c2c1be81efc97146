//! Guest-scoped objects (a VM's firewall), case by case: owned through their guest.

use super::*;

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
