//! Targets and effects: what a write reaches in PVE's view, and what it does there.

use super::*;

#[test]
fn writes_are_judged_by_what_pve_routes() {
    let guest = |vmid, kind, rest: &[&str]| Target::Guest {
        node: "pve01".into(),
        kind,
        vmid,
        rest: rest.iter().map(|s| s.to_string()).collect(),
    };
    let endpoint = |node: Option<&str>, needs| Target::Endpoint {
        node: node.map(str::to_string),
        needs,
    };
    use Capability::*;
    use GuestType::*;
    for (path, pairs, expected) in [
        (
            "/nodes/pve01/lxc/101/config",
            &[][..],
            Ok(guest(101, Lxc, &["config"])),
        ),
        ("/nodes/pve01/qemu/100", &[], Ok(guest(100, Qemu, &[]))),
        (
            "/nodes/pve01/lxc",
            &[("vmid", "150")],
            Ok(Target::NewGuest {
                node: "pve01".into(),
                kind: Lxc,
                vmid: 150,
            }),
        ),
        ("/nodes/pve01/lxc", &[("vmid", "0150")], Err(Rule::Target)),
        (
            "/cluster/ha/resources",
            &[("sid", "vm:150")],
            Ok(Target::HaResource {
                vmid: 150,
                create: true,
                rest: vec![],
            }),
        ),
        (
            "/cluster/ha/resources/ct%3A7/migrate",
            &[("node", "pve02")],
            Ok(Target::HaResource {
                vmid: 7,
                create: false,
                rest: vec!["migrate".into()],
            }),
        ),
        (
            "/cluster/ha/resources/100",
            &[],
            Ok(Target::HaResource {
                vmid: 100,
                create: false,
                rest: vec![],
            }),
        ),
        (
            "/cluster/ha/resources",
            &[("sid", "vm:01")],
            Err(Rule::Target),
        ),
        ("/cluster/ha/resources/fw%3A1", &[], Err(Rule::Target)),
        ("/cluster/ha/rules", &[], Ok(endpoint(None, ClusterConfig))),
        ("/nodes/pve01/lxc", &[], Err(Rule::Target)),
        ("/nodes/pve01/lxc/0101/config", &[], Err(Rule::Path)),
        (
            "/nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-100-disk-0",
            &[],
            Ok(Target::Volume {
                node: "pve01".into(),
                storage: "local-lvm".into(),
                volume: "local-lvm:vm-100-disk-0".into(),
                owner: Some(100),
            }),
        ),
        (
            "/nodes/pve01/storage/local/content/iso%2Fx.iso",
            &[],
            Ok(Target::Volume {
                node: "pve01".into(),
                storage: "local".into(),
                volume: "local:iso/x.iso".into(),
                owner: None,
            }),
        ),
        (
            "/nodes/pve01/storage/local/download-url",
            &[],
            Ok(Target::NewFile {
                node: "pve01".into(),
                storage: "local".into(),
            }),
        ),
        (
            "/nodes/pve01/storage/local/content/local-lvm%3Avm-1-disk-0",
            &[],
            Err(Rule::Volume),
        ),
        (
            "/nodes/pve01/stopall",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
        (
            "/nodes/pve01/startall",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
        (
            "/nodes/pve01/migrateall",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
        (
            "/nodes/pve01/suspendall",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
        (
            "/nodes/pve01/status",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
        (
            "/nodes/pve01/execute",
            &[],
            Ok(endpoint(Some("pve01"), NodeExec)),
        ),
        (
            "/nodes/pve01/termproxy",
            &[],
            Ok(endpoint(Some("pve01"), NodeExec)),
        ),
        (
            "/nodes/pve01/network",
            &[],
            Ok(endpoint(Some("pve01"), NetworkConfig)),
        ),
        (
            "/nodes/pve01/network/vmbr9",
            &[],
            Ok(endpoint(Some("pve01"), NetworkConfig)),
        ),
        (
            "/nodes/pve01/apt/update",
            &[],
            Ok(endpoint(Some("pve01"), Apt)),
        ),
        (
            "/nodes/pve01/dns",
            &[],
            Ok(endpoint(Some("pve01"), NodeConfig)),
        ),
        (
            "/nodes/pve01/tasks/UPID:x/status",
            &[],
            Ok(endpoint(Some("pve01"), NodeConfig)),
        ),
        (
            "/nodes/pve01/storage/local",
            &[],
            Ok(endpoint(Some("pve01"), StorageConfig)),
        ),
        (
            "/nodes/pve01/qemu/100/monitor",
            &[],
            Ok(endpoint(Some("pve01"), GuestExec)),
        ),
        (
            "/nodes/pve01/qemu/100/agent/exec",
            &[],
            Ok(endpoint(Some("pve01"), GuestExec)),
        ),
        (
            "/nodes/pve01/qemu/100/agent/ping",
            &[],
            Ok(guest(100, Qemu, &["agent", "ping"])),
        ),
        // A guest's firewall is a write to that guest (owned through it); the cluster's
        // security groups are network configuration until a kind's listing names them.
        (
            "/nodes/pve01/qemu/100/firewall/rules/3",
            &[("moveto", "0")],
            Ok(guest(100, Qemu, &["firewall", "rules", "3"])),
        ),
        (
            "/nodes/pve01/lxc/101/firewall/options",
            &[],
            Ok(guest(101, Lxc, &["firewall", "options"])),
        ),
        (
            "/cluster/firewall/groups/web/0",
            &[],
            Ok(endpoint(None, NetworkConfig)),
        ),
        ("/access/users", &[], Ok(endpoint(None, Access))),
        ("/access/acl", &[], Ok(endpoint(None, Access))),
        ("/storage", &[], Ok(endpoint(None, StorageConfig))),
        ("/cluster/options", &[], Ok(endpoint(None, ClusterConfig))),
        ("/cluster/sdn", &[], Ok(endpoint(None, NetworkConfig))),
        ("/pools", &[], Ok(endpoint(None, ClusterConfig))),
        // PVE decodes the whole path before it routes: an encoded `/` is a separator to it.
        (
            "/nodes/pve01%2Fstopall",
            &[],
            Ok(endpoint(Some("pve01"), NodePower)),
        ),
    ] {
        assert_eq!(target(path, pairs), expected, "{path} {pairs:?}");
    }
}

#[test]
fn volumes_belong_to_the_guest_pve_names() {
    for (name, owner) in [
        ("vm-100-disk-0", Some(100)),
        ("base-9000-disk-0", Some(9000)),
        ("subvol-101-disk-0", Some(101)),
        ("basevol-101-disk-0", Some(101)),
        ("100/vm-100-disk-0.qcow2", Some(100)),
        (
            "9000/base-9000-disk-0.qcow2/100/vm-100-disk-1.qcow2",
            Some(100),
        ),
        ("101/something.raw", Some(101)),
        (
            "backup/vzdump-qemu-100-2026_01_01-00_00_00.vma.zst",
            Some(100),
        ),
        (
            "backup/vzdump-lxc-101-2026_01_01-00_00_00.tar.zst",
            Some(101),
        ),
        ("iso/ubuntu.iso", None),
        ("vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", None),
        ("import/disk.qcow2", None),
        ("snippets/user.yaml", None),
        ("vm-x-disk-0", None),
    ] {
        assert_eq!(volume_owner(name), owner, "{name}");
    }
}

#[test]
fn effects_come_from_the_calls() {
    let e = |method, path: &str| effect(method, &target(path, &[]).expect("a target"), &[]);
    let none = Effect::default();
    let stops = Effect {
        destroys: false,
        disturbs: true,
    };
    assert_eq!(
        e(Method::Delete, "/nodes/pve01/lxc/101"),
        Effect {
            destroys: true,
            disturbs: true
        }
    );
    assert_eq!(
        e(
            Method::Delete,
            "/nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-1-disk-0"
        ),
        Effect {
            destroys: true,
            disturbs: false
        }
    );
    for op in [
        "stop",
        "shutdown",
        "suspend",
        "reboot",
        "reset",
        "hibernate",
    ] {
        assert_eq!(
            e(Method::Post, &format!("/nodes/pve01/qemu/100/status/{op}")),
            stops,
            "{op}"
        );
    }
    assert_eq!(e(Method::Post, "/nodes/pve01/qemu/100/status/start"), none);
    // HA stops a guest whose resource is set to `stopped` or `disabled`.
    let ha = |method, path: &str, params: &[(&str, &str)]| {
        let params = super::params(params);
        let target = Target::of(&pve_view(path), &params).expect("a target");
        effect(method, &target, &params)
    };
    let create = "/cluster/ha/resources";
    for (state, effect) in [("stopped", stops), ("disabled", stops), ("started", none)] {
        assert_eq!(
            ha(Method::Post, create, &[("sid", "vm:1"), ("state", state)]),
            effect,
            "{state}"
        );
        assert_eq!(
            ha(
                Method::Put,
                "/cluster/ha/resources/vm%3A1",
                &[("state", state)]
            ),
            effect,
            "{state}"
        );
    }
    assert_eq!(
        ha(Method::Delete, "/cluster/ha/resources/vm%3A1", &[]),
        none
    );
    assert_eq!(e(Method::Put, "/nodes/pve01/lxc/101/config"), none);
    assert_eq!(e(Method::Delete, "/nodes/pve01/lxc/101/snapshot/x"), none);
}
