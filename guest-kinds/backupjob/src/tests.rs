//! The kind through its WIT functions, with JSON as the host sends it: manifests with the
//! diagnostics they give, live jobs with the calls plan proposes, adopt's round trip.

use proxops_kind_sdk::kind::{Reference, Resolved, ResourceKind};
use proxops_kind_sdk::model::{Observation, Proposal, Read};
use proxops_kind_sdk::secrets::NoSecrets;
use proxops_kind_sdk::wit::Guest;
use serde_json::{Value, json};

use crate::BackupJob as Kind;

fn manifest(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "BackupJob", "metadata": {"name": name}, "spec": spec})
}

fn desired(spec: Value) -> String {
    match <Kind as Guest>::validate(manifest("nightly", spec.clone()).to_string()) {
        Ok(v) => v.desired,
        Err(e) => panic!("{spec} does not validate: {e:?}"),
    }
}

fn wit(rs: &[Resolved]) -> Vec<proxops_kind_sdk::wit::Resolved> {
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

fn resolved(kind: &str, name: &str, path: &str, desired: Value) -> Resolved {
    Resolved {
        reference: Reference {
            kind: kind.into(),
            name: name.into(),
            path: path.into(),
        },
        desired: desired.to_string(),
    }
}

/// The observation: the job entry (if any) and the storage read with `content`.
fn observed(entry: Option<Value>, content: &str) -> Observation {
    Observation {
        live: entry.map(|e| e.to_string()),
        reads: vec![Read {
            call: crate::plan::storage_read("backups"),
            status: 200,
            body: json!({"storage": "backups", "type": "dir", "content": content}).to_string(),
        }],
    }
}

fn plan(d: Option<&str>, r: &[Resolved], o: Observation) -> Result<Proposal, Vec<String>> {
    <Kind as Guest>::plan(d.map(str::to_string), wit(r), vec![], o).map_err(|e| {
        e.into_iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect()
    })
}

fn calls(p: &Proposal) -> Vec<String> {
    let info = <Kind as ResourceKind>::describe();
    p.actions
        .iter()
        .flat_map(|a| &a.calls)
        .map(|c| {
            assert!(info.declares(c.method, &c.path), "undeclared {c:?}");
            let mut s = format!("{} {}", c.method.as_str(), c.path);
            for p in &c.params {
                s.push_str(&format!(" {}={}", p.name, p.value));
            }
            s
        })
        .collect()
}

#[test]
fn manifests_are_checked_with_pves_rules() {
    let base = json!({"schedule": "21:00", "storage": "backups", "all": true});
    let check = |name: &str, patch: Value, want: &[(&str, &str)]| {
        let mut spec = base.clone();
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                spec.as_object_mut().unwrap().remove(k);
            } else {
                spec[k] = v.clone();
            }
        }
        let got: Vec<(String, String)> =
            match <Kind as Guest>::validate(manifest(name, spec.clone()).to_string()) {
                Ok(_) => vec![],
                Err(e) => e.into_iter().map(|d| (d.path, d.message)).collect(),
            };
        assert_eq!(got.len(), want.len(), "{spec}: {got:?}");
        for ((p, m), (wp, wm)) in got.iter().zip(want) {
            assert_eq!(p, wp, "{got:?}");
            assert!(m.contains(wm), "{m} lacks {wm}");
        }
    };
    check("nightly", json!({}), &[]);
    check(
        "nightly",
        json!({"schedule": "mon..fri 22:30", "mode": "stop", "compression": "zstd",
        "retention": {"keep-daily": 7}, "notes-template": "{{guestname}}", "exclude": [100, "web-01"]}),
        &[],
    );
    check(
        "nightly",
        json!({"schedule": "25:00:00"}),
        &[("spec.schedule", "is not a PVE calendar event")],
    );
    check(
        "nightly",
        json!({"schedule": "funday"}),
        &[("spec.schedule", "'funday' is not a weekday")],
    );
    check(
        "nightly",
        json!({"schedule": null}),
        &[("spec.schedule", "required")],
    );
    check(
        "nightly",
        json!({"storage": "Backups"}),
        &[("spec.storage", "not a PVE storage id")],
    );
    check(
        "nightly",
        json!({"pool": "web"}),
        &[("spec", "exactly one selection")],
    );
    check(
        "nightly",
        json!({"all": null}),
        &[("spec", "exactly one selection")],
    );
    check(
        "nightly",
        json!({"all": null, "pool": "web", "exclude": [100]}),
        &[("spec.exclude", "applies to `all: true` only")],
    );
    check(
        "nightly",
        json!({"all": null, "guests": []}),
        &[("spec.guests", "at least one guest")],
    );
    check(
        "nightly",
        json!({"retention": {"keep-all": true, "keep-last": 2}}),
        &[("spec.retention.keep-all", "cannot be set together")],
    );
    check(
        "nightly",
        json!({"notes-template": "{{vmname}}"}),
        &[("spec.notes-template", "{{vmname}}")],
    );
    check(
        "nightly",
        json!({"notes-template": "a\\tb"}),
        &[("spec.notes-template", "escape sequence")],
    );
    check("nightly", json!({"mode": "fast"}), &[("spec.mode", "")]);
    check(
        "x",
        json!({}),
        &[("metadata.name", "at least 2 characters")],
    );
    check("1st", json!({}), &[("metadata.name", "a letter first")]);
}

#[test]
fn plans_create_update_and_prune_with_the_fewest_calls() {
    let d = desired(
        json!({"schedule": "21:00", "storage": "backups", "pool": "web", "compression": "zstd",
        "retention": {"keep-last": 3, "keep-daily": 7}, "comment": "web"}),
    );
    let pool = [resolved("Pool", "web", "spec.pool", json!({"pool": "web"}))];
    let live = json!({"id": "nightly", "type": "vzdump", "schedule": "21:00", "storage": "backups", "pool": "web",
        "compress": "zstd", "prune-backups": {"keep-last": 3, "keep-daily": 7}, "enabled": 1,
        "comment": "web (proxops:nightly)", "mailto": "ops@example.com", "next-run": 1_700_000_000});
    let with = |patch: Value| {
        let mut l = live.clone();
        for (k, v) in patch.as_object().unwrap() {
            if v.is_null() {
                l.as_object_mut().unwrap().remove(k);
            } else {
                l[k] = v.clone();
            }
        }
        Some(l)
    };
    for (what, entry, want) in [
        (
            "absent: one create",
            None,
            vec![
                "POST /cluster/backup id=nightly schedule=21:00 storage=backups pool=web mode=snapshot compress=zstd prune-backups=keep-last=3,keep-daily=7 enabled=1 comment=web (proxops:nightly)",
            ],
        ),
        (
            "converged (an unmodelled mailto is left alone)",
            with(json!({})),
            vec![],
        ),
        (
            "schedule drifted",
            with(json!({"schedule": "22:00"})),
            vec!["PUT /cluster/backup/nightly schedule=21:00"],
        ),
        (
            "retention dropped in PVE, disabled",
            with(json!({"prune-backups": null, "enabled": 0})),
            vec!["PUT /cluster/backup/nightly prune-backups=keep-last=3,keep-daily=7 enabled=1"],
        ),
        (
            "switched to all+exclude in PVE",
            with(json!({"pool": null, "all": 1, "exclude": "100"})),
            vec!["PUT /cluster/backup/nightly pool=web delete=exclude"],
        ),
        (
            "unmarked: nothing",
            with(json!({"comment": "theirs"})),
            vec![],
        ),
    ] {
        let p = plan(Some(&d), &pool, observed(entry.clone(), "backup,iso"))
            .unwrap_or_else(|e| panic!("{what}: {e:?}"));
        assert_eq!(calls(&p), want, "{what}");
        let unmarked = entry.as_ref().is_some_and(|e| e["comment"] == "theirs");
        assert_eq!(p.anomalies.len(), usize::from(unmarked), "{what}");
    }
    // A storage without backup content: an error, no call.
    let e = plan(Some(&d), &pool, observed(None, "images,rootdir")).unwrap_err();
    assert!(
        e[0].starts_with(
            "spec.storage: storage backups has no `backup` content (its content: images,rootdir)"
        ),
        "{e:?}"
    );
    // Prune needs the mark.
    let p = plan(None, &[], observed(with(json!({})), "backup")).unwrap();
    assert_eq!(calls(&p), ["DELETE /cluster/backup/nightly"]);
    let p = plan(
        None,
        &[],
        observed(with(json!({"comment": "proxops:other"})), "backup"),
    )
    .unwrap();
    assert!(p.actions.is_empty() && p.anomalies.len() == 1);
    assert!(<Kind as ResourceKind>::claims("/cluster/backup", &live));
    assert!(!<Kind as ResourceKind>::claims(
        "/cluster/backup",
        &json!({"id": "nightly", "comment": "x"})
    ));
}

#[test]
fn named_guests_resolve_to_vmids_and_clash_with_raw_ones() {
    let d = desired(json!({"schedule": "daily", "storage": "backups", "guests": ["web-01", 100]}));
    let r = [resolved(
        "VM",
        "web-01",
        "spec.guests[0]",
        json!({"vmid": 100}),
    )];
    let diags = <Kind as Guest>::check_references(d.clone(), wit(&r));
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert_eq!(diags[0].path, "spec.guests[1]");
    let r = [resolved(
        "VM",
        "web-01",
        "spec.guests[0]",
        json!({"vmid": 101}),
    )];
    let p = plan(Some(&d), &r, observed(None, "backup")).unwrap();
    assert!(calls(&p)[0].contains(" vmid=100,101 "), "{:?}", calls(&p));
}

#[test]
fn adopt_round_trips_with_no_change() {
    for (entry, gaps) in [
        (
            json!({"id": "nightly", "type": "vzdump", "schedule": "21:00", "storage": "backups", "all": 1, "exclude": "101,100",
            "compress": "1", "mode": "stop", "enabled": 0, "comment": "proxops:nightly", "notes-template": "{{vmid}}"}),
            0,
        ),
        (
            json!({"id": "weekly", "type": "vzdump", "schedule": "sun 01:00", "storage": "backups", "vmid": "100,200",
            "prune-backups": {"keep-all": 1}, "enabled": 1, "bwlimit": 1000}),
            2,
        ),
        (
            json!({"id": "pooled", "type": "vzdump", "schedule": "daily", "storage": "backups", "pool": "web",
            "comment": "web jobs (proxops:pooled)"}),
            1,
        ),
    ] {
        let o = observed(Some(entry.clone()), "backup");
        let a = <Kind as ResourceKind>::adopt(&o, &NoSecrets)
            .unwrap_or_else(|e| panic!("{entry}: {e}"));
        assert_eq!(a.gaps.len(), gaps, "{entry}: {:?}", a.gaps);
        let d = match <Kind as Guest>::validate(a.manifest.to_string()) {
            Ok(v) => v.desired,
            Err(e) => panic!("{}: {e:?}", a.manifest),
        };
        let mut r = Vec::new();
        if let Some(p) = entry.get("pool").and_then(Value::as_str) {
            r.push(resolved("Pool", p, "spec.pool", json!({"pool": p})));
        }
        let p = plan(Some(&d), &r, observed(Some(entry.clone()), "backup")).unwrap();
        assert!(p.actions.is_empty() && p.drift.is_empty(), "{entry}: {p:?}");
        // Flagged by the host for a take-over (the manifest's `metadata.adopt` matches): an
        // unmarked job gets the mark in its comment and nothing else.
        let mut flagged = entry.clone();
        flagged["proxops-take-over"] = json!(true);
        let p = plan(Some(&d), &r, observed(Some(flagged), "backup")).unwrap();
        let expected: &[&str] = match entry["id"].as_str() {
            Some("weekly") => &["PUT /cluster/backup/weekly comment=proxops:weekly"],
            _ => &[],
        };
        assert_eq!(calls(&p), expected, "{entry}");
    }
    // A comment edited by hand is kept, the mark appended; a manifest that differs changes
    // nothing in the take-over.
    let d =
        desired(json!({"schedule": "03:00", "storage": "backups", "all": true, "comment": "new"}));
    let entry = json!({"id": "nightly", "type": "vzdump", "schedule": "21:00", "storage": "backups", "all": 1,
        "comment": "by hand", "proxops-take-over": true});
    let p = plan(Some(&d), &[], observed(Some(entry), "backup")).unwrap();
    assert_eq!(
        calls(&p),
        ["PUT /cluster/backup/nightly comment=by hand (proxops:nightly)"]
    );
    let e = <Kind as ResourceKind>::adopt(
        &observed(Some(json!({"id": "x_y", "schedule": "daily"})), "backup"),
        &NoSecrets,
    )
    .unwrap_err();
    assert!(
        e.starts_with("backup job id `x_y` cannot be a manifest name"),
        "{e}"
    );
}
