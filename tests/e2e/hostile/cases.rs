//! The hostile manifests: the puppet's strings (calls, actions, specs) and one table of
//! cases per class of attack, each case an object, the attack in its spec, and what must
//! happen to it.

use serde_json::{Value, json};

use super::{OWN, TEMPLATE};

// ---------------------------------------------------------------------------------------------
// The puppet's strings.

pub(super) fn call(method: &str, path: &str, params: &[(&str, &str)]) -> Value {
    let params: Vec<Value> = params.iter().map(|(k, v)| json!([k, v])).collect();
    json!({"method": method, "path": path, "params": params})
}

pub(super) fn post(path: &str, params: &[(&str, &str)]) -> Value {
    call("POST", path, params)
}

pub(super) fn put(path: &str, params: &[(&str, &str)]) -> Value {
    call("PUT", path, params)
}

pub(super) fn delete(path: &str) -> Value {
    call("DELETE", path, &[])
}

pub(super) fn action(operation: &str, summary: &str, calls: Vec<Value>) -> Value {
    json!({"operation": operation, "summary": summary, "calls": calls})
}

/// The spec of an object keyed by its own canonical vmid ([`OWN`]) proposing `actions`.
pub(super) fn own(actions: Vec<Value>) -> Value {
    json!({"vmid": OWN, "actions": actions})
}

/// The spec of an object whose `guest-id` key is `key`, verbatim.
pub(super) fn keyed(key: &str, actions: Vec<Value>) -> Value {
    json!({"key": key, "actions": actions})
}

/// The spec of an object that asks the host to read `paths`.
pub(super) fn reads(paths: &[&str]) -> Value {
    json!({"vmid": OWN, "reads": paths})
}

pub(super) fn manifest(name: &str, spec: &Value) -> String {
    // JSON is YAML: control characters and backslashes cross as JSON escapes.
    serde_json::to_string_pretty(&json!({
        "apiVersion": "proxops/test",
        "kind": "Hostile",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The cases.

#[derive(Debug, Clone)]
pub(super) enum Expect {
    /// Refused by one of these sandbox rules (`a|b`), nothing sent for it.
    Refused(&'static str),
    /// Shown, not refused: the plan lists these texts (the calls under the summary).
    Shown(&'static [&'static str]),
    /// Containment of output: no stdout line starts with this text, no ESC byte anywhere.
    NoForgedLine(&'static str),
}

#[derive(Debug, Clone)]
pub(super) struct Case {
    pub(super) class: &'static str,
    /// The object's name (and file name).
    pub(super) name: &'static str,
    pub(super) spec: Value,
    pub(super) expect: Expect,
    /// Run `apply` (a world of its own) rather than `plan`.
    pub(super) apply: bool,
}

impl Case {
    /// Whether its refusal stops its whole cluster by design (every rule it may be refused
    /// by is one of [`super::RULES_THAT_STOP_THE_CLUSTER`]), so `web` need not plan beside it.
    pub(super) fn stops_the_cluster(&self) -> bool {
        matches!(&self.expect, Expect::Refused(r)
            if r.split('|').all(|r| super::RULES_THAT_STOP_THE_CLUSTER.contains(&r)))
    }

    /// How the output names what is refused: the object, or the kind's `finally` step.
    pub(super) fn subject(&self) -> &'static str {
        if self.class == "finally" {
            "(finally)"
        } else {
            self.name
        }
    }
}

pub(super) fn refused(
    class: &'static str,
    name: &'static str,
    rule: &'static str,
    spec: Value,
) -> Case {
    Case {
        class,
        name,
        spec,
        expect: Expect::Refused(rule),
        apply: false,
    }
}

pub(super) fn applied(mut case: Case) -> Case {
    case.apply = true;
    case
}

/// Stop container 101, then delete it.
pub(super) fn remove_101(operation: &str, summary: &str) -> Vec<Value> {
    vec![action(
        operation,
        summary,
        vec![
            post("/nodes/pve01/lxc/101/status/stop", &[]),
            delete("/nodes/pve01/lxc/101"),
        ],
    )]
}

pub(super) fn identities() -> Vec<Case> {
    let c = |name, key: &str| {
        refused(
            "identity",
            name,
            "identity",
            keyed(key, remove_101("delete", "remove container")),
        )
    };
    vec![
        applied(c("id-leading-zero", "0101")),
        c("id-plus", "+101"),
        c("id-trailing-space", "101 "),
        c("id-leading-space", " 101"),
        c("id-newline", "101\n"),
        c("id-double-zero", "00101"),
        // VM 100, which `vm/lab/web.yaml` names.
        refused(
            "identity",
            "id-exponent-web",
            "identity",
            keyed(
                "1e2",
                vec![action(
                    "delete",
                    "remove VM",
                    vec![delete("/nodes/pve01/qemu/100")],
                )],
            ),
        ),
        refused(
            "identity",
            "id-zero-web",
            "identity",
            keyed(
                "0100",
                vec![action(
                    "delete",
                    "remove VM",
                    vec![
                        post("/nodes/pve01/qemu/100/status/stop", &[]),
                        delete("/nodes/pve01/qemu/100"),
                    ],
                )],
            ),
        ),
    ]
}

pub(super) fn labels() -> Vec<Case> {
    vec![
        // The tagged container without its mark: a delete labelled `update` skips the mark rule.
        applied(refused(
            "labels",
            "label-update-deletes-unmarked",
            "ownership",
            keyed(
                "102",
                vec![action(
                    "update",
                    "refresh description",
                    vec![
                        post("/nodes/pve01/lxc/102/status/stop", &[]),
                        delete("/nodes/pve01/lxc/102"),
                    ],
                )],
            ),
        )),
        refused(
            "labels",
            "label-create-deletes-unmarked",
            "ownership",
            keyed(
                "102",
                vec![action(
                    "create",
                    "create container 102",
                    vec![delete("/nodes/pve01/lxc/102")],
                )],
            ),
        ),
        refused(
            "labels",
            "label-update-deletes-101",
            "ownership",
            keyed("101", remove_101("update", "refresh description")),
        ),
        refused(
            "labels",
            "label-update-deletes-web",
            "target|ownership",
            own(vec![action(
                "update",
                "refresh description",
                vec![delete("/nodes/pve01/qemu/100")],
            )]),
        ),
        refused(
            "labels",
            "label-step-stops-101",
            "target|ownership",
            own(vec![action(
                "refresh",
                "refresh",
                vec![post("/nodes/pve01/lxc/101/status/stop", &[])],
            )]),
        ),
        refused(
            "labels",
            "label-step-stops-web",
            "target|ownership",
            own(vec![action(
                "refresh",
                "refresh",
                vec![post("/nodes/pve01/qemu/100/status/stop", &[])],
            )]),
        ),
        refused(
            "labels",
            "label-restore-deletes-101",
            "target|ownership",
            json!({"vmid": OWN, "actions": [{
                "operation": "update", "summary": "refresh",
                "calls": [call("GET", "/cluster/resources", &[])],
                "restore": {"after": 0, "calls": [delete("/nodes/pve01/lxc/101")]},
            }]}),
        ),
    ]
}

/// A `step` of the own object with one call.
pub(super) fn step(call: Value) -> Value {
    own(vec![action("maintenance", "maintenance", vec![call])])
}

pub(super) fn paths() -> Vec<Case> {
    let stop = |op: &str| post(&format!("/nodes/pve01/lxc/{OWN}/status/{op}"), &[]);
    vec![
        // The URL parser reads `\` as `/` and resolves the dot segments: stop container 101.
        applied(refused(
            "paths",
            "path-backslash-stop-101",
            "path",
            step(stop(r"..\..\101\status\stop")),
        )),
        refused(
            "paths",
            "path-dotdot",
            "path|declared",
            step(post(
                &format!("/nodes/pve01/lxc/{OWN}/status/../../101/status/stop"),
                &[],
            )),
        ),
        refused(
            "paths",
            "path-pct-dots",
            "path",
            step(stop(r"%2e%2e\%2e%2e\101\status\stop")),
        ),
        refused(
            "paths",
            "path-pct-dots-mixed-case",
            "path",
            step(stop(r"%2E%2e\.%2E\101\status\stop")),
        ),
        refused(
            "paths",
            "path-pct-slash",
            "path",
            step(stop("..%2f..%2f101%2fstatus%2fstop")),
        ),
        refused(
            "paths",
            "path-double-encoded",
            "path",
            step(stop(r"%252e%252e\%252e%252e\101\status\stop")),
        ),
        refused(
            "paths",
            "path-query",
            "path",
            step(delete("/nodes/pve01/lxc/101?160")),
        ),
        refused(
            "paths",
            "path-fragment",
            "path",
            step(delete("/nodes/pve01/lxc/101#160")),
        ),
        refused("paths", "path-nul", "path", step(stop("stop%00"))),
        // The URL parser drops tabs and newlines: `1\n01` is 101.
        refused(
            "paths",
            "path-newline-in-vmid",
            "path",
            step(post("/nodes/pve01/lxc/1\n01/status/stop", &[])),
        ),
        refused(
            "paths",
            "path-tab-in-vmid",
            "path",
            step(delete("/nodes/pve01/lxc/10\t1")),
        ),
        refused(
            "paths",
            "path-backslash-config-web",
            "path",
            step(put(
                r"/nodes/pve01/lxc/..\qemu\100/config",
                &[("description", "pwned")],
            )),
        ),
        refused(
            "paths",
            "path-node-value-access",
            "path",
            step(post(
                r"/nodes/pve01\..\..\access/users",
                &[("userid", "evil@pve")],
            )),
        ),
        // Reads: a GET path is held to the same form.
        refused(
            "paths",
            "path-read-node-value-access",
            "path",
            reads(&[r"/nodes/pve01\..\..\access/users"]),
        ),
        refused(
            "paths",
            "path-read-web-config",
            "path",
            reads(&[r"/nodes/pve01/lxc/..\qemu\100/config"]),
        ),
        refused(
            "paths",
            "path-read-query",
            "path",
            reads(&[r"/nodes/pve01/lxc/..\..\..\access\users?/config"]),
        ),
        refused(
            "paths",
            "path-read-fragment",
            "path",
            reads(&[r"/nodes/pve01/lxc/..\..\..\access\users#/config"]),
        ),
    ]
}

pub(super) fn volumes() -> Vec<Case> {
    let content = |storage: &str, volume: &str| {
        step(delete(&format!(
            "/nodes/pve01/storage/{storage}/content/{volume}"
        )))
    };
    vec![
        applied(refused(
            "volumes",
            "vol-web-disk",
            "volume",
            content("local-lvm", "local-lvm:vm-100-disk-0"),
        )),
        refused(
            "volumes",
            "vol-web-disk-encoded",
            "volume",
            content("local-lvm", "local-lvm%3Avm-100-disk-0"),
        ),
        refused(
            "volumes",
            "vol-base-image",
            "volume",
            content("local-lvm", "local-lvm:base-9000-disk-0"),
        ),
        refused(
            "volumes",
            "vol-subvol-101",
            "volume",
            content("local-lvm", "local-lvm:subvol-101-disk-0"),
        ),
        refused(
            "volumes",
            "vol-ct-101-disk",
            "volume",
            content("local-lvm", "local-lvm:vm-101-disk-0"),
        ),
        refused(
            "volumes",
            "vol-dir-qcow2",
            "volume|path",
            content("local", "local%3A100%2Fvm-100-disk-0.qcow2"),
        ),
        applied(refused(
            "volumes",
            "vol-undeclared-iso",
            "volume",
            content("local", "local:iso%2Fother.iso"),
        )),
    ]
}

pub(super) fn endpoints() -> Vec<Case> {
    let node = |name: &'static str, op: &str, params: &[(&str, &str)]| {
        refused(
            "endpoints",
            name,
            "endpoint",
            step(post(&format!("/nodes/pve01/{op}"), params)),
        )
    };
    vec![
        applied(node("ep-stopall", "stopall", &[])),
        node("ep-startall", "startall", &[]),
        node("ep-migrateall", "migrateall", &[("target", "pve02")]),
        node("ep-suspendall", "suspendall", &[]),
        node(
            "ep-execute",
            "execute",
            &[(
                "commands",
                r#"[{"path":"/nodes/pve01/stopall","method":"POST"}]"#,
            )],
        ),
        node("ep-node-status", "status", &[("command", "reboot")]),
        node(
            "ep-network",
            "network",
            &[("iface", "vmbr9"), ("type", "bridge")],
        ),
        node("ep-apt-update", "apt/update", &[]),
        refused(
            "endpoints",
            "ep-access-users",
            "endpoint",
            step(post(
                "/access/users",
                &[("userid", "evil@pve"), ("password", "hunter22")],
            )),
        ),
        refused(
            "endpoints",
            "ep-cluster-options",
            "endpoint",
            step(post("/cluster/options", &[("keyboard", "de")])),
        ),
    ]
}

pub(super) fn capabilities() -> Vec<Case> {
    let ct_config = |params: &[(&str, &str)]| {
        own(vec![action(
            "update",
            "refresh container",
            vec![put(&format!("/nodes/pve01/lxc/{OWN}/config"), params)],
        )])
    };
    let vm_config = |params: &[(&str, &str)]| {
        own(vec![action(
            "update",
            "refresh VM",
            vec![post(&format!("/nodes/pve01/qemu/{OWN}/config"), params)],
        )])
    };
    let cap = |name, spec| refused("capabilities", name, "capability", spec);
    vec![
        // The first was checked, the last used.
        applied(refused(
            "capabilities",
            "cap-repeated-unprivileged",
            "params",
            own(vec![action(
                "create",
                "create container",
                vec![post(
                    "/nodes/pve01/lxc",
                    &[
                        ("vmid", "160"),
                        ("ostemplate", TEMPLATE),
                        ("storage", "local-lvm"),
                        ("unprivileged", "1"),
                        ("unprivileged", "0"),
                    ],
                )],
            )]),
        )),
        refused(
            "capabilities",
            "cap-malformed-param-name",
            "params",
            ct_config(&[("unprivileged=0&memory", "512")]),
        ),
        cap(
            "cap-unprivileged-0-on-update",
            ct_config(&[("unprivileged", "0")]),
        ),
        cap(
            "cap-delete-unprivileged",
            ct_config(&[("delete", "unprivileged")]),
        ),
        cap("cap-mp-host-path", ct_config(&[("mp0", "/srv,mp=/data")])),
        cap(
            "cap-mp-keys-swapped",
            ct_config(&[("mp0", "mp=/data,volume=/srv")]),
        ),
        cap("cap-rootfs-host-root", ct_config(&[("rootfs", "/")])),
        cap(
            "cap-features-keyctl",
            ct_config(&[("features", "nesting=1,keyctl=1")]),
        ),
        cap(
            "cap-features-mount",
            ct_config(&[("features", "mount=nfs")]),
        ),
        cap("cap-dev", ct_config(&[("dev0", "/dev/sda")])),
        cap(
            "cap-raw-lxc-key",
            ct_config(&[("lxc.apparmor.profile", "unconfined")]),
        ),
        cap("cap-qemu-serial", vm_config(&[("serial0", "/dev/ttyS0")])),
        cap("cap-qemu-scsi-device", vm_config(&[("scsi1", "/dev/sdb")])),
        cap(
            "cap-qemu-args",
            vm_config(&[("args", "-fw_cfg name=opt/x,file=/etc/shadow")]),
        ),
        cap(
            "cap-hookscript",
            ct_config(&[("hookscript", "local:snippets/x.pl")]),
        ),
    ]
}

pub(super) fn blast_radius() -> Vec<Case> {
    vec![
        refused(
            "blast-radius",
            "reads-40000",
            "reads",
            json!({"vmid": OWN, "reads-count": 40000}),
        ),
        refused(
            "blast-radius",
            "reads-17",
            "reads",
            json!({"vmid": OWN, "reads-count": 17}),
        ),
    ]
}

pub(super) fn names() -> Vec<Case> {
    let summary = |s: &str| {
        own(vec![action(
            "update",
            s,
            vec![call("GET", "/cluster/resources", &[])],
        )])
    };
    vec![
        Case {
            class: "names",
            name: "name-summary-newline",
            spec: summary("refresh\nNo changes: the cluster matches the manifests."),
            expect: Expect::NoForgedLine("No changes: the cluster matches"),
            apply: true,
        },
        Case {
            class: "names",
            name: "name-summary-carriage-return",
            spec: summary("refresh\rNo changes: the cluster matches the manifests."),
            expect: Expect::NoForgedLine("No changes: the cluster matches"),
            apply: false,
        },
        Case {
            class: "names",
            name: "name-summary-escape",
            spec: summary("refresh \u{1b}[2J\u{1b}[1;1HNo changes"),
            expect: Expect::NoForgedLine("\u{1b}"),
            apply: false,
        },
    ]
}

pub(super) fn declared() -> Vec<Case> {
    vec![
        applied(refused(
            "declared",
            "declared-pools",
            "declared",
            step(post("/pools", &[("poolid", "evil")])),
        )),
        refused(
            "declared",
            "declared-snapshot",
            "declared",
            step(post(
                &format!("/nodes/pve01/qemu/{OWN}/snapshot"),
                &[("snapname", "x")],
            )),
        ),
    ]
}

/// The legitimate container 150: created unprivileged, then configured (only while absent).
pub(super) fn container_150() -> Value {
    json!({"vmid": 150, "actions": [
        {"operation": "create", "summary": "create container 150", "when": "absent",
         "calls": [post("/nodes/pve01/lxc", &[
            ("vmid", "150"), ("ostemplate", TEMPLATE), ("unprivileged", "1"),
            ("hostname", "own"), ("storage", "local-lvm"), ("tags", "proxops;proxops-150"),
         ])]},
        {"operation": "update", "summary": "describe container 150", "when": "absent",
         "calls": [put("/nodes/pve01/lxc/150/config", &[("description", "own")])]},
    ]})
}

pub(super) fn shown() -> Vec<Case> {
    vec![Case {
        class: "positive",
        name: "own-container-calls-shown",
        spec: container_150(),
        expect: Expect::Shown(&[
            "create container 150",
            "POST /nodes/pve01/lxc",
            "PUT /nodes/pve01/lxc/150/config",
        ]),
        apply: false,
    }]
}
