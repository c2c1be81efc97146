//! Access control: users, groups, roles, ACL entries and API tokens with PVE's checks and messages, the token
//! value returned once, and a created token authenticating with its own privileges.

use serde_json::{Value, json};

use super::T;

/// A request authenticated with `token` (`user@realm!id=value`) instead of the simulator's own.
async fn as_token(
    t: &T,
    token: &str,
    method: &str,
    path: &str,
    params: super::P<'_>,
) -> (u16, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
    let mut rb = t
        .client
        .request(m, t.url(path))
        .header("Authorization", format!("PVEAPIToken={token}"));
    rb = if method == "GET" || method == "DELETE" {
        rb.query(params)
    } else {
        rb.form(params)
    };
    let resp = rb.send().await.expect("sent");
    let status = resp.status().as_u16();
    let text = resp.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn users_groups_and_roles_are_created_listed_and_refused_as_pve_does() {
    let t = T::new().await;
    // A fresh installation: root@pam, the two realms, the built-in roles.
    let users = t.get("/access/users", &[]).await;
    assert_eq!(
        users,
        json!([{"userid": "root@pam", "enable": 1, "expire": 0, "realm-type": "pam"}])
    );
    let realms = t.get("/access/domains", &[]).await;
    assert_eq!(realms.as_array().map(Vec::len), Some(2));
    let roles = t.get("/access/roles", &[]).await;
    let admin = roles
        .as_array()
        .and_then(|r| r.iter().find(|r| r["roleid"] == "PVEVMAdmin"))
        .cloned()
        .expect("PVEVMAdmin");
    assert_eq!(admin["special"], 1);
    assert!(
        admin["privs"]
            .as_str()
            .unwrap_or("")
            .contains("VM.Allocate")
    );

    t.check(
        "POST",
        "/access/groups",
        &[("groupid", "ops"), ("comment", "Ops (proxops:ops)")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        "/access/users",
        &[
            ("userid", "ci@pve"),
            ("comment", "CI"),
            ("groups", "ops"),
            ("email", "ci@example.com"),
        ],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        "/access/roles",
        &[("roleid", "Deployer"), ("privs", "VM.Allocate,VM.Audit")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/access/users/ci@pve", &[]).await,
        json!({"enable": 1, "expire": 0, "comment": "CI", "email": "ci@example.com", "groups": ["ops"], "tokens": {}})
    );
    assert_eq!(
        t.get("/access/groups", &[]).await,
        json!([{"groupid": "ops", "comment": "Ops (proxops:ops)", "users": "ci@pve"}])
    );
    assert_eq!(
        t.get("/access/roles/Deployer", &[]).await,
        json!({"VM.Allocate": 1, "VM.Audit": 1})
    );
    // `groups` replaces the memberships; `append` adds.
    t.check("POST", "/access/groups", &[("groupid", "dev")], 200, "null")
        .await;
    t.check(
        "PUT",
        "/access/users/ci@pve",
        &[("groups", "dev")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/access/users/ci@pve", &[]).await["groups"],
        json!(["dev"])
    );
    t.check(
        "PUT",
        "/access/users/ci@pve",
        &[("groups", "ops"), ("append", "1")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/access/users/ci@pve", &[]).await["groups"],
        json!(["dev", "ops"])
    );
    t.check(
        "PUT",
        "/access/roles/Deployer",
        &[("privs", "VM.Audit")],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/access/roles/Deployer", &[]).await,
        json!({"VM.Audit": 1})
    );

    let cases: &[(&str, &str, super::P, u16, &str)] = &[
        (
            "POST",
            "/access/users",
            &[("userid", "ci@pve")],
            500,
            "create user failed: user 'ci@pve' already exists",
        ),
        (
            "POST",
            "/access/users",
            &[("userid", "nobody")],
            400,
            "does not look like a valid user name",
        ),
        (
            "POST",
            "/access/users",
            &[("userid", "a@pve"), ("groups", "nope")],
            500,
            "create user failed: no such group 'nope'",
        ),
        (
            "POST",
            "/access/users",
            &[("userid", "b@ldap"), ("password", "secret-pw-1")],
            500,
            "auth domain 'ldap' does not exist",
        ),
        (
            "PUT",
            "/access/users/zz@pve",
            &[("comment", "x")],
            500,
            "update user failed: no such user ('zz@pve')",
        ),
        (
            "POST",
            "/access/groups",
            &[("groupid", "ops")],
            500,
            "create group failed: group 'ops' already exists",
        ),
        (
            "POST",
            "/access/groups",
            &[("groupid", "bad name")],
            400,
            "group name 'bad name' contains invalid characters",
        ),
        (
            "DELETE",
            "/access/groups/nope",
            &[],
            500,
            "delete group failed: group 'nope' does not exist",
        ),
        (
            "POST",
            "/access/roles",
            &[("roleid", "PVEMine")],
            400,
            "cannot use role ID starting with the (case-insensitive) 'PVE' namespace",
        ),
        (
            "POST",
            "/access/roles",
            &[("roleid", "R1"), ("privs", "VM.Fly")],
            400,
            "invalid privilege 'VM.Fly'",
        ),
        (
            "PUT",
            "/access/roles/PVEAdmin",
            &[("privs", "VM.Audit")],
            500,
            "auto-generated role 'PVEAdmin' cannot be modified",
        ),
        (
            "DELETE",
            "/access/roles/Administrator",
            &[],
            500,
            "auto-generated role 'Administrator' cannot be deleted",
        ),
        (
            "DELETE",
            "/access/roles/Nope",
            &[],
            500,
            "delete role failed: role 'Nope' does not exist",
        ),
        (
            "PUT",
            "/access/acl",
            &[("path", "/"), ("roles", "PVEAuditor")],
            400,
            "either 'users', 'groups' or 'tokens' is required.",
        ),
        (
            "PUT",
            "/access/acl",
            &[
                ("path", "/bogus"),
                ("roles", "PVEAuditor"),
                ("users", "ci@pve"),
            ],
            400,
            "invalid ACL path '/bogus'",
        ),
        (
            "PUT",
            "/access/acl",
            &[("path", "/"), ("roles", "Nope"), ("users", "ci@pve")],
            500,
            "ACL update failed: role 'Nope' does not exist",
        ),
        (
            "PUT",
            "/access/acl",
            &[("path", "/"), ("roles", "PVEAuditor"), ("users", "zz@pve")],
            500,
            "ACL update failed: user 'zz@pve' does not exist",
        ),
        (
            "PUT",
            "/access/acl",
            &[
                ("path", "/"),
                ("roles", "PVEAuditor"),
                ("tokens", "ci@pve!nope"),
            ],
            500,
            "ACL update failed: no such token 'nope' for user 'ci@pve'",
        ),
    ];
    for (method, path, params, status, fragment) in cases {
        t.check(method, path, params, *status, fragment).await;
    }
    // Deleting a group takes its ACL entries with it; deleting a user its memberships.
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/vms"),
            ("roles", "PVEVMUser"),
            ("groups", "dev"),
            ("propagate", "0"),
        ],
        200,
        "null",
    )
    .await;
    assert_eq!(
        t.get("/access/acl", &[]).await,
        json!([{"path": "/vms", "type": "group", "ugid": "dev", "roleid": "PVEVMUser", "propagate": 0}])
    );
    t.check("DELETE", "/access/groups/dev", &[], 200, "null")
        .await;
    assert_eq!(t.get("/access/acl", &[]).await, json!([]));
    t.check("DELETE", "/access/users/ci@pve", &[], 200, "null")
        .await;
    assert_eq!(
        t.get("/access/groups/ops", &[]).await,
        json!({"members": [], "comment": "Ops (proxops:ops)"})
    );
}

#[tokio::test]
async fn a_token_value_is_returned_once_and_the_token_acts_with_its_privileges() {
    let t = T::new().await;
    t.check(
        "POST",
        "/access/users",
        &[("userid", "deploy@pve")],
        200,
        "null",
    )
    .await;
    let (s, created) = t
        .req(
            "POST",
            "/access/users/deploy@pve/token/ci",
            &[("comment", "CI (proxops:deploy@pve!ci)")],
        )
        .await;
    assert_eq!(s, 200, "{created}");
    let data = &created["data"];
    assert_eq!(data["full-tokenid"], "deploy@pve!ci");
    assert_eq!(
        data["info"],
        json!({"privsep": 1, "expire": 0, "comment": "CI (proxops:deploy@pve!ci)"})
    );
    let value = data["value"].as_str().expect("value").to_string();
    assert_eq!(value.len(), 36, "a UUID: {value}");
    // Never again: not in the read, the listing, the user or the full user listing.
    for path in [
        "/access/users/deploy@pve/token/ci",
        "/access/users/deploy@pve/token",
        "/access/users/deploy@pve",
    ] {
        let text = t.get(path, &[]).await.to_string();
        assert!(!text.contains(&value), "{path} shows the value: {text}");
    }
    let full = t.get("/access/users", &[("full", "1")]).await.to_string();
    assert!(
        !full.contains(&value) && full.contains("\"tokenid\":\"ci\""),
        "{full}"
    );
    t.check(
        "POST",
        "/access/users/deploy@pve/token/ci",
        &[],
        400,
        "Token already exists.",
    )
    .await;

    let token = format!("deploy@pve!ci={value}");
    // It authenticates: a read answers.
    let (s, _) = as_token(&t, &token, "GET", "/cluster/resources", &[]).await;
    assert_eq!(s, 200);
    // A wrong value does not.
    let (s, _) = as_token(
        &t,
        "deploy@pve!ci=00000000-0000-0000-0000-000000000000",
        "GET",
        "/version",
        &[],
    )
    .await;
    assert_eq!(s, 401);
    // Without privileges a write is PVE's 403, and nothing changes.
    let (s, body) = as_token(&t, &token, "POST", "/access/groups", &[("groupid", "g1")]).await;
    assert_eq!(s, 403, "{body}");
    assert!(
        body.to_string()
            .contains("Permission check failed (/access/groups, Group.Allocate)"),
        "{body}"
    );
    assert_eq!(t.get("/access/groups", &[]).await, json!([]));
    // privsep: the user's role alone does not reach the token...
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/access"),
            ("roles", "PVEUserAdmin"),
            ("users", "deploy@pve"),
        ],
        200,
        "null",
    )
    .await;
    let (s, _) = as_token(&t, &token, "POST", "/access/groups", &[("groupid", "g1")]).await;
    assert_eq!(s, 403);
    // ...the token's own entry, intersected with the user's, does.
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/access"),
            ("roles", "PVEUserAdmin"),
            ("tokens", "deploy@pve!ci"),
        ],
        200,
        "null",
    )
    .await;
    let (s, body) = as_token(&t, &token, "POST", "/access/groups", &[("groupid", "g1")]).await;
    assert_eq!(s, 200, "{body}");
    // A privilege the token has but its user lacks is not held.
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/"),
            ("roles", "PVEVMAdmin"),
            ("tokens", "deploy@pve!ci"),
        ],
        200,
        "null",
    )
    .await;
    let (s, body) = as_token(&t, &token, "DELETE", "/nodes/pve01/qemu/100", &[]).await;
    assert_eq!(s, 403, "{body}");
    assert!(
        body.to_string()
            .contains("Permission check failed (/vms/100, VM.Allocate)"),
        "{body}"
    );
    // Without privilege separation the token has its user's privileges.
    t.check(
        "PUT",
        "/access/users/deploy@pve/token/ci",
        &[("privsep", "0")],
        200,
        "privsep",
    )
    .await;
    // A VM create naming a pool needs VM.Allocate on the VM or on the pool (qemu-server's
    // create_vm); an entry on the pool allows no create outside it.
    t.check("POST", "/pools", &[("poolid", "web")], 200, "null")
        .await;
    let create = [("vmid", "150"), ("pool", "web")];
    let (s, body) = as_token(&t, &token, "POST", "/nodes/pve01/qemu", &create).await;
    assert_eq!(s, 403, "{body}");
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/pool/web"),
            ("roles", "PVEVMAdmin"),
            ("users", "deploy@pve"),
        ],
        200,
        "null",
    )
    .await;
    let (s, body) = as_token(&t, &token, "POST", "/nodes/pve01/qemu", &create).await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = as_token(&t, &token, "POST", "/nodes/pve01/qemu", &[("vmid", "151")]).await;
    assert_eq!(s, 403, "{body}");
    assert!(
        body.to_string()
            .contains("Permission check failed (/vms/151, VM.Allocate)"),
        "{body}"
    );
    t.check(
        "PUT",
        "/access/acl",
        &[
            ("path", "/access"),
            ("roles", "PVEUserAdmin"),
            ("users", "deploy@pve"),
            ("delete", "1"),
        ],
        200,
        "null",
    )
    .await;
    let (s, _) = as_token(&t, &token, "POST", "/access/groups", &[("groupid", "g2")]).await;
    assert_eq!(s, 403);
    // Deleted, it no longer authenticates, and its ACL entries are gone.
    t.check(
        "DELETE",
        "/access/users/deploy@pve/token/ci",
        &[],
        200,
        "null",
    )
    .await;
    let (s, _) = as_token(&t, &token, "GET", "/version", &[]).await;
    assert_eq!(s, 401);
    let acl = t.get("/access/acl", &[]).await;
    assert!(!acl.to_string().contains("deploy@pve!ci"), "{acl}");
    t.check(
        "GET",
        "/access/users/deploy@pve/token/ci",
        &[],
        500,
        "no such token 'ci' for user 'deploy@pve'",
    )
    .await;
    // The token grammar is the schema's.
    t.check(
        "POST",
        "/access/users/deploy@pve/token/1x",
        &[],
        400,
        "tokenid",
    )
    .await;
}
