//! `kinds:` in `proxops.yaml`: the third-party kinds an operator runs, each pinned by its
//! sha256 and contained by a grant: the API calls it may make, the secret references it may
//! put in which parameters, the PVE capabilities its calls may use, and its limits within the
//! host's maxima.
//!
//! ```yaml
//! kinds:
//!   - file: kinds/container.wasm          # inside the repository
//!     sha256: 3b1f…                       # of the .wasm; a mismatch refuses to run
//!     grant:
//!       calls:                            # METHOD /path/{template}
//!         - GET /cluster/resources
//!         - POST /nodes/{node}/lxc
//!       secrets:                          # ref: parameters it may fill (default none)
//!         containers.root-password: [password]
//!       capabilities: []                  # see `Capability`: parameter and endpoint capabilities
//!       limits: {deadline-ms: 2000, memory-mib: 64, output-kib: 1024, log-lines: 200,
//!                reads-per-object: 16, reads-per-cycle: 2000}
//! ```
//!
//! A grant never covers a request by its template alone: the host judges the concrete request
//! (`proxops_reconcile::request`), so a granted template such as `POST /nodes/{node}/{op}` still
//! reaches `stopall` only with the `node-power` capability.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::pin::{pinned_file, pinned_sha256};

/// One entry of `kinds:`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KindEntry {
    /// Position in the list, for diagnostics (`kinds[0].grant`).
    pub index: usize,
    /// Path of the `.wasm`, relative to the repository root.
    pub file: String,
    /// Expected SHA-256 of the file, lower-case hex.
    pub sha256: String,
    pub grant: Grant,
}

impl KindEntry {
    /// The field path of this entry in `proxops.yaml`, e.g. `kinds[1]`.
    pub fn path(&self) -> String {
        format!("kinds[{}]", self.index)
    }
}

/// What the operator allows a third-party kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Grant {
    /// Calls it may make: method (upper case) and path template.
    pub calls: Vec<CallGrant>,
    /// The secret references it may use (`proxops:kind@0.2.1` `secrets.reference`), each with
    /// the parameter names (lower case) its token may fill. A third-party kind never holds a
    /// secret value: the host puts the value in at the wire.
    pub secrets: BTreeMap<String, Vec<String>>,
    /// PVE capabilities its calls may use.
    pub capabilities: Vec<Capability>,
    pub limits: GrantLimits,
}

/// One granted call: `GET /nodes/{node}/lxc/{vmid}/config`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct CallGrant {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// Path template below `/api2/json`; `{name}` matches one segment.
    pub path: String,
}

impl std::fmt::Display for CallGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// What a third-party kind's requests may do only with an explicit grant: the first four are
/// about a guest's parameters, the others are whole endpoints that reach beyond one guest
/// (refused without the capability, shown with a warning at load, in `proxops kinds` and in
/// every plan that uses one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// A privileged container (`unprivileged=0`, or a container created without
    /// `unprivileged=1`: PVE's default is privileged), a change of `unprivileged` on an
    /// existing container, or container `features` other than `nesting`.
    Privileged,
    /// A host path mounted into a guest (`rootfs`/`mpN` naming an absolute path).
    BindMounts,
    /// Host devices passed through (`devN`, `hostpciN`, `usbN`, `parallelN`, a `serialN` that
    /// is not a socket, a disk or mount point on a `/dev` path).
    Devices,
    /// A hook script (`hookscript`).
    Hookscript,
    /// Node-wide power: `startall`, `stopall`, `migrateall`, `suspendall`, a node's
    /// `status` (reboot, shutdown), `wakeonlan`.
    NodePower,
    /// Commands on a node: `execute`, and the node's shells (`termproxy`, `vncshell`, …).
    NodeExec,
    /// Commands inside a guest: the QEMU monitor, guest-agent commands other than reads,
    /// consoles, `sendkey`.
    GuestExec,
    /// Users, groups, roles, tokens, ACLs, realms (`/access/…`).
    Access,
    /// Storage definitions and disks (`/storage`, a node's storage and disk endpoints other
    /// than a volume's content and downloads).
    StorageConfig,
    /// Network, SDN and firewall configuration of nodes and the cluster.
    NetworkConfig,
    /// Package updates (`/nodes/{node}/apt/…`).
    Apt,
    /// Cluster configuration (`/cluster/…`, `/pools`, anything else outside `/nodes`).
    ClusterConfig,
    /// A node's own configuration (DNS, hosts, time, services, certificates, tasks, …).
    NodeConfig,
}

impl Capability {
    pub const ALL: [Capability; 13] = [
        Capability::Privileged,
        Capability::BindMounts,
        Capability::Devices,
        Capability::Hookscript,
        Capability::NodePower,
        Capability::NodeExec,
        Capability::GuestExec,
        Capability::Access,
        Capability::StorageConfig,
        Capability::NetworkConfig,
        Capability::Apt,
        Capability::ClusterConfig,
        Capability::NodeConfig,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Privileged => "privileged",
            Capability::BindMounts => "bind-mounts",
            Capability::Devices => "devices",
            Capability::Hookscript => "hookscript",
            Capability::NodePower => "node-power",
            Capability::NodeExec => "node-exec",
            Capability::GuestExec => "guest-exec",
            Capability::Access => "access",
            Capability::StorageConfig => "storage-config",
            Capability::NetworkConfig => "network-config",
            Capability::Apt => "apt",
            Capability::ClusterConfig => "cluster-config",
            Capability::NodeConfig => "node-config",
        }
    }

    /// Whether the capability opens an endpoint beyond one guest (warned about wherever it
    /// is granted or used).
    pub fn is_endpoint(self) -> bool {
        !matches!(
            self,
            Capability::Privileged
                | Capability::BindMounts
                | Capability::Devices
                | Capability::Hookscript
        )
    }

    /// The names, for messages: `privileged, bind-mounts, …`.
    pub fn names() -> String {
        Capability::ALL
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn parse(text: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `grant.limits`: each `None` takes the host's default for kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct GrantLimits {
    pub deadline_ms: Option<u64>,
    pub memory_mib: Option<u64>,
    pub output_kib: Option<u64>,
    pub log_lines: Option<u64>,
    /// GETs one object's `observe` may ask for.
    pub reads_per_object: Option<u64>,
    /// GETs the kind's objects may ask for in one cycle, together (after de-duplication).
    pub reads_per_cycle: Option<u64>,
}

impl GrantLimits {
    /// GETs one object may ask for: the grant's, else [`DEFAULT_READS_PER_OBJECT`].
    pub fn reads_per_object(&self) -> u64 {
        self.reads_per_object.unwrap_or(DEFAULT_READS_PER_OBJECT)
    }

    /// GETs the kind may ask for in a cycle of `objects` objects: the grant's, else
    /// [`DEFAULT_READS_PER_OBJECT_IN_A_CYCLE`] per object plus [`DEFAULT_READS_PER_CYCLE`].
    pub fn reads_per_cycle(&self, objects: usize) -> u64 {
        self.reads_per_cycle.unwrap_or(
            DEFAULT_READS_PER_CYCLE + DEFAULT_READS_PER_OBJECT_IN_A_CYCLE * objects as u64,
        )
    }
}

/// The host's maxima for a third-party kind's limits (a grant may lower them, never raise).
pub const MAX_DEADLINE_MS: u64 = 5_000;
pub const MAX_MEMORY_MIB: u64 = 256;
pub const MAX_OUTPUT_KIB: u64 = 16 * 1024;
pub const MAX_LOG_LINES: u64 = 200;
pub const MAX_READS_PER_OBJECT: u64 = 1_024;
pub const MAX_READS_PER_CYCLE: u64 = 1_000_000;
/// The bundled kinds read at most a few answers per object (a VM: its `/pending` or
/// `/config`; an image: one storage listing per node it serves), so 16 is a small multiple.
pub const DEFAULT_READS_PER_OBJECT: u64 = 16;
/// Without `reads-per-cycle`: this many GETs per object of the kind, plus
/// [`DEFAULT_READS_PER_CYCLE`].
pub const DEFAULT_READS_PER_OBJECT_IN_A_CYCLE: u64 = 4;
pub const DEFAULT_READS_PER_CYCLE: u64 = 64;

const ENTRY_KEYS: &[&str] = &["file", "sha256", "grant"];
const GRANT_KEYS: &[&str] = &["calls", "secrets", "capabilities", "limits"];
const LIMIT_KEYS: [(&str, u64); 6] = [
    ("deadline-ms", MAX_DEADLINE_MS),
    ("memory-mib", MAX_MEMORY_MIB),
    ("output-kib", MAX_OUTPUT_KIB),
    ("log-lines", MAX_LOG_LINES),
    ("reads-per-object", MAX_READS_PER_OBJECT),
    ("reads-per-cycle", MAX_READS_PER_CYCLE),
];

/// Parse `METHOD /path` into a call grant.
pub fn parse_call(text: &str) -> Result<CallGrant, String> {
    let mut parts = text.split_whitespace();
    let (Some(method), Some(path), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err("expected `METHOD /path`, e.g. `GET /nodes/{node}/lxc`".into());
    };
    let method = method.to_ascii_uppercase();
    if !["GET", "POST", "PUT", "DELETE"].contains(&method.as_str()) {
        return Err(format!(
            "unknown method `{method}`; expected GET, POST, PUT or DELETE"
        ));
    }
    if !path.starts_with('/') || path.contains("//") || path.contains("..") {
        return Err(format!(
            "`{path}` is not an API path below /api2/json (it starts with `/`, e.g. `/nodes/{{node}}/lxc`)"
        ));
    }
    // Each segment a plain name or one `{placeholder}`: nothing the URL parser or PVE could
    // read another way (`\`, `?`, `#`, `%`, dot segments).
    for segment in path[1..].split('/') {
        let placeholder = segment
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .is_some_and(|name| {
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        let literal = !segment.is_empty()
            && segment != "."
            && segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !placeholder && !literal {
            return Err(format!(
                "`{path}`: the segment `{segment}` is neither a name (letters, digits, `-`, `_`, `.`) nor one `{{placeholder}}`"
            ));
        }
    }
    Ok(CallGrant {
        method,
        path: path.to_string(),
    })
}

/// Parse one `kinds:` entry, reporting every problem through `err`.
pub(crate) fn parse_kind_entry(
    index: usize,
    item: &Value,
    err: &mut impl FnMut(String, String),
) -> Option<KindEntry> {
    let at = |k: &str| {
        if k.is_empty() {
            format!("kinds[{index}]")
        } else {
            format!("kinds[{index}].{k}")
        }
    };
    let Some(map) = item.as_object() else {
        err(
            at(""),
            "expected a mapping with file, sha256 and grant".into(),
        );
        return None;
    };
    let mut ok = true;
    for key in map.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            err(
                at(key),
                format!("unknown field; expected one of: {}", ENTRY_KEYS.join(", ")),
            );
            ok = false;
        }
    }
    let file = pinned_file(map, &at, err);
    let sha256 = pinned_sha256(map, &at, err, "a third-party kind");
    let grant = match map.get("grant") {
        None | Some(Value::Null) => Some(Grant::default()),
        Some(Value::Object(g)) => parse_grant(g, &at, err),
        Some(_) => {
            err(
                at("grant"),
                "expected a mapping with calls, secrets, capabilities and limits".into(),
            );
            None
        }
    };
    let (file, sha256, grant) = (file?, sha256?, grant?);
    ok.then_some(KindEntry {
        index,
        file,
        sha256,
        grant,
    })
}

fn parse_grant(
    g: &Map<String, Value>,
    at: &dyn Fn(&str) -> String,
    err: &mut impl FnMut(String, String),
) -> Option<Grant> {
    let mut ok = true;
    let mut grant = Grant::default();
    for key in g.keys() {
        if !GRANT_KEYS.contains(&key.as_str()) {
            err(
                at(&format!("grant.{key}")),
                format!("unknown field; expected one of: {}", GRANT_KEYS.join(", ")),
            );
            ok = false;
        }
    }
    match g.get("calls") {
        None | Some(Value::Null) => {}
        Some(Value::Array(calls)) => {
            for (i, c) in calls.iter().enumerate() {
                match c.as_str().map(parse_call) {
                    Some(Ok(call)) => grant.calls.push(call),
                    Some(Err(why)) => {
                        err(at(&format!("grant.calls[{i}]")), why);
                        ok = false;
                    }
                    None => {
                        err(
                            at(&format!("grant.calls[{i}]")),
                            "expected a string `METHOD /path`".into(),
                        );
                        ok = false;
                    }
                }
            }
        }
        Some(_) => {
            err(
                at("grant.calls"),
                "expected a list of `METHOD /path` strings".into(),
            );
            ok = false;
        }
    }
    match g.get("secrets") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(Value::Bool(true)) => {
            err(
                at("grant.secrets"),
                "`secrets: true` would hand secret values to the kind; a third-party kind gets references only. Name each ref and the parameters its value may fill, e.g. `secrets: {containers.root-password: [password]}`".into(),
            );
            ok = false;
        }
        Some(Value::Object(refs)) => {
            for (r, params) in refs {
                let field = format!("grant.secrets.{r}");
                if let Err(why) = check_secret_path(r) {
                    err(at(&field), why);
                    ok = false;
                    continue;
                }
                let names: Option<Vec<String>> = params.as_array().and_then(|a| {
                    a.iter()
                        .map(|v| {
                            v.as_str()
                                .filter(|n| plain_param(n))
                                .map(str::to_ascii_lowercase)
                        })
                        .collect()
                });
                match names {
                    Some(names) if !names.is_empty() => {
                        grant.secrets.insert(r.clone(), names);
                    }
                    _ => {
                        err(
                            at(&field),
                            "expected a non-empty list of parameter names (letters, digits, `-`, `_`), e.g. `[password]`".into(),
                        );
                        ok = false;
                    }
                }
            }
        }
        Some(_) => {
            err(
                at("grant.secrets"),
                "expected a mapping of secret refs to the parameters each may fill, e.g. `{containers.root-password: [password]}`".into(),
            );
            ok = false;
        }
    }
    match g.get("capabilities") {
        None | Some(Value::Null) => {}
        Some(Value::Array(caps)) => {
            for (i, c) in caps.iter().enumerate() {
                match c.as_str().and_then(Capability::parse) {
                    Some(cap) => grant.capabilities.push(cap),
                    None => {
                        err(
                            at(&format!("grant.capabilities[{i}]")),
                            format!("expected one of: {}", Capability::names()),
                        );
                        ok = false;
                    }
                }
            }
        }
        Some(_) => {
            err(at("grant.capabilities"), "expected a list".into());
            ok = false;
        }
    }
    match g.get("limits") {
        None | Some(Value::Null) => {}
        Some(Value::Object(l)) => {
            for key in l.keys() {
                if !LIMIT_KEYS.iter().any(|(k, _)| k == key) {
                    err(
                        at(&format!("grant.limits.{key}")),
                        format!(
                            "unknown field; expected one of: {}",
                            LIMIT_KEYS.map(|(k, _)| k).join(", ")
                        ),
                    );
                    ok = false;
                }
            }
            for (key, max) in LIMIT_KEYS {
                let Some(v) = l.get(key) else { continue };
                let value = match v.as_u64() {
                    Some(n) if n >= 1 && n <= max => n,
                    _ => {
                        err(
                            at(&format!("grant.limits.{key}")),
                            format!("expected a whole number from 1 to {max} (the host's maximum)"),
                        );
                        ok = false;
                        continue;
                    }
                };
                let slot = match key {
                    "deadline-ms" => &mut grant.limits.deadline_ms,
                    "memory-mib" => &mut grant.limits.memory_mib,
                    "output-kib" => &mut grant.limits.output_kib,
                    "log-lines" => &mut grant.limits.log_lines,
                    "reads-per-object" => &mut grant.limits.reads_per_object,
                    _ => &mut grant.limits.reads_per_cycle,
                };
                *slot = Some(value);
            }
        }
        Some(_) => {
            err(at("grant.limits"), "expected a mapping".into());
            ok = false;
        }
    }
    ok.then_some(grant)
}

/// A dot-path into the SOPS document: segments of letters, digits, `-` and `_`.
pub fn check_secret_path(path: &str) -> Result<(), String> {
    let ok = !path.is_empty()
        && path.split('.').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if ok {
        Ok(())
    } else {
        Err("expected a dot-path of the SOPS document (segments of letters, digits, `-` and `_`), e.g. `containers.root-password`".into())
    }
}

fn plain_param(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    /// Parse `yaml` (a `proxops.yaml`) and compare the kinds or the error paths.
    fn check(yaml: &str, expected: Result<Vec<(&str, usize, usize)>, Vec<&str>>) {
        let got = crate::settings::parse_text("proxops.yaml", yaml);
        match (got, expected) {
            (Ok(s), Ok(want)) => {
                let have: Vec<(&str, usize, usize)> = s
                    .kinds
                    .iter()
                    .map(|k| (k.file.as_str(), k.grant.calls.len(), k.grant.secrets.len()))
                    .collect();
                assert_eq!(have, want, "{yaml}");
            }
            (Err(d), Err(paths)) => {
                let have: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
                assert_eq!(have, paths, "{yaml}: {d:?}");
            }
            (got, want) => panic!("{yaml}: got {got:?}, expected {want:?}"),
        }
    }

    const SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn kinds_entries() {
        check("kinds: []\n", Ok(vec![]));
        check(
            &format!("kinds:\n  - file: kinds/ct.wasm\n    sha256: {SHA}\n"),
            Ok(vec![("kinds/ct.wasm", 0, 0)]),
        );
        check(
            &format!(
                "kinds:\n  - file: kinds/ct.wasm\n    sha256: {SHA}\n    grant:\n      calls: [GET /cluster/resources, \"post /nodes/{{node}}/lxc\"]\n      secrets: {{ct.root: [password, Description], ct.note: [description]}}\n      capabilities: [bind-mounts]\n      limits: {{deadline-ms: 100, memory-mib: 64}}\n"
            ),
            Ok(vec![("kinds/ct.wasm", 2, 2)]),
        );
        // `true` handed values to the kind (before 0.2.1); refs must be named now.
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{secrets: true}}\n"
            ),
            Err(vec!["kinds[0].grant.secrets"]),
        );
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{secrets: false}}\n"
            ),
            Ok(vec![("ct.wasm", 0, 0)]),
        );
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{secrets: {{a..b: [x], ok: [], ok2: [\"pass word\"], ok3: password, \"x/y\": [p]}}}}\n"
            ),
            Err(vec![
                "kinds[0].grant.secrets.a..b",
                "kinds[0].grant.secrets.ok",
                "kinds[0].grant.secrets.ok2",
                "kinds[0].grant.secrets.ok3",
                "kinds[0].grant.secrets.x/y",
            ]),
        );
        check(
            "kinds:\n  - file: kinds/ct.wasm\n",
            Err(vec!["kinds[0].sha256"]),
        );
        check(
            &format!("kinds:\n  - file: /etc/ct.wasm\n    sha256: {SHA}\n"),
            Err(vec!["kinds[0].file"]),
        );
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{calls: [FETCH /x, GET nodes, GET]}}\n"
            ),
            Err(vec![
                "kinds[0].grant.calls[0]",
                "kinds[0].grant.calls[1]",
                "kinds[0].grant.calls[2]",
            ]),
        );
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{capabilities: [root], secrets: yes-please, extra: 1}}\n"
            ),
            Err(vec![
                "kinds[0].grant.extra",
                "kinds[0].grant.secrets",
                "kinds[0].grant.capabilities[0]",
            ]),
        );
        check(
            &format!(
                "kinds:\n  - file: ct.wasm\n    sha256: {SHA}\n    grant: {{limits: {{memory-mib: 4096, deadline-ms: 0, cpu: 1}}}}\n"
            ),
            Err(vec![
                "kinds[0].grant.limits.cpu",
                "kinds[0].grant.limits.deadline-ms",
                "kinds[0].grant.limits.memory-mib",
            ]),
        );
        check("kinds: {}\n", Err(vec!["kinds"]));
    }
}
