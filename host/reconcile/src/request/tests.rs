//! The canonical form, targets and capabilities of proposed requests, case by case.

use super::capability::*;
use super::form::*;
use super::target::*;
use super::*;
use proxops_core::grant::Capability;
use proxops_runtime::kind::{Call, CallPattern, Method, Param};

fn pattern(method: Method, path: &str) -> CallPattern {
    CallPattern {
        method,
        path: path.into(),
    }
}

fn params(pairs: &[(&str, &str)]) -> Vec<Param> {
    pairs
        .iter()
        .map(|(n, v)| Param {
            name: n.to_string(),
            value: v.to_string(),
            sensitive: false,
        })
        .collect()
}

/// Templates a hostile kind might be granted because they look ordinary.
fn declared() -> Vec<CallPattern> {
    use Method::*;
    vec![
        pattern(Get, "/cluster/resources"),
        pattern(Get, "/nodes/{node}/lxc/{vmid}/config"),
        pattern(Put, "/nodes/{node}/lxc/{vmid}/config"),
        pattern(Post, "/nodes/{node}/lxc"),
        pattern(Post, "/nodes/{node}/{op}"),
        pattern(Delete, "/nodes/{node}/storage/{storage}/content/{volume}"),
        pattern(Post, "/{area}/{what}"),
    ]
}

/// `canonical`: the path the host sends, or the rule that refuses it.
fn check(method: Method, path: &str, expected: Result<&str, Rule>) {
    let got = canonical(method, path, &declared());
    match (&got, expected) {
        (Ok(sent), Ok(want)) => assert_eq!(sent, want, "{path}"),
        (Err(r), Err(rule)) => {
            assert_eq!(r.rule, rule, "{path}: {r}");
            assert!(
                r.to_string().ends_with(&format!("(sandbox rule `{rule}`)")),
                "{r}"
            );
        }
        _ => panic!("{method:?} {path}: got {got:?}, expected {expected:?}"),
    }
}

#[test]
fn paths_are_sent_in_the_form_the_host_builds() {
    use Method::*;
    let config = "/nodes/pve01/lxc/101/config";
    check(Get, config, Ok(config));
    check(Put, config, Ok(config));
    // Letters spelt as escapes are the same path, sent plainly.
    check(Put, "/nodes/pve01/%6cxc/101/config", Ok(config));
    check(Put, "/nodes/%70ve01/lxc/101/config", Ok(config));
    // A volume's `:` and `/` are encoded once, whatever the kind wrote.
    let volume = "/nodes/pve01/storage/local/content/local%3Aiso%2Fx.iso";
    check(Delete, volume, Ok(volume));
    check(
        Delete,
        "/nodes/pve01/storage/local/content/local:iso%2fx.iso",
        Ok(volume),
    );
    for (path, rule) in [
        // Identity: a vmid segment is a canonical decimal.
        ("/nodes/pve01/lxc/0101/config", Rule::Path),
        ("/nodes/pve01/lxc/+101/config", Rule::Path),
        ("/nodes/pve01/lxc/101%20/config", Rule::Path),
        ("/nodes/pve01/lxc/1e2/config", Rule::Path),
        // What the URL parser or PVE read another way.
        ("/nodes/pve01/lxc/101\\..\\..\\access/config", Rule::Path),
        ("/nodes/pve01/lxc/101/config?x=1", Rule::Path),
        ("/nodes/pve01/lxc/101/config#x", Rule::Path),
        ("/nodes/pve01/lxc/101/../102/config", Rule::Path),
        ("/nodes/pve01/lxc/%2e%2e/config", Rule::Path),
        ("/nodes/pve01/lxc/%2E%2e/config", Rule::Path),
        ("/nodes/pve01/lxc/./101/config", Rule::Path),
        ("/nodes/pve01/lxc/101%2f..%2f102/config", Rule::Path),
        ("/nodes/pve01/lxc/101%00/config", Rule::Path),
        ("/nodes/pve01/lxc/101\n/config", Rule::Path),
        ("/nodes/pve01/lxc/%252e%252e/config", Rule::Path),
        ("/nodes/pve01/lxc/%zz/config", Rule::Path),
        ("/nodes/pve01%5C..%5Caccess/lxc/101/config", Rule::Path),
        ("/nodes/pve01/lxc//config", Rule::Path),
        ("/nodes/pve01/lxc/101/config/", Rule::Path),
        ("nodes/pve01/lxc/101/config", Rule::Path),
        ("/nodes/pve01/lxc/101/cönfig", Rule::Path),
        // A generic placeholder holds a plain value only.
        ("/nodes/pve01/%2e%2e", Rule::Path),
        ("/access/users%2F..%2Fgroups", Rule::Path),
        // A volume with a dot segment, or on no storage id.
        (
            "/nodes/pve01/storage/local/content/local%3Aiso%2F..%2F..%2Fx",
            Rule::Path,
        ),
        (
            "/nodes/pve01/storage/local/content/%2Fetc%2Fpasswd",
            Rule::Path,
        ),
        // Not declared: another shape or method.
        ("/nodes/pve01/qemu/100/config", Rule::Declared),
        ("/version", Rule::Declared),
    ] {
        let method = if path.contains("/storage/") {
            Delete
        } else {
            Put
        };
        let method = if path.starts_with("/access") || path.matches('/').count() == 2 {
            Post
        } else {
            method
        };
        check(method, path, Err(rule));
    }
    check(Delete, config, Err(Rule::Declared));
}

#[test]
fn parameter_names_are_plain_and_given_once() {
    let check = |pairs: &[(&str, &str)], ok: bool| {
        let got = check_params(&params(pairs));
        assert_eq!(got.is_ok(), ok, "{pairs:?}: {got:?}");
        if let Err(r) = got {
            assert_eq!(r.rule, Rule::Params);
        }
    };
    check(
        &[("memory", "512"), ("net0", "x"), ("lxc.cgroup", "x")],
        true,
    );
    check(&[("unprivileged", "1"), ("unprivileged", "0")], false);
    check(&[("unprivileged", "1"), ("Unprivileged", "0")], false);
    check(&[("mem ory", "1")], false);
    check(&[("memory\n", "1")], false);
    check(&[("", "1")], false);
    check(&[("a[0]", "1")], false);
}

fn target(path: &str, pairs: &[(&str, &str)]) -> Result<Target, Rule> {
    Target::of(&pve_view(path), &params(pairs)).map_err(|r| r.rule)
}

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
    let e = |method, path: &str| effect(method, &target(path, &[]).expect("a target"));
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
    assert_eq!(e(Method::Put, "/nodes/pve01/lxc/101/config"), none);
    assert_eq!(e(Method::Delete, "/nodes/pve01/lxc/101/snapshot/x"), none);
}

/// The capabilities a write's parameters use, or the rule that refuses them.
fn caps(method: Method, path: &str, pairs: &[(&str, &str)], expected: Result<&[Capability], Rule>) {
    let t = target(path, pairs).expect("a target");
    let got = capabilities_used(method, &t, &params(pairs)).map_err(|r| r.rule);
    assert_eq!(got.as_deref().map_err(|r| *r), expected, "{path} {pairs:?}");
}

#[test]
fn capabilities_are_read_as_pve_parses_parameters() {
    use Capability::*;
    use Method::*;
    let create = "/nodes/pve01/lxc";
    let ct = "/nodes/pve01/lxc/101/config";
    let vm = "/nodes/pve01/qemu/100/config";
    let v = ("vmid", "101");
    caps(Post, create, &[v, ("unprivileged", "1")], Ok(&[]));
    caps(Post, create, &[v], Ok(&[Privileged]));
    caps(Post, create, &[v, ("unprivileged", "0")], Ok(&[Privileged]));
    caps(
        Post,
        create,
        &[v, ("unprivileged", " 1")],
        Ok(&[Privileged]),
    );
    caps(
        Post,
        create,
        &[v, ("unprivileged", "true")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("unprivileged", "1")], Ok(&[Privileged]));
    caps(Put, ct, &[("unprivileged", "0")], Ok(&[Privileged]));
    caps(
        Put,
        ct,
        &[("delete", "memory,unprivileged")],
        Ok(&[Privileged]),
    );
    caps(
        Put,
        ct,
        &[("delete", "memory;UNPRIVILEGED")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("revert", "unprivileged")], Ok(&[Privileged]));
    caps(Put, ct, &[("memory", "512")], Ok(&[]));
    caps(Put, ct, &[("mp0", "local-lvm:8,mp=/data")], Ok(&[]));
    caps(Put, ct, &[("mp0", "/srv,mp=/data")], Ok(&[BindMounts]));
    caps(
        Put,
        ct,
        &[("mp0", "mp=/data,volume=/srv")],
        Ok(&[BindMounts]),
    );
    caps(
        Put,
        ct,
        &[("MP0", "mp=/data,volume=/srv")],
        Ok(&[BindMounts]),
    );
    caps(
        Put,
        ct,
        &[("mp0", "local-lvm:8,volume=/srv,mp=/x")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("mp0", "volume=local-lvm:8,volume=/srv,mp=/x")],
        Err(Rule::Capability),
    );
    caps(Put, ct, &[("mp0", "srv,mp=/x")], Err(Rule::Capability));
    caps(Put, ct, &[("rootfs", "/")], Ok(&[BindMounts]));
    caps(
        Put,
        ct,
        &[("mp1", "/dev/sdb,mp=/mnt")],
        Ok(&[BindMounts, Devices]),
    );
    caps(Put, ct, &[("features", "nesting=1")], Ok(&[]));
    caps(
        Put,
        ct,
        &[("features", "nesting=1,keyctl=1")],
        Ok(&[Privileged]),
    );
    caps(Put, ct, &[("features", "mount=nfs")], Ok(&[Privileged]));
    caps(
        Put,
        ct,
        &[("features", "nesting=1,nesting=0")],
        Err(Rule::Capability),
    );
    caps(Put, ct, &[("dev0", "/dev/sda")], Ok(&[Devices]));
    caps(
        Put,
        ct,
        &[("lxc.apparmor.profile", "unconfined")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("delete", "lxc.apparmor.profile")],
        Err(Rule::Capability),
    );
    caps(
        Put,
        ct,
        &[("hookscript", "local:snippets/x.pl")],
        Ok(&[Hookscript]),
    );
    caps(
        Put,
        ct,
        &[("whatever", "/etc/shadow")],
        Err(Rule::Capability),
    );
    caps(Post, vm, &[("serial0", "socket")], Ok(&[]));
    caps(Post, vm, &[("serial0", "/dev/ttyS0")], Ok(&[Devices]));
    caps(Post, vm, &[("parallel0", "/dev/parport0")], Ok(&[Devices]));
    caps(Post, vm, &[("hostpci0", "mapping=gpu")], Ok(&[Devices]));
    caps(Post, vm, &[("usb0", "host=1234:5678")], Ok(&[Devices]));
    caps(Post, vm, &[("scsi1", "/dev/sdb")], Ok(&[Devices]));
    caps(
        Post,
        vm,
        &[("scsi1", "file=/dev/sdb,size=8G")],
        Ok(&[Devices]),
    );
    caps(
        Post,
        vm,
        &[("virtio0", "local-lvm:8,import-from=/var/lib/x.qcow2")],
        Ok(&[Devices]),
    );
    caps(
        Post,
        vm,
        &[("scsi1", "local-lvm:8,file=/dev/sdb")],
        Err(Rule::Capability),
    );
    caps(
        Post,
        vm,
        &[("scsi1", "local-lvm:vm-100-disk-1,size=8G")],
        Ok(&[]),
    );
    caps(Post, vm, &[("args", "-device x")], Err(Rule::Capability));
    caps(
        Post,
        vm,
        &[("memory", "2048"), ("description", "a /path inside")],
        Ok(&[]),
    );
}

#[test]
fn values_for_messages_are_escaped_and_short() {
    assert_eq!(shown("/nodes/pve01"), "/nodes/pve01");
    assert_eq!(shown("a\nb"), "\"a\\nb\"");
    assert_eq!(shown("\u{1b}[2J"), "\"\\u{1b}[2J\"");
    assert_eq!(shown(""), "\"\"");
    assert!(shown(&"x".repeat(200)).ends_with("x…"));
    assert_eq!(shown(&"x".repeat(200)).chars().count(), 81);
}

/// Random calls from a fixed set of templates, values and parameters, each through the
/// whole sandbox (declared templates, canonical form, grant, ownership by target) as a
/// third-party kind whose object is guest 150 (clone source 9000): whatever is accepted is
/// decoded as PVE decodes it and must reach nothing but guest 150, its volumes, a new file,
/// or the template's clone into 150. Live: 150 (owned), 101 (untagged), 100 (another
/// manifest's), 9000 (the owned template).
#[test]
fn no_accepted_request_reaches_what_the_object_does_not_own() {
    use crate::grant::{Trust, check_call};
    use crate::ownership::{LiveGuest, Scope, check_calls};
    use proxops_runtime::kind::{Action, KindInfo, Operation};

    let templates = [
        (Method::Post, "/nodes/{node}/lxc"),
        (Method::Put, "/nodes/{node}/lxc/{vmid}/config"),
        (Method::Post, "/nodes/{node}/lxc/{vmid}/status/{op}"),
        (Method::Delete, "/nodes/{node}/lxc/{vmid}"),
        (Method::Post, "/nodes/{node}/qemu/{vmid}/clone"),
        (
            Method::Delete,
            "/nodes/{node}/storage/{storage}/content/{volume}",
        ),
        (Method::Post, "/nodes/{node}/{op}"),
        (Method::Post, "/{area}/{op}"),
        (Method::Put, "/nodes/{node}/{area}/{vmid}/{op}"),
    ];
    let info = KindInfo {
        kind: "Hostile".into(),
        api_version: "proxops/test".into(),
        folder: "hostile".into(),
        schema: "{}".into(),
        calls: templates.iter().map(|(m, p)| pattern(*m, p)).collect(),
        listings: Vec::new(),
        references_kinds: Vec::new(),
        secrets: false,
        capabilities: Vec::new(),
    };
    let trust = Trust::Granted(proxops_core::grant::Grant::default());
    let values = [
        "pve01",
        "pve02",
        "pve09",
        "150",
        "0150",
        "+150",
        "101",
        "100",
        "9000",
        "1e2",
        "150%20",
        "%31%35%30",
        "lxc",
        "qemu",
        "stopall",
        "execute",
        "access",
        "users",
        "config",
        "stop",
        "start",
        "..",
        "%2e%2e",
        "%2E%2e",
        "a\\b",
        "x?y",
        "x#y",
        "local",
        "local-lvm",
        "local-lvm%3Avm-150-disk-0",
        "local-lvm%3Avm-101-disk-0",
        "local%3A150%2Fvm-150-disk-0.qcow2",
        "local%3A100%2Fvm-100-disk-0.qcow2",
        "local%3Aiso%2Fx.iso",
        "local-lvm%3Abase-9000-disk-0",
        "local%3Aiso%2F..%2F..%2Fx",
        "pve01%2Fstopall",
        "150%2F..%2F101",
        "%00",
        "storage",
        "content",
    ];
    let param_sets: [&[(&str, &str)]; 6] = [
        &[],
        &[("vmid", "150"), ("unprivileged", "1")],
        &[("vmid", "101"), ("unprivileged", "1")],
        &[("newid", "150")],
        &[("newid", "101")],
        &[("vmid", "0150"), ("unprivileged", "1")],
    ];
    let live = |v: u64| {
        let (tags, vmid) = match v {
            150 => ("proxops;proxops-150", 150),
            101 => ("", 101),
            100 => ("proxops;proxops-100", 100),
            9000 => ("proxops;proxops-9000", 9000),
            _ => return None,
        };
        LiveGuest::from_entry(&crate::live::Entry::from_value(&serde_json::json!({
            "id": format!("lxc/{vmid}"), "type": "lxc", "vmid": vmid, "node": "pve01", "tags": tags
        })))
    };
    let named = |v: u64| (v == 100).then(|| "VM web".to_string());
    let manageable = |g: &LiveGuest| g.tagged();
    let nodes: std::collections::HashSet<String> = ["pve01".into(), "pve02".into()].into();
    let scope = Scope {
        vmid: Some(150),
        clone_sources: vec![9000],
        nodes: &nodes,
        prune: false,
        resource: Some("lxc/150"),
        guests: &live,
        named_elsewhere: &named,
        manageable: &manageable,
    };

    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let (method, template) = templates[next(templates.len())];
        let path: String = template
            .split('/')
            .map(|seg| {
                // Half the time a value that fits the placeholder, so both sides are reached.
                let fitting = match seg {
                    "{node}" => Some("pve01"),
                    "{vmid}" => Some("150"),
                    "{storage}" => Some("local-lvm"),
                    "{volume}" => Some("local-lvm%3Avm-150-disk-0"),
                    "{op}" => Some("start"),
                    _ => None,
                };
                match fitting {
                    Some(v) if next(2) == 0 => v.to_string(),
                    _ if seg.starts_with('{') => values[next(values.len())].to_string(),
                    _ => seg.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let mut call = Call {
            method,
            path,
            params: params(param_sets[next(param_sets.len())]),
        };
        let proposed = call.path.clone();
        let ok = check_call(&trust, &info, &mut call).is_ok()
            && check_calls(
                &[Action {
                    operation: Operation::Update,
                    summary: String::new(),
                    calls: vec![call.clone()],
                    changes: Vec::new(),
                    disturbs_availability: false,
                    destructive: false,
                    restore: None,
                }],
                &scope,
            )
            .is_ok();
        if !ok {
            refused += 1;
            continue;
        }
        accepted += 1;
        // The oracle: the URL as PVE routes it (the whole path decoded once, split on `/`).
        let sent = &call.path;
        assert!(
            sent.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.~%".contains(&b)),
            "{proposed} was sent as {sent}"
        );
        let decoded =
            String::from_utf8(percent_decode(sent).expect("decodes").as_bytes().to_vec()).unwrap();
        let segs: Vec<&str> = decoded.split('/').skip(1).collect();
        assert!(
            segs.iter()
                .all(|s| !s.is_empty() && *s != "." && *s != ".."),
            "{proposed} -> {decoded}"
        );
        assert_eq!(
            segs[0], "nodes",
            "{proposed} -> {decoded}: only guest and storage writes"
        );
        assert!(
            ["pve01", "pve02"].contains(&segs[1]),
            "{proposed} -> {decoded}"
        );
        let vmid_param = |n: &str| {
            call.params
                .iter()
                .find(|p| p.name == n)
                .map(|p| p.value.as_str())
        };
        match &segs[2..] {
            ["lxc" | "qemu"] => assert_eq!(vmid_param("vmid"), Some("150"), "{proposed}"),
            ["lxc" | "qemu", "9000", "clone"] => {
                assert_eq!(vmid_param("newid"), Some("150"), "{proposed}")
            }
            ["lxc" | "qemu", v, ..] => assert_eq!(*v, "150", "{proposed} -> {decoded}"),
            ["storage", _, "content", rest @ ..] => {
                let volume = rest.join("/");
                assert!(
                    volume.contains("vm-150-") || volume.contains(":150/"),
                    "{proposed} -> {decoded}: a volume of another guest or an undeclared file"
                );
            }
            other => panic!("{proposed} -> {decoded}: reached {other:?}"),
        }
    }
    // The generator reaches both sides, so the oracle judged real requests.
    eprintln!("accepted {accepted}, refused {refused}");
    assert!(
        accepted > 500 && refused > 5_000,
        "accepted {accepted}, refused {refused}"
    );
}

/// `secret::check_refs` of a call with `pairs` (`@ref` stands for this run's token of `ref`)
/// against a grant letting `note` fill `description` and `root` fill `password`: the
/// parameters then marked sensitive, or the rule that refuses the call.
fn refs(method: Method, path: &str, pairs: &[(&str, &str)], expected: Result<&[&str], Rule>) {
    use proxops_core::secret_ref::token;
    let granted: std::collections::BTreeMap<String, Vec<String>> = [
        ("note".to_string(), vec!["description".to_string()]),
        ("root".to_string(), vec!["password".to_string()]),
    ]
    .into();
    let spelled: Vec<(String, String)> = pairs
        .iter()
        .map(|(n, v)| {
            let v = match v.strip_prefix('@') {
                Some(r) => token(r),
                None => v.replace("{nonce-token}", &token("note")),
            };
            (n.to_string(), v)
        })
        .collect();
    let mut call = Call {
        method,
        path: path.replace("{nonce-token}", &token("note")),
        params: spelled
            .iter()
            .map(|(n, v)| Param {
                name: n.clone(),
                value: v.clone(),
                sensitive: false,
            })
            .collect(),
    };
    let got = secret::check_refs(&mut call, Some(&granted), "Hostile");
    match (got, expected) {
        (Ok(()), Ok(want)) => {
            let sensitive: Vec<&str> = call
                .params
                .iter()
                .filter(|p| p.sensitive)
                .map(|p| p.name.as_str())
                .collect();
            assert_eq!(sensitive, want, "{pairs:?}");
        }
        (Err(r), Err(rule)) => {
            assert_eq!(r.rule, rule, "{pairs:?}: {r}");
            let text = r.to_string();
            assert!(
                text.contains("Hostile") || !text.contains("grant"),
                "{text}"
            );
            assert!(
                !text.contains(proxops_core::secret_ref::MARK),
                "no token in: {text}"
            );
        }
        (got, want) => panic!("{method:?} {path} {pairs:?}: got {got:?}, expected {want:?}"),
    }
}

#[test]
fn secret_references_stand_only_where_the_grant_puts_them() {
    use Method::*;
    let config = "/nodes/pve01/lxc/150/config";
    // Granted: the ref's param becomes sensitive, any case of its name.
    refs(
        Put,
        config,
        &[("description", "@note")],
        Ok(&["description"]),
    );
    refs(
        Put,
        config,
        &[("Description", "@note"), ("memory", "512")],
        Ok(&["Description"]),
    );
    refs(
        Post,
        "/nodes/pve01/lxc",
        &[("password", "@root"), ("vmid", "150")],
        Ok(&["password"]),
    );
    refs(Put, config, &[("memory", "512")], Ok(&[]));
    // A ref in a parameter the grant does not name for it, or a ref it does not name.
    refs(Put, config, &[("password", "@note")], Err(Rule::Secret));
    refs(Put, config, &[("description", "@root")], Err(Rule::Secret));
    refs(Put, config, &[("description", "@other")], Err(Rule::Secret));
    // Parameters the host judges requests by, or PVE reads as host access: never, granted or not.
    for name in [
        "vmid",
        "tags",
        "digest",
        "delete",
        "mp0",
        "rootfs",
        "dev0",
        "hookscript",
        "lxc.mount.entry",
        "scsi0",
    ] {
        refs(Put, config, &[(name, "@note")], Err(Rule::Secret));
    }
    // Inside a longer value, from another run, in the path, in a read.
    refs(
        Put,
        config,
        &[("description", "x {nonce-token}")],
        Err(Rule::Secret),
    );
    refs(
        Put,
        config,
        &[(
            "description",
            "proxops-secret-ref:00000000000000000000000000000000:note",
        )],
        Err(Rule::Secret),
    );
    refs(
        Put,
        "/nodes/{nonce-token}/lxc/150/config",
        &[],
        Err(Rule::Secret),
    );
    refs(Get, config, &[("description", "@note")], Err(Rule::Secret));
    for name in ["cicustom", "rng0", "virtiofs1"] {
        refs(Put, config, &[(name, "@note")], Err(Rule::Secret));
    }
    // A bundled kind holds values and sends no reference: one in its call came from a
    // manifest's text, whatever ref it names.
    let mut call = Call {
        method: Put,
        path: config.into(),
        params: params(&[("description", &proxops_core::secret_ref::token("note"))]),
    };
    let refused = secret::check_refs(&mut call, None, "VM").unwrap_err();
    assert_eq!(refused.rule, Rule::Secret, "{refused}");
    assert!(
        refused.to_string().contains("the VM kind holds values"),
        "{refused}"
    );
}

#[test]
fn a_grant_naming_a_judged_parameter_for_a_secret_is_refused_at_load() {
    let granted: std::collections::BTreeMap<String, Vec<String>> = [
        (
            "note".to_string(),
            vec!["description".to_string(), "tags".to_string()],
        ),
        ("root".to_string(), vec!["mp0".to_string()]),
        ("ok".to_string(), vec!["password".to_string()]),
    ]
    .into();
    let problems = secret::grant_problems(&granted);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("grant.secrets.note names the parameter `tags`"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("grant.secrets.root names the parameter `mp0`"),
        "{problems:?}"
    );
}
