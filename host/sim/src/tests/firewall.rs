//! The guest firewall and the cluster's security groups: positional rules (create at 0, `moveto`),
//! the digest on updates, references to aliases and ipsets, PVE's refusals, and the file's life
//! with its guest (removed on destroy, copied on clone).

use serde_json::{Value, json};

use super::{P, T};

const RULES: &str = "/nodes/pve01/qemu/100/firewall/rules";

/// The comments of the rules at `path`, in order (each rule is told by its comment).
async fn order(t: &T, path: &str) -> Vec<String> {
    t.get(path, &[])
        .await
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| r["comment"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn digest(t: &T, path: &str) -> String {
    let list = t.get(path, &[]).await;
    list[0]["digest"].as_str().expect("digest").to_string()
}

async fn add(t: &T, path: &str, comment: &str) {
    t.check(
        "POST",
        path,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("proto", "tcp"),
            ("dport", "22"),
            ("comment", comment),
        ],
        200,
        "null",
    )
    .await;
}

#[tokio::test]
async fn rules_are_positional_and_move_as_pve_moves_them() {
    let t = T::new().await;
    t.create(100, &[]).await;
    // PVE inserts every new rule at the top (`unshift`), whatever `pos` says.
    for c in ["c", "b", "a"] {
        add(&t, RULES, c).await;
    }
    t.check(
        "POST",
        RULES,
        &[
            ("type", "out"),
            ("action", "DROP"),
            ("pos", "3"),
            ("enable", "1"),
            ("comment", "top"),
        ],
        200,
        "null",
    )
    .await;
    assert_eq!(order(&t, RULES).await, ["top", "a", "b", "c"]);
    let rules = t.get(RULES, &[]).await;
    assert_eq!(rules[0]["enable"], json!(1));
    // A rule created without `enable` is disabled.
    assert_eq!(rules[1]["enable"], json!(0));
    assert_eq!(rules[1]["pos"], json!(1));
    // moveto: before the rule that was at `moveto` (a move down lands one above it) ...
    let cases: &[(usize, usize, &[&str])] = &[
        (0, 2, &["a", "top", "b", "c"]),
        (1, 4, &["a", "b", "c", "top"]),
        (3, 0, &["top", "a", "b", "c"]),
        (2, 9, &["top", "a", "c", "b"]),
    ];
    for (pos, to, want) in cases {
        let d = digest(&t, RULES).await;
        t.check(
            "PUT",
            &format!("{RULES}/{pos}"),
            // ... and nothing else changes in a move, even when other fields are given.
            &[
                ("moveto", &to.to_string()),
                ("digest", &d),
                ("comment", "ignored"),
            ],
            200,
            "null",
        )
        .await;
        assert_eq!(order(&t, RULES).await, *want, "pos {pos} moveto {to}");
    }
}

#[tokio::test]
async fn a_stale_digest_and_a_missing_position_are_refused() {
    let t = T::new().await;
    t.create(100, &[]).await;
    add(&t, RULES, "one").await;
    let stale = digest(&t, RULES).await;
    add(&t, RULES, "two").await;
    let modified = "detected modified configuration - file changed by other user? Try again.";
    t.check(
        "PUT",
        &format!("{RULES}/0"),
        &[("comment", "x"), ("digest", &stale)],
        500,
        modified,
    )
    .await;
    t.check(
        "DELETE",
        &format!("{RULES}/0"),
        &[("digest", &stale)],
        500,
        modified,
    )
    .await;
    t.check(
        "PUT",
        &format!("{RULES}/7"),
        &[("comment", "x")],
        500,
        "no rule at position 7",
    )
    .await;
    t.check(
        "GET",
        &format!("{RULES}/7"),
        &[],
        500,
        "no rule at position 7",
    )
    .await;
    assert_eq!(order(&t, RULES).await, ["two", "one"]);
    // An update with the current digest lands; `delete` clears a field.
    let d = digest(&t, RULES).await;
    t.check(
        "PUT",
        &format!("{RULES}/1"),
        &[("delete", "dport"), ("proto", "udp"), ("digest", &d)],
        200,
        "null",
    )
    .await;
    let one = t.get(&format!("{RULES}/1"), &[]).await;
    assert_eq!(one["proto"], "udp");
    assert!(one.get("dport").is_none(), "{one}");
    let d = digest(&t, RULES).await;
    t.check(
        "DELETE",
        &format!("{RULES}/0"),
        &[("digest", &d)],
        200,
        "null",
    )
    .await;
    assert_eq!(order(&t, RULES).await, ["one"]);
}

#[tokio::test]
async fn rules_are_checked_as_verify_rule_checks_them() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let cases: &[(P<'_>, u16, &str)] = &[
        (
            &[("type", "in"), ("action", "ALLOW")],
            400,
            "unknown action 'ALLOW'",
        ),
        (
            &[("type", "forward"), ("action", "ACCEPT")],
            400,
            "invalid rule type 'forward' for rule_env 'vm'",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("dport", "80")],
            400,
            "missing property - 'dport' requires this property",
        ),
        (
            &[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("proto", "gre"),
                ("dport", "80"),
            ],
            400,
            "protocol 'gre' does not support ports",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("source", "office")],
            400,
            "no such alias 'office'",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("dest", "+admins")],
            400,
            "no such ipset 'admins'",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("iface", "eth0")],
            400,
            "value does not match the regex pattern",
        ),
        (
            &[("type", "in"), ("action", "ACCEPT"), ("macro", "nosuch")],
            400,
            "unknown macro 'nosuch'",
        ),
        // A group rule naming a group that does not exist is accepted, as PVE accepts it.
        (&[("type", "group"), ("action", "nosuchgroup")], 200, "null"),
        // A macro's name is taken in PVE's spelling.
        (
            &[("type", "in"), ("action", "ACCEPT"), ("macro", "ssh")],
            200,
            "null",
        ),
    ];
    for (params, status, fragment) in cases {
        t.check("POST", RULES, params, *status, fragment).await;
    }
    let rules = t.get(RULES, &[]).await;
    assert_eq!(rules[0]["macro"], "SSH");
    assert_eq!(rules[1]["action"], "nosuchgroup");
    // Once the alias and the ipset exist, rules may name them.
    let fw = "/nodes/pve01/qemu/100/firewall";
    t.check(
        "POST",
        &format!("{fw}/aliases"),
        &[("name", "Office"), ("cidr", "192.0.2.0/24")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        &format!("{fw}/aliases"),
        &[("name", "office"), ("cidr", "192.0.2.1")],
        400,
        "alias 'office' already exists",
    )
    .await;
    t.check(
        "POST",
        &format!("{fw}/ipset"),
        &[("name", "admins")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        &format!("{fw}/ipset/admins"),
        &[("cidr", "198.51.100.7"), ("comment", "alice")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        RULES,
        &[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("source", "office"),
            ("dest", "+admins"),
        ],
        200,
        "null",
    )
    .await;
    let rule = t.get(&format!("{RULES}/0"), &[]).await;
    assert_eq!(rule["ipversion"], json!(4));
    assert_eq!(
        t.get(&format!("{fw}/aliases"), &[]).await[0]["name"],
        json!("Office")
    );
    assert_eq!(
        t.get(&format!("{fw}/ipset/admins"), &[]).await[0]["comment"],
        json!("alice")
    );
    t.check(
        "DELETE",
        &format!("{fw}/ipset/admins"),
        &[],
        500,
        "IPSet 'admins' is not empty",
    )
    .await;
}

#[tokio::test]
async fn options_carry_a_digest_and_the_file_lives_with_its_guest() {
    let t = T::new().await;
    t.create(100, &[]).await;
    let opts = "/nodes/pve01/qemu/100/firewall/options";
    let empty = t.get(opts, &[]).await;
    assert_eq!(empty.as_object().map(|o| o.len()), Some(1), "{empty}");
    let d0 = empty["digest"].as_str().unwrap_or("").to_string();
    t.check(
        "PUT",
        opts,
        &[("enable", "1"), ("policy_in", "DROP"), ("digest", &d0)],
        200,
        "null",
    )
    .await;
    let now = t.get(opts, &[]).await;
    assert_eq!(now["enable"], json!(1));
    assert_eq!(now["policy_in"], json!("DROP"));
    t.check(
        "PUT",
        opts,
        &[("macfilter", "0"), ("digest", &d0)],
        500,
        "detected modified configuration",
    )
    .await;
    t.check(
        "PUT",
        opts,
        &[("delete", "nosuch")],
        400,
        "no such option 'nosuch'",
    )
    .await;
    add(&t, RULES, "kept").await;
    // A clone copies the source's firewall file.
    let exit = t
        .task(
            "POST",
            "/nodes/pve01/qemu/100/clone",
            &[("newid", "101"), ("name", "copy")],
        )
        .await;
    assert_eq!(exit, "OK");
    assert_eq!(
        order(&t, "/nodes/pve01/qemu/101/firewall/rules").await,
        ["kept"]
    );
    // Destroying the guest removes its file.
    let exit = t.task("DELETE", "/nodes/pve01/qemu/100", &[]).await;
    assert_eq!(exit, "OK");
    assert_eq!(t.get(RULES, &[]).await, json!([]));
    let opts_after: Value = t.get(opts, &[]).await;
    assert!(opts_after.get("enable").is_none(), "{opts_after}");
}

#[tokio::test]
async fn security_groups_hold_rules_and_refuse_as_pve_does() {
    let t = T::new().await;
    let groups = "/cluster/firewall/groups";
    t.check(
        "POST",
        groups,
        &[("group", "web"), ("comment", "tier (proxops:web)")],
        200,
        "null",
    )
    .await;
    t.check(
        "POST",
        groups,
        &[("group", "web")],
        400,
        "Security group 'web' already exists",
    )
    .await;
    assert_eq!(
        t.get(groups, &[]).await[0]["comment"],
        json!("tier (proxops:web)")
    );
    let web = "/cluster/firewall/groups/web";
    add(&t, web, "ssh").await;
    // A group's rules are `in`, `out` or `forward`; never a group, never an interface.
    t.check(
        "POST",
        web,
        &[("type", "group"), ("action", "other")],
        400,
        "invalid rule type 'group' for rule_env 'group'",
    )
    .await;
    t.check(
        "POST",
        "/cluster/firewall/groups/nosuch",
        &[("type", "in"), ("action", "ACCEPT")],
        500,
        "no such security group 'nosuch'",
    )
    .await;
    assert_eq!(order(&t, web).await, ["ssh"]);
    t.check("DELETE", web, &[], 500, "Security group 'web' is not empty")
        .await;
    let d = digest(&t, web).await;
    t.check(
        "DELETE",
        &format!("{web}/0"),
        &[("digest", &d)],
        200,
        "null",
    )
    .await;
    // A guest rule naming the group does not keep it: PVE's delete looks only at the group.
    t.check(
        "POST",
        "/nodes/pve01/qemu/100/firewall/rules",
        &[("type", "group"), ("action", "web")],
        200,
        "null",
    )
    .await;
    t.check("DELETE", web, &[], 200, "null").await;
    assert_eq!(t.get(groups, &[]).await, json!([]));
    assert_eq!(
        t.get("/nodes/pve01/qemu/100/firewall/rules", &[]).await[0]["action"],
        json!("web")
    );
}
