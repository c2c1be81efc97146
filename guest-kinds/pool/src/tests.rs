//! The kind through its WIT functions, with JSON as the host sends it. Each test is a table:
//! manifests with the diagnostics they give, live pools with the calls plan proposes.

use proxops_kind_sdk::kind::{Reference, Resolved, ResourceKind};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal, Read};
use proxops_kind_sdk::wit::Guest;
use serde_json::{Value, json};

use crate::Pool as Kind;

fn manifest(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "Pool", "metadata": {"name": name}, "spec": spec})
}

fn desired(name: &str, spec: Value) -> String {
    match <Kind as Guest>::validate(manifest(name, spec).to_string()) {
        Ok(v) => v.desired,
        Err(e) => panic!("{name} does not validate: {e:?}"),
    }
}

fn vm(i: usize, kind: &str, name: &str, vmid: u32) -> Resolved {
    Resolved {
        reference: Reference {
            kind: kind.into(),
            name: name.into(),
            path: format!("spec.guests[{i}]"),
        },
        desired: json!({"name": name, "node": "pve01", "vmid": vmid}).to_string(),
    }
}

fn wit_resolved(rs: &[Resolved]) -> Vec<proxops_kind_sdk::wit::Resolved> {
    rs.iter()
        .map(|r| proxops_kind_sdk::wit::Resolved {
            reference: proxops_kind_sdk::wit::Reference {
                kind: r.reference.kind.clone(),
                name: r.reference.name.clone(),
                path: r.reference.path.clone(),
            },
            desired: r.desired.clone(),
        })
        .collect()
}

/// The observation of pool `entry` with `members` (PVE's member entries) read.
fn observed(entry: Option<Value>, members: &[Value]) -> Observation {
    let reads = match &entry {
        Some(e) => vec![Read {
            call: crate::plan::members_read(e["poolid"].as_str().unwrap()),
            status: 200,
            body: json!([{"poolid": e["poolid"], "comment": e["comment"], "members": members}])
                .to_string(),
        }],
        None => vec![],
    };
    Observation {
        live: entry.map(|e| e.to_string()),
        reads,
    }
}

fn plan(desired: Option<&str>, resolved: &[Resolved], o: Observation) -> Proposal {
    <Kind as Guest>::plan(
        desired.map(str::to_string),
        wit_resolved(resolved),
        vec![],
        o,
    )
    .unwrap_or_else(|e| panic!("plan failed: {e:?}"))
}

/// Each call as `METHOD path k=v …`.
fn calls(p: &Proposal) -> Vec<String> {
    p.actions
        .iter()
        .flat_map(|a| &a.calls)
        .map(|c: &Call| {
            let mut s = format!("{} {}", c.method.as_str(), c.path);
            for p in &c.params {
                s.push_str(&format!(" {}={}", p.name, p.value));
            }
            s
        })
        .collect()
}

fn guest(vmid: u32) -> Value {
    json!({"id": format!("qemu/{vmid}"), "vmid": vmid, "type": "qemu", "node": "pve01"})
}

fn storage(id: &str) -> Value {
    json!({"id": format!("storage/pve01/{id}"), "storage": id, "type": "storage", "node": "pve01"})
}

#[test]
fn manifests_are_checked_with_pves_rules() {
    let check = |name: &str, spec: Value, errors: &[(&str, &str)]| {
        let got = match <Kind as Guest>::validate(manifest(name, spec.clone()).to_string()) {
            Ok(_) => vec![],
            Err(e) => e.into_iter().map(|d| (d.path, d.message)).collect(),
        };
        assert_eq!(got.len(), errors.len(), "{name} {spec}: {got:?}");
        for ((p, m), (want_p, want_m)) in got.iter().zip(errors) {
            assert_eq!(p, want_p, "{got:?}");
            assert!(m.contains(want_m), "{m} lacks {want_m}");
        }
    };
    check("web", json!({}), &[]);
    check(
        "web",
        json!({"comment": "web tier", "guests": ["web-01", "VM/web-02", "TemplateVM/base", 300], "storages": ["local-lvm"]}),
        &[],
    );
    check(
        "9web",
        json!({}),
        &[("metadata.name", "must start with a letter")],
    );
    check("web", json!({"members": []}), &[("spec.members", "")]);
    check(
        "web",
        json!({"guests": [99]}),
        &[("spec.guests[0]", "outside PVE's range")],
    );
    check(
        "web",
        json!({"guests": ["300"]}),
        &[("spec.guests[0]", "write it as a number")],
    );
    check(
        "web",
        json!({"guests": ["CT/x"]}),
        &[("spec.guests[0]", "names a CT")],
    );
    check(
        "web",
        json!({"guests": ["a", "VM/a"]}),
        &[("spec.guests[1]", "already spec.guests[0]")],
    );
    check(
        "web",
        json!({"guests": [true]}),
        &[("spec.guests[0]", "got a boolean")],
    );
    check(
        "web",
        json!({"storages": ["Local"]}),
        &[("spec.storages[0]", "not a PVE storage id")],
    );
    check(
        "web",
        json!({"storages": ["local", "local"]}),
        &[("spec.storages[1]", "listed twice")],
    );
    check(
        "web",
        json!({"comment": "a\nb"}),
        &[("spec.comment", "one line")],
    );
}

#[test]
fn named_guests_are_references_resolved_to_vmids() {
    let d = desired("web", json!({"guests": ["web-01", "TemplateVM/base", 300]}));
    let v = <Kind as Guest>::validate(
        manifest("web", json!({"guests": ["web-01", "TemplateVM/base", 300]})).to_string(),
    )
    .unwrap();
    let refs = <Kind as Guest>::references(v.desired.clone());
    let refs: Vec<(String, String, String)> =
        refs.into_iter().map(|r| (r.kind, r.name, r.path)).collect();
    assert_eq!(
        refs,
        [
            ("VM".into(), "web-01".into(), "spec.guests[0]".into()),
            ("TemplateVM".into(), "base".into(), "spec.guests[1]".into()),
        ]
    );
    let ok = [
        vm(0, "VM", "web-01", 100),
        vm(1, "TemplateVM", "base", 9000),
    ];
    assert!(<Kind as Guest>::check_references(d.clone(), wit_resolved(&ok)).is_empty());
    // A name and a raw vmid of the same guest.
    let clash = [
        vm(0, "VM", "web-01", 300),
        vm(1, "TemplateVM", "base", 9000),
    ];
    let diags = <Kind as Guest>::check_references(d, wit_resolved(&clash));
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].path, "spec.guests[2]");
    assert!(
        diags[0].message.contains("vmid 300"),
        "{}",
        diags[0].message
    );
}

/// What a plan case is: its name, the live pool, its members, the calls expected.
type Case = (&'static str, Option<Value>, Vec<Value>, Vec<&'static str>);

#[test]
fn plans_use_pves_forms_and_the_fewest_calls() {
    let d = desired(
        "web",
        json!({"comment": "web tier", "guests": ["web-01", 300], "storages": ["local-lvm"]}),
    );
    let r = [vm(0, "VM", "web-01", 100)];
    let marked = json!({"poolid": "web", "comment": "web tier (proxops:web)"});
    let cases: Vec<Case> = vec![
        (
            "absent: a create, members in the next pass",
            None,
            vec![],
            vec!["POST /pools poolid=web comment=web tier (proxops:web)"],
        ),
        (
            "created, empty: one PUT adds every member",
            Some(json!({"poolid": "web", "comment": "web tier (proxops:web)"})),
            vec![],
            vec!["PUT /pools poolid=web vms=100,300 storage=local-lvm"],
        ),
        (
            "converged",
            Some(marked.clone()),
            vec![guest(100), guest(300), storage("local-lvm")],
            vec![],
        ),
        (
            "one guest gone from the pool",
            Some(marked.clone()),
            vec![guest(300), storage("local-lvm")],
            vec!["PUT /pools poolid=web vms=100"],
        ),
        (
            "a stranger added, a storage missing: removal first, then the add",
            Some(marked.clone()),
            vec![guest(100), guest(300), guest(555)],
            vec![
                "PUT /pools poolid=web vms=555 delete=1",
                "PUT /pools poolid=web storage=local-lvm",
            ],
        ),
        (
            "comment edited in PVE, mark kept: the comment alone",
            Some(json!({"poolid": "web", "comment": "edited proxops:web"})),
            vec![guest(100), guest(300), storage("local-lvm")],
            vec!["PUT /pools poolid=web comment=web tier (proxops:web)"],
        ),
        (
            "unmarked: an anomaly, no call",
            Some(json!({"poolid": "web", "comment": "theirs"})),
            vec![],
            vec![],
        ),
    ];
    for (what, live, members, want) in cases {
        let unmarked = live
            .as_ref()
            .is_some_and(|l| !l["comment"].as_str().unwrap_or("").contains("proxops:web"));
        let p = plan(Some(&d), &r, observed(live, &members));
        assert_eq!(calls(&p), want, "{what}");
        assert_eq!(
            p.anomalies.len(),
            usize::from(unmarked),
            "{what}: {:?}",
            p.anomalies
        );
        assert_eq!(p.actions.is_empty(), want.is_empty(), "{what}");
        for a in &p.actions {
            for c in &a.calls {
                assert!(
                    <Kind as ResourceKind>::describe().declares(c.method, &c.path),
                    "{what}: {c:?}"
                );
            }
        }
    }
}

#[test]
fn prunes_empty_the_pool_first_and_need_the_mark() {
    let marked = json!({"poolid": "old", "comment": "proxops:old"});
    let p = plan(
        None,
        &[],
        observed(Some(marked.clone()), &[guest(100), storage("local")]),
    );
    assert_eq!(
        calls(&p),
        [
            "PUT /pools poolid=old vms=100 storage=local delete=1",
            "DELETE /pools poolid=old"
        ]
    );
    assert!(p.actions[0].destructive);
    let p = plan(None, &[], observed(Some(marked.clone()), &[]));
    assert_eq!(calls(&p), ["DELETE /pools poolid=old"]);
    assert!(<Kind as ResourceKind>::claims("/pools", &marked));
    for unowned in [
        json!({"poolid": "old", "comment": "proxops:other"}),
        json!({"poolid": "old"}),
    ] {
        assert!(
            !<Kind as ResourceKind>::claims("/pools", &unowned),
            "{unowned}"
        );
        let p = plan(None, &[], observed(Some(unowned.clone()), &[]));
        assert!(
            p.actions.is_empty() && p.anomalies.len() == 1,
            "{unowned}: {p:?}"
        );
    }
    assert!(!<Kind as ResourceKind>::claims(
        "/cluster/resources",
        &marked
    ));
}

#[test]
fn observe_reads_members_only_of_a_live_pool() {
    assert!(<Kind as ResourceKind>::observe(None, None, &[], &[]).is_empty());
    let reads = <Kind as ResourceKind>::observe(None, Some(&json!({"poolid": "web"})), &[], &[]);
    assert_eq!(reads.len(), 1);
    assert_eq!(
        (
            reads[0].method,
            reads[0].path.as_str(),
            reads[0].get("poolid")
        ),
        (Method::Get, "/pools", Some("web"))
    );
}

#[test]
fn adopt_round_trips_with_no_change() {
    for (entry, members, gaps) in [
        (
            json!({"poolid": "web", "comment": "web tier (proxops:web)"}),
            vec![guest(100), storage("local")],
            1,
        ),
        (json!({"poolid": "db", "comment": "proxops:db"}), vec![], 0),
        (
            json!({"poolid": "ops", "comment": "hand made"}),
            vec![guest(101)],
            1,
        ),
        (json!({"poolid": "bare"}), vec![], 0),
    ] {
        let o = observed(Some(entry.clone()), &members);
        let a = <Kind as ResourceKind>::adopt(&o, &proxops_kind_sdk::secrets::NoSecrets).unwrap();
        assert_eq!(a.gaps.len(), gaps, "{entry}: {:?}", a.gaps);
        let d = match <Kind as Guest>::validate(a.manifest.to_string()) {
            Ok(v) => v.desired,
            Err(e) => panic!("{entry}: adopted manifest does not validate: {e:?}"),
        };
        let p = plan(Some(&d), &[], observed(Some(entry.clone()), &members));
        assert!(p.actions.is_empty() && p.drift.is_empty(), "{entry}: {p:?}");
    }
    let e = <Kind as ResourceKind>::adopt(
        &observed(Some(json!({"poolid": "Upper"})), &[]),
        &proxops_kind_sdk::secrets::NoSecrets,
    )
    .unwrap_err();
    assert!(
        e.starts_with("pool id `Upper` cannot be a manifest name"),
        "{e}"
    );
}

/// An unmarked pool the host flagged for a take-over (its manifest's `metadata.adopt`
/// matches): the one write adds the mark to the live comment, whatever else differs; without
/// the flag, an anomaly and nothing else.
#[test]
fn a_flagged_take_over_writes_the_mark_alone() {
    fn check(entry: Value, spec: Value, expected: &[&str]) {
        let d = desired(entry["poolid"].as_str().unwrap(), spec);
        let mut flagged = entry.clone();
        flagged["proxops-take-over"] = json!(true);
        let p = plan(Some(&d), &[], observed(Some(flagged), &[guest(100)]));
        assert_eq!(calls(&p), expected, "{entry}");
        assert!(p.anomalies.is_empty(), "{p:?}");
        assert_eq!(p.actions[0].changes.len(), 1);
        let p = plan(Some(&d), &[], observed(Some(entry.clone()), &[guest(100)]));
        assert!(p.actions.is_empty() && p.anomalies.len() == 1, "{p:?}");
    }
    check(
        json!({"poolid": "web"}),
        json!({"guests": [100, 101], "comment": "web tier"}),
        &["PUT /pools poolid=web comment=proxops:web"],
    );
    check(
        json!({"poolid": "ops", "comment": "hand made"}),
        json!({"storages": ["local"]}),
        &["PUT /pools poolid=ops comment=hand made (proxops:ops)"],
    );
    // A marked pool: the flag is moot (the host sets it only on unmarked ones), plain update.
    let d = desired("db", json!({"comment": "db"}));
    let p = plan(
        Some(&d),
        &[],
        observed(
            Some(json!({"poolid": "db", "comment": "proxops:db", "proxops-take-over": true})),
            &[],
        ),
    );
    assert_eq!(calls(&p), ["PUT /pools poolid=db comment=db (proxops:db)"]);
}

/// A named guest's desired state with its own `spec.pool`.
fn vm_in(i: usize, name: &str, vmid: u32, pool: Option<&str>) -> Resolved {
    let mut r = vm(i, "VM", name, vmid);
    if let Some(p) = pool {
        let mut t: Value = serde_json::from_str(&r.desired).unwrap();
        t["pool"] = json!(p);
        r.desired = t.to_string();
    }
    r
}

/// (what, the listed guest's own spec.pool, the error expected: none, or words it contains)
#[test]
fn a_listed_guest_must_not_declare_a_pool() {
    let d = desired("web", json!({"guests": ["web-01", 300]}));
    for (what, pool, expected) in [
        ("no spec.pool", None, None),
        (
            "another pool",
            Some("db"),
            Some(
                "VM `web-01` declares spec.pool: db (vm/<cluster>/web-01.yaml), but this pool web lists it",
            ),
        ),
        (
            "this pool: declared twice",
            Some("web"),
            Some("VM `web-01` already joins pool web through its own spec.pool"),
        ),
    ] {
        let diags = <Kind as Guest>::check_references(
            d.clone(),
            wit_resolved(&[vm_in(0, "web-01", 100, pool)]),
        );
        match expected {
            None => assert!(diags.is_empty(), "{what}: {diags:?}"),
            Some(words) => {
                assert_eq!(diags.len(), 1, "{what}: {diags:?}");
                assert_eq!(diags[0].path, "spec.guests[0]", "{what}");
                assert!(
                    diags[0].message.contains(words),
                    "{what}: {}",
                    diags[0].message
                );
            }
        }
    }
}

/// A guest whose own manifest declares `spec.pool: web` is a member the pool keeps without
/// listing it, and never adds; one declaring another pool is not kept.
#[test]
fn members_declared_by_their_guests_are_kept_not_added() {
    let d = desired("web", json!({"guests": [300]}));
    let marked = json!({"poolid": "web", "comment": "proxops:web"});
    let referrer = |vmid: u32, pool: &str| Resolved {
        reference: Reference {
            kind: "Pool".into(),
            name: "web".into(),
            path: "spec.pool".into(),
        },
        desired: json!({"name": format!("vm-{vmid}"), "vmid": vmid, "pool": pool}).to_string(),
    };
    let plan_with = |referrers: &[Resolved], members: &[Value]| {
        <Kind as Guest>::plan(
            Some(d.clone()),
            vec![],
            wit_resolved(referrers),
            observed(Some(marked.clone()), members),
        )
        .unwrap()
    };
    for (what, referrers, members, want) in [
        (
            "declared and a member: converged",
            vec![referrer(100, "web")],
            vec![guest(100), guest(300)],
            vec![],
        ),
        (
            "declared, not a member yet: not added (its create puts it in)",
            vec![referrer(100, "web")],
            vec![guest(300)],
            vec![],
        ),
        (
            "undeclared member: removed",
            vec![],
            vec![guest(100), guest(300)],
            vec!["PUT /pools poolid=web vms=100 delete=1"],
        ),
        (
            "a referrer naming another pool is not kept",
            vec![referrer(100, "db")],
            vec![guest(100), guest(300)],
            vec!["PUT /pools poolid=web vms=100 delete=1"],
        ),
    ] {
        let p = plan_with(&referrers, &members);
        assert_eq!(calls(&p), want, "{what}");
    }
}
