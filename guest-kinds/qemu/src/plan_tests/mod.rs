//! Data-driven planning cases: desired (base manifest + patches) and observed PVE state (in the
//! forms PVE prints: `/config` values as strings, `/pending` rows with `value`/`pending`/
//! `delete`) -> the proposal rendered as text lines.

use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::model::{Call, Method, Observation, Operation, Proposal, Read};
use serde_json::{Value, json};

use crate::Reference;
use crate::desired::Flavour;
use crate::validate_tests::{base, patch, secrets};

mod cloud_init;
mod create;
mod ha;
mod hardware;
mod pool;
mod prune;
mod update;

/// The desired states of the objects the test manifests reference, by name.
fn catalog(name: &str) -> Option<Value> {
    Some(match name {
        "golden" => json!({"kind": "TemplateVM", "name": "golden", "node": "pve01", "vmid": 9000}),
        "golden-b" => {
            json!({"kind": "TemplateVM", "name": "golden-b", "node": "pve02", "vmid": 9001})
        }
        "noble" => {
            json!({"kind": "DiskImage", "name": "noble", "node": "pve01", "storage": "local",
            "url": "https://h/noble.qcow2", "filename": "noble.qcow2", "content": "import",
            "volid": "local:import/noble.qcow2", "verify-certificates": true})
        }
        "debian-13" => {
            json!({"kind": "ISO", "name": "debian-13", "node": "pve01", "storage": "local",
            "url": "https://h/debian-13.iso", "filename": "debian-13.iso", "content": "iso",
            "volid": "local:iso/debian-13.iso", "verify-certificates": true})
        }
        "web" => json!({"pool": "web"}),
        "db" => json!({"pool": "db"}),
        _ => return None,
    })
}

/// The targets of `d`'s references as the host resolves them (by kind and name).
fn resolve_all(d: &crate::Desired) -> Vec<(Reference, String)> {
    crate::references(d)
        .into_iter()
        .filter_map(|r| {
            let t = catalog(&r.name)?;
            let kind = t.get("kind").and_then(Value::as_str).unwrap_or("Pool");
            (kind == r.kind.as_str()).then(|| (r, t.to_string()))
        })
        .collect()
}

/// The live config PVE prints for `base()` after create (sim-faithful shapes: memory as a string,
/// cores as a number, PVE-assigned upper-case MAC, `size=32G`, `;`-joined tags).
fn live_config() -> Value {
    json!({
        "boot": "order=scsi0;net0", "cores": 2, "cpu": "host", "digest": "d1", "memory": "2048",
        "meta": "creation-qemu=9.2.0,ctime=1767225600", "name": "web-01",
        "net0": "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0", "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "smbios1": "uuid=5d5b0f4e-0000-4000-8000-000000000001", "tags": "proxops;proxops-100", "vmgenid": "00000000-0000-4000-8000-000000000002"
    })
}

fn entry(status: &str, template: bool) -> Value {
    let mut e = json!({"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve01", "status": status,
        "name": "web-01", "tags": "proxops;proxops-100"});
    if template {
        e["template"] = json!(1);
    }
    e
}

/// Fail unless every call of the proposal (restore calls too) is one `flavour` declares: the
/// host refuses any other.
fn assert_declared(flavour: Flavour, p: &Proposal) {
    let info = crate::describe(flavour);
    for a in &p.actions {
        let restore = a.restore.iter().flat_map(|r| &r.calls);
        for c in a.calls.iter().chain(restore) {
            assert!(
                info.declares(c.method, &c.path),
                "{flavour:?} proposes {:?} {}, which it does not declare",
                c.method,
                c.path
            );
        }
    }
}

/// An operation as the test lines name it.
fn operation_name(o: &Operation) -> String {
    match o {
        Operation::Step(s) if s == crate::plan::POWER => "Power".into(),
        Operation::Step(s) if s == crate::plan::MARK_TEMPLATE => "MarkTemplate".into(),
        Operation::Step(s) => format!("Step({s:?})"),
        Operation::Create => "Create".into(),
        Operation::Update => "Update".into(),
        Operation::Delete => "Delete".into(),
    }
}

/// A method as the test lines name it (`Get`, `Post`, …).
pub(crate) fn method_name(m: Method) -> &'static str {
    match m {
        Method::Get => "Get",
        Method::Post => "Post",
        Method::Put => "Put",
        Method::Delete => "Delete",
    }
}

/// A call as one test line: `Get /path [("name", "value", sensitive), …]`.
pub(crate) fn call_line(c: &Call) -> String {
    let params: Vec<_> = c
        .params
        .iter()
        .map(|p| (&p.name, &p.value, p.sensitive))
        .collect();
    format!("{} {} {params:?}", method_name(c.method), c.path)
}

/// Render a proposal as compact lines. Every call must be one the kinds declare.
fn render(p: &Proposal) -> Vec<String> {
    // The TemplateVM declares every call the VM does, and marks templates.
    assert_declared(Flavour::Template, p);
    let mut out = Vec::new();
    for a in &p.actions {
        out.push(format!(
            "{}{}{}: {}",
            operation_name(&a.operation),
            if a.disturbs_availability {
                " [stop]"
            } else {
                ""
            },
            if a.destructive { " [destructive]" } else { "" },
            a.summary
        ));
        for c in &a.calls {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|p| {
                    let mark = if p.sensitive { "[sensitive]" } else { "" };
                    format!("{}={}{mark}", p.name, p.value)
                })
                .collect();
            out.push(
                format!(
                    "  {} {} {}",
                    method_name(c.method),
                    c.path,
                    params.join(" ")
                )
                .trim_end()
                .to_string(),
            );
        }
    }
    for d in &p.drift {
        out.push(format!(
            "drift {}: {} -> {}{}",
            d.path,
            d.live.as_deref().unwrap_or("-"),
            d.desired.as_deref().unwrap_or("-"),
            if d.sensitive { " [sensitive]" } else { "" }
        ));
    }
    for d in &p.pending {
        out.push(format!(
            "pending {}: {} -> {}",
            d.path,
            d.live.as_deref().unwrap_or("-"),
            d.desired.as_deref().unwrap_or("-")
        ));
    }
    for a in &p.anomalies {
        out.push(format!("anomaly {}", a.path));
    }
    out
}

struct Case<'a> {
    flavour: Flavour,
    patches: &'a [(&'a str, Value)],
    /// `None`: no manifest (prune).
    manifest: bool,
    live: Option<Value>,
    config: &'a [(&'a str, Value)],
    pending: Option<Value>,
    /// Replaces the config read entirely (e.g. a fresh clone of a template).
    whole_config: Option<Value>,
    /// The answer to `GET /cluster/mapping/pci`, when it was read.
    mappings: Option<Value>,
    /// The status and answer of PVE's migration precondition check, when it was read.
    precondition: Option<(u16, Value)>,
}

impl Default for Case<'_> {
    fn default() -> Self {
        Case {
            flavour: Flavour::Vm,
            patches: &[],
            manifest: true,
            live: Some(entry("stopped", false)),
            config: &[],
            pending: None,
            whole_config: None,
            mappings: None,
            precondition: None,
        }
    }
}

fn run(c: Case<'_>) -> Proposal {
    let mut doc = base();
    if c.flavour == Flavour::Template {
        doc["kind"] = json!("TemplateVM");
    } else {
        // Cases start from a stopped VM; those about running guests say `started`.
        patch(&mut doc, "spec/state", json!("stopped"));
    }
    for (p, v) in c.patches {
        patch(&mut doc, p, v.clone());
    }
    let desired = crate::validate(c.flavour, &doc, &secrets())
        .expect("test manifest is valid")
        .desired;
    let mut cfg = c.whole_config.unwrap_or_else(live_config);
    for (k, v) in c.config {
        patch(&mut cfg, k, v.clone());
    }
    let mut reads = vec![Read {
        call: Call::new(Method::Get, "/nodes/pve01/qemu/100/config").param("current", "1"),
        status: 200,
        body: cfg.to_string(),
    }];
    if let Some(p) = &c.pending {
        reads.push(Read {
            call: Call::new(Method::Get, "/nodes/pve01/qemu/100/pending"),
            status: 200,
            body: p.to_string(),
        });
    }
    if let Some(m) = &c.mappings {
        reads.push(Read {
            call: Call::new(Method::Get, crate::plan::PCI_MAPPINGS),
            status: 200,
            body: m.to_string(),
        });
    }
    if let Some((status, body)) = &c.precondition {
        let node = c.live.as_ref().and_then(|l| l["node"].as_str()).unwrap();
        reads.push(Read {
            call: crate::plan::precondition_call(node, 100, "pve01"),
            status: *status,
            body: body.to_string(),
        });
    }
    let obs = Observation {
        live: c.live.map(|l| l.to_string()),
        reads,
    };
    let resolved = resolve_all(&desired);
    let p = crate::plan(
        c.flavour,
        c.manifest.then_some(&desired),
        &resolved,
        &secrets(),
        &obs,
    )
    .expect("plan succeeds");
    assert_declared(c.flavour, &p);
    let live = obs
        .live
        .as_deref()
        .map(|l| serde_json::from_str(l).unwrap());
    let reads = crate::observe(c.manifest.then_some(&desired), live.as_ref());
    assert_declared(
        c.flavour,
        &Proposal {
            actions: vec![proxops_kind_sdk::model::Action {
                operation: Operation::Update,
                summary: "the reads observe asks for".into(),
                calls: reads,
                changes: vec![],
                disturbs_availability: false,
                destructive: false,
                restore: None,
            }],
            ..Proposal::default()
        },
    );
    p
}

fn check(c: Case<'_>, expected: &[&str]) {
    let got = render(&run(c));
    assert_eq!(got, expected, "\ngot:\n{}\n", got.join("\n"));
}

#[test]
fn converged_is_empty() {
    check(Case::default(), &[]);
    check(
        Case {
            live: Some(entry("running", false)),
            pending: Some(json!([])),
            patches: &[("spec/state", json!("started"))],
            ..Case::default()
        },
        &[],
    );
}

#[test]
fn pve_normalisation_is_never_drift() {
    check(
        Case {
            patches: &[
                ("spec/tags", json!(["Web", "db", "web"])),
                ("spec/networks/0/mac", json!("bc:24:11:5e:0a:1f")),
                ("spec/networks/0/vlan", json!(20)),
                ("spec/networks/0/firewall", json!(true)),
                ("spec/networks/0/rate-limit", json!(10)),
                ("spec/disks/0/iothread", json!(true)),
                ("spec/disks/0/discard", json!("ignore")),
                ("spec/disks/0/ssd", json!(false)),
                ("spec/hardware/bios", json!("ovmf")),
                ("spec/hardware/machine", json!("q35")),
                (
                    "spec/hardware/efi-disk",
                    json!({"storage": "local-lvm", "template": "4m", "secure-boot": "enabled"}),
                ),
                ("spec/hardware/sockets", json!(1)),
                (
                    "spec/hardware/pci-devices",
                    json!([{"slot": 0, "device": "0000:01:00.0", "pcie": true}]),
                ),
                ("spec/options/agent", json!(true)),
                ("spec/options/acpi", json!(true)),
                ("spec/options/hotplug", json!("usb,network,disk")),
                ("spec/options/startup", json!("order=10")),
                ("spec/options/boot-order", json!(["scsi0", "net0"])),
                ("spec/memory", json!("2048MiB")),
                ("spec/extra/ostype", json!("l26")),
            ],
            config: &[
                ("tags", json!("db;proxops;proxops-100;web")),
                ("memory", json!(2048)),
                ("cores", json!("2")),
                (
                    "net0",
                    json!("virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,rate=10,tag=20"),
                ),
                (
                    "scsi0",
                    json!("local-lvm:vm-100-disk-0,iothread=1,size=32768M"),
                ),
                ("bios", json!("ovmf")),
                ("machine", json!("pc-q35-9.2+pve1")),
                (
                    "efidisk0",
                    json!(
                        "local-lvm:vm-100-disk-1,efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M"
                    ),
                ),
                ("hostpci0", json!("01:00.0,pcie=1")),
                ("agent", json!("enabled=1,fstrim_cloned_disks=1")),
                ("startup", json!("10")),
                ("ostype", json!("l26")),
            ],
            ..Case::default()
        },
        &[],
    );
}
