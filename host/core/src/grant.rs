//! `kinds:` in `proxops.yaml`: the third-party kinds an operator runs, each pinned by its
//! sha256 and contained by a grant: the API calls it may make, whether it may read secrets,
//! the PVE capabilities its calls may use, and its limits within the host's maxima.
//!
//! ```yaml
//! kinds:
//!   - file: kinds/container.wasm          # inside the repository
//!     sha256: 3b1f…                       # of the .wasm; a mismatch refuses to run
//!     grant:
//!       calls:                            # METHOD /path/{template}
//!         - GET /cluster/resources
//!         - POST /nodes/{node}/lxc
//!       secrets: false                    # default false
//!       capabilities: []                  # privileged, bind-mounts, devices, hookscript
//!       limits: {deadline-ms: 2000, memory-mib: 64, output-kib: 1024, log-lines: 200}
//! ```

use serde_json::{Map, Value};

use crate::settings::{pinned_file, pinned_sha256};

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
    /// Whether it may read the cluster's secrets.
    pub secrets: bool,
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

/// PVE capabilities a call's parameters may use only with an explicit grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// A privileged container (`unprivileged=0`, or a container created without
    /// `unprivileged=1`: PVE's default is privileged).
    Privileged,
    /// A host path mounted into a guest (`rootfs`/`mpN` naming an absolute path).
    BindMounts,
    /// Host devices passed through (`devN`, `hostpciN`, `usbN`).
    Devices,
    /// A hook script (`hookscript`).
    Hookscript,
}

impl Capability {
    pub const ALL: [Capability; 4] = [
        Capability::Privileged,
        Capability::BindMounts,
        Capability::Devices,
        Capability::Hookscript,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Privileged => "privileged",
            Capability::BindMounts => "bind-mounts",
            Capability::Devices => "devices",
            Capability::Hookscript => "hookscript",
        }
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
}

/// The host's maxima for a third-party kind's limits (a grant may lower them, never raise).
pub const MAX_DEADLINE_MS: u64 = 5_000;
pub const MAX_MEMORY_MIB: u64 = 256;
pub const MAX_OUTPUT_KIB: u64 = 16 * 1024;
pub const MAX_LOG_LINES: u64 = 200;

const ENTRY_KEYS: &[&str] = &["file", "sha256", "grant"];
const GRANT_KEYS: &[&str] = &["calls", "secrets", "capabilities", "limits"];
const LIMIT_KEYS: [(&str, u64); 4] = [
    ("deadline-ms", MAX_DEADLINE_MS),
    ("memory-mib", MAX_MEMORY_MIB),
    ("output-kib", MAX_OUTPUT_KIB),
    ("log-lines", MAX_LOG_LINES),
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
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => grant.secrets = *b,
        Some(_) => {
            err(at("grant.secrets"), "expected true or false".into());
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
                            "expected one of: privileged, bind-mounts, devices, hookscript".into(),
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
                        "unknown field; expected one of: deadline-ms, memory-mib, output-kib, log-lines".into(),
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
                    _ => &mut grant.limits.log_lines,
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

#[cfg(test)]
mod tests {
    /// Parse `yaml` (a `proxops.yaml`) and compare the kinds or the error paths.
    fn check(yaml: &str, expected: Result<Vec<(&str, usize, bool)>, Vec<&str>>) {
        let got = crate::settings::parse_text("proxops.yaml", yaml);
        match (got, expected) {
            (Ok(s), Ok(want)) => {
                let have: Vec<(&str, usize, bool)> = s
                    .kinds
                    .iter()
                    .map(|k| (k.file.as_str(), k.grant.calls.len(), k.grant.secrets))
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
            Ok(vec![("kinds/ct.wasm", 0, false)]),
        );
        check(
            &format!(
                "kinds:\n  - file: kinds/ct.wasm\n    sha256: {SHA}\n    grant:\n      calls: [GET /cluster/resources, \"post /nodes/{{node}}/lxc\"]\n      secrets: true\n      capabilities: [bind-mounts]\n      limits: {{deadline-ms: 100, memory-mib: 64}}\n"
            ),
            Ok(vec![("kinds/ct.wasm", 2, true)]),
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
