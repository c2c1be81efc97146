//! What a kind may send. Every kind is held to the calls it declared in `describe()`; a
//! third-party kind also to the operator's grant in `proxops.yaml`: at load, what it declares
//! must be within the grant; before planning is accepted, every call it proposes must use
//! only the PVE capabilities (privileged containers, bind mounts, devices, hook scripts) the
//! grant names. A refused call fails its object with nothing sent.

use proxops_core::grant::{Capability, Grant};
use proxops_runtime::kind::{Call, CallPattern, KindInfo, Method};

use crate::plan::method_name;

/// How far a kind is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Built from this repository's source and embedded in the binary: held to what it
    /// declares.
    Bundled,
    /// Loaded from a file: held to what it declares and to the operator's grant.
    Granted(Grant),
}

/// Does `path` match the template (`{x}` matches one non-empty segment)?
pub fn path_matches(template: &str, path: &str) -> bool {
    let parts: Vec<&str> = template.split('/').collect();
    let segments: Vec<&str> = path.split('/').collect();
    parts.len() == segments.len()
        && parts
            .iter()
            .zip(&segments)
            .all(|(p, s)| (p.starts_with('{') && p.ends_with('}') && !s.is_empty()) || p == s)
}

/// Whether `method path` is one of `patterns`.
pub fn call_allowed(patterns: &[CallPattern], method: Method, path: &str) -> bool {
    patterns
        .iter()
        .any(|p| p.method == method && path_matches(&p.path, path))
}

fn capability(c: proxops_runtime::kind::Capability) -> Capability {
    use proxops_runtime::kind::Capability as K;
    match c {
        K::Privileged => Capability::Privileged,
        K::BindMounts => Capability::BindMounts,
        K::Devices => Capability::Devices,
        K::Hookscript => Capability::Hookscript,
    }
}

/// What `info` declares beyond `grant`, one line each (empty: within the grant).
pub fn declared_beyond(info: &KindInfo, grant: &Grant) -> Vec<String> {
    let mut beyond = Vec::new();
    for c in &info.calls {
        let method = method_name(c.method);
        let granted = grant
            .calls
            .iter()
            .any(|g| g.method == method && g.path == c.path);
        if !granted {
            beyond.push(format!("call {method} {}", c.path));
        }
    }
    for l in &info.listings {
        if !info
            .calls
            .iter()
            .any(|c| c.method == Method::Get && c.path == l.path)
        {
            beyond.push(format!(
                "listing {} (not among its declared GET calls)",
                l.path
            ));
        }
    }
    if info.secrets && !grant.secrets {
        beyond.push("secrets: true".into());
    }
    for c in &info.capabilities {
        let c = capability(*c);
        if !grant.capabilities.contains(&c) {
            beyond.push(format!("capability {c}"));
        }
    }
    beyond
}

/// The PVE capabilities a call's parameters use.
pub fn capabilities_used(call: &Call) -> Vec<Capability> {
    let mut used = Vec::new();
    let mut add = |c| {
        if !used.contains(&c) {
            used.push(c);
        }
    };
    let param = |name: &str| call.params.iter().find(|p| p.name == name);
    // PVE creates a privileged container unless told otherwise.
    let creates_container =
        call.method == Method::Post && path_matches("/nodes/{node}/lxc", &call.path);
    if param("unprivileged").is_some_and(|p| p.value.trim() == "0")
        || (creates_container && param("unprivileged").is_none_or(|p| p.value.trim() != "1"))
    {
        add(Capability::Privileged);
    }
    for p in &call.params {
        let numbered = |prefix: &str| {
            p.name
                .strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        if p.name == "rootfs" || numbered("mp") {
            let volume = p
                .value
                .split(',')
                .find_map(|part| part.strip_prefix("volume="))
                .unwrap_or_else(|| p.value.split(',').next().unwrap_or_default());
            if volume.trim_start().starts_with('/') {
                add(Capability::BindMounts);
            }
        }
        if numbered("dev") || numbered("hostpci") || numbered("usb") {
            add(Capability::Devices);
        }
        if p.name == "hookscript" {
            add(Capability::Hookscript);
        }
    }
    used
}

/// Check one proposed call of a kind: declared by it, and for a third-party kind within its
/// grant's capabilities. The error says what was refused and what to grant.
pub fn check_call(trust: &Trust, info: &KindInfo, call: &Call) -> Result<(), String> {
    let shown = format!("{} {}", method_name(call.method), call.path);
    if !call_allowed(&info.calls, call.method, &call.path) {
        return Err(format!(
            "{shown} is not among the calls the {} kind declared; nothing was sent",
            info.kind
        ));
    }
    if let Trust::Granted(grant) = trust {
        let missing: Vec<String> = capabilities_used(call)
            .into_iter()
            .filter(|c| !grant.capabilities.contains(c))
            .map(|c| c.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "{shown} needs the capability {} (e.g. a privileged container, a bind mount, a device or a hook script), which proxops.yaml does not grant the {} kind; nothing was sent. Grant it under `grant.capabilities` only if you trust the kind with it",
                missing.join(", "),
                info.kind
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_runtime::kind::Param;

    fn call(method: Method, path: &str, params: &[(&str, &str)]) -> Call {
        Call {
            method,
            path: path.into(),
            params: params
                .iter()
                .map(|(n, v)| Param {
                    name: n.to_string(),
                    value: v.to_string(),
                    sensitive: false,
                })
                .collect(),
        }
    }

    #[test]
    fn path_templates_match_one_segment_per_placeholder() {
        for (path, ok) in [
            ("/nodes/pve01/qemu", true),
            ("/nodes/pve01/qemu/100", false),
            ("/nodes//qemu", false),
            ("/access/users", false),
        ] {
            assert_eq!(path_matches("/nodes/{node}/qemu", path), ok, "{path}");
        }
        assert!(path_matches(
            "/nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve01/qemu/100/config"
        ));
        assert!(!path_matches(
            "/nodes/{node}/qemu/{vmid}/config",
            "/nodes/pve01/qemu/100/config/extra"
        ));
    }

    #[test]
    fn capabilities_each_call_uses() {
        let check = |c: Call, expected: &[Capability]| {
            assert_eq!(capabilities_used(&c), expected, "{} {:?}", c.path, c.params);
        };
        let create = "/nodes/pve01/lxc";
        let config = "/nodes/pve01/lxc/101/config";
        use Capability::*;
        check(call(Method::Post, create, &[("unprivileged", "1")]), &[]);
        check(
            call(Method::Post, create, &[("vmid", "101")]),
            &[Privileged],
        );
        check(
            call(Method::Post, create, &[("unprivileged", "0")]),
            &[Privileged],
        );
        check(
            call(Method::Put, config, &[("unprivileged", "0")]),
            &[Privileged],
        );
        check(call(Method::Put, config, &[("memory", "512")]), &[]);
        check(
            call(Method::Put, config, &[("mp0", "/srv/data,mp=/data")]),
            &[BindMounts],
        );
        check(
            call(Method::Put, config, &[("mp0", "mp=/data,volume=/srv")]),
            &[BindMounts],
        );
        check(
            call(Method::Put, config, &[("mp0", "local-lvm:8,mp=/data")]),
            &[],
        );
        check(
            call(Method::Put, config, &[("dev0", "/dev/ttyUSB0")]),
            &[Devices],
        );
        check(
            call(
                Method::Post,
                "/nodes/pve01/qemu/100/config",
                &[("hostpci0", "0000:01:00.0")],
            ),
            &[Devices],
        );
        check(
            call(
                Method::Put,
                config,
                &[("hookscript", "local:snippets/x.pl")],
            ),
            &[Hookscript],
        );
        check(call(Method::Put, config, &[("mpx", "/srv")]), &[]);
    }

    #[test]
    fn a_granted_kind_is_refused_what_it_was_not_granted() {
        let info = KindInfo {
            kind: "Container".into(),
            api_version: "proxops/v1alpha1".into(),
            folder: "container".into(),
            schema: "{}".into(),
            calls: vec![CallPattern {
                method: Method::Post,
                path: "/nodes/{node}/lxc".into(),
            }],
            listings: Vec::new(),
            references_kinds: Vec::new(),
            secrets: false,
            capabilities: Vec::new(),
        };
        let privileged = call(Method::Post, "/nodes/pve01/lxc", &[("vmid", "101")]);
        let plain = call(Method::Post, "/nodes/pve01/lxc", &[("unprivileged", "1")]);
        let outside = call(Method::Post, "/access/users", &[]);
        let none = Trust::Granted(Grant::default());
        let privileges = Trust::Granted(Grant {
            capabilities: vec![Capability::Privileged],
            ..Grant::default()
        });
        assert!(check_call(&none, &info, &plain).is_ok());
        let e = check_call(&none, &info, &privileged).unwrap_err();
        assert!(e.contains("capability privileged"), "{e}");
        assert!(check_call(&privileges, &info, &privileged).is_ok());
        assert!(check_call(&Trust::Bundled, &info, &privileged).is_ok());
        let e = check_call(&Trust::Bundled, &info, &outside).unwrap_err();
        assert!(e.contains("POST /access/users is not among"), "{e}");
    }

    #[test]
    fn a_declaration_beyond_the_grant_is_listed() {
        let mut info = KindInfo {
            kind: "Container".into(),
            api_version: "proxops/v1alpha1".into(),
            folder: "container".into(),
            schema: "{}".into(),
            calls: vec![
                CallPattern {
                    method: Method::Get,
                    path: "/cluster/resources".into(),
                },
                CallPattern {
                    method: Method::Post,
                    path: "/nodes/{node}/lxc".into(),
                },
            ],
            listings: vec![proxops_runtime::kind::Listing {
                path: "/pools".into(),
                id_field: "poolid".into(),
            }],
            references_kinds: Vec::new(),
            secrets: true,
            capabilities: vec![proxops_runtime::kind::Capability::Devices],
        };
        let grant = Grant {
            calls: vec![proxops_core::grant::parse_call("GET /cluster/resources").unwrap()],
            ..Grant::default()
        };
        assert_eq!(
            declared_beyond(&info, &grant),
            [
                "call POST /nodes/{node}/lxc",
                "listing /pools (not among its declared GET calls)",
                "secrets: true",
                "capability devices"
            ]
        );
        info.listings.clear();
        info.secrets = false;
        info.capabilities.clear();
        info.calls.truncate(1);
        assert!(declared_beyond(&info, &grant).is_empty());
    }
}
