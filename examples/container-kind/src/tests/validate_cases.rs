//! `validate`: each case edits the base manifest and names the diagnostics it must give
//! (`(path, message)`), or none; accepted cases also check the normalised desired state.

use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::secrets::NoSecrets;
use serde_json::{Value, json};

use super::{desired, manifest, with};
use crate::ContainerKind;
use crate::desired::*;

/// Validate `doc`; compare its diagnostics (errors and warnings) with `expected`.
fn check(doc: Value, expected: &[(&str, &str)]) {
    let got: Vec<(String, String)> = match ContainerKind::validate(&doc, &NoSecrets) {
        Ok(v) => v
            .warnings
            .into_iter()
            .map(|d| (d.path, d.message))
            .collect(),
        Err(d) => d.into_iter().map(|d| (d.path, d.message)).collect(),
    };
    let got: Vec<(&str, &str)> = got.iter().map(|(p, m)| (p.as_str(), m.as_str())).collect();
    assert_eq!(got, expected, "diagnostics of {doc}");
}

/// The base manifest with `edits` gives `expected`.
fn case(edits: &[(&str, Value)], expected: &[(&str, &str)]) {
    check(with(manifest(), edits), expected);
}

#[test]
fn base_manifest_normalises() {
    let d = desired(&manifest());
    assert_eq!(
        d,
        Container {
            name: "web".into(),
            vmid: 101,
            node: "pve01".into(),
            hostname: "web".into(),
            ostemplate: "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst".into(),
            cores: Some(2),
            memory_mib: 1024,
            swap_mib: Some(512),
            rootfs: Rootfs {
                storage: "local-lvm".into(),
                size_bytes: 8 << 30
            },
            mount_points: vec![],
            nics: vec![Nic {
                slot: 0,
                name: "eth0".into(),
                bridge: "vmbr0".into(),
                ip: Some("dhcp".into()),
                gw: None,
                firewall: None,
                vlan: None,
                mac: None
            }],
            features: Features {
                nesting: Some(true),
                keyctl: None,
                fuse: None
            },
            unprivileged: true,
            onboot: Some(true),
            tags: vec!["proxops".into(), "proxops-101".into(), "web".into()],
            description: None,
            state: PowerState::Running,
            ha: None,
        }
    );
}

#[test]
fn defaults_and_normal_forms() {
    let d = desired(&with(
        manifest(),
        &[
            ("/spec/hostname", json!("web.lab.example")),
            ("/spec/tags", json!(["Web", "db", "web"])),
            ("/spec/state", json!("stopped")),
            ("/spec/unprivileged", json!(false)),
            ("/spec/swap", json!("0MiB")),
            ("/spec/nics/0/mac", json!("bc:24:11:aa:bb:cc")),
            (
                "/spec/mount-points",
                json!([
                    {"storage": "local-lvm", "size": "4GiB", "path": "/data", "backup": true},
                    {"slot": "mp7", "host-path": "/srv/media", "path": "/media", "read-only": true}
                ]),
            ),
        ],
    ));
    assert_eq!(d.hostname, "web.lab.example");
    assert_eq!(d.tags, ["db", "proxops", "proxops-101", "web"]);
    assert_eq!(d.state, PowerState::Stopped);
    assert!(!d.unprivileged);
    assert_eq!(d.swap_mib, Some(0));
    assert_eq!(d.nics[0].mac.as_deref(), Some("BC:24:11:AA:BB:CC"));
    assert_eq!(d.mount_points[0].slot, 0);
    assert_eq!(
        d.mount_points[1],
        MountPoint {
            slot: 7,
            source: MountSource::Bind {
                host_path: "/srv/media".into()
            },
            path: "/media".into(),
            read_only: Some(true),
            backup: None
        }
    );
    // The desired state survives its JSON round trip (the host hands it back as text).
    let text = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<Container>(&text).unwrap(), d);
}

#[test]
fn envelope_and_required_fields() {
    case(&[], &[]);
    case(
        &[("/kind", json!("VM"))],
        &[("kind", "must be `Container`, got `VM`")],
    );
    case(
        &[("/spec/vmid", Value::Null), ("/spec/node", Value::Null)],
        &[("spec.vmid", "is required"), ("spec.node", "is required")],
    );
    case(
        &[
            ("/spec/ostemplate", Value::Null),
            ("/spec/memory", Value::Null),
        ],
        &[
            ("spec.ostemplate", "is required"),
            ("spec.memory", "is required"),
        ],
    );
    case(
        &[("/spec/rootfs", Value::Null)],
        &[("spec.rootfs", "is required")],
    );
    case(
        &[("/spec/node", json!("pve_01"))],
        &[(
            "spec.node",
            "`pve_01` is not a PVE node name; use letters, digits and `-` (e.g. `pve01`)",
        )],
    );
    case(
        &[("/spec/vmid", json!(99))],
        &[("spec.vmid", "must be from 100 to 999999999, got 99")],
    );
}

#[test]
fn unknown_fields_name_their_path() {
    case(
        &[("/spec/memroy", json!("1GiB"))],
        &[(
            "spec.memroy",
            "unknown field `memroy`; did you mean `memory`?",
        )],
    );
    case(
        &[("/spec/rootfs/sise", json!("8GiB"))],
        &[(
            "spec.rootfs.sise",
            "unknown field `sise`; did you mean `size`?",
        )],
    );
    case(
        &[("/spec/nics/0/vlna", json!(5))],
        &[(
            "spec.nics[0].vlna",
            "unknown field `vlna`; did you mean `vlan`?",
        )],
    );
    case(
        &[("/spec/features/nesteng", json!(true))],
        &[(
            "spec.features.nesteng",
            "unknown field `nesteng`; did you mean `nesting`?",
        )],
    );
    case(
        &[("/spec/password", json!("x"))],
        &[(
            "spec.password",
            "unknown field `password`; expected one of `vmid`, `node`, `hostname`, `ostemplate`, `cores`, `memory`, `swap`, `rootfs`, `mount-points`, `nics`, `features`, `unprivileged`, `onboot`, `tags`, `description`, `state`, `ha`",
        )],
    );
}

#[test]
fn hostname_and_template() {
    case(
        &[("/spec/hostname", json!("Web_01"))],
        &[(
            "spec.hostname",
            "`Web_01` contains `W`; use lower-case letters, digits and `-` (DNS labels), separated by `.`",
        )],
    );
    case(
        &[("/spec/ostemplate", json!("local:iso/debian-12.iso"))],
        &[(
            "spec.ostemplate",
            "`local:iso/debian-12.iso` does not name a container template; the volume must be `local:vztmpl/<file>`, e.g. `local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`",
        )],
    );
    case(
        &[(
            "/spec/ostemplate",
            json!("debian-12-standard_12.7-1_amd64.tar.zst"),
        )],
        &[(
            "spec.ostemplate",
            "`debian-12-standard_12.7-1_amd64.tar.zst` is not a template volume; write `<storage>:vztmpl/<file>`, e.g. `local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`",
        )],
    );
}

#[test]
fn sizes() {
    case(
        &[("/spec/memory", json!(2048))],
        &[(
            "spec.memory",
            "size `2048` has no unit; write it with a binary unit such as `2048MiB` or `2048GiB`",
        )],
    );
    case(
        &[("/spec/memory", json!("8MiB"))],
        &[(
            "spec.memory",
            "must be at least 16MiB (PVE's minimum), got 8MiB",
        )],
    );
    case(&[("/spec/memory", json!("2GiB"))], &[]);
    case(
        &[("/spec/rootfs/size", json!("0GiB"))],
        &[("spec.rootfs.size", "must be positive; write e.g. `8GiB`")],
    );
    case(
        &[("/spec/rootfs/size", json!("1536MiB"))],
        &[(
            "spec.rootfs.size",
            "must be a whole number of GiB (PVE allocates container volumes in GiB), got 1536MiB; round it, e.g. `2GiB`",
        )],
    );
    case(
        &[("/spec/cores", json!(0))],
        &[("spec.cores", "must be from 1 to 8192, got 0")],
    );
}

#[test]
fn mount_points() {
    let mp = |v: Value| vec![("/spec/mount-points", json!([v]))];
    case(
        &mp(json!({"storage": "local-lvm", "size": "4GiB", "path": "/data"})),
        &[],
    );
    case(
        &mp(json!({"host-path": "/srv/data", "path": "/data", "read-only": true})),
        &[],
    );
    case(
        &mp(json!({"path": "/data"})),
        &[(
            "spec.mount-points[0]",
            "needs `storage` and `size` (a new volume) or `host-path` (a bind mount)",
        )],
    );
    case(
        &mp(json!({"storage": "local-lvm", "size": "4GiB", "host-path": "/srv", "path": "/data"})),
        &[(
            "spec.mount-points[0]",
            "has both `host-path` and `storage`/`size`; a mount point is either a new volume (storage and size) or a bind mount (host-path)",
        )],
    );
    case(
        &mp(json!({"host-path": "srv/data", "path": "/data"})),
        &[(
            "spec.mount-points[0].host-path",
            "`srv/data` is not an absolute path; start it with `/`",
        )],
    );
    case(
        &mp(json!({"host-path": "/srv", "path": "/data", "backup": true})),
        &[(
            "spec.mount-points[0].backup",
            "applies to volume mount points only (PVE never backs up a bind mount); remove it",
        )],
    );
    case(
        &mp(json!({"storage": "local-lvm", "size": "4GiB", "path": "/"})),
        &[(
            "spec.mount-points[0].path",
            "`/` is the root file system; configure it under spec.rootfs",
        )],
    );
    case(
        &mp(json!({"slot": "mp256", "storage": "local-lvm", "size": "4GiB", "path": "/d"})),
        &[(
            "spec.mount-points[0].slot",
            "`mp256` is not a mount point slot; write `mp0` to `mp255`",
        )],
    );
    case(
        &mp(json!({"storage": "local-lvm", "size": "-4GiB", "path": "/d"})),
        &[(
            "spec.mount-points[0].size",
            "size `-4GiB` does not start with a number; expected e.g. 512MiB or 8GiB",
        )],
    );
    case(
        &[(
            "/spec/mount-points",
            json!([
                {"slot": "mp1", "storage": "local-lvm", "size": "4GiB", "path": "/a"},
                {"storage": "local-lvm", "size": "4GiB", "path": "/a/"}
            ]),
        )],
        &[
            (
                "spec.mount-points[1].slot",
                "slot `mp1` is already used by spec.mount-points[0]; give each mount point its own slot",
            ),
            (
                "spec.mount-points[1].path",
                "`/a/` is already mounted by spec.mount-points[0]; use another path",
            ),
        ],
    );
}

#[test]
fn nics() {
    let nic = |v: Value| vec![("/spec/nics/0", v)];
    case(
        &nic(
            json!({"bridge": "vmbr0", "ip": "10.0.0.5/24", "gw": "10.0.0.1", "vlan": 20, "firewall": true, "mac": "BC:24:11:00:00:01"}),
        ),
        &[],
    );
    case(
        &nic(json!({"bridge": "vmbr0", "ip": "10.0.0.5"})),
        &[(
            "spec.nics[0].ip",
            "`10.0.0.5` is neither `dhcp` nor an IPv4 address with prefix length (e.g. `192.168.1.20/24`)",
        )],
    );
    case(
        &nic(json!({"bridge": "vmbr0", "ip": "dhcp", "gw": "10.0.0.1"})),
        &[(
            "spec.nics[0].gw",
            "a gateway needs a static `ip` (a CIDR); set `ip` or remove `gw` (DHCP supplies the gateway)",
        )],
    );
    case(
        &nic(json!({"bridge": "vmbr0", "vlan": 4095})),
        &[("spec.nics[0].vlan", "must be from 1 to 4094, got 4095")],
    );
    case(
        &nic(json!({"bridge": "vmbr0", "mac": "01:00:5E:00:00:01"})),
        &[(
            "spec.nics[0].mac",
            "`01:00:5E:00:00:01` is not a unicast MAC address; write six hex pairs with an even first octet (e.g. `BC:24:11:12:34:56`), or remove it to keep the one PVE assigned",
        )],
    );
    case(
        &nic(json!({"ip": "dhcp"})),
        &[("spec.nics[0].bridge", "is required")],
    );
    case(
        &[("/spec/nics/1", json!({"name": "eth0", "bridge": "vmbr1"}))],
        &[(
            "spec.nics[1].name",
            "`eth0` is already the name of spec.nics[0]; give each interface its own name",
        )],
    );
}

#[test]
fn tags_state_and_types() {
    case(
        &[("/spec/tags", json!(["proxops-7"]))],
        &[(
            "spec.tags[0]",
            "`proxops-7`: tags starting with `proxops-` are reserved for proxops's ownership marks; rename it",
        )],
    );
    case(
        &[("/spec/tags", json!(["-x"]))],
        &[(
            "spec.tags[0]",
            "`-x` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`",
        )],
    );
    case(
        &[("/spec/state", json!("started"))],
        &[(
            "spec.state",
            "must be one of `running`, `stopped`, got `started`",
        )],
    );
    case(
        &[("/spec/unprivileged", json!("yes"))],
        &[("spec.unprivileged", "expected true or false, got a string")],
    );
}
