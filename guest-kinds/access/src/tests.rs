//! The kind's logic natively: validation messages, plans rendered as lines (actions, calls,
//! drift, anomalies) for one object against a live entry and the reads it asked for, claims
//! and adopt's round trip.

use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::model::{Method, Observation, Proposal, Read};
use serde_json::{Value, json};

use crate::desired::Desired;
use crate::{Access, plan, validate};

fn manifest(spec: Value) -> Value {
    json!({"apiVersion": "proxops/v1alpha1", "kind": "Access", "metadata": {"name": "deployer"}, "spec": spec})
}

fn desired(spec: Value) -> Desired {
    validate::validate(&manifest(spec)).unwrap_or_else(|e| panic!("{e:?}"))
}

fn read(path: &str, body: Value) -> Read {
    Read {
        call: proxops_kind_sdk::model::Call::new(Method::Get, path),
        status: 200,
        body: body.to_string(),
    }
}

fn lines(p: &Proposal) -> Vec<String> {
    let mut out = Vec::new();
    for a in &p.actions {
        let op = format!("{:?}", a.operation).to_lowercase();
        let op = op.rsplit("::").next().unwrap_or("");
        out.push(format!("{op}: {}", a.summary.to_lowercase()));
        for c in &a.calls {
            let params: Vec<String> = c
                .params
                .iter()
                .map(|p| format!("{}={}", p.name, p.value))
                .collect();
            out.push(
                format!("  {} {} {}", c.method.as_str(), c.path, params.join(" "))
                    .trim_end()
                    .to_string(),
            );
        }
    }
    for a in &p.anomalies {
        out.push(format!("anomaly {}: {}", a.path, a.message));
    }
    out
}

/// Plans `spec` against `live` (listing entry) and `reads`; every call must be declared.
fn check(spec: Value, live: Option<Value>, reads: Vec<Read>, expected: &[&str]) {
    let d = desired(spec);
    let observed = Observation {
        live: live.map(|l| l.to_string()),
        reads,
    };
    let p = plan::plan(Some(&d), &observed).unwrap_or_else(|e| panic!("{e:?}"));
    let info = Access::describe();
    for a in &p.actions {
        for c in &a.calls {
            assert!(
                info.declares(c.method, &c.path),
                "undeclared: {} {}",
                c.method.as_str(),
                c.path
            );
        }
    }
    let got = lines(&p);
    let got: Vec<&str> = got.iter().map(String::as_str).collect();
    assert_eq!(got, expected);
}

const DOMAINS: &str = "/access/domains";

fn realms() -> Read {
    read(
        DOMAINS,
        json!([{"realm": "pam", "type": "pam"}, {"realm": "pve", "type": "pve"}]),
    )
}

fn user_entry(comment: &str) -> Value {
    json!({"userid": "deploy@pve", "enable": 1, "expire": 0, "comment": comment})
}

#[test]
fn validation_names_the_field() {
    let cases: &[(Value, &str)] = &[
        (json!({}), "needs exactly one of `user`, `group` or `role`"),
        (json!({"user": {"id": "deploy"}}), "must be `name@realm`"),
        (json!({"user": {"id": "de ploy@pve"}}), "without spaces"),
        (
            json!({"user": {"id": "d@1pve"}}),
            "realm `1pve` must start with a letter",
        ),
        (
            json!({"user": {"id": "d@pve", "comment": "x proxops:y"}}),
            "must not contain `proxops:`",
        ),
        (
            json!({"user": {"id": "d@pve", "tokens": [{"id": "1x"}]}}),
            "`1x` is not a token id",
        ),
        (
            json!({"user": {"id": "d@pve", "acl": [{"path": "/bogus", "roles": ["PVEAuditor"]}]}}),
            "`/bogus` is not an ACL path",
        ),
        (
            json!({"user": {"id": "d@pve", "acl": [{"path": "/vms", "roles": []}]}}),
            "at least one role",
        ),
        (
            json!({"user": {"id": "d@pve", "tokens": [{"id": "ci", "privsep": false, "acl": [{"path": "/", "roles": ["PVEAuditor"]}]}]}}),
            "without privilege separation",
        ),
        (
            json!({"role": {"privs": ["VM.Fly"]}}),
            "`VM.Fly` is not a PVE privilege",
        ),
        (
            json!({"user": {"id": "d@pve"}, "group": {}}),
            "got user, group",
        ),
    ];
    for (spec, says) in cases {
        let err = validate::validate(&manifest(spec.clone())).expect_err(says);
        let text = format!("{err:?}");
        assert!(text.contains(says), "`{says}` in {text}");
    }
}

#[test]
fn a_new_user_is_created_with_its_mark_acl_and_tokens() {
    check(
        json!({"user": {"id": "deploy@pve", "comment": "CI", "groups": ["ops"],
            "acl": [{"path": "/vms", "roles": ["PVEAuditor"]}],
            "tokens": [{"id": "ci", "acl": [{"path": "/", "roles": ["proxops-deploy"], "propagate": false}]}]}}),
        None,
        vec![realms()],
        &[
            "create: create user deploy@pve",
            "  POST /access/users userid=deploy@pve comment=CI (proxops:deploy@pve) enable=1 expire=0 groups=ops",
            "  PUT /access/acl path=/vms roles=PVEAuditor users=deploy@pve propagate=1",
            "create: create api token deploy@pve!ci (its secret goes into the cluster's sops file)",
            "  POST /access/users/deploy@pve/token/ci comment=proxops:deploy@pve!ci privsep=1",
            "  PUT /access/acl path=/ roles=proxops-deploy tokens=deploy@pve!ci propagate=0",
        ],
    );
}

#[test]
fn drift_is_repaired_with_the_minimal_calls() {
    let spec = json!({"user": {"id": "deploy@pve", "comment": "CI",
        "acl": [{"path": "/vms", "roles": ["PVEAuditor"]}],
        "tokens": [{"id": "ci"}]}});
    let detail = |stored: bool| {
        read(
            "/access/users/deploy@pve",
            json!({"groups": [], "tokens": {
            "ci": {"privsep": 1, "expire": 0, "comment": "proxops:deploy@pve!ci", "secret-stored": stored},
            "old": {"privsep": 1, "expire": 0, "comment": "proxops:deploy@pve!old", "secret-stored": true},
            "mine": {"privsep": 1, "expire": 0, "comment": "hand-made"}}}),
        )
    };
    let acl = read(
        "/access/acl",
        json!([
            {"path": "/vms", "type": "user", "ugid": "deploy@pve", "roleid": "PVEAuditor", "propagate": 1},
            {"path": "/storage", "type": "user", "ugid": "deploy@pve", "roleid": "PVEDatastoreUser", "propagate": 1},
            {"path": "/", "type": "user", "ugid": "other@pve", "roleid": "Administrator", "propagate": 1}
        ]),
    );
    // Converged but for the stray ACL entry and a marked token no longer declared.
    check(
        spec.clone(),
        Some(user_entry("CI (proxops:deploy@pve)")),
        vec![realms(), detail(true), acl.clone()],
        &[
            "update: update user deploy@pve",
            "  PUT /access/acl path=/storage roles=PVEDatastoreUser users=deploy@pve delete=1",
            "delete: delete api token deploy@pve!old (not in the manifest)",
            "  DELETE /access/users/deploy@pve/token/old",
        ],
    );
    // A changed comment is one PUT that keeps the mark; a token whose secret is not stored is
    // deleted and created again.
    check(
        spec,
        Some(user_entry("edited (proxops:deploy@pve)")),
        vec![realms(), detail(false), acl],
        &[
            "update: update user deploy@pve",
            "  PUT /access/users/deploy@pve comment=CI (proxops:deploy@pve)",
            "  PUT /access/acl path=/storage roles=PVEDatastoreUser users=deploy@pve delete=1",
            "update: re-create api token deploy@pve!ci: its secret is not in the cluster's sops file",
            "  DELETE /access/users/deploy@pve/token/ci",
            "  POST /access/users/deploy@pve/token/ci comment=proxops:deploy@pve!ci privsep=1",
            "delete: delete api token deploy@pve!old (not in the manifest)",
            "  DELETE /access/users/deploy@pve/token/old",
        ],
    );
}

#[test]
fn unmarked_objects_and_tokens_are_anomalies_and_unknown_realms_too() {
    check(
        json!({"user": {"id": "deploy@pve"}}),
        Some(user_entry("made by hand")),
        vec![realms()],
        &[
            "anomaly spec.user.id: user deploy@pve exists in PVE but was not created by proxops (its comment lacks `proxops:deploy@pve`); nothing is changed. Take it over: add `metadata.adopt: {id: deploy@pve, comment: \"made by hand\"}` to this manifest (the next apply then only adds the mark to its comment), or add `proxops:deploy@pve` to its comment in PVE; or rename the manifest's user",
        ],
    );
    check(
        json!({"user": {"id": "deploy@ldap"}}),
        None,
        vec![realms()],
        &[
            "anomaly spec.user.id: realm `ldap` does not exist in this cluster (its realms: pam, pve); create it in PVE first, or use `@pve`",
        ],
    );
    let p = {
        let d = desired(json!({"user": {"id": "deploy@pve", "tokens": [{"id": "mine"}]}}));
        let observed = Observation {
            live: Some(user_entry("proxops:deploy@pve").to_string()),
            reads: vec![
                realms(),
                read(
                    "/access/users/deploy@pve",
                    json!({"groups": [], "tokens": {"mine": {"privsep": 1, "comment": "hand"}}}),
                ),
                read("/access/acl", json!([])),
            ],
        };
        plan::plan(Some(&d), &observed).expect("plan")
    };
    assert!(p.actions.is_empty(), "{:?}", lines(&p));
    assert!(
        lines(&p)[0]
            .contains("API token deploy@pve!mine exists in PVE but was not created by proxops")
    );
}

/// A user or group the host flagged for a take-over (its manifest's `metadata.adopt` matches):
/// the mark added to the live comment and nothing else, whatever the manifest says.
#[test]
fn flagged_take_overs_write_the_mark_alone() {
    let mut flagged = user_entry("made by hand");
    flagged["proxops-take-over"] = json!(true);
    check(
        json!({"user": {"id": "deploy@pve", "comment": "Deploy", "email": "d@example.com"}}),
        Some(flagged),
        vec![realms()],
        &[
            "update: take over user deploy@pve: add proxops's mark `proxops:deploy@pve` to its comment (nothing else changes)",
            "  PUT /access/users/deploy@pve comment=made by hand (proxops:deploy@pve)",
        ],
    );
    check(
        json!({"group": {"comment": "Ops", "acl": [{"path": "/pool/web", "roles": ["PVEVMUser"]}]}}),
        Some(json!({"groupid": "deployer", "proxops-take-over": true})),
        vec![],
        &[
            "update: take over group deployer: add proxops's mark `proxops:deployer` to its comment (nothing else changes)",
            "  PUT /access/groups/deployer comment=proxops:deployer",
        ],
    );
}

#[test]
fn groups_and_roles() {
    let group = json!({"group": {"comment": "Ops", "acl": [{"path": "/pool/web", "roles": ["PVEVMUser"]}]}});
    let spec_name = |spec: Value, name: &str| {
        let mut m = manifest(spec);
        m["metadata"]["name"] = json!(name);
        validate::validate(&m).unwrap_or_else(|e| panic!("{e:?}"))
    };
    let g = spec_name(group, "ops");
    let p = plan::plan(
        Some(&g),
        &Observation {
            live: None,
            reads: vec![],
        },
    )
    .expect("plan");
    assert_eq!(
        lines(&p),
        vec![
            "create: create group ops",
            "  POST /access/groups groupid=ops comment=Ops (proxops:ops)",
            "  PUT /access/acl path=/pool/web roles=PVEVMUser groups=ops propagate=1",
        ]
    );
    let r = spec_name(
        json!({"role": {"privs": ["VM.Audit", "VM.Allocate"]}}),
        "deploy",
    );
    assert_eq!(r.id(), "proxops-deploy");
    let live = json!({"roleid": "proxops-deploy", "privs": "VM.Audit", "special": 0});
    let p = plan::plan(
        Some(&r),
        &Observation {
            live: Some(live.to_string()),
            reads: vec![],
        },
    )
    .expect("plan");
    assert_eq!(
        lines(&p),
        vec![
            "update: update role proxops-deploy",
            "  PUT /access/roles/proxops-deploy privs=VM.Allocate,VM.Audit"
        ]
    );
    // A live entry of another type with the same id is not this object's.
    let p = plan::plan(
        Some(&g),
        &Observation {
            live: Some(live.to_string()),
            reads: vec![],
        },
    )
    .expect("plan");
    assert_eq!(lines(&p)[0], "create: create group ops");
}

#[test]
fn claims_and_prunes_take_only_marked_objects() {
    let cases = [
        (
            "/access/users",
            json!({"userid": "a@pve", "comment": "proxops:a@pve"}),
            true,
        ),
        (
            "/access/users",
            json!({"userid": "a@pve", "comment": "proxops:b@pve"}),
            false,
        ),
        ("/access/users", json!({"userid": "root@pam"}), false),
        (
            "/access/groups",
            json!({"groupid": "ops", "comment": "x (proxops:ops)"}),
            true,
        ),
        ("/access/groups", json!({"groupid": "ops"}), false),
        (
            "/access/roles",
            json!({"roleid": "proxops-deploy", "privs": ""}),
            true,
        ),
        (
            "/access/roles",
            json!({"roleid": "PVEAdmin", "privs": "VM.Audit"}),
            false,
        ),
    ];
    for (listing, entry, want) in cases {
        assert_eq!(plan::claims(listing, &entry), want, "{entry}");
        let p = plan::plan(
            None,
            &Observation {
                live: Some(entry.to_string()),
                reads: vec![],
            },
        )
        .expect("plan");
        assert_eq!(p.actions.len(), usize::from(want), "{entry}");
    }
}

#[test]
fn adopt_round_trips_to_an_empty_plan() {
    let entry = user_entry("CI (proxops:deploy@pve)");
    let reads = vec![
        realms(),
        read(
            "/access/users/deploy@pve",
            json!({"groups": [], "tokens": {"x": {"privsep": 1}}}),
        ),
        read(
            "/access/acl",
            json!([{"path": "/vms", "type": "user", "ugid": "deploy@pve", "roleid": "PVEAuditor", "propagate": 1}]),
        ),
    ];
    let observed = Observation {
        live: Some(entry.to_string()),
        reads: reads.clone(),
    };
    let adopted = crate::adopt::adopt(&observed).expect("adopt");
    assert_eq!(adopted.manifest["metadata"]["name"], "deploy-pve");
    assert!(
        adopted
            .gaps
            .iter()
            .any(|g| g.reason.contains("deploy@pve!x is not adopted"))
    );
    let d = validate::validate(&adopted.manifest).unwrap_or_else(|e| panic!("{e:?}"));
    // The token the manifest does not declare is hand-made (no mark): left alone.
    let p = plan::plan(Some(&d), &observed).expect("plan");
    assert!(
        p.actions.is_empty() && p.anomalies.is_empty(),
        "{:?}",
        lines(&p)
    );
    let root = json!({"userid": "root@pam", "enable": 1});
    let err = crate::adopt::adopt(&Observation {
        live: Some(root.to_string()),
        reads: vec![],
    });
    assert!(err.is_err());
}
