//! The whole sandbox, property-tested: no accepted request reaches what the object does not own.

use super::*;

/// Random calls from a fixed set of templates, values and parameters, each through the
/// whole sandbox (declared templates, canonical form, grant, ownership by target) as a
/// third-party kind whose object is guest 150 (clone source 9000): whatever is accepted is
/// decoded as PVE decodes it and must reach nothing but guest 150, its volumes, a new file,
/// or the template's clone into 150. Live: 150 (owned), 101 (untagged), 100 (another
/// manifest's), 9000 (the owned template).
#[test]
fn no_accepted_request_reaches_what_the_object_does_not_own() {
    use crate::grant::{Trust, check_call};
    use crate::ownership::{LiveGuest, Scope, check_calls};
    use proxops_runtime::kind::{Action, KindInfo, Operation};

    let templates = [
        (Method::Post, "/nodes/{node}/lxc"),
        (Method::Put, "/nodes/{node}/lxc/{vmid}/config"),
        (Method::Post, "/nodes/{node}/lxc/{vmid}/status/{op}"),
        (Method::Delete, "/nodes/{node}/lxc/{vmid}"),
        (Method::Post, "/nodes/{node}/qemu/{vmid}/clone"),
        (
            Method::Delete,
            "/nodes/{node}/storage/{storage}/content/{volume}",
        ),
        (Method::Post, "/nodes/{node}/{op}"),
        (Method::Post, "/{area}/{op}"),
        (Method::Put, "/nodes/{node}/{area}/{vmid}/{op}"),
    ];
    let info = KindInfo {
        kind: "Hostile".into(),
        api_version: "proxops/test".into(),
        folder: "hostile".into(),
        schema: "{}".into(),
        calls: templates.iter().map(|(m, p)| pattern(*m, p)).collect(),
        listings: Vec::new(),
        references_kinds: Vec::new(),
        secrets: false,
        capabilities: Vec::new(),
    };
    let trust = Trust::Granted(proxops_core::grant::Grant::default());
    let values = [
        "pve01",
        "pve02",
        "pve09",
        "150",
        "0150",
        "+150",
        "101",
        "100",
        "9000",
        "1e2",
        "150%20",
        "%31%35%30",
        "lxc",
        "qemu",
        "stopall",
        "execute",
        "access",
        "users",
        "config",
        "stop",
        "start",
        "..",
        "%2e%2e",
        "%2E%2e",
        "a\\b",
        "x?y",
        "x#y",
        "local",
        "local-lvm",
        "local-lvm%3Avm-150-disk-0",
        "local-lvm%3Avm-101-disk-0",
        "local%3A150%2Fvm-150-disk-0.qcow2",
        "local%3A100%2Fvm-100-disk-0.qcow2",
        "local%3Aiso%2Fx.iso",
        "local-lvm%3Abase-9000-disk-0",
        "local%3Aiso%2F..%2F..%2Fx",
        "pve01%2Fstopall",
        "150%2F..%2F101",
        "%00",
        "storage",
        "content",
    ];
    let param_sets: [&[(&str, &str)]; 6] = [
        &[],
        &[("vmid", "150"), ("unprivileged", "1")],
        &[("vmid", "101"), ("unprivileged", "1")],
        &[("newid", "150")],
        &[("newid", "101")],
        &[("vmid", "0150"), ("unprivileged", "1")],
    ];
    let live = |v: u64| {
        let (tags, vmid) = match v {
            150 => ("proxops;proxops-150", 150),
            101 => ("", 101),
            100 => ("proxops;proxops-100", 100),
            9000 => ("proxops;proxops-9000", 9000),
            _ => return None,
        };
        LiveGuest::from_entry(&crate::live::Entry::from_value(&serde_json::json!({
            "id": format!("lxc/{vmid}"), "type": "lxc", "vmid": vmid, "node": "pve01", "tags": tags
        })))
    };
    let named = |v: u64| (v == 100).then(|| "VM web".to_string());
    let manageable = |g: &LiveGuest| g.tagged();
    let nodes: std::collections::HashSet<String> = ["pve01".into(), "pve02".into()].into();
    let scope = Scope {
        vmid: Some(150),
        guest_scope: None,
        clone_sources: vec![9000],
        nodes: &nodes,
        offline: &std::collections::HashSet::new(),
        ha_marked: &|_| None,
        listings: &[],
        named: &|_, _| crate::ownership::NamedLive::Unread,
        prune: false,
        resource: Some("lxc/150"),
        guests: &live,
        named_elsewhere: &named,
        manageable: &manageable,
        pool: &|_| Ok(()),
        take_over: None,
        named_type: &|_, _| None,
    };

    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let (mut accepted, mut refused) = (0, 0);
    for _ in 0..20_000 {
        let (method, template) = templates[next(templates.len())];
        let path: String = template
            .split('/')
            .map(|seg| {
                // Half the time a value that fits the placeholder, so both sides are reached.
                let fitting = match seg {
                    "{node}" => Some("pve01"),
                    "{vmid}" => Some("150"),
                    "{storage}" => Some("local-lvm"),
                    "{volume}" => Some("local-lvm%3Avm-150-disk-0"),
                    "{op}" => Some("start"),
                    _ => None,
                };
                match fitting {
                    Some(v) if next(2) == 0 => v.to_string(),
                    _ if seg.starts_with('{') => values[next(values.len())].to_string(),
                    _ => seg.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("/");
        let mut call = Call {
            method,
            path,
            params: params(param_sets[next(param_sets.len())]),
        };
        let proposed = call.path.clone();
        let ok = check_call(&trust, &info, &mut call).is_ok()
            && check_calls(
                &[Action {
                    operation: Operation::Update,
                    summary: String::new(),
                    calls: vec![call.clone()],
                    changes: Vec::new(),
                    disturbs_availability: false,
                    destructive: false,
                    restore: None,
                }],
                &scope,
            )
            .is_ok();
        if !ok {
            refused += 1;
            continue;
        }
        accepted += 1;
        // The oracle: the URL as PVE routes it (the whole path decoded once, split on `/`).
        let sent = &call.path;
        assert!(
            sent.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-_.~%".contains(&b)),
            "{proposed} was sent as {sent}"
        );
        let decoded =
            String::from_utf8(percent_decode(sent).expect("decodes").as_bytes().to_vec()).unwrap();
        let segs: Vec<&str> = decoded.split('/').skip(1).collect();
        assert!(
            segs.iter()
                .all(|s| !s.is_empty() && *s != "." && *s != ".."),
            "{proposed} -> {decoded}"
        );
        assert_eq!(
            segs[0], "nodes",
            "{proposed} -> {decoded}: only guest and storage writes"
        );
        assert!(
            ["pve01", "pve02"].contains(&segs[1]),
            "{proposed} -> {decoded}"
        );
        let vmid_param = |n: &str| {
            call.params
                .iter()
                .find(|p| p.name == n)
                .map(|p| p.value.as_str())
        };
        match &segs[2..] {
            ["lxc" | "qemu"] => assert_eq!(vmid_param("vmid"), Some("150"), "{proposed}"),
            ["lxc" | "qemu", "9000", "clone"] => {
                assert_eq!(vmid_param("newid"), Some("150"), "{proposed}")
            }
            ["lxc" | "qemu", v, ..] => assert_eq!(*v, "150", "{proposed} -> {decoded}"),
            ["storage", _, "content", rest @ ..] => {
                let volume = rest.join("/");
                assert!(
                    volume.contains("vm-150-") || volume.contains(":150/"),
                    "{proposed} -> {decoded}: a volume of another guest or an undeclared file"
                );
            }
            other => panic!("{proposed} -> {decoded}: reached {other:?}"),
        }
    }
    // The generator reaches both sides, so the oracle judged real requests.
    eprintln!("accepted {accepted}, refused {refused}");
    assert!(
        accepted > 500 && refused > 5_000,
        "accepted {accepted}, refused {refused}"
    );
}
