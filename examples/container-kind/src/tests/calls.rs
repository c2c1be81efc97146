//! The declared surface: `describe()` facts, `identity`, `observe`, `claims`, the schema, the
//! example repository (its manifests validate, its `proxops.yaml` grants exactly the declared
//! calls) and the rule that every call any plan produces matches a declared pattern.

use proxops_kind_sdk::kind::{Listing, ResourceKind};
use proxops_kind_sdk::model::Method;
use serde_json::{Value, json};

use super::*;

#[test]
fn describe_declares_the_surface() {
    let k = ContainerKind::describe();
    assert_eq!(
        (k.kind.as_str(), k.folder.as_str()),
        ("Container", "container")
    );
    assert_eq!(k.api_version, "proxops/v1alpha1");
    assert_eq!(k.listings, vec![Listing::cluster_resources()]);
    assert!(!k.secrets);
    assert!(k.capabilities.is_empty());
    assert!(k.references_kinds.is_empty());
    let calls: Vec<String> = k
        .calls
        .iter()
        .map(|(m, p)| format!("{} {p}", method(*m)))
        .collect();
    assert_eq!(
        calls,
        [
            "GET /cluster/resources",
            "GET /nodes/{node}/lxc/{vmid}/config",
            "GET /nodes/{node}/lxc/{vmid}/status/current",
            "POST /nodes/{node}/lxc",
            "PUT /nodes/{node}/lxc/{vmid}/config",
            "PUT /nodes/{node}/lxc/{vmid}/resize",
            "POST /nodes/{node}/lxc/{vmid}/status/start",
            "POST /nodes/{node}/lxc/{vmid}/status/shutdown",
            "POST /nodes/{node}/lxc/{vmid}/status/stop",
            "DELETE /nodes/{node}/lxc/{vmid}",
            "POST /cluster/ha/resources",
            "PUT /cluster/ha/resources/{sid}",
            "DELETE /cluster/ha/resources/{sid}",
        ]
    );
    // Through the WIT glue too (what the host reads at load).
    let w = <ContainerKind as proxops_kind_sdk::wit::Guest>::describe();
    assert_eq!(w.calls.len(), k.calls.len());
    let schema: Value = serde_json::from_str(&w.schema).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["properties"]["kind"]["const"], "Container");
    // Every spec key validate knows is in the schema, and no other.
    let mut props: Vec<&str> = schema["properties"]["spec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = crate::validate::SPEC_KEYS.to_vec();
    props.sort();
    keys.sort();
    assert_eq!(props, keys);
    // And so is every key of spec.ha.
    let ha = &schema["properties"]["spec"]["properties"]["ha"];
    let mut props: Vec<&str> = ha["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut keys = crate::validate::HA_KEYS.to_vec();
    props.sort();
    keys.sort();
    assert_eq!(props, keys);
    assert_eq!(ha["additionalProperties"], json!(false));
}

#[test]
fn identity_observe_and_claims() {
    let d = desired(&manifest());
    let key = ContainerKind::identity(&d);
    assert_eq!(key.node.as_deref(), Some("pve01"));
    assert_eq!((key.space.as_str(), key.key.as_str()), ("guest-id", "101"));
    assert_eq!(key.resource_id.as_deref(), Some("lxc/101"));

    assert!(ContainerKind::observe(Some(&d), None, &[], &[]).is_empty());
    // The live node wins: a container found elsewhere is read where it is.
    let elsewhere = with(entry("running"), &[("/node", json!("pve02"))]);
    let reads: Vec<String> = ContainerKind::observe(Some(&d), Some(&elsewhere), &[], &[])
        .iter()
        .map(render_call)
        .collect();
    assert_eq!(
        reads,
        [
            "GET /nodes/pve02/lxc/101/config",
            "GET /nodes/pve02/lxc/101/status/current"
        ]
    );

    let claims = |listing: &str, e: Value| ContainerKind::claims(listing, &e);
    assert!(claims("/cluster/resources", entry("running")));
    assert!(claims(
        "/cluster/resources",
        with(entry("stopped"), &[("/tags", json!("web,proxops"))])
    ));
    assert!(claims(
        "/cluster/resources",
        with(entry("stopped"), &[("/tags", json!("web proxops"))])
    ));
    assert!(!claims("/pools", entry("running")));
    assert!(!claims(
        "/cluster/resources",
        with(entry("running"), &[("/tags", json!("web;proxops-101"))])
    ));
    assert!(!claims(
        "/cluster/resources",
        with(entry("running"), &[("/tags", Value::Null)])
    ));
    assert!(!claims(
        "/cluster/resources",
        with(
            entry("running"),
            &[("/type", json!("qemu")), ("/id", json!("qemu/101"))]
        )
    ));
    assert!(!claims(
        "/cluster/resources",
        with(entry("stopped"), &[("/template", json!(1))])
    ));
    assert!(!claims(
        "/cluster/resources",
        json!({"id": "storage/pve01/local", "type": "storage", "node": "pve01", "storage": "local"})
    ));
}

#[test]
fn pattern_matching() {
    for (pattern, path, want) in [
        ("/nodes/{node}/lxc", "/nodes/pve01/lxc", true),
        ("/nodes/{node}/lxc", "/nodes//lxc", false),
        (
            "/nodes/{node}/lxc/{vmid}",
            "/nodes/pve01/lxc/101/config",
            false,
        ),
        ("/cluster/resources", "/cluster/resources", true),
    ] {
        assert_eq!(matches_pattern(pattern, path), want, "{pattern} ~ {path}");
    }
}

/// Every call of every plan below (create, update, power, prune, with and without a stop, the
/// HA resource's create, update and removal) is covered by a declared pattern; `check_plan` asserts the same for every plan test.
#[test]
fn every_planned_call_is_declared() {
    let big = with(
        manifest(),
        &[
            ("/spec/rootfs/size", json!("16GiB")),
            ("/spec/memory", json!("2GiB")),
            ("/spec/state", json!("stopped")),
            (
                "/spec/mount-points",
                json!([{"storage": "local-lvm", "size": "4GiB", "path": "/data"}]),
            ),
        ],
    );
    let ha_entry = with(
        entry("running"),
        &[
            ("/hastate", json!("started")),
            (
                "/ha",
                json!({"sid": "ct:101", "state": "started", "comment": "managed by proxops (proxops-101)", "digest": "h1"}),
            ),
        ],
    );
    let cases: Vec<(Option<Value>, Observation)> = vec![
        (Some(manifest()), Observation::default()),
        (Some(big.clone()), Observation::default()),
        (
            Some(big),
            observation(Some(entry("running")), &config(), "running"),
        ),
        (
            Some(manifest()),
            observation(Some(entry("stopped")), &config(), "stopped"),
        ),
        (
            None,
            observation(Some(entry("running")), &config(), "running"),
        ),
        (
            None,
            observation(Some(entry("stopped")), &config(), "stopped"),
        ),
        // spec.ha: created, changed (a marked resource), removed (spec.ha dropped).
        (
            Some(with(manifest(), &[("/spec/ha", json!({}))])),
            observation(Some(entry("running")), &config(), "running"),
        ),
        (
            Some(with(
                manifest(),
                &[("/spec/ha", json!({"failback": false}))],
            )),
            observation(Some(ha_entry.clone()), &config(), "running"),
        ),
        (
            Some(manifest()),
            observation(Some(ha_entry), &config(), "running"),
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (doc, obs) in cases {
        let d = doc.as_ref().map(desired);
        for c in ContainerKind::observe(
            d.as_ref(),
            obs.live
                .as_deref()
                .map(|l| serde_json::from_str(l).unwrap())
                .as_ref(),
            &[],
            &[],
        ) {
            assert!(declared(&c), "undeclared read {}", render_call(&c));
        }
        let p = ContainerKind::plan(d.as_ref(), &[], &[], &obs, &NoSecrets).unwrap();
        for a in &p.actions {
            for c in a
                .calls
                .iter()
                .chain(a.restore.iter().flat_map(|r| &r.calls))
            {
                assert!(declared(c), "undeclared call {}", render_call(c));
                let pattern = CALLS
                    .iter()
                    .find(|(m, p)| *m == c.method && matches_pattern(p, &c.path))
                    .unwrap();
                seen.insert(format!("{} {}", method(pattern.0), pattern.1));
            }
        }
    }
    // And nothing is declared that no plan or read uses (the grant should be minimal).
    for (m, p) in CALLS {
        let line = format!("{} {p}", method(*m));
        let read = *m == Method::Get;
        assert!(
            read || seen.contains(&line),
            "declared but never proposed: {line}"
        );
    }
}

/// The example repository: every manifest validates, each sits in `container/<cluster>/`
/// named after its `metadata.name`, and the `proxops.yaml` grant lists exactly the calls
/// `describe()` declares, with no secrets and no capabilities.
#[test]
fn example_repository_matches_the_kind() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../containers");
    let mut count = 0;
    for cluster in std::fs::read_dir(root.join("container")).unwrap() {
        let cluster = cluster.unwrap().path();
        for file in std::fs::read_dir(&cluster).unwrap() {
            let file = file.unwrap().path();
            let text = std::fs::read_to_string(&file).unwrap();
            let doc: Value = serde_yaml::from_str(&text).unwrap();
            let d = match ContainerKind::validate(&doc, &NoSecrets) {
                Ok(v) => v.desired,
                Err(e) => panic!("{} does not validate: {e:?}", file.display()),
            };
            assert_eq!(
                file.file_stem().unwrap().to_str().unwrap(),
                d.name,
                "{} is not named after metadata.name",
                file.display()
            );
            count += 1;
        }
    }
    assert!(
        count >= 2,
        "the example repository has {count} container manifests"
    );

    let text = std::fs::read_to_string(root.join("proxops.yaml")).unwrap();
    let cfg: Value = serde_yaml::from_str(&text).unwrap();
    let kind = &cfg["kinds"][0];
    assert_eq!(kind["file"], "kinds/container.wasm");
    let granted: Vec<&str> = kind["grant"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let declared: Vec<String> = CALLS
        .iter()
        .map(|(m, p)| format!("{} {p}", method(*m)))
        .collect();
    assert_eq!(granted, declared);
    assert_eq!(kind["grant"]["secrets"], json!({}));
    assert_eq!(kind["grant"]["capabilities"], json!([]));
}
