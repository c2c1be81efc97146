//! What a kind may send. Every kind is held to the calls it declared in `describe()`, each
//! proposed call in canonical form (`request`); a third-party kind also to the operator's
//! grant in `proxops.yaml`: at load, what it declares must be within the grant and its
//! listings plain collection paths; before planning is accepted, every call it proposes may
//! reach an endpoint beyond one guest, or use a guest capability (privileged containers, bind
//! mounts, devices, hook scripts), only when the grant names it. A refused call fails its
//! object with nothing sent.

use proxops_core::grant::{Capability, Grant};
use proxops_runtime::kind::{Call, CallPattern, KindInfo, Method};

use crate::plan::method_name;
use crate::request::target::Target;
use crate::request::{self, Refusal, Rule};

/// How far a kind is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// Built from this repository's source and embedded in the binary: held to what it
    /// declares.
    Bundled,
    /// Loaded from a file: held to what it declares and to the operator's grant.
    Granted(Grant),
}

impl Trust {
    /// The secret refs a third-party kind may use and where (`None` for a bundled kind).
    pub fn secrets(&self) -> Option<&std::collections::BTreeMap<String, Vec<String>>> {
        match self {
            Trust::Bundled => None,
            Trust::Granted(grant) => Some(&grant.secrets),
        }
    }
}

/// Whether `method path` is one of `patterns`, in canonical form or a spelling of it that
/// the host would send canonically ([`request::form::canonical`]).
pub fn call_allowed(patterns: &[CallPattern], method: Method, path: &str) -> bool {
    request::form::canonical(method, path, patterns).is_ok()
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
    if info.secrets && grant.secrets.is_empty() {
        beyond.push(
            "secrets (name the refs it may use, and the parameters each may fill, under `grant.secrets`)"
                .into(),
        );
    }
    for c in &info.capabilities {
        let c = capability(*c);
        if !grant.capabilities.contains(&c) {
            beyond.push(format!("capability {c}"));
        }
    }
    beyond
}

/// The id field the host itself reads `/cluster/resources` by (the guests' `qemu/100`).
pub const HOST_LISTING_ID: (&str, &str) = ("/cluster/resources", "id");

/// Why the listings `info` declares cannot be loaded beside `others` (the kinds already
/// loaded), one line each (empty: none). A listing is a plain collection path (literal
/// segments of names, no placeholder, query or escape: the host reads it as written), and
/// one path is read by one id rule: a listing may not alias the host's `/cluster/resources`
/// or another kind's listing with a different id field, which would make it the only
/// claimant of entries other kinds read by another id.
pub fn listing_problems<'k>(
    info: &KindInfo,
    others: impl IntoIterator<Item = &'k KindInfo>,
) -> Vec<String> {
    let others: Vec<&KindInfo> = others.into_iter().collect();
    let mut problems = Vec::new();
    for l in &info.listings {
        let plain = l.path.len() > 1
            && l.path.starts_with('/')
            && l.path[1..].split('/').all(|seg| {
                !seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            });
        if !plain {
            problems.push(format!(
                "listing {} is not a plain collection path (names separated by `/`, no placeholder, query, escape or dot segment) (sandbox rule `{}`)",
                request::shown(&l.path),
                Rule::Listing
            ));
            continue;
        }
        let mut rules: Vec<(String, &str)> = Vec::new();
        if l.path == HOST_LISTING_ID.0 {
            rules.push(("the host".into(), HOST_LISTING_ID.1));
        }
        for o in &others {
            for ol in o.listings.iter().filter(|ol| ol.path == l.path) {
                rules.push((format!("the {} kind", o.kind), ol.id_field.as_str()));
            }
        }
        if let Some((who, field)) = rules.iter().find(|(_, f)| *f != l.id_field) {
            problems.push(format!(
                "listing {} is read by its `{}` field, but {who} reads it by `{field}`; one listing has one id rule, so its entries keep exactly one claimant (sandbox rule `{}`)",
                l.path,
                request::shown(&l.id_field),
                Rule::Listing
            ));
        }
    }
    problems
}

/// Check one proposed call of a kind and put it in the form the host sends: its path
/// declared by the kind, in canonical form ([`request::form::canonicalize`], the path replaced by
/// the one the host builds), its parameter names plain and unrepeated; a write's target
/// derived from the request ([`Target::of`]); for a third-party kind, an endpoint beyond one
/// guest only with its capability, and the guest parameters' capabilities within the grant.
/// Bundled kinds write guests and storage files only. Returns the write's target (`None` for a
/// GET).
pub fn check_call(
    trust: &Trust,
    info: &KindInfo,
    call: &mut Call,
) -> Result<Option<Target>, Refusal> {
    request::form::canonicalize(call, &info.calls).map_err(|mut r| {
        if r.rule == Rule::Declared {
            r.what = format!(
                "{} is not among the calls the {} kind declared",
                request::describe_call(call),
                info.kind
            );
        }
        r
    })?;
    request::secret::check_refs(call, trust.secrets(), &info.kind)?;
    if call.method == Method::Get {
        return Ok(None);
    }
    let segments = request::form::pve_view(&call.path);
    let listings: Vec<(String, String)> = info
        .listings
        .iter()
        .map(|l| (l.path.clone(), l.id_field.clone()))
        .collect();
    let target = Target::of(&segments, &call.params)?.named_in(
        call.method,
        &segments,
        &call.params,
        &listings,
    )?;
    let shown = request::describe_call(call);
    match (trust, &target) {
        // A named object under /access (users, tokens, ACLs) is still access control.
        (Trust::Granted(grant), Target::Named { listing, .. })
            if listing.starts_with("/access")
                && !grant.capabilities.contains(&Capability::Access) =>
        {
            return Err(Refusal::new(
                Rule::Endpoint,
                format!(
                    "{shown} writes access control and needs the capability `access`, which proxops.yaml does not grant the {} kind. Grant it under `grant.capabilities` only if you trust the kind with it",
                    info.kind
                ),
            ));
        }
        (Trust::Bundled, Target::Endpoint { .. }) => {
            return Err(Refusal::new(
                Rule::Endpoint,
                format!("{shown} is not a guest or storage write; bundled kinds send no other"),
            ));
        }
        (Trust::Granted(grant), Target::Endpoint { needs, .. })
            if !grant.capabilities.contains(needs) =>
        {
            return Err(Refusal::new(
                Rule::Endpoint,
                format!(
                    "{shown} reaches beyond one guest and needs the capability `{needs}`, which proxops.yaml does not grant the {} kind. Grant it under `grant.capabilities` only if you trust the kind with it",
                    info.kind
                ),
            ));
        }
        _ => {}
    }
    if let Trust::Granted(grant) = trust {
        let missing: Vec<String> =
            request::capability::capabilities_used(call.method, &target, &call.params)?
                .into_iter()
                .filter(|c| !grant.capabilities.contains(c))
                .map(|c| c.to_string())
                .collect();
        if !missing.is_empty() {
            return Err(Refusal::new(
                Rule::Capability,
                format!(
                    "{shown} needs the capability {} (a privileged container, a bind mount, a device or a hook script), which proxops.yaml does not grant the {} kind. Grant it under `grant.capabilities` only if you trust the kind with it",
                    missing.join(", "),
                    info.kind
                ),
            ));
        }
    }
    Ok(Some(target))
}

/// What an endpoint capability lets a kind reach, for warnings.
pub fn capability_reach(c: Capability) -> &'static str {
    match c {
        Capability::NodePower => "start, stop or migrate every guest of a node, reboot a node",
        Capability::NodeExec => "run commands on a node",
        Capability::GuestExec => "run commands inside guests",
        Capability::Access => "change users, tokens and permissions",
        Capability::StorageConfig => "change storage definitions and disks",
        Capability::NetworkConfig => "change node and cluster networking and firewalls",
        Capability::Apt => "update a node's packages",
        Capability::ClusterConfig => "change cluster configuration",
        Capability::NodeConfig => "change a node's configuration",
        Capability::Privileged
        | Capability::BindMounts
        | Capability::Devices
        | Capability::Hookscript => "one guest's host access",
    }
}

/// The capabilities a grant names that reach beyond one guest, for the warnings at load, in
/// `proxops kinds` and in plans.
pub fn endpoint_capabilities(grant: &Grant) -> Vec<Capability> {
    grant
        .capabilities
        .iter()
        .copied()
        .filter(|c| c.is_endpoint())
        .collect()
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

    /// A kind's own listings are where its named objects live: a write to one of them is a
    /// named-object write (judged by its mark, not refused as an endpoint), for a bundled kind
    /// too; `/access` ones still need the `access` capability from a third-party kind.
    #[test]
    fn writes_into_a_kinds_own_listings_are_named_objects() {
        use proxops_runtime::kind::Listing;
        let pattern = |method, path: &str| CallPattern {
            method,
            path: path.into(),
        };
        let info = KindInfo {
            kind: "HARule".into(),
            api_version: "proxops/v1alpha1".into(),
            folder: "harule".into(),
            schema: "{}".into(),
            calls: vec![
                pattern(Method::Post, "/cluster/ha/rules"),
                pattern(Method::Put, "/cluster/ha/rules/{rule}"),
                pattern(Method::Post, "/cluster/ha/groups"),
                pattern(Method::Post, "/access/users"),
            ],
            listings: vec![
                Listing {
                    path: "/cluster/ha/rules".into(),
                    id_field: "rule".into(),
                },
                Listing {
                    path: "/access/users".into(),
                    id_field: "userid".into(),
                },
            ],
            references_kinds: Vec::new(),
            secrets: false,
            capabilities: Vec::new(),
        };
        let check = |trust: &Trust, c: Call| check_call(trust, &info, &mut c.clone());
        let named = |listing: &str, id: &str, create| {
            Some(Target::Named {
                listing: listing.into(),
                id: id.into(),
                create,
            })
        };
        let create = call(Method::Post, "/cluster/ha/rules", &[("rule", "r1")]);
        assert_eq!(
            check(&Trust::Bundled, create),
            Ok(named("/cluster/ha/rules", "r1", true))
        );
        let update = call(Method::Put, "/cluster/ha/rules/r1", &[]);
        assert_eq!(
            check(&Trust::Bundled, update),
            Ok(named("/cluster/ha/rules", "r1", false))
        );
        let groups = call(Method::Post, "/cluster/ha/groups", &[("group", "g")]);
        assert!(check(&Trust::Bundled, groups).is_err(), "not its listing");
        let user = call(Method::Post, "/access/users", &[("userid", "a@pve")]);
        let none = Trust::Granted(Grant::default());
        let e = check(&none, user.clone()).unwrap_err().to_string();
        assert!(e.contains("capability `access`"), "{e}");
        let access = Trust::Granted(Grant {
            capabilities: vec![Capability::Access],
            ..Grant::default()
        });
        assert_eq!(
            check(&access, user),
            Ok(named("/access/users", "a@pve", true))
        );
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
        let plain = call(
            Method::Post,
            "/nodes/pve01/lxc",
            &[("vmid", "101"), ("unprivileged", "1")],
        );
        let outside = call(Method::Post, "/access/users", &[]);
        let none = Trust::Granted(Grant::default());
        let privileges = Trust::Granted(Grant {
            capabilities: vec![Capability::Privileged],
            ..Grant::default()
        });
        let check = |trust: &Trust, call: &Call| check_call(trust, &info, &mut call.clone());
        assert!(check(&none, &plain).is_ok());
        let e = check(&none, &privileged).unwrap_err().to_string();
        assert!(e.contains("capability privileged"), "{e}");
        assert!(e.ends_with("(sandbox rule `capability`)"), "{e}");
        assert!(check(&privileges, &privileged).is_ok());
        assert!(check(&Trust::Bundled, &privileged).is_ok());
        let e = check(&Trust::Bundled, &outside).unwrap_err().to_string();
        assert!(
            e.contains("POST /access/users is not among the calls the Container kind declared"),
            "{e}"
        );
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
                "secrets (name the refs it may use, and the parameters each may fill, under `grant.secrets`)",
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
