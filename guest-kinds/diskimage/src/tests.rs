//! Observe and plan of the download logic, driven by a small fake of PVE's storage answers.
//! The ISO crate tests what differs for ISOs; validation is tested in proxops-kind-download.

use proxops_kind_download::{self as download, DISK_IMAGE, DownloadDesired, Referrer};
use proxops_kind_sdk::model::{Call, Method, Observation, Operation, Proposal, Read};
use proxops_kind_sdk::wit;
use serde_json::{Value, json};

use proxops_kind_sdk::wit::Guest;

/// The exported component type.
type Kind = proxops_kind_download::DiskImage;

const URL: &str = "https://images.example/noble.qcow2";
const SUM: &str = "5c3ddb00f60bc455dac0862fabe9d8bacec46c33ac1751143c5c3683404b110d";
const SIZE: u64 = 614_203_392;

/// The desired state of DiskImage `noble`: `spec` over a base with storage `local`, the URL
/// and a checksum.
fn desired(spec: Value) -> DownloadDesired {
    let mut s =
        json!({"storage": "local", "url": URL, "checksum": SUM, "checksum-algorithm": "sha256"});
    for (k, v) in spec.as_object().unwrap() {
        s[k] = v.clone();
    }
    let doc = json!({"apiVersion": "proxops/v1alpha1", "kind": "DiskImage", "metadata": {"name": "noble"}, "spec": s});
    download::validate(&DISK_IMAGE, &doc)
        .expect("valid test manifest")
        .0
}

/// VM `name` on `node` naming the image from its first disk.
fn vm(name: &str, node: &str) -> Referrer {
    Referrer {
        kind: "VM".into(),
        name: name.into(),
        path: "spec.disks[0].image".into(),
        desired: json!({"kind": "VM", "name": name, "node": node, "vmid": 100}).to_string(),
    }
}

/// A node's storage list entry.
fn storage(name: &str, content: &str, shared: bool) -> Value {
    json!({"storage": name, "type": if shared { "nfs" } else { "dir" }, "content": content,
        "active": 1, "enabled": 1, "shared": u8::from(shared), "total": 1_u64 << 40, "used": 0, "avail": 1_u64 << 40})
}

fn local() -> Value {
    storage("local", "iso,vztmpl,backup,import", false)
}

/// Files of a node: `(volid, size as PVE sends it)`.
type Files = Vec<(&'static str, Value)>;

/// What a fake cluster holds: per node, its storages and its files `(volid, size)`.
/// Files on a shared storage are listed on every node that has it, as PVE does.
#[derive(Default, Clone)]
struct World {
    nodes: Vec<(&'static str, Vec<Value>, Files)>,
    /// Reads answered with an error: `(path, status, PVE message)`.
    failing: Vec<(&'static str, u16, &'static str)>,
}

impl World {
    fn node(
        mut self,
        node: &'static str,
        storages: Vec<Value>,
        files: &[(&'static str, Value)],
    ) -> Self {
        self.nodes.push((node, storages, files.to_vec()));
        self
    }

    fn fail(mut self, path: &'static str, status: u16, msg: &'static str) -> Self {
        self.failing.push((path, status, msg));
        self
    }

    /// Answer `calls` the way the host does (status 200 and PVE's `data`, or the error).
    fn observe(&self, calls: &[Call]) -> Observation {
        let reads = calls
            .iter()
            .map(|call| {
                assert_eq!(call.method, Method::Get);
                let (status, body) = self.answer(call);
                Read {
                    call: call.clone(),
                    status,
                    body,
                }
            })
            .collect();
        Observation { live: None, reads }
    }

    fn answer(&self, call: &Call) -> (u16, String) {
        if let Some((_, status, msg)) = self.failing.iter().find(|(p, _, _)| *p == call.path) {
            return (*status, json!({"error": msg}).to_string());
        }
        let parts: Vec<&str> = call.path.trim_start_matches('/').split('/').collect();
        let Some((_, storages, files)) = self.nodes.iter().find(|(n, _, _)| *n == parts[1]) else {
            return (
                595,
                json!({"error": format!("no such node '{}'", parts[1])}).to_string(),
            );
        };
        match parts.as_slice() {
            ["nodes", _, "storage"] => (200, Value::Array(storages.clone()).to_string()),
            ["nodes", _, "storage", s, "content"] => {
                if !storages.iter().any(|e| e["storage"] == *s) {
                    return (
                        500,
                        json!({"error": format!("storage '{s}' does not exist")}).to_string(),
                    );
                }
                let content = call.get("content").unwrap_or_default();
                let items: Vec<Value> = files
                    .iter()
                    .filter(|(volid, _)| volid.starts_with(&format!("{s}:{content}/")))
                    .map(|(volid, size)| json!({"volid": volid, "format": volid.rsplit('.').next(), "size": size, "content": content, "ctime": 1_767_225_600}))
                    .collect();
                (200, Value::Array(items).to_string())
            }
            _ => panic!("unexpected read {}", call.path),
        }
    }
}

/// A call as a line; it must be one the kind declares (the host refuses any other).
fn render_call(c: &Call) -> String {
    assert!(
        <Kind as proxops_kind_sdk::kind::ResourceKind>::describe().declares(c.method, &c.path),
        "undeclared call {c:?}"
    );
    let params: Vec<String> = c
        .params
        .iter()
        .map(|p| format!("{}={}", p.name, p.value))
        .collect();
    let method = c.method.as_str();
    if params.is_empty() {
        format!("{method} {}", c.path)
    } else {
        format!("{method} {}?{}", c.path, params.join("&"))
    }
}

/// An operation as the test lines name it (`Create`, …, `Step("name")`).
fn operation_name(o: &Operation) -> String {
    match o {
        Operation::Create => "Create".into(),
        Operation::Update => "Update".into(),
        Operation::Delete => "Delete".into(),
        Operation::Step(s) => format!("Step({s:?})"),
    }
}

/// One line per action, drift item and anomaly, or per error.
fn render(result: Result<Proposal, Vec<proxops_kind_sdk::check::Diag>>) -> Vec<String> {
    match result {
        Err(diags) => diags
            .iter()
            .map(|d| format!("error {}: {}", d.path, d.message))
            .collect(),
        Ok(p) => {
            let mut out = Vec::new();
            for a in &p.actions {
                assert!(
                    !a.destructive && !a.disturbs_availability && a.restore.is_none(),
                    "{a:?}"
                );
                out.push(format!("{}: {}", operation_name(&a.operation), a.summary));
                out.extend(a.calls.iter().map(|c| format!("  {}", render_call(c))));
            }
            for d in &p.drift {
                out.push(format!("drift {}: {:?} -> {:?}", d.path, d.live, d.desired));
            }
            for a in &p.anomalies {
                out.push(format!("anomaly {}: {}", a.path, a.message));
            }
            out
        }
    }
}

/// Observe `d` with `referrers`, check the reads asked for, answer them from `world` and
/// compare the plan with `expected`.
fn check(
    d: &DownloadDesired,
    referrers: &[Referrer],
    world: &World,
    reads: &[&str],
    expected: &[&str],
) {
    let calls = download::observe(d, referrers);
    let got: Vec<String> = calls.iter().map(render_call).collect();
    assert_eq!(got, reads, "reads");
    let obs = world.observe(&calls);
    assert_eq!(render(download::plan(d, referrers, &obs)), expected, "plan");
}

fn dl(node: &str, storage: &str) -> String {
    format!(
        "  POST /nodes/{node}/storage/{storage}/download-url?url={URL}&content=import&filename=noble.qcow2&checksum={SUM}&checksum-algorithm=sha256&verify-certificates=1"
    )
}

#[test]
fn no_node_needs_it_nothing_to_do() {
    check(&desired(json!({})), &[], &World::default(), &[], &[]);
}

#[test]
fn downloads_once_per_node_of_the_referring_vms() {
    let refs = [
        vm("web-02", "pve02"),
        vm("web-01", "pve01"),
        vm("web-03", "pve01"),
    ];
    let world =
        World::default()
            .node("pve01", vec![local()], &[])
            .node("pve02", vec![local()], &[]);
    check(
        &desired(json!({})),
        &refs,
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/local/content?content=import",
            "GET /nodes/pve02/storage",
            "GET /nodes/pve02/storage/local/content?content=import",
        ],
        &[
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve01",
            &dl("pve01", "local"),
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve02",
            &dl("pve02", "local"),
            r#"drift : None -> Some("local:import/noble.qcow2 on pve01")"#,
            r#"drift : None -> Some("local:import/noble.qcow2 on pve02")"#,
        ],
    );
}

#[test]
fn present_file_is_not_downloaded_again() {
    let refs = [vm("web-01", "pve01"), vm("web-02", "pve02")];
    let world = World::default()
        .node(
            "pve01",
            vec![local()],
            &[("local:import/noble.qcow2", json!(SIZE))],
        )
        .node(
            "pve02",
            vec![local()],
            &[("local:import/other.qcow2", json!(1))],
        );
    check(
        &desired(json!({})),
        &refs,
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/local/content?content=import",
            "GET /nodes/pve02/storage",
            "GET /nodes/pve02/storage/local/content?content=import",
        ],
        &[
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve02",
            &dl("pve02", "local"),
            r#"drift : None -> Some("local:import/noble.qcow2 on pve02")"#,
        ],
    );
    // Present everywhere, with the recorded size (as a string, as some storages send it).
    let world = World::default()
        .node(
            "pve01",
            vec![local()],
            &[("local:import/noble.qcow2", json!(SIZE))],
        )
        .node(
            "pve02",
            vec![local()],
            &[("local:import/noble.qcow2", json!(SIZE.to_string()))],
        );
    let d = desired(json!({"size": SIZE}));
    let calls = download::observe(&d, &refs);
    assert_eq!(
        render(download::plan(&d, &refs, &world.observe(&calls))),
        Vec::<String>::new()
    );
}

#[test]
fn explicit_nodes_replace_the_referrers_nodes() {
    let refs = [vm("web-01", "pve01")];
    let world = World::default().node("pve03", vec![local()], &[]);
    check(
        &desired(json!({"nodes": ["pve03"]})),
        &refs,
        &world,
        &[
            "GET /nodes/pve03/storage",
            "GET /nodes/pve03/storage/local/content?content=import",
        ],
        &[
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve03",
            &dl("pve03", "local"),
            r#"drift : None -> Some("local:import/noble.qcow2 on pve03")"#,
            "anomaly unavailable-on:pve01: VM `web-01` (spec.disks[0].image) is on node pve01, which spec.nodes does not list: the file is not placed there; add pve01 to spec.nodes, or remove spec.nodes to follow the VMs",
        ],
    );
    // A referrer on a listed node needs nothing more.
    let world = World::default().node(
        "pve01",
        vec![local()],
        &[("local:import/noble.qcow2", json!(SIZE))],
    );
    check(
        &desired(json!({"nodes": ["pve01"]})),
        &refs,
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/local/content?content=import",
        ],
        &[],
    );
}

#[test]
fn shared_storage_is_downloaded_once_for_the_cluster() {
    let nfs = storage("nfs-img", "import,iso", true);
    let refs = [vm("a", "pve02"), vm("b", "pve01"), vm("c", "pve03")];
    let world = World::default()
        .node("pve01", vec![local(), nfs.clone()], &[])
        .node("pve02", vec![local(), nfs.clone()], &[])
        .node("pve03", vec![local(), nfs.clone()], &[]);
    let d = desired(json!({"storage": "nfs-img"}));
    check(
        &d,
        &refs,
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/nfs-img/content?content=import",
            "GET /nodes/pve02/storage",
            "GET /nodes/pve02/storage/nfs-img/content?content=import",
            "GET /nodes/pve03/storage",
            "GET /nodes/pve03/storage/nfs-img/content?content=import",
        ],
        &[
            "Create: download DiskImage noble to nfs-img:import/noble.qcow2 on pve01, once for pve01, pve02, pve03 (shared storage)",
            &dl("pve01", "nfs-img"),
            r#"drift : None -> Some("nfs-img:import/noble.qcow2 (shared storage, for pve01, pve02, pve03)")"#,
        ],
    );
    // Present (every node lists it): nothing; an explicit node outside is no anomaly either.
    let file = [("nfs-img:import/noble.qcow2", json!(SIZE))];
    let world = World::default()
        .node("pve01", vec![nfs.clone()], &file)
        .node("pve02", vec![nfs.clone()], &file);
    check(
        &desired(json!({"storage": "nfs-img", "nodes": ["pve01", "pve02"]})),
        &[vm("z", "pve09")],
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/nfs-img/content?content=import",
            "GET /nodes/pve02/storage",
            "GET /nodes/pve02/storage/nfs-img/content?content=import",
        ],
        &[],
    );
}

#[test]
fn size_other_than_recorded_is_drift_and_an_anomaly_never_a_download() {
    let refs = [vm("web-01", "pve01")];
    let world = World::default().node(
        "pve01",
        vec![local()],
        &[("local:import/noble.qcow2", json!(1000))],
    );
    check(
        &desired(json!({"size": SIZE})),
        &refs,
        &world,
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/local/content?content=import",
        ],
        &[
            r#"drift spec.size: Some("1000") -> Some("614203392")"#,
            "anomaly spec.size: local:import/noble.qcow2 on pve01 is 1000 bytes but spec.size records 614203392; proxops never replaces a present file (referenced by VM `web-01`). If this file is the right one, set spec.size to 1000; otherwise set a new spec.filename to download the new file next to it, or check that no VM uses it, delete it by hand (`pvesm free local:import/noble.qcow2` on pve01) and apply again",
        ],
    );
}

#[test]
fn changed_url_and_checksum_show_through_the_recorded_size() {
    // The manifest moved to a new image (URL, checksum and the new size); the old file stays.
    let refs = [vm("web-01", "pve01")];
    let world = World::default().node(
        "pve01",
        vec![local()],
        &[("local:import/noble.qcow2", json!(SIZE))],
    );
    let d = desired(
        json!({"url": "https://images.example/v2/noble.qcow2", "checksum": "ab".repeat(32), "size": SIZE + 4096}),
    );
    let calls = download::observe(&d, &refs);
    let got = render(download::plan(&d, &refs, &world.observe(&calls)));
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with("drift spec.size: Some(\"614203392\")"),
        "{got:#?}"
    );
    assert!(
        got[1]
            .starts_with("anomaly spec.size: local:import/noble.qcow2 on pve01 is 614203392 bytes"),
        "{got:#?}"
    );
    // Without a recorded size the change cannot be seen: a present file is simply kept.
    let d = desired(json!({"url": "https://images.example/v2/noble.qcow2"}));
    assert_eq!(
        render(download::plan(&d, &refs, &world.observe(&calls))),
        Vec::<String>::new()
    );
}

#[test]
fn copies_of_different_sizes_without_a_record_are_an_anomaly() {
    let refs = [vm("a", "pve01"), vm("b", "pve02")];
    let world = World::default()
        .node(
            "pve01",
            vec![local()],
            &[("local:import/noble.qcow2", json!(SIZE))],
        )
        .node(
            "pve02",
            vec![local()],
            &[("local:import/noble.qcow2", json!(4096))],
        );
    let d = desired(json!({}));
    let calls = download::observe(&d, &refs);
    assert_eq!(
        render(download::plan(&d, &refs, &world.observe(&calls))),
        [
            "anomaly spec.size: the copies of local:import/noble.qcow2 differ in size (local:import/noble.qcow2 on pve01: 614203392 bytes, local:import/noble.qcow2 on pve02: 4096 bytes); proxops cannot tell which is right and replaces neither. Set spec.size to the right size to see which copy is off, then delete that copy by hand (`pvesm free local:import/noble.qcow2` on its node) and apply again"
        ]
    );
}

#[test]
/// A node whose storage cannot hold the file, or cannot be read, fails that node only: the
/// host blocks the referrers there, and the other nodes still get their download.
fn failed_reads_and_unusable_storages_fail_that_node_only() {
    let refs = [vm("web-01", "pve01"), vm("web-02", "pve02")];
    let d = desired(json!({}));
    let both = World::default()
        .node("pve01", vec![local()], &[])
        .node("pve02", vec![local()], &[]);
    let reads = [
        "GET /nodes/pve01/storage",
        "GET /nodes/pve01/storage/local/content?content=import",
        "GET /nodes/pve02/storage",
        "GET /nodes/pve02/storage/local/content?content=import",
    ];
    check(
        &d,
        &refs,
        &both
            .clone()
            .fail("/nodes/pve01/storage", 500, "proxy loop detected"),
        &reads,
        &[
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve02",
            &dl("pve02", "local"),
            "drift : None -> Some(\"local:import/noble.qcow2 on pve02\")",
            "anomaly unavailable-on:pve01: reading GET /nodes/pve01/storage failed (HTTP 500): proxy loop detected",
        ],
    );
    check(
        &d,
        &refs,
        &both
            .clone()
            .fail("/nodes/pve02/storage/local/content", 0, "connection reset"),
        &reads,
        &[
            "Create: download DiskImage noble to local:import/noble.qcow2 on pve01",
            &dl("pve01", "local"),
            "drift : None -> Some(\"local:import/noble.qcow2 on pve01\")",
            "anomaly unavailable-on:pve02: reading GET /nodes/pve02/storage/local/content failed (no HTTP status): connection reset",
        ],
    );
    let world = World::default()
        .node("pve01", vec![storage("local", "iso,vztmpl", false)], &[])
        .node(
            "pve02",
            vec![storage("local-lvm", "images,rootdir", false)],
            &[],
        );
    check(
        &d,
        &refs,
        &world,
        &reads,
        &[
            "anomaly unavailable-on:pve01: storage `local` on node pve01 does not hold `import` content (it holds `iso,vztmpl`); enable `import` content on it or choose another storage",
            "anomaly unavailable-on:pve02: storage `local` is not available on node pve02 (needed by VM `web-02`)",
        ],
    );
    let mut off = local();
    off["active"] = json!(0);
    check(
        &desired(json!({"nodes": ["pve01"]})),
        &[],
        &World::default().node("pve01", vec![off], &[]),
        &[
            "GET /nodes/pve01/storage",
            "GET /nodes/pve01/storage/local/content?content=import",
        ],
        &[
            "anomaly unavailable-on:pve01: storage `local` is not active on node pve01 (listed in spec.nodes)",
        ],
    );
}

#[test]
fn download_parameters() {
    let d = desired(
        json!({"verify-certificates": false, "checksum": null, "checksum-algorithm": null, "filename": "n.raw"}),
    );
    let world = World::default().node("pve01", vec![local()], &[]);
    let calls = download::observe(&d, &[vm("a", "pve01")]);
    let p = download::plan(&d, &[vm("a", "pve01")], &world.observe(&calls)).unwrap();
    let call = &p.actions[0].calls[0];
    assert_eq!(
        render_call(call),
        format!(
            "POST /nodes/pve01/storage/local/download-url?url={URL}&content=import&filename=n.raw&verify-certificates=0"
        )
    );
    let changes: Vec<(&str, Option<&str>)> = p.actions[0]
        .changes
        .iter()
        .map(|c| (c.key.as_str(), c.new.as_deref()))
        .collect();
    assert_eq!(
        changes,
        [
            ("url", Some(URL)),
            ("filename", Some("n.raw")),
            ("verify-certificates", Some("0"))
        ]
    );
}

#[test]
fn component_functions() {
    let info = Kind::describe();
    assert_eq!(info.kind, "DiskImage");
    let calls: Vec<String> = info
        .calls
        .iter()
        .map(|c| format!("{:?} {}", c.method, c.path))
        .collect();
    assert_eq!(
        calls,
        [
            "Method::Get /nodes/{node}/storage",
            "Method::Get /nodes/{node}/storage/{storage}/content",
            "Method::Post /nodes/{node}/storage/{storage}/download-url"
        ]
    );
    assert!(info.listings.is_empty() && !info.secrets && info.capabilities.is_empty());
    let schema: Value = serde_json::from_str(&info.schema).unwrap();
    assert!(schema["$schema"].as_str().unwrap().contains("2020-12"));
    let manifest = json!({"apiVersion": "proxops/v1alpha1", "kind": "DiskImage", "metadata": {"name": "noble"},
        "spec": {"storage": "local", "url": URL, "checksum": SUM, "checksum-algorithm": "sha256"}});
    let v = Kind::validate(manifest.to_string()).unwrap();
    assert!(v.warnings.is_empty());
    let key = Kind::identity(v.desired.clone());
    assert_eq!(
        (
            key.node,
            key.space.as_str(),
            key.key.as_str(),
            key.resource_id
        ),
        (None, "storage-volume", "local:import/noble.qcow2", None)
    );
    let bad = Kind::validate(json!({"apiVersion": "proxops/v1alpha1", "kind": "DiskImage", "metadata": {"name": "x"}, "spec": {}}).to_string());
    assert!(bad.is_err());

    let r = vm("web-01", "pve01");
    let resolved = || {
        vec![wit::Resolved {
            reference: wit::Reference {
                kind: "DiskImage".into(),
                name: "noble".into(),
                path: r.path.clone(),
            },
            desired: r.desired.clone(),
        }]
    };
    let calls = Kind::observe(Some(v.desired.clone()), None, vec![], resolved());
    assert_eq!(calls.len(), 2);
    let obs = World::default()
        .node("pve01", vec![local()], &[])
        .observe(&calls);
    let observed = wit::Observation {
        live: None,
        reads: obs
            .reads
            .into_iter()
            .map(|x| wit::Read {
                call: x.call,
                status: x.status,
                body: x.body,
            })
            .collect(),
    };
    let p = Kind::plan(Some(v.desired), vec![], resolved(), observed).unwrap();
    assert_eq!(p.actions.len(), 1);
    assert_eq!(
        p.actions[0].summary,
        "download DiskImage noble to local:import/noble.qcow2 on pve01"
    );

    let empty = wit::Observation {
        live: None,
        reads: vec![],
    };
    assert!(
        Kind::plan(None, vec![], vec![], empty)
            .unwrap()
            .actions
            .is_empty()
    );
    assert!(Kind::observe(None, None, vec![], vec![]).is_empty());
    assert!(!Kind::claims(
        "/cluster/resources".into(),
        json!({"id": "storage/pve01/local", "type": "storage"}).to_string()
    ));
    assert!(
        Kind::adopt(wit::Observation {
            live: None,
            reads: vec![]
        })
        .is_err()
    );
}

#[test]
fn referrer_without_a_node_is_an_anomaly() {
    let mut odd = vm("odd", "pve01");
    odd.desired = json!({"kind": "VM", "name": "odd"}).to_string();
    check(
        &desired(json!({})),
        &[odd],
        &World::default(),
        &[],
        &[
            "anomaly : the desired state of VM `odd` (spec.disks[0].image) names no node; no node is provisioned for it",
        ],
    );
}
