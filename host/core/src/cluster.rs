//! `clusters/<name>.yaml`: where a cluster is, how to authenticate, how to trust its TLS
//! certificate, and execution options.
//!
//! ```yaml
//! apiVersion: proxops/v1alpha1
//! kind: Cluster
//! metadata: {name: lab}
//! spec:
//!   endpoint: https://pve01.example:8006      # or sim: (the embedded simulator)
//!   token:
//!     id: root@pam!proxops
//!     secret: {env: PVE_TOKEN_SECRET}          # or {sops: pve.token}
//!   tls: {fingerprint: "AB:CD:…"}              # or {ca-file: ca.pem} or {insecure: true}
//!   sops-file: secrets/lab.sops.yaml           # default secrets/<name>.sops.yaml
//!   options: {write-concurrency: 2, read-concurrency: 30, task-timeout-seconds: 600, max-passes: 5}
//!   simulator: {nodes: [pve01, pve02]}         # only with endpoint sim: (+ volumes: [local:vztmpl/…])
//! ```

use serde_json::{Map, Value};

use crate::API_VERSION;
use crate::diag::{Diagnostic, quote};

/// Where the cluster's API is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// The embedded simulator, its state under the repository's `.proxops/`.
    Sim,
    /// `https://host:port`: no credentials, no path, no query (see [`parse_endpoint`]).
    Https(String),
    /// `http://host:port`: allowed, with a warning (the token crosses the network in clear).
    Http(String),
}

impl Endpoint {
    /// The PVE API this endpoint reaches, `host:port` with the scheme's default port filled
    /// in; `None` for `sim:` (each cluster file gets an embedded simulator of its own).
    pub fn identity(&self) -> Option<String> {
        let (base, default_port) = match self {
            Endpoint::Sim => return None,
            Endpoint::Https(base) => (base.strip_prefix("https://")?, 443),
            Endpoint::Http(base) => (base.strip_prefix("http://")?, 80),
        };
        let host = base.to_ascii_lowercase();
        // An IPv6 host is bracketed (`[::1]:8006`): the port follows the last `]`.
        let has_port = host.rsplit_once(':').is_some_and(|(h, p)| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (!h.starts_with('[') || h.ends_with(']'))
        });
        Some(if has_port {
            host
        } else {
            format!("{host}:{default_port}")
        })
    }
}

/// Where a secret value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    /// A dot-path in the cluster's SOPS document.
    Sops(String),
}

/// How the server certificate is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tls {
    /// The platform's trust store.
    System,
    /// A PEM CA file, relative to the repository root.
    CaFile(String),
    /// SHA-256 of the server certificate (DER), as PVE shows it: `AB:CD:…` (32 bytes).
    Fingerprint(String),
    /// Accept any certificate (warned about on every run).
    Insecure,
}

/// API token reference: the id in clear, the secret from a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRef {
    /// `USER@REALM!TOKENID`.
    pub id: String,
    pub secret: SecretSource,
}

/// Reads in flight per node when `read-concurrency` is not set: PVE serves a node's API
/// requests with three worker processes (`max_workers => 3` in pve-manager's pveproxy and
/// pvedaemon), so more reads at once per node only queue there (`proxops-bench`, scenario 9).
pub const READS_PER_NODE: usize = 3;

/// Execution options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// Mutating requests in flight per node.
    pub write_concurrency: usize,
    /// Reads in flight per cluster; `None`: [`READS_PER_NODE`] for each of its nodes.
    pub read_concurrency: Option<usize>,
    /// Longest a PVE task may run before it is reported as timed out.
    pub task_timeout_seconds: u64,
    /// Observe-plan-execute passes per apply before giving up on convergence.
    pub max_passes: u32,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            write_concurrency: 2,
            read_concurrency: None,
            task_timeout_seconds: 600,
            max_passes: 5,
        }
    }
}

/// A parsed cluster file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterFile {
    pub file: String,
    pub name: String,
    pub endpoint: Endpoint,
    pub token: Option<TokenRef>,
    pub tls: Tls,
    /// Relative to the repository root.
    pub sops_file: String,
    pub options: ClusterOptions,
    /// Nodes of the embedded simulator (endpoint `sim:` only).
    pub sim_nodes: Vec<String>,
    /// Volumes the embedded simulator starts with (`local:vztmpl/…`, `local:iso/…`).
    pub sim_volumes: Vec<String>,
}

struct Reader<'a> {
    file: &'a str,
    diags: Vec<Diagnostic>,
}

impl Reader<'_> {
    fn err(&mut self, path: &str, message: impl Into<String>) {
        self.diags.push(Diagnostic::error(self.file, path, message));
    }

    fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(map) = v.as_object() else {
            self.err(path, "expected a mapping");
            return None;
        };
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                self.err(
                    &at,
                    format!("unknown field; expected one of: {}", allowed.join(", ")),
                );
            }
        }
        Some(map)
    }

    fn string(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        required: bool,
    ) -> Option<String> {
        let at = format!("{path}.{key}");
        match map.get(key) {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                self.err(&at, "expected a non-empty string");
                None
            }
            None if required => {
                self.err(&at, "required field is missing");
                None
            }
            None => None,
        }
    }

    fn count(
        &mut self,
        map: &Map<String, Value>,
        path: &str,
        key: &str,
        min: u64,
        max: u64,
    ) -> Option<u64> {
        let v = map.get(key)?;
        match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.err(
                    &format!("{path}.{key}"),
                    format!("expected an integer from {min} to {max}"),
                );
                None
            }
        }
    }

    fn secret(&mut self, v: &Value, path: &str) -> Option<SecretSource> {
        let map = self.object(v, path, &["env", "sops"])?;
        match (map.get("env"), map.get("sops")) {
            (Some(Value::String(e)), None) if is_env_name(e) => Some(SecretSource::Env(e.clone())),
            (Some(Value::String(e)), None) => {
                self.err(
                    &format!("{path}.env"),
                    format!(
                        "`{}` is not an environment variable name (letters, digits and `_`, not starting with a digit)",
                        quote(e)
                    ),
                );
                None
            }
            (None, Some(Value::String(s))) if !s.is_empty() => Some(SecretSource::Sops(s.clone())),
            _ => {
                self.err(
                    path,
                    "expected exactly one of `env: VARIABLE` or `sops: dot.path`",
                );
                None
            }
        }
    }
}

impl ClusterFile {
    /// Parse `clusters/<name>.yaml`; every problem is reported.
    pub fn parse(file: &str, name: &str, doc: &Value) -> Result<ClusterFile, Vec<Diagnostic>> {
        let mut r = Reader {
            file,
            diags: Vec::new(),
        };
        let top = r
            .object(doc, "", &["apiVersion", "kind", "metadata", "spec"])
            .cloned()
            .unwrap_or_default();
        match top.get("apiVersion").and_then(Value::as_str) {
            Some(API_VERSION) => {}
            _ => r.err("apiVersion", format!("expected `{API_VERSION}`")),
        }
        match top.get("kind").and_then(Value::as_str) {
            Some("Cluster") => {}
            _ => r.err(
                "kind",
                "expected `Cluster` (files under clusters/ describe clusters)",
            ),
        }
        match top
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
        {
            Some(n) if n == name => {}
            Some(n) => r.err(
                "metadata.name",
                format!("`{}` does not match the file name `{name}`", quote(n)),
            ),
            None => r.err("metadata.name", "required field is missing"),
        }
        let empty = Value::Object(Map::new());
        let spec_value = top.get("spec").unwrap_or(&empty);
        let spec = r
            .object(
                spec_value,
                "spec",
                &[
                    "endpoint",
                    "token",
                    "tls",
                    "sops-file",
                    "options",
                    "simulator",
                ],
            )
            .cloned()
            .unwrap_or_default();

        let endpoint = match r.string(&spec, "spec", "endpoint", true) {
            Some(url) => match parse_endpoint(&url) {
                Ok(e) => Some(e),
                Err(message) => {
                    r.err("spec.endpoint", message);
                    None
                }
            },
            None => None,
        };

        let token = match spec.get("token") {
            None => None,
            Some(v) => r
                .object(v, "spec.token", &["id", "secret"])
                .cloned()
                .and_then(|t| {
                    let id = r.string(&t, "spec.token", "id", true);
                    if let Some(id) = &id
                        && !(id.contains('@') && id.contains('!'))
                    {
                        r.err(
                            "spec.token.id",
                            "expected USER@REALM!TOKENID, e.g. root@pam!proxops",
                        );
                    }
                    let secret = match t.get("secret") {
                        Some(s) => r.secret(s, "spec.token.secret"),
                        None => {
                            r.err("spec.token.secret", "required field is missing");
                            None
                        }
                    };
                    Some(TokenRef {
                        id: id?,
                        secret: secret?,
                    })
                }),
        };
        if matches!(endpoint, Some(Endpoint::Https(_) | Endpoint::Http(_)))
            && spec.get("token").is_none()
        {
            r.err(
                "spec.token",
                "a real cluster needs an API token: token: {id: USER@REALM!ID, secret: {env: VAR}}",
            );
        }

        let tls = match spec.get("tls") {
            None => Tls::System,
            Some(v) => {
                match r
                    .object(v, "spec.tls", &["ca-file", "fingerprint", "insecure"])
                    .cloned()
                {
                    None => Tls::System,
                    Some(t) => {
                        match (t.get("ca-file"), t.get("fingerprint"), t.get("insecure")) {
                            (Some(Value::String(ca)), None, None) => Tls::CaFile(ca.clone()),
                            (None, Some(Value::String(fp)), None) => {
                                match normalise_fingerprint(fp) {
                                    Some(fp) => Tls::Fingerprint(fp),
                                    None => {
                                        r.err("spec.tls.fingerprint", "expected a SHA-256 fingerprint: 32 hex bytes separated by `:`");
                                        Tls::System
                                    }
                                }
                            }
                            (None, None, Some(Value::Bool(true))) => Tls::Insecure,
                            (None, None, Some(Value::Bool(false))) => Tls::System,
                            _ => {
                                r.err("spec.tls", "expected exactly one of ca-file, fingerprint or insecure: true");
                                Tls::System
                            }
                        }
                    }
                }
            }
        };

        let sops_file = r
            .string(&spec, "spec", "sops-file", false)
            .unwrap_or_else(|| format!("secrets/{name}.sops.yaml"));

        let mut options = ClusterOptions::default();
        if let Some(v) = spec.get("options")
            && let Some(o) = r
                .object(
                    v,
                    "spec.options",
                    &[
                        "write-concurrency",
                        "read-concurrency",
                        "task-timeout-seconds",
                        "max-passes",
                    ],
                )
                .cloned()
        {
            if let Some(n) = r.count(&o, "spec.options", "write-concurrency", 1, 64) {
                options.write_concurrency = n as usize;
            }
            if let Some(n) = r.count(&o, "spec.options", "read-concurrency", 1, 256) {
                options.read_concurrency = Some(n as usize);
            }
            if let Some(n) = r.count(&o, "spec.options", "task-timeout-seconds", 1, 86_400) {
                options.task_timeout_seconds = n;
            }
            if let Some(n) = r.count(&o, "spec.options", "max-passes", 1, 20) {
                options.max_passes = n as u32;
            }
        }

        let mut sim_nodes = Vec::new();
        let mut sim_volumes = Vec::new();
        if let Some(v) = spec.get("simulator") {
            if endpoint != Some(Endpoint::Sim) {
                r.err("spec.simulator", "only meaningful with `endpoint: sim:`");
            }
            if let Some(s) = r
                .object(v, "spec.simulator", &["nodes", "volumes"])
                .cloned()
            {
                match s.get("volumes") {
                    None => {}
                    Some(Value::Array(volumes)) => {
                        for (i, v) in volumes.iter().enumerate() {
                            match v.as_str() {
                                Some(v) if v.contains(':') => sim_volumes.push(v.to_string()),
                                _ => r.err(
                                    &format!("spec.simulator.volumes[{i}]"),
                                    "expected a volume id like local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
                                ),
                            }
                        }
                    }
                    Some(_) => r.err("spec.simulator.volumes", "expected a list of volume ids"),
                }
                match s.get("nodes").and_then(Value::as_array) {
                    Some(nodes) if !nodes.is_empty() => {
                        for (i, n) in nodes.iter().enumerate() {
                            match n.as_str() {
                                Some(n) if !n.is_empty() => sim_nodes.push(n.to_string()),
                                _ => r.err(
                                    &format!("spec.simulator.nodes[{i}]"),
                                    "expected a node name",
                                ),
                            }
                        }
                    }
                    _ => r.err(
                        "spec.simulator.nodes",
                        "expected a non-empty list of node names",
                    ),
                }
            }
        }
        if endpoint == Some(Endpoint::Sim) && sim_nodes.is_empty() {
            sim_nodes = vec!["pve01".into(), "pve02".into()];
        }

        match (r.diags.is_empty(), endpoint) {
            (true, Some(endpoint)) => Ok(ClusterFile {
                file: file.to_string(),
                name: name.to_string(),
                endpoint,
                token,
                tls,
                sops_file,
                options,
                sim_nodes,
                sim_volumes,
            }),
            _ => Err(r.diags),
        }
    }
}

/// `ab:cd:…` or `abcd…` (64 hex digits) to `AB:CD:…`; `None` when it is not 32 bytes of hex.
pub fn normalise_fingerprint(fp: &str) -> Option<String> {
    let hex: String = fp.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let upper = hex.to_ascii_uppercase();
    let pairs: Vec<&str> = (0..32).map(|i| &upper[2 * i..2 * i + 2]).collect();
    Some(pairs.join(":"))
}

/// `sim:`, or `https://host[:port]` / `http://host[:port]` with nothing else: credentials
/// (`user:password@`) are refused, so an endpoint never carries a secret into output or logs;
/// a path other than `/`, a query or a fragment are refused, since proxops adds `/api2/json`
/// itself. The message quotes the value with any credentials replaced by `***`.
pub fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    if text == "sim:" {
        return Ok(Endpoint::Sim);
    }
    let shown = quote(&redact_userinfo(text));
    let not_an_endpoint =
        || format!("`{shown}` is not `sim:`, `https://host:8006` or `http://host:port`");
    let lower = text.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return Err(not_an_endpoint());
    }
    let url = url::Url::parse(text).map_err(|e| format!("{}: {e}", not_an_endpoint()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "`{shown}` has credentials in it; they would be printed and logged. Put the API token in spec.token"
        ));
    }
    let Some(host) = url.host_str().filter(|h| !h.is_empty()) else {
        return Err(format!("`{shown}` names no host"));
    };
    if url.path() != "/" && !url.path().is_empty() {
        return Err(format!(
            "`{shown}` has a path; give only https://host:port (proxops adds /api2/json itself)"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`{shown}` has a query or fragment; give only https://host:port"
        ));
    }
    let mut base = format!("{}://{host}", url.scheme());
    if let Some(port) = url.port() {
        base.push_str(&format!(":{port}"));
    }
    Ok(if url.scheme() == "https" {
        Endpoint::Https(base)
    } else {
        Endpoint::Http(base)
    })
}

/// `scheme://user:password@host/…` with the credentials replaced by `***`, for messages.
pub fn redact_userinfo(text: &str) -> String {
    let Some(start) = text.find("://").map(|i| i + 3) else {
        return text.to_string();
    };
    let authority_end = text[start..]
        .find(['/', '?', '#'])
        .map_or(text.len(), |i| start + i);
    match text[start..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &text[..start], &text[start + at..]),
        None => text.to_string(),
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The prefixes an API token's environment variable may have without being allowed by name
/// in `proxops.yaml` (`allow-token-env`).
pub const TOKEN_ENV_PREFIXES: [&str; 2] = ["PROXOPS_", "PVE_"];

/// A cluster file may read its API token only from a variable named `PROXOPS_*` or `PVE_*`,
/// or one `proxops.yaml` lists in `allow-token-env`: otherwise a pull request editing
/// `clusters/*.yaml` could make a CI plan send any CI secret to an endpoint of its choice.
/// This is hygiene, not a control: `--trusted-config` is the control.
pub fn check_token_env(cluster: &ClusterFile, allowed: &[String]) -> Option<Diagnostic> {
    let SecretSource::Env(var) = &cluster.token.as_ref()?.secret else {
        return None;
    };
    let ok = TOKEN_ENV_PREFIXES
        .iter()
        .any(|p| var.starts_with(p) && var.len() > p.len())
        || allowed.iter().any(|a| a == var);
    (!ok).then(|| {
        Diagnostic::error(
            &cluster.file,
            "spec.token.secret.env",
            format!(
                "`{}` is not a token variable: its name must start with PROXOPS_ or PVE_, or be listed in proxops.yaml under allow-token-env",
                quote(var)
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options as a cluster file spells them, parsed.
    fn options(spelled: &str) -> ClusterOptions {
        let doc: Value = serde_json::from_str(&format!(
            r#"{{"apiVersion": "proxops/v1alpha1", "kind": "Cluster", "metadata": {{"name": "lab"}},
               "spec": {{"endpoint": "https://192.0.2.1:8006",
                         "token": {{"id": "x@pve!t", "secret": {{"env": "PROXOPS_T"}}}},
                         "options": {spelled}}}}}"#
        ))
        .expect("test JSON");
        ClusterFile::parse("clusters/lab.yaml", "lab", &doc)
            .expect("a valid cluster file")
            .options
    }

    #[test]
    fn reads_default_to_three_per_node_unless_set() {
        assert_eq!(options("{}").read_concurrency, None);
        assert_eq!(
            options(r#"{"read-concurrency": 16}"#).read_concurrency,
            Some(16)
        );
        assert_eq!(options(r#"{"write-concurrency": 4}"#).write_concurrency, 4);
        assert_eq!(READS_PER_NODE, 3);
    }
}
