//! `plan`: each case edits the base manifest and/or the converged live container and names
//! the rendered proposal (actions with their calls, drift, anomalies) it must give.

use serde_json::{Value, json};

use super::*;

/// The base manifest with `spec` edits, against the converged config with `cfg` edits (null
/// removes a key), the container `status` (`running`/`stopped`).
fn case(spec: &[(&str, Value)], cfg: &[(&str, Value)], status: &str, expected: &[&str]) {
    let doc = with(manifest(), spec);
    let cfg_edits: Vec<(String, Value)> = cfg
        .iter()
        .map(|(k, v)| (format!("/{k}"), v.clone()))
        .collect();
    let cfg_edits: Vec<(&str, Value)> = cfg_edits
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let obs = observation(Some(entry(status)), &with(config(), &cfg_edits), status);
    check_plan(Some(&doc), &obs, expected);
}

#[test]
fn converged_is_quiet() {
    case(&[], &[], "running", &[]);
    // PVE reads the description back with a final newline; tags in another order or case of
    // separators, and a MAC in lower case, are the same.
    case(
        &[
            ("/spec/description", json!("web front")),
            ("/spec/nics/0/mac", json!("bc:24:11:5e:7a:01")),
        ],
        &[
            ("description", json!("web front\n")),
            ("tags", json!("web,proxops-101 proxops")),
        ],
        "running",
        &[],
    );
    // Unowned live keys (cores absent from the manifest, a mount= feature, ip6) are left alone.
    case(
        &[("/spec/cores", Value::Null)],
        &[
            ("cores", json!(8)),
            ("features", json!("mount=nfs,nesting=1")),
            (
                "net0",
                json!("name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,ip6=auto,type=veth"),
            ),
        ],
        "running",
        &[],
    );
}

#[test]
fn create_sends_every_parameter() {
    let obs = Observation::default();
    check_plan(
        Some(&manifest()),
        &obs,
        &[
            "create: create CT 101 `web` on pve01 from local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst and start it",
            "  POST /nodes/pve01/lxc vmid=101 ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst hostname=web memory=1024 swap=512 cores=2 rootfs=local-lvm:8 net0=name=eth0,bridge=vmbr0,ip=dhcp,type=veth features=nesting=1 unprivileged=1 onboot=1 tags=proxops;proxops-101;web start=1",
            "drift : - -> CT 101 `web` on pve01",
        ],
    );
    let full = with(
        manifest(),
        &[
            ("/spec/state", json!("stopped")),
            ("/spec/unprivileged", json!(false)),
            ("/spec/swap", Value::Null),
            ("/spec/cores", Value::Null),
            ("/spec/onboot", Value::Null),
            ("/spec/description", json!("build box")),
            (
                "/spec/features",
                json!({"keyctl": true, "nesting": true, "fuse": false}),
            ),
            (
                "/spec/nics/0",
                json!({"bridge": "vmbr0", "ip": "10.0.0.5/24", "gw": "10.0.0.1", "vlan": 20, "firewall": true, "mac": "BC:24:11:00:00:05"}),
            ),
            (
                "/spec/mount-points",
                json!([
                    {"storage": "local-lvm", "size": "4GiB", "path": "/data", "backup": true},
                    {"slot": "mp5", "host-path": "/srv/media", "path": "/media", "read-only": true}
                ]),
            ),
        ],
    );
    check_plan(
        Some(&full),
        &obs,
        &[
            "create: create CT 101 `web` on pve01 from local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            "  POST /nodes/pve01/lxc vmid=101 ostemplate=local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst hostname=web memory=1024 rootfs=local-lvm:8 mp0=local-lvm:4,mp=/data,backup=1 mp5=/srv/media,mp=/media,ro=1 net0=name=eth0,bridge=vmbr0,firewall=1,gw=10.0.0.1,hwaddr=BC:24:11:00:00:05,ip=10.0.0.5/24,tag=20,type=veth features=fuse=0,keyctl=1,nesting=1 unprivileged=0 tags=proxops;proxops-101;web description=build box",
            "drift : - -> CT 101 `web` on pve01",
        ],
    );
}

#[test]
fn scalar_drift_is_one_config_write_with_digest() {
    case(
        &[
            ("/spec/memory", json!("2GiB")),
            ("/spec/swap", json!("0MiB")),
            ("/spec/cores", json!(4)),
        ],
        &[],
        "running",
        &[
            "update: update CT 101 on pve01: memory, swap, cores",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e memory=2048 swap=0 cores=4",
            "drift spec.memory: 1024 -> 2048",
            "drift spec.swap: 512 -> 0",
            "drift spec.cores: 2 -> 4",
        ],
    );
    case(
        &[
            ("/spec/hostname", json!("www")),
            ("/spec/onboot", json!(false)),
            ("/spec/description", json!("new")),
        ],
        &[("description", json!("old\n"))],
        "running",
        &[
            "update: update CT 101 on pve01: hostname, onboot, description",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e hostname=www onboot=0 description=new",
            "drift spec.hostname: web -> www",
            "drift spec.onboot: 1 -> 0",
            "drift spec.description: old\n -> new",
        ],
    );
    // Tags: the manifest owns the set (a tag added in PVE is removed, the marks restored).
    case(
        &[],
        &[("tags", json!("proxops;web;manual"))],
        "running",
        &[
            "update: update CT 101 on pve01: tags",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e tags=proxops;proxops-101;web",
            "drift spec.tags: proxops;web;manual -> proxops;proxops-101;web",
        ],
    );
}

#[test]
fn features_keep_unowned_tokens() {
    case(
        &[("/spec/features", json!({"nesting": true, "keyctl": true}))],
        &[("features", json!("mount=nfs;cifs,nesting=1"))],
        "stopped",
        &[
            "update: update CT 101 on pve01: features",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e features=keyctl=1,mount=nfs;cifs,nesting=1",
            "step power: start CT 101 on pve01",
            "  POST /nodes/pve01/lxc/101/status/start",
            "drift spec.features.keyctl: false -> true",
            "drift spec.state: stopped -> running",
        ],
    );
    case(
        &[("/spec/features", json!({"nesting": false}))],
        &[("features", Value::Null)],
        "running",
        &[],
    );
}

#[test]
fn nics() {
    // A changed bridge and VLAN keep the PVE-assigned MAC and the unowned tokens.
    case(
        &[(
            "/spec/nics/0",
            json!({"bridge": "vmbr1", "ip": "dhcp", "vlan": 30}),
        )],
        &[(
            "net0",
            json!("name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,mtu=1450,type=veth"),
        )],
        "running",
        &[
            "update: update CT 101 on pve01: net0",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e net0=name=eth0,bridge=vmbr1,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,mtu=1450,tag=30,type=veth",
            "drift spec.nics[0].bridge: vmbr0 -> vmbr1",
            "drift spec.nics[0].vlan: - -> 30",
        ],
    );
    // A pinned MAC is written; a static address with its gateway.
    case(
        &[(
            "/spec/nics/0",
            json!({"bridge": "vmbr0", "ip": "10.0.0.5/24", "gw": "10.0.0.1", "mac": "BC:24:11:00:00:05"}),
        )],
        &[],
        "running",
        &[
            "update: update CT 101 on pve01: net0",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e net0=name=eth0,bridge=vmbr0,gw=10.0.0.1,hwaddr=BC:24:11:00:00:05,ip=10.0.0.5/24,type=veth",
            "drift spec.nics[0].gw: - -> 10.0.0.1",
            "drift spec.nics[0].mac: BC:24:11:5E:7A:01 -> BC:24:11:00:00:05",
            "drift spec.nics[0].ip: dhcp -> 10.0.0.5/24",
        ],
    );
    // Back to DHCP drops the gateway; a new NIC is added; an undeclared one is deleted.
    case(
        &[("/spec/nics/1", json!({"bridge": "vmbr1"}))],
        &[
            (
                "net0",
                json!(
                    "name=eth0,bridge=vmbr0,gw=10.0.0.1,hwaddr=BC:24:11:5E:7A:01,ip=10.0.0.5/24,type=veth"
                ),
            ),
            (
                "net2",
                json!("name=eth2,bridge=vmbr9,hwaddr=BC:24:11:5E:7A:09,type=veth"),
            ),
        ],
        "running",
        &[
            "update: update CT 101 on pve01: net0, net1, net2",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e net0=name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth net1=name=eth1,bridge=vmbr1,type=veth delete=net2",
            "drift spec.nics[0].ip: 10.0.0.5/24 -> dhcp",
            "drift spec.nics[0].gw: 10.0.0.1 -> -",
            "drift spec.nics[1]: - -> name=eth1,bridge=vmbr1,type=veth",
            "drift spec.nics (net2): name=eth2,bridge=vmbr9,hwaddr=BC:24:11:5E:7A:09,type=veth -> -",
        ],
    );
}

#[test]
fn volumes() {
    // Growing the root volume and adding a mount point.
    case(
        &[
            ("/spec/rootfs/size", json!("12GiB")),
            (
                "/spec/mount-points",
                json!([{"storage": "local-lvm", "size": "4GiB", "path": "/data", "backup": true}]),
            ),
        ],
        &[],
        "running",
        &[
            "update: update CT 101 on pve01: mp0, rootfs.size",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e mp0=local-lvm:4,mp=/data,backup=1",
            "  PUT /nodes/pve01/lxc/101/resize disk=rootfs size=12G",
            "drift spec.rootfs.size: 8GiB -> 12GiB",
            "drift spec.mount-points[0]: - -> local-lvm:4,mp=/data,backup=1",
        ],
    );
    // A live mount point: converged, then options and size changed in place.
    let mp = json!([{"storage": "local-lvm", "size": "4GiB", "path": "/data", "backup": true}]);
    let live_mp = json!("local-lvm:vm-101-disk-1,mp=/data,backup=1,size=4G");
    case(
        &[("/spec/mount-points", mp.clone())],
        &[("mp0", live_mp.clone())],
        "running",
        &[],
    );
    case(
        &[(
            "/spec/mount-points",
            json!([{"storage": "local-lvm", "size": "6GiB", "path": "/srv", "read-only": true}]),
        )],
        &[("mp0", live_mp.clone())],
        "running",
        &[
            "update: update CT 101 on pve01: mp0, mp0.size",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e mp0=local-lvm:vm-101-disk-1,mp=/srv,backup=1,ro=1,size=4G",
            "  PUT /nodes/pve01/lxc/101/resize disk=mp0 size=6G",
            "drift spec.mount-points[0].size: 4GiB -> 6GiB",
            "drift spec.mount-points[0].path: /data -> /srv",
            "drift spec.mount-points[0].read-only: - -> 1",
        ],
    );
    // A bind mount whose host path changed is rewritten.
    case(
        &[(
            "/spec/mount-points",
            json!([{"host-path": "/srv/new", "path": "/media"}]),
        )],
        &[("mp0", json!("/srv/old,mp=/media"))],
        "stopped",
        &[
            "update: update CT 101 on pve01: mp0",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e mp0=/srv/new,mp=/media",
            "step power: start CT 101 on pve01",
            "  POST /nodes/pve01/lxc/101/status/start",
            "drift spec.mount-points[0].host-path: /srv/old -> /srv/new",
            "drift spec.state: stopped -> running",
        ],
    );
}

#[test]
fn what_cannot_change_in_place_is_an_anomaly() {
    case(
        &[("/spec/rootfs/size", json!("4GiB"))],
        &[],
        "running",
        &[
            "anomaly spec.rootfs.size: CT 101's rootfs volume is 8GiB, the manifest says 4GiB; PVE cannot shrink a volume. Set the size to at least 8GiB",
        ],
    );
    case(
        &[("/spec/rootfs/storage", json!("zfs"))],
        &[],
        "running",
        &[
            "anomaly spec.rootfs.storage: CT 101's root volume `local-lvm:vm-101-disk-0` is on `local-lvm`, the manifest says `zfs`; a volume cannot move by a config write. Move it in PVE (`pct move-volume 101 rootfs zfs`) or set spec.rootfs.storage to `local-lvm`",
        ],
    );
    case(
        &[("/spec/unprivileged", json!(false))],
        &[],
        "running",
        &[
            "anomaly spec.unprivileged: CT 101 is unprivileged (unprivileged=1) but the manifest says unprivileged: false; PVE cannot change this on an existing container. Set spec.unprivileged to true, or recreate the container with the other setting (back it up and `pct restore --unprivileged 0`, or delete it and apply)",
        ],
    );
    case(
        &[],
        &[("unprivileged", Value::Null)],
        "running",
        &[
            "anomaly spec.unprivileged: CT 101 is privileged (unprivileged=0) but the manifest says unprivileged: true; PVE cannot change this on an existing container. Set spec.unprivileged to false, or recreate the container with the other setting (back it up and `pct restore --unprivileged 1`, or delete it and apply)",
        ],
    );
    case(
        &[(
            "/spec/ostemplate",
            json!("local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst"),
        )],
        &[],
        "running",
        &[
            "anomaly spec.ostemplate: CT 101 runs a `debian` system but spec.ostemplate is a `ubuntu` template; the template is used only at create and cannot change in place. Set spec.ostemplate back, or recreate the container (delete it, then apply)",
        ],
    );
    // Drift that can be repaired still is, next to the anomaly.
    case(
        &[
            ("/spec/memory", json!("2GiB")),
            (
                "/spec/mount-points",
                json!([{"storage": "local-lvm", "size": "4GiB", "path": "/data"}]),
            ),
        ],
        &[
            ("mp0", json!("/srv/data,mp=/data")),
            ("mp1", json!("local-lvm:vm-101-disk-2,mp=/old,size=2G")),
        ],
        "running",
        &[
            "update: update CT 101 on pve01: memory",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e memory=2048",
            "drift spec.memory: 1024 -> 2048",
            "anomaly spec.mount-points[0]: CT 101's mp0 is `/srv/data`, a bind mount, and the manifest declares a volume; proxops does not swap a volume for a bind mount or back in place. Use another slot, or change mp0 in PVE",
            "anomaly spec.mount-points: CT 101 has mp1 (`local-lvm:vm-101-disk-2,mp=/old,size=2G`), which the manifest does not declare; proxops does not remove mount points (PVE would detach the volume). Declare it, or remove it in PVE",
        ],
    );
}

#[test]
fn power() {
    case(
        &[],
        &[],
        "stopped",
        &[
            "step power: start CT 101 on pve01",
            "  POST /nodes/pve01/lxc/101/status/start",
            "drift spec.state: stopped -> running",
        ],
    );
    // Stopping comes first, so the write lands on a stopped container.
    case(
        &[
            ("/spec/state", json!("stopped")),
            ("/spec/memory", json!("2GiB")),
        ],
        &[],
        "running",
        &[
            "step power: shut down CT 101 on pve01 [disturbs]",
            "  POST /nodes/pve01/lxc/101/status/shutdown forceStop=1 timeout=180",
            "update: update CT 101 on pve01: memory",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e memory=2048",
            "drift spec.memory: 1024 -> 2048",
            "drift spec.state: running -> stopped",
        ],
    );
    case(&[("/spec/state", json!("stopped"))], &[], "stopped", &[]);
}

#[test]
fn locks_and_foreign_objects() {
    case(
        &[("/spec/memory", json!("2GiB"))],
        &[("lock", json!("backup"))],
        "running",
        &[
            "locked : CT 101 on pve01 is locked (backup); not changing it this cycle. If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `pct unlock 101` on its node",
        ],
    );
    let doc = manifest();
    let obs = observation(
        Some(with(entry("stopped"), &[("/lock", json!("create"))])),
        &config(),
        "stopped",
    );
    check_plan(
        Some(&doc),
        &obs,
        &[
            "locked : CT 101 on pve01 is locked (create); not changing it this cycle. If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `pct unlock 101` on its node",
        ],
    );
    let obs = observation(
        Some(with(entry("running"), &[("/node", json!("pve02"))])),
        &config(),
        "running",
    );
    check_plan(
        Some(&doc),
        &obs,
        &[
            "anomaly spec.node: CT 101 lives on node pve02, the manifest says pve01; proxops does not migrate containers (migrate it in PVE or fix the manifest)",
        ],
    );
    case(
        &[],
        &[("template", json!(1))],
        "stopped",
        &[
            "anomaly : CT 101 on pve01 is a PVE container template; a kind: Container manages ordinary containers. Pick another vmid, or convert it in PVE",
        ],
    );
}

#[test]
fn failed_reads_fail_closed() {
    let mut obs = observation(Some(entry("running")), &config(), "running");
    obs.reads[0].status = 500;
    obs.reads[0].body = "internal error".into();
    let d = desired(&manifest());
    let e = ContainerKind::plan(Some(&d), &[], &[], &obs, &NoSecrets).unwrap_err();
    assert_eq!(
        e[0].message,
        "reading /nodes/pve01/lxc/101/config failed with HTTP 500: internal error; check that the container exists and the token may read it (VM.Audit)"
    );
    let obs = Observation {
        live: Some(entry("running").to_string()),
        reads: vec![],
    };
    assert!(ContainerKind::plan(Some(&d), &[], &[], &obs, &NoSecrets).is_err());
}

#[test]
fn prune() {
    let prune = |entry: Value, cfg: Value, status: &str, expected: &[&str]| {
        check_plan(None, &observation(Some(entry), &cfg, status), expected);
    };
    prune(
        entry("running"),
        config(),
        "running",
        &[
            "delete: delete CT 101 `web` on pve01 (no manifest), stopping it first [disturbs] [destructive]",
            "  POST /nodes/pve01/lxc/101/status/stop",
            "  DELETE /nodes/pve01/lxc/101 purge=1",
            "  restore after 0: POST /nodes/pve01/lxc/101/status/start",
            "drift : CT 101 `web` on pve01 -> -",
        ],
    );
    prune(
        entry("stopped"),
        config(),
        "stopped",
        &[
            "delete: delete CT 101 `web` on pve01 (no manifest) [destructive]",
            "  DELETE /nodes/pve01/lxc/101 purge=1",
            "drift : CT 101 `web` on pve01 -> -",
        ],
    );
    prune(
        entry("stopped"),
        with(config(), &[("/protection", json!(1))]),
        "stopped",
        &[
            "anomaly : CT 101 `web` on pve01 has no manifest but protection=1 is set; not deleting it (clear protection to let proxops prune it)",
        ],
    );
    prune(
        entry("running"),
        with(config(), &[("/lock", json!("snapshot"))]),
        "running",
        &[
            "locked : CT 101 `web` on pve01 is locked (snapshot); not deleting it this cycle. If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `pct unlock 101` on its node",
        ],
    );
    prune(
        with(entry("running"), &[("/tags", json!("web"))]),
        config(),
        "running",
        &["anomaly : CT 101 `web` on pve01 is not a proxops-owned container; not deleting it"],
    );
    check_plan(None, &Observation::default(), &[]);
}

/// What PVE prints after the create of the base manifest converges: planning against it
/// proposes nothing, so a create is never followed by a spurious update.
#[test]
fn create_then_converged() {
    let full = with(
        manifest(),
        &[
            ("/spec/description", json!("build box")),
            ("/spec/features", json!({"keyctl": true, "nesting": true})),
            (
                "/spec/nics/0",
                json!({"bridge": "vmbr0", "ip": "10.0.0.5/24", "gw": "10.0.0.1", "vlan": 20, "firewall": true}),
            ),
            (
                "/spec/mount-points",
                json!([
                    {"storage": "local-lvm", "size": "4GiB", "path": "/data", "backup": true},
                    {"slot": "mp5", "host-path": "/srv/media", "path": "/media", "read-only": true}
                ]),
            ),
        ],
    );
    case(
        &[
            ("/spec/description", json!("build box")),
            ("/spec/features", json!({"keyctl": true, "nesting": true})),
            ("/spec/nics/0", full["spec"]["nics"][0].clone()),
            ("/spec/mount-points", full["spec"]["mount-points"].clone()),
        ],
        &[
            ("description", json!("build box\n")),
            ("features", json!("keyctl=1,nesting=1")),
            (
                "net0",
                json!(
                    "name=eth0,bridge=vmbr0,firewall=1,gw=10.0.0.1,hwaddr=BC:24:11:5E:7A:01,ip=10.0.0.5/24,tag=20,type=veth"
                ),
            ),
            (
                "mp0",
                json!("local-lvm:vm-101-disk-1,mp=/data,backup=1,size=4G"),
            ),
            ("mp5", json!("/srv/media,mp=/media,ro=1")),
        ],
        "running",
        &[],
    );
}

#[test]
fn small_nic_and_scalar_edges() {
    // firewall turned on; a live lower-case MAC equals a pinned upper-case one.
    case(
        &[(
            "/spec/nics/0",
            json!({"bridge": "vmbr0", "ip": "dhcp", "firewall": true, "mac": "BC:24:11:5E:7A:01"}),
        )],
        &[(
            "net0",
            json!("name=eth0,bridge=vmbr0,hwaddr=bc:24:11:5e:7a:01,ip=dhcp,type=veth"),
        )],
        "running",
        &[
            "update: update CT 101 on pve01: net0",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e net0=name=eth0,bridge=vmbr0,firewall=1,hwaddr=bc:24:11:5e:7a:01,ip=dhcp,type=veth",
            "drift spec.nics[0].firewall: - -> 1",
        ],
    );
    // firewall: false is satisfied by an absent token; keys PVE left unset are written.
    case(
        &[(
            "/spec/nics/0",
            json!({"bridge": "vmbr0", "ip": "dhcp", "firewall": false}),
        )],
        &[("memory", Value::Null), ("swap", Value::Null)],
        "running",
        &[
            "update: update CT 101 on pve01: memory, swap",
            "  PUT /nodes/pve01/lxc/101/config digest=0f3c9a1e memory=1024 swap=512",
            "drift spec.memory: - -> 1024",
            "drift spec.swap: - -> 512",
        ],
    );
    // A renamed interface and a config without a digest (the write then carries none).
    case(
        &[("/spec/nics/0/name", json!("lan0"))],
        &[("digest", Value::Null)],
        "running",
        &[
            "update: update CT 101 on pve01: net0",
            "  PUT /nodes/pve01/lxc/101/config net0=name=lan0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
            "drift spec.nics[0].name: eth0 -> lan0",
        ],
    );
}

#[test]
fn template_facts_from_file_names() {
    use crate::plan::template_facts;
    for (t, ostype, arch) in [
        (
            "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            Some("debian"),
            Some("amd64"),
        ),
        (
            "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst",
            Some("ubuntu"),
            Some("amd64"),
        ),
        (
            "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz",
            Some("alpine"),
            Some("amd64"),
        ),
        (
            "local:vztmpl/rockylinux-9-default_20240912_amd64.tar.xz",
            Some("centos"),
            Some("amd64"),
        ),
        ("local:vztmpl/custom-image.tar.gz", None, None),
    ] {
        assert_eq!(template_facts(t), (ostype, arch), "{t}");
    }
    // An unknown distribution is never an anomaly.
    case(
        &[(
            "/spec/ostemplate",
            json!("local:vztmpl/golden-2025.tar.zst"),
        )],
        &[],
        "running",
        &[],
    );
    // Another architecture is.
    case(
        &[(
            "/spec/ostemplate",
            json!("local:vztmpl/debian-12-standard_12.7-1_arm64.tar.zst"),
        )],
        &[],
        "running",
        &[
            "anomaly spec.ostemplate: CT 101 is an `amd64` container but spec.ostemplate is an `arm64` template; the template is used only at create and cannot change in place. Set spec.ostemplate back, or recreate the container",
        ],
    );
}
