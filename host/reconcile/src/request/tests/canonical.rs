//! The canonical form: paths and parameter names, each spelling the host sends or refuses.

use super::*;

/// `canonical`: the path the host sends, or the rule that refuses it.
fn check(method: Method, path: &str, expected: Result<&str, Rule>) {
    let got = canonical(method, path, &declared());
    match (&got, expected) {
        (Ok(sent), Ok(want)) => assert_eq!(sent, want, "{path}"),
        (Err(r), Err(rule)) => {
            assert_eq!(r.rule, rule, "{path}: {r}");
            assert!(
                r.to_string().ends_with(&format!("(sandbox rule `{rule}`)")),
                "{r}"
            );
        }
        _ => panic!("{method:?} {path}: got {got:?}, expected {expected:?}"),
    }
}

#[test]
fn paths_are_sent_in_the_form_the_host_builds() {
    use Method::*;
    let config = "/nodes/pve01/lxc/101/config";
    check(Get, config, Ok(config));
    check(Put, config, Ok(config));
    // Letters spelt as escapes are the same path, sent plainly.
    check(Put, "/nodes/pve01/%6cxc/101/config", Ok(config));
    check(Put, "/nodes/%70ve01/lxc/101/config", Ok(config));
    // A volume's `:` and `/` are encoded once, whatever the kind wrote.
    let volume = "/nodes/pve01/storage/local/content/local%3Aiso%2Fx.iso";
    check(Delete, volume, Ok(volume));
    check(
        Delete,
        "/nodes/pve01/storage/local/content/local:iso%2fx.iso",
        Ok(volume),
    );
    for (path, rule) in [
        // Identity: a vmid segment is a canonical decimal.
        ("/nodes/pve01/lxc/0101/config", Rule::Path),
        ("/nodes/pve01/lxc/+101/config", Rule::Path),
        ("/nodes/pve01/lxc/101%20/config", Rule::Path),
        ("/nodes/pve01/lxc/1e2/config", Rule::Path),
        // What the URL parser or PVE read another way.
        ("/nodes/pve01/lxc/101\\..\\..\\access/config", Rule::Path),
        ("/nodes/pve01/lxc/101/config?x=1", Rule::Path),
        ("/nodes/pve01/lxc/101/config#x", Rule::Path),
        ("/nodes/pve01/lxc/101/../102/config", Rule::Path),
        ("/nodes/pve01/lxc/%2e%2e/config", Rule::Path),
        ("/nodes/pve01/lxc/%2E%2e/config", Rule::Path),
        ("/nodes/pve01/lxc/./101/config", Rule::Path),
        ("/nodes/pve01/lxc/101%2f..%2f102/config", Rule::Path),
        ("/nodes/pve01/lxc/101%00/config", Rule::Path),
        ("/nodes/pve01/lxc/101\n/config", Rule::Path),
        ("/nodes/pve01/lxc/%252e%252e/config", Rule::Path),
        ("/nodes/pve01/lxc/%zz/config", Rule::Path),
        ("/nodes/pve01%5C..%5Caccess/lxc/101/config", Rule::Path),
        ("/nodes/pve01/lxc//config", Rule::Path),
        ("/nodes/pve01/lxc/101/config/", Rule::Path),
        ("nodes/pve01/lxc/101/config", Rule::Path),
        ("/nodes/pve01/lxc/101/cönfig", Rule::Path),
        // A generic placeholder holds a plain value only.
        ("/nodes/pve01/%2e%2e", Rule::Path),
        ("/access/users%2F..%2Fgroups", Rule::Path),
        // A volume with a dot segment, or on no storage id.
        (
            "/nodes/pve01/storage/local/content/local%3Aiso%2F..%2F..%2Fx",
            Rule::Path,
        ),
        (
            "/nodes/pve01/storage/local/content/%2Fetc%2Fpasswd",
            Rule::Path,
        ),
        // Not declared: another shape or method.
        ("/nodes/pve01/qemu/100/config", Rule::Declared),
        ("/version", Rule::Declared),
    ] {
        let method = if path.contains("/storage/") {
            Delete
        } else {
            Put
        };
        let method = if path.starts_with("/access") || path.matches('/').count() == 2 {
            Post
        } else {
            method
        };
        check(method, path, Err(rule));
    }
    check(Delete, config, Err(Rule::Declared));
}

#[test]
fn parameter_names_are_plain_and_given_once() {
    let check = |pairs: &[(&str, &str)], ok: bool| {
        let got = check_params(&params(pairs));
        assert_eq!(got.is_ok(), ok, "{pairs:?}: {got:?}");
        if let Err(r) = got {
            assert_eq!(r.rule, Rule::Params);
        }
    };
    check(
        &[("memory", "512"), ("net0", "x"), ("lxc.cgroup", "x")],
        true,
    );
    check(&[("unprivileged", "1"), ("unprivileged", "0")], false);
    check(&[("unprivileged", "1"), ("Unprivileged", "0")], false);
    check(&[("mem ory", "1")], false);
    check(&[("memory\n", "1")], false);
    check(&[("", "1")], false);
    check(&[("a[0]", "1")], false);
}
