//! Secret references: where a token may stand, and the grants that are refused at load.

use super::*;

/// `secret::check_refs` of a call with `pairs` (`@ref` stands for this run's token of `ref`)
/// against a grant letting `note` fill `description` and `root` fill `password`: the
/// parameters then marked sensitive, or the rule that refuses the call.
fn refs(method: Method, path: &str, pairs: &[(&str, &str)], expected: Result<&[&str], Rule>) {
    use proxops_core::secret_ref::token;
    let granted: std::collections::BTreeMap<String, Vec<String>> = [
        ("note".to_string(), vec!["description".to_string()]),
        ("root".to_string(), vec!["password".to_string()]),
    ]
    .into();
    let spelled: Vec<(String, String)> = pairs
        .iter()
        .map(|(n, v)| {
            let v = match v.strip_prefix('@') {
                Some(r) => token(r),
                None => v.replace("{nonce-token}", &token("note")),
            };
            (n.to_string(), v)
        })
        .collect();
    let mut call = Call {
        method,
        path: path.replace("{nonce-token}", &token("note")),
        params: spelled
            .iter()
            .map(|(n, v)| Param {
                name: n.clone(),
                value: v.clone(),
                sensitive: false,
            })
            .collect(),
    };
    let got = secret::check_refs(&mut call, Some(&granted), "Hostile");
    match (got, expected) {
        (Ok(()), Ok(want)) => {
            let sensitive: Vec<&str> = call
                .params
                .iter()
                .filter(|p| p.sensitive)
                .map(|p| p.name.as_str())
                .collect();
            assert_eq!(sensitive, want, "{pairs:?}");
        }
        (Err(r), Err(rule)) => {
            assert_eq!(r.rule, rule, "{pairs:?}: {r}");
            let text = r.to_string();
            assert!(
                text.contains("Hostile") || !text.contains("grant"),
                "{text}"
            );
            assert!(
                !text.contains(proxops_core::secret_ref::MARK),
                "no token in: {text}"
            );
        }
        (got, want) => panic!("{method:?} {path} {pairs:?}: got {got:?}, expected {want:?}"),
    }
}

#[test]
fn secret_references_stand_only_where_the_grant_puts_them() {
    use Method::*;
    let config = "/nodes/pve01/lxc/150/config";
    // Granted: the ref's param becomes sensitive, any case of its name.
    refs(
        Put,
        config,
        &[("description", "@note")],
        Ok(&["description"]),
    );
    refs(
        Put,
        config,
        &[("Description", "@note"), ("memory", "512")],
        Ok(&["Description"]),
    );
    refs(
        Post,
        "/nodes/pve01/lxc",
        &[("password", "@root"), ("vmid", "150")],
        Ok(&["password"]),
    );
    refs(Put, config, &[("memory", "512")], Ok(&[]));
    // A ref in a parameter the grant does not name for it, or a ref it does not name.
    refs(Put, config, &[("password", "@note")], Err(Rule::Secret));
    refs(Put, config, &[("description", "@root")], Err(Rule::Secret));
    refs(Put, config, &[("description", "@other")], Err(Rule::Secret));
    // Parameters the host judges requests by, or PVE reads as host access: never, granted or not.
    for name in [
        "vmid",
        "tags",
        "digest",
        "delete",
        "mp0",
        "rootfs",
        "dev0",
        "hookscript",
        "lxc.mount.entry",
        "scsi0",
    ] {
        refs(Put, config, &[(name, "@note")], Err(Rule::Secret));
    }
    // Inside a longer value, from another run, in the path, in a read.
    refs(
        Put,
        config,
        &[("description", "x {nonce-token}")],
        Err(Rule::Secret),
    );
    refs(
        Put,
        config,
        &[(
            "description",
            "proxops-secret-ref:00000000000000000000000000000000:note",
        )],
        Err(Rule::Secret),
    );
    refs(
        Put,
        "/nodes/{nonce-token}/lxc/150/config",
        &[],
        Err(Rule::Secret),
    );
    refs(Get, config, &[("description", "@note")], Err(Rule::Secret));
    for name in ["cicustom", "rng0", "virtiofs1"] {
        refs(Put, config, &[(name, "@note")], Err(Rule::Secret));
    }
    // A bundled kind holds values and sends no reference: one in its call came from a
    // manifest's text, whatever ref it names.
    let mut call = Call {
        method: Put,
        path: config.into(),
        params: params(&[("description", &proxops_core::secret_ref::token("note"))]),
    };
    let refused = secret::check_refs(&mut call, None, "VM").unwrap_err();
    assert_eq!(refused.rule, Rule::Secret, "{refused}");
    assert!(
        refused.to_string().contains("the VM kind holds values"),
        "{refused}"
    );
}

#[test]
fn a_grant_naming_a_judged_parameter_for_a_secret_is_refused_at_load() {
    let granted: std::collections::BTreeMap<String, Vec<String>> = [
        (
            "note".to_string(),
            vec!["description".to_string(), "tags".to_string()],
        ),
        ("root".to_string(), vec!["mp0".to_string()]),
        ("ok".to_string(), vec!["password".to_string()]),
    ]
    .into();
    let problems = secret::grant_problems(&granted);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("grant.secrets.note names the parameter `tags`"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("grant.secrets.root names the parameter `mp0`"),
        "{problems:?}"
    );
}
