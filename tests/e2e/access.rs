//! The Access kind (guest-kinds/access), loaded from its `.wasm` with a grant that includes
//! `access`, against the simulator's `/access` endpoints: users, groups, roles, ACL entries and
//! API tokens created with proxops's marks, drift repaired with the minimal calls, pruned; a
//! hand-made user left alone; the token's secret in the cluster's SOPS file (read back with the
//! real `sops` binary), never printed, and a token that authenticates with its own privileges;
//! a secret that could not be stored makes the next run delete and re-create the token; the
//! kind without `access` is refused (that case and the hand-made user against a `proxops sim
//! serve` child, `Served`).

use proxops_pve::Method;

use crate::support::{Lab, Served, TestCluster, sha256_hex};

/// Every call the kind declares, as its grant lists them.
const CALLS: &[&str] = &[
    "GET /access/users",
    "GET /access/groups",
    "GET /access/roles",
    "GET /access/acl",
    "GET /access/domains",
    "GET /access/users/{userid}",
    "POST /access/users",
    "PUT /access/users/{userid}",
    "DELETE /access/users/{userid}",
    "POST /access/users/{userid}/token/{tokenid}",
    "PUT /access/users/{userid}/token/{tokenid}",
    "DELETE /access/users/{userid}/token/{tokenid}",
    "POST /access/groups",
    "PUT /access/groups/{groupid}",
    "DELETE /access/groups/{groupid}",
    "POST /access/roles",
    "PUT /access/roles/{roleid}",
    "DELETE /access/roles/{roleid}",
    "PUT /access/acl",
];

/// `kinds/access.wasm` pinned in `proxops.yaml`, with `capabilities`.
fn install(lab: &impl TestCluster, capabilities: &str) {
    let path = proxops_guests::artifact_path("proxops-kind-access").expect("built");
    let wasm = std::fs::read(path).expect("read the access kind");
    lab.write_bytes("kinds/access.wasm", &wasm);
    let calls: String = CALLS.iter().map(|c| format!("        - {c}\n")).collect();
    lab.write(
        "proxops.yaml",
        &format!(
            "apiVersion: proxops/v1alpha1\nkinds:\n  - file: kinds/access.wasm\n    sha256: {}\n    grant:\n      calls:\n{calls}      capabilities: {capabilities}\n      limits: {{deadline-ms: 2000, memory-mib: 64, output-kib: 1024, log-lines: 200}}\n",
            sha256_hex(&wasm)
        ),
    );
}

fn fixture_dir() -> std::path::PathBuf {
    crate::support::workspace().join("tests/fixtures/sops")
}

fn identity() -> String {
    fixture_dir()
        .join("TEST-ONLY-age-key.txt")
        .display()
        .to_string()
}

/// The cluster's SOPS file: the fixture, as the real sops wrote it.
fn write_sops(lab: &impl TestCluster) {
    let original = std::fs::read_to_string(fixture_dir().join("cluster.sops.yaml")).unwrap();
    lab.write("secrets/lab.sops.yaml", &original);
}

/// The value at `path` of the lab's SOPS file, read by proxops's own reader.
fn sops_value(lab: &Lab, path: &str) -> Option<String> {
    let ids = proxops_secrets::Identities::from_file(std::path::Path::new(&identity())).unwrap();
    let doc =
        proxops_secrets::SopsDocument::open(&lab.repo.path().join("secrets/lab.sops.yaml"), &ids)
            .unwrap();
    doc.get(path).ok().map(str::to_string)
}

const ROLE: &str = "apiVersion: proxops/v1alpha1\nkind: Access\nmetadata: {name: deploy}\nspec:\n  role:\n    privs: [VM.Audit, VM.Allocate]\n";
const GROUP: &str = "apiVersion: proxops/v1alpha1\nkind: Access\nmetadata: {name: ops}\nspec:\n  group:\n    comment: Operators\n    acl:\n      - {path: /vms, roles: [PVEAuditor]}\n";
const USER: &str = "apiVersion: proxops/v1alpha1\nkind: Access\nmetadata: {name: deployer}\nspec:\n  user:\n    id: deploy@pve\n    comment: CI deployer\n    groups: [ops]\n    acl:\n      - {path: /vms, roles: [proxops-deploy]}\n    tokens:\n      - id: ci\n        acl:\n          - {path: /vms, roles: [proxops-deploy]}\n";

const SECRET_PATH: &str = "pve-tokens.deploy_40pve_21ci";

fn repo(lab: &impl TestCluster) {
    install(lab, "[access]");
    write_sops(lab);
    lab.write("access/lab/deploy.yaml", ROLE);
    lab.write("access/lab/ops.yaml", GROUP);
    lab.write("access/lab/deployer.yaml", USER);
}

async fn run(lab: &impl TestCluster, args: &[&str]) -> crate::support::Run {
    let id = identity();
    let mut all = vec!["--age-identity", id.as_str()];
    all.extend_from_slice(args);
    lab.run(&all).await
}

/// A client authenticating with `token` (`user@realm!id`) and `secret`.
fn client_as(lab: &Lab, token: &str, secret: &str) -> proxops_pve::Client {
    proxops_pve::Client::new(proxops_pve::ClientConfig {
        base_url: lab.sim.base_url(),
        token_id: token.to_string(),
        token_secret: secret.to_string(),
        tls: proxops_pve::TlsMode::Fingerprint(lab.sim.fingerprint().unwrap()),
        timeout: std::time::Duration::from_secs(30),
    })
    .unwrap()
}

fn no_secret_in(run: &crate::support::Run, secret: &str) {
    assert!(
        !run.stdout.contains(secret) && !run.stderr.contains(secret),
        "the token's secret was printed:\n{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn access_objects_are_created_repaired_and_pruned_and_the_token_secret_lands_in_sops() {
    let lab = Lab::start().await;
    repo(&lab);
    let first = run(&lab, &["apply"]).await;
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);

    // PVE holds them, marked.
    let user = lab
        .client
        .get("/access/users/deploy@pve", &[])
        .await
        .unwrap();
    assert_eq!(
        user["comment"], "CI deployer (proxops:deploy@pve)",
        "{user}"
    );
    assert_eq!(user["groups"], serde_json::json!(["ops"]));
    assert_eq!(user["tokens"]["ci"]["comment"], "proxops:deploy@pve!ci");
    let role = lab
        .client
        .get("/access/roles/proxops-deploy", &[])
        .await
        .unwrap();
    assert_eq!(role, serde_json::json!({"VM.Allocate": 1, "VM.Audit": 1}));
    let acl = lab
        .client
        .get("/access/acl", &[])
        .await
        .unwrap()
        .to_string();
    for want in [
        r#""type":"group","ugid":"ops""#,
        r#""type":"user","ugid":"deploy@pve""#,
        r#""type":"token","ugid":"deploy@pve!ci""#,
    ] {
        assert!(acl.contains(want), "{want} in {acl}");
    }

    // The secret is in the SOPS file, readable by the real sops, and printed nowhere.
    let secret = sops_value(&lab, SECRET_PATH).expect("the token's secret in SOPS");
    assert_eq!(secret.len(), 36);
    no_secret_in(&first, &secret);
    if let Some(sops) = crate::adopt::sops_binary() {
        let out = std::process::Command::new(sops)
            .env("SOPS_AGE_KEY_FILE", identity())
            .args([
                "decrypt",
                "--extract",
                r#"["pve-tokens"]["deploy_40pve_21ci"]"#,
            ])
            .arg(lab.repo.path().join("secrets/lab.sops.yaml"))
            .output()
            .expect("run sops");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim_end(), secret);
    }

    // The token authenticates, and holds what its ACL entries give it (privilege separation).
    let token = client_as(&lab, "deploy@pve!ci", &secret);
    assert!(token.get("/access/users", &[]).await.is_ok());
    let refused = token
        .request(
            Method::Post,
            "/access/groups",
            &[proxops_pve::Param::new("groupid", "sneaky")],
            false,
        )
        .await
        .expect_err("no Group.Allocate");
    assert!(
        refused.to_string().contains("Permission check failed"),
        "{refused}"
    );

    // Converged: a second run changes nothing.
    lab.clear();
    let again = run(&lab, &["apply"]).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", again.stdout);

    // Drift behind proxops's back: a comment and a stray ACL entry; repaired with two calls.
    lab.pve(
        Method::Put,
        "/access/users/deploy@pve",
        &[("comment", "edited (proxops:deploy@pve)")],
    )
    .await;
    lab.pve(
        Method::Put,
        "/access/acl",
        &[
            ("path", "/storage"),
            ("roles", "PVEDatastoreUser"),
            ("users", "deploy@pve"),
        ],
    )
    .await;
    lab.clear();
    let repair = run(&lab, &["apply"]).await;
    assert_eq!(repair.code, 0, "{}\n{}", repair.stdout, repair.stderr);
    assert_eq!(
        lab.mutations(),
        vec![
            "PUT /access/users/deploy@pve -> 200".to_string(),
            "PUT /access/acl -> 200".to_string()
        ],
        "{}",
        repair.stdout
    );
    let user = lab
        .client
        .get("/access/users/deploy@pve", &[])
        .await
        .unwrap();
    assert_eq!(user["comment"], "CI deployer (proxops:deploy@pve)");

    // Prune: the user's manifest goes, the user goes (with its token); the rest stays.
    lab.remove("access/lab/deployer.yaml");
    lab.clear();
    let prune = run(&lab, &["apply"]).await;
    assert_eq!(prune.code, 0, "{}\n{}", prune.stdout, prune.stderr);
    assert_eq!(
        lab.mutations(),
        vec!["DELETE /access/users/deploy@pve -> 200".to_string()],
        "{}",
        prune.stdout
    );
    assert!(lab.client.get("/access/groups/ops", &[]).await.is_ok());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_whose_secret_was_not_stored_is_deleted_and_created_again() {
    let lab = Lab::start().await;
    repo(&lab);
    // The token's key is taken by a mapping in this SOPS file: its secret cannot be written.
    let text = std::fs::read_to_string(lab.repo.path().join("secrets/lab.sops.yaml")).unwrap();
    let ids = proxops_secrets::Identities::from_file(std::path::Path::new(&identity())).unwrap();
    let broken = proxops_secrets::add_strings(
        std::path::Path::new("lab.sops.yaml"),
        &text,
        &ids,
        &["pve-tokens", "deploy_40pve_21ci"],
        &[("taken", "not-the-secret")],
        1_796_040_000,
    )
    .unwrap();
    lab.write("secrets/lab.sops.yaml", &broken);
    let first = run(&lab, &["apply"]).await;
    assert_ne!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    assert!(
        first.stdout.contains("could not be stored")
            || first.stderr.contains("could not be stored"),
        "{}\n{}",
        first.stdout,
        first.stderr
    );
    // PVE has the token; its secret is nowhere.
    let user = lab
        .client
        .get("/access/users/deploy@pve", &[])
        .await
        .unwrap();
    assert!(user["tokens"]["ci"].is_object(), "{user}");

    // The file is fixed; the next run deletes the token and creates it again, then its ACL.
    write_sops(&lab);
    lab.clear();
    let second = run(&lab, &["apply"]).await;
    assert_eq!(second.code, 0, "{}\n{}", second.stdout, second.stderr);
    let token_calls: Vec<String> = lab
        .mutations()
        .into_iter()
        .filter(|m| m.contains("/token/") || m.starts_with("PUT /access/acl"))
        .collect();
    assert_eq!(
        token_calls,
        vec![
            "DELETE /access/users/deploy@pve/token/ci -> 200".to_string(),
            "POST /access/users/deploy@pve/token/ci -> 200".to_string(),
            "PUT /access/acl -> 200".to_string(),
        ],
        "{}",
        second.stdout
    );
    let secret = sops_value(&lab, SECRET_PATH).expect("stored on the second run");
    no_secret_in(&second, &secret);
    assert!(
        client_as(&lab, "deploy@pve!ci", &secret)
            .get("/version", &[])
            .await
            .is_ok()
    );
    lab.clear();
    let third = run(&lab, &["apply"]).await;
    assert_eq!(third.code, 0, "{}", third.stdout);
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", third.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hand_made_user_is_reported_and_untouched_and_the_kind_needs_access() {
    // Against `proxops sim serve` children, as an operator runs one.
    let lab = Served::start().await;
    repo(&lab);
    lab.pve(
        Method::Post,
        "/access/users",
        &[("userid", "deploy@pve"), ("comment", "made by hand")],
    )
    .await;
    lab.clear().await;
    let plan = run(&lab, &["apply"]).await;
    assert!(
        plan.stdout
            .contains("user deploy@pve exists in PVE but was not created by proxops"),
        "{}\n{}",
        plan.stdout,
        plan.stderr
    );
    let user = lab
        .client()
        .get("/access/users/deploy@pve", &[])
        .await
        .unwrap();
    assert_eq!(user["comment"], "made by hand");
    let mutations = lab.mutations().await;
    assert!(
        mutations
            .iter()
            .all(|m| !m.contains("deploy@pve") && !m.contains("/token/")),
        "{mutations:?}"
    );

    // The same kind without the `access` capability: every write is refused, nothing sent.
    let lab = Served::start().await;
    repo(&lab);
    install(&lab, "[]");
    lab.clear().await;
    let refused = run(&lab, &["apply"]).await;
    assert_ne!(refused.code, 0, "{}", refused.stdout);
    let all = format!("{}\n{}", refused.stdout, refused.stderr);
    assert!(all.contains("needs the capability `access`"), "{all}");
    assert_eq!(lab.mutations().await, Vec::<String>::new(), "{all}");
}
