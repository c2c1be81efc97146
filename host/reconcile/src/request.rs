//! What a proposed request is and what it touches, derived from the request itself and never
//! from what the kind says about it (its identity, labels, listings or summaries are claims).
//!
//! Three steps, each a pure function:
//! 1. [`canonical`]: the path is matched against the kind's declared templates segment by
//!    segment, each segment decoded once, each placeholder's value held to its grammar (a vmid
//!    is a canonical decimal; a node, a storage and a volume follow PVE's formats); the host
//!    then builds the URL itself from the template and the values, percent-encoding each value
//!    once, and that URL is the one sent. Parameter names are plain and never repeated.
//! 2. [`pve_view`]: the segments PVE routes (it decodes the whole path before routing, so a
//!    `%2F` inside a value is a separator to PVE).
//! 3. [`Target::of`]: what the request touches in PVE's view: a guest by vmid, a new guest,
//!    a storage volume (its owner read from PVE's volume naming), a new file, or an endpoint
//!    beyond one guest, with the capability that endpoint needs.
//!
//! [`capabilities_used`] reads a guest write's parameters as PVE parses them (property strings,
//! `delete` lists, repeated keys) and names the capabilities they need, or refuses what it
//! cannot classify.

use std::borrow::Cow;

use proxops_core::grant::Capability;
use proxops_runtime::kind::{Call, CallPattern, Method, Param};

use crate::plan::method_name;

/// The sandbox rule a refusal falls under, named in every refusal (``sandbox rule `path` ``).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Not among the calls the kind declared.
    Declared,
    /// A path that is not in canonical form, or that PVE or the URL parser could read another way.
    Path,
    /// A parameter name that is repeated or not a plain name.
    Params,
    /// A guest-id key that is not a canonical decimal.
    Identity,
    /// A write about another object than the one planned.
    Target,
    /// A write to a guest proxops does not own, or a delete without the vmid-bound mark.
    Ownership,
    /// A volume of another guest, or a file the object did not declare.
    Volume,
    /// An endpoint beyond one guest, without the capability for it.
    Endpoint,
    /// A parameter that needs a capability the grant does not name, or that the host cannot
    /// classify.
    Capability,
    /// More reads than the grant allows.
    Reads,
    /// A listing that is not a plain collection path or that aliases another's.
    Listing,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Declared => "declared",
            Rule::Path => "path",
            Rule::Params => "params",
            Rule::Identity => "identity",
            Rule::Target => "target",
            Rule::Ownership => "ownership",
            Rule::Volume => "volume",
            Rule::Endpoint => "endpoint",
            Rule::Capability => "capability",
            Rule::Reads => "reads",
            Rule::Listing => "listing",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request the sandbox refused, and why; nothing of it is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} (sandbox rule `{rule}`)")]
pub struct Refusal {
    pub rule: Rule,
    pub what: String,
}

impl Refusal {
    pub fn new(rule: Rule, what: impl Into<String>) -> Refusal {
        Refusal {
            rule,
            what: what.into(),
        }
    }
}

/// A value for a message: as it is when it is plain (printable ASCII, no space, quote or
/// backslash), else quoted with every control character and quote escaped; at most 80
/// characters either way.
pub fn shown(value: &str) -> String {
    let cut = value.chars().count() > 80;
    let head: String = value.chars().take(80).collect();
    let plain = head
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\\' | b'`'));
    let mut out = if plain && !head.is_empty() {
        head
    } else {
        format!(
            "\"{}\"",
            head.chars()
                .flat_map(char::escape_debug)
                .collect::<String>()
        )
    };
    if cut {
        out.push('…');
    }
    out
}

/// `vmid` as a canonical decimal (no sign, no leading zero, no space; at most 9 digits, as
/// PVE's `pve-vmid`), or `None`.
pub fn canonical_vmid(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || b.len() > 9 || b[0] == b'0' || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}

/// PVE's `pve-node`: a host name label.
pub fn is_node_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// PVE's `pve-storage-id`: `[a-z][a-z0-9\-_.]*[a-z0-9]`.
pub fn is_storage_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_' | b'.')
        })
}

/// One name of a volume's path (`vm-100-disk-0`, `iso`, `debian-12_amd64.tar.zst`): starts with
/// a letter, digit or `_`, so it is never `.` or `..`.
fn is_volume_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'+' | b'@' | b'=')
        })
}

/// PVE's `pve-volume-id`: `storage:name[/name…]`, every name plain (no dot segment).
pub fn is_volume_id(s: &str) -> bool {
    match s.split_once(':') {
        Some((storage, name)) => is_storage_id(storage) && name.split('/').all(is_volume_part),
        None => false,
    }
}

/// A value of a placeholder with no grammar of its own: a plain token (no `/`, no `%`, no
/// space or control character, never `.` or `..`).
fn is_plain_value(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 255
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'_' | b'.' | b':' | b'@' | b'!' | b'+' | b'=' | b',' | b'~'
                )
        })
}

/// Whether `value` fits the grammar of placeholder `name`.
fn fits(name: &str, value: &str) -> bool {
    match name {
        "vmid" | "newid" => canonical_vmid(value).is_some(),
        "node" => is_node_name(value),
        "storage" => is_storage_id(value),
        "volume" => is_volume_id(value) || value.split('/').all(is_volume_part),
        _ => is_plain_value(value),
    }
}

/// Percent-encode one path segment: everything but ASCII letters, digits and `-_.~`.
pub fn encode_segment(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Decode `%XX` escapes once; `None` for a broken escape or text that is not UTF-8.
fn percent_decode(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('%') {
        return Some(Cow::Borrowed(s));
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

/// Bytes a proposed path may hold before decoding: RFC 3986's path characters. Anything
/// else (`\`, `?`, `#`, space, a control or non-ASCII character) the URL parser or PVE could
/// read another way.
fn raw_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'/' | b'-'
                | b'.'
                | b'_'
                | b'~'
                | b'%'
                | b':'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

/// The canonical form of `path` for `method`, checked against the kind's `patterns`: the URL
/// the host sends (borrowed when the kind already wrote it so). The refusal names the rule.
pub fn canonical<'p>(
    method: Method,
    path: &'p str,
    patterns: &[CallPattern],
) -> Result<Cow<'p, str>, Refusal> {
    let shown_call = || format!("{} {}", method_name(method), shown(path));
    if let Some(bad) = path.bytes().find(|b| !raw_path_byte(*b)) {
        return Err(Refusal::new(
            Rule::Path,
            format!(
                "{} holds {}, which the URL parser or PVE could read as another path",
                shown_call(),
                shown(&(bad as char).to_string())
            ),
        ));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Refusal::new(
            Rule::Path,
            format!("{} does not start with `/`", shown_call()),
        ));
    };
    let mut segments: Vec<Cow<'p, str>> = Vec::with_capacity(8);
    for raw in rest.split('/') {
        let Some(decoded) = percent_decode(raw) else {
            return Err(Refusal::new(
                Rule::Path,
                format!("{} holds a broken percent escape", shown_call()),
            ));
        };
        if decoded.is_empty() || decoded == "." || decoded == ".." {
            return Err(Refusal::new(
                Rule::Path,
                format!(
                    "{} has an empty, `.` or `..` segment (spelt {})",
                    shown_call(),
                    shown(raw)
                ),
            ));
        }
        segments.push(decoded);
    }
    // The first template of the method whose literal segments all match; its placeholders'
    // values must then fit their grammar (a value that does not is a path refusal, not an
    // undeclared call: the kind declared the shape).
    let mut shape_matched: Option<(&str, &str)> = None;
    'patterns: for p in patterns.iter().filter(|p| p.method == method) {
        let Some(template) = p.path.strip_prefix('/') else {
            continue;
        };
        if template.split('/').count() != segments.len() {
            continue;
        }
        for (t, v) in template.split('/').zip(&segments) {
            if !is_placeholder(t) && t != v.as_ref() {
                continue 'patterns;
            }
        }
        let bad = template
            .split('/')
            .zip(&segments)
            .filter_map(|(t, v)| Some((placeholder_name(t)?, v.as_ref())))
            .find(|(name, v)| !fits(name, v));
        match bad {
            Some((name, value)) => {
                shape_matched.get_or_insert((name, value));
                continue;
            }
            None => return Ok(build(path, template, &segments)),
        }
    }
    Err(match shape_matched {
        Some((name, value)) => Refusal::new(
            Rule::Path,
            format!(
                "{}: the value {} of `{{{name}}}` is not a {}",
                shown_call(),
                shown(value),
                grammar_name(name)
            ),
        ),
        None => Refusal::new(
            Rule::Declared,
            format!("{} is not among the calls the kind declared", shown_call()),
        ),
    })
}

fn grammar_name(placeholder: &str) -> &'static str {
    match placeholder {
        "vmid" | "newid" => "canonical vmid (a decimal without sign or leading zero)",
        "node" => "PVE node name",
        "storage" => "PVE storage id",
        "volume" => "PVE volume id (`storage:name`, no dot segment)",
        _ => "plain value (letters, digits and `-_.:@!+=,~`, never a dot segment)",
    }
}

fn is_placeholder(t: &str) -> bool {
    t.starts_with('{') && t.ends_with('}')
}

fn placeholder_name(t: &str) -> Option<&str> {
    t.strip_prefix('{')?.strip_suffix('}')
}

/// The URL built from the template's literals and the decoded values, each encoded once.
fn build<'p>(raw: &'p str, template: &str, values: &[Cow<'_, str>]) -> Cow<'p, str> {
    let mut out = String::with_capacity(raw.len() + 8);
    for (t, v) in template.split('/').zip(values) {
        out.push('/');
        if is_placeholder(t) {
            encode_segment(v, &mut out);
        } else {
            out.push_str(t);
        }
    }
    if out == raw {
        Cow::Borrowed(raw)
    } else {
        Cow::Owned(out)
    }
}

/// Parameter names: plain (letters, digits, `-_.`), and none twice (case folded: PVE's
/// parser keeps one of them, the host's check would see the other).
pub fn check_params(params: &[Param]) -> Result<(), Refusal> {
    for (i, p) in params.iter().enumerate() {
        let plain = !p.name.is_empty()
            && p.name.len() <= 64
            && p.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !plain {
            return Err(Refusal::new(
                Rule::Params,
                format!("the parameter name {} is not a plain name", shown(&p.name)),
            ));
        }
        if params[..i]
            .iter()
            .any(|q| q.name.eq_ignore_ascii_case(&p.name))
        {
            return Err(Refusal::new(
                Rule::Params,
                format!(
                    "the parameter `{}` is given twice (PVE would use one of them, the check another)",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

/// A call in canonical form: its path replaced by the one the host builds. The refusal
/// names the rule; the call is otherwise unchanged.
pub fn canonicalize(call: &mut Call, patterns: &[CallPattern]) -> Result<(), Refusal> {
    check_params(&call.params)?;
    if let Cow::Owned(path) = canonical(call.method, &call.path, patterns)? {
        call.path = path;
    }
    Ok(())
}

/// The segments PVE routes `path` (a canonical path) by: it decodes the whole path first.
pub fn pve_view(path: &str) -> Vec<String> {
    let decoded = percent_decode(path).map_or_else(|| path.to_string(), Cow::into_owned);
    decoded
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `qemu` or `lxc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestType {
    Qemu,
    Lxc,
}

impl GuestType {
    fn parse(s: &str) -> Option<GuestType> {
        match s {
            "qemu" => Some(GuestType::Qemu),
            "lxc" => Some(GuestType::Lxc),
            _ => None,
        }
    }
}

/// What a mutating request touches, in PVE's view of its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/nodes/{node}/{qemu|lxc}/{vmid}[/…]`: an existing guest (`rest` is what follows).
    Guest {
        node: String,
        kind: GuestType,
        vmid: u64,
        rest: Vec<String>,
    },
    /// `POST /nodes/{node}/{qemu|lxc}`: creates the guest its `vmid` parameter names.
    NewGuest {
        node: String,
        kind: GuestType,
        vmid: u64,
    },
    /// `/nodes/{node}/storage/{storage}/content/{volume}`: a volume, owned by the guest PVE's
    /// naming names (`vm-<id>-…`, `base-<id>-…`, `subvol-<id>-…`, an `<id>/` folder, a
    /// `vzdump-<type>-<id>-…` backup), else by no guest (an ISO, a template, an image file).
    Volume {
        node: String,
        storage: String,
        volume: String,
        owner: Option<u64>,
    },
    /// `POST /nodes/{node}/storage/{storage}/{download-url|upload|oci-registry-pull}`: a new
    /// file (PVE refuses to overwrite an existing one).
    NewFile { node: String, storage: String },
    /// Anything else: an endpoint beyond one guest, and the capability it needs.
    Endpoint {
        node: Option<String>,
        needs: Capability,
    },
}

impl Target {
    /// The target of a mutating request (`segments` as [`pve_view`] gives them).
    pub fn of(segments: &[String], params: &[Param]) -> Result<Target, Refusal> {
        let s: Vec<&str> = segments.iter().map(String::as_str).collect();
        let joined = || format!("/{}", s.join("/"));
        let endpoint = |node: Option<&str>, needs| Target::Endpoint {
            node: node.map(str::to_string),
            needs,
        };
        Ok(match s.as_slice() {
            ["nodes", node, rest @ ..] => {
                if !is_node_name(node) {
                    return Err(Refusal::new(
                        Rule::Path,
                        format!(
                            "{} names the node {}, which is not a node name",
                            shown(&joined()),
                            shown(node)
                        ),
                    ));
                }
                let node_owned = node.to_string();
                match rest {
                    [kind, tail @ ..] if GuestType::parse(kind).is_some() => {
                        let kind = GuestType::parse(kind).unwrap_or(GuestType::Qemu);
                        match tail {
                            [] => {
                                let vmid = params
                                    .iter()
                                    .find(|p| p.name.eq_ignore_ascii_case("vmid"))
                                    .and_then(|p| canonical_vmid(&p.value));
                                let Some(vmid) = vmid else {
                                    return Err(Refusal::new(
                                        Rule::Target,
                                        format!(
                                            "{} creates a guest without a canonical `vmid` parameter",
                                            shown(&joined())
                                        ),
                                    ));
                                };
                                Target::NewGuest {
                                    node: node_owned,
                                    kind,
                                    vmid,
                                }
                            }
                            [vmid, tail @ ..] => {
                                let Some(vmid) = canonical_vmid(vmid) else {
                                    return Err(Refusal::new(
                                        Rule::Path,
                                        format!(
                                            "{}: the guest segment {} is not a canonical vmid",
                                            shown(&joined()),
                                            shown(vmid)
                                        ),
                                    ));
                                };
                                let rest: Vec<String> =
                                    tail.iter().map(|t| t.to_string()).collect();
                                if let Some(needs) = guest_endpoint(&rest) {
                                    return Ok(endpoint(Some(node), needs));
                                }
                                Target::Guest {
                                    node: node_owned,
                                    kind,
                                    vmid,
                                    rest,
                                }
                            }
                        }
                    }
                    ["storage", storage, "content", volume @ ..] if !volume.is_empty() => {
                        let volume = volume.join("/");
                        let volid = if volume.contains(':') {
                            volume.clone()
                        } else {
                            format!("{storage}:{volume}")
                        };
                        if !is_volume_id(&volid) {
                            return Err(Refusal::new(
                                Rule::Path,
                                format!(
                                    "{}: {} is not a PVE volume id",
                                    shown(&joined()),
                                    shown(&volid)
                                ),
                            ));
                        }
                        let (vol_storage, name) = volid.split_once(':').unwrap_or_default();
                        if vol_storage != *storage {
                            return Err(Refusal::new(
                                Rule::Volume,
                                format!(
                                    "{} names storage `{storage}` in its path but the volume {} is on `{vol_storage}`",
                                    shown(&joined()),
                                    shown(&volid)
                                ),
                            ));
                        }
                        Target::Volume {
                            node: node_owned,
                            storage: storage.to_string(),
                            owner: volume_owner(name),
                            volume: volid,
                        }
                    }
                    [
                        "storage",
                        storage,
                        "download-url" | "upload" | "oci-registry-pull",
                    ] => Target::NewFile {
                        node: node_owned,
                        storage: storage.to_string(),
                    },
                    [first, ..] => endpoint(Some(node), node_endpoint(first)),
                    [] => endpoint(Some(node), Capability::NodeConfig),
                }
            }
            ["access", ..] => endpoint(None, Capability::Access),
            ["storage", ..] => endpoint(None, Capability::StorageConfig),
            ["cluster", "sdn" | "firewall", ..] => endpoint(None, Capability::NetworkConfig),
            _ => endpoint(None, Capability::ClusterConfig),
        })
    }

    /// The guest a write reaches: its own vmid, a new guest's, or a volume's owner.
    pub fn guest(&self) -> Option<u64> {
        match self {
            Target::Guest { vmid, .. } | Target::NewGuest { vmid, .. } => Some(*vmid),
            Target::Volume { owner, .. } => *owner,
            _ => None,
        }
    }

    pub fn node(&self) -> Option<&str> {
        match self {
            Target::Guest { node, .. }
            | Target::NewGuest { node, .. }
            | Target::Volume { node, .. }
            | Target::NewFile { node, .. } => Some(node),
            Target::Endpoint { node, .. } => node.as_deref(),
        }
    }
}

/// A guest's sub-path that runs commands inside it or gives a console: `guest-exec`.
fn guest_endpoint(rest: &[String]) -> Option<Capability> {
    let first = rest.first()?.as_str();
    let exec = match first {
        "monitor" | "termproxy" | "vncproxy" | "spiceproxy" | "vncwebsocket" | "sendkey"
        | "mtunnel" | "mtunnelwebsocket" | "remote_migrate" => true,
        // Reading the agent (`ping`, `get-*`, `info`) is harmless; the rest acts inside.
        "agent" => !rest.get(1).is_some_and(|cmd| {
            cmd == "ping" || cmd == "info" || cmd.starts_with("get-") || cmd.starts_with("get_")
        }),
        _ => false,
    };
    exec.then_some(Capability::GuestExec)
}

/// The capability a write to `/nodes/{node}/<first>…` needs.
fn node_endpoint(first: &str) -> Capability {
    match first {
        "startall" | "stopall" | "migrateall" | "suspendall" | "status" | "wakeonlan" => {
            Capability::NodePower
        }
        "execute" | "termproxy" | "vncshell" | "spiceshell" | "vncwebsocket" => {
            Capability::NodeExec
        }
        "storage" | "disks" | "scan" | "ceph" => Capability::StorageConfig,
        "network" | "firewall" | "sdn" => Capability::NetworkConfig,
        "apt" => Capability::Apt,
        _ => Capability::NodeConfig,
    }
}

/// The guest that owns volume `name` (the part after `storage:`), by PVE's naming.
pub fn volume_owner(name: &str) -> Option<u64> {
    let last = name.rsplit('/').next().unwrap_or(name);
    for prefix in ["vm-", "base-", "subvol-", "basevol-"] {
        if let Some(rest) = last.strip_prefix(prefix) {
            let digits: &str = rest.split('-').next().unwrap_or_default();
            if let Ok(v) = digits.parse() {
                return Some(v);
            }
        }
    }
    if let Some(rest) = last.strip_prefix("vzdump-") {
        let mut parts = rest.split('-');
        if let (Some("qemu" | "lxc" | "openvz"), Some(id)) = (parts.next(), parts.next())
            && let Ok(v) = id.parse()
        {
            return Some(v);
        }
    }
    // A dir-type storage keeps a guest's images in `images/<vmid>/`: `local:100/x.qcow2`.
    let (first, _) = name.split_once('/')?;
    first.parse().ok()
}

/// What a write does to its target, whatever the action's label says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Effect {
    /// Removes a guest or a volume.
    pub destroys: bool,
    /// Stops, suspends or restarts a guest (or removes it).
    pub disturbs: bool,
}

/// The effect of a mutating call with target `target`.
pub fn effect(method: Method, target: &Target) -> Effect {
    match (method, target) {
        (Method::Delete, Target::Guest { rest, .. }) if rest.is_empty() => Effect {
            destroys: true,
            disturbs: true,
        },
        (Method::Delete, Target::Volume { .. }) => Effect {
            destroys: true,
            disturbs: false,
        },
        (Method::Post, Target::Guest { rest, .. })
            if rest.first().is_some_and(|r| r == "status")
                && rest.get(1).is_some_and(|op| {
                    matches!(
                        op.as_str(),
                        "stop" | "shutdown" | "suspend" | "reboot" | "reset" | "hibernate"
                    )
                }) =>
        {
            Effect {
                destroys: false,
                disturbs: true,
            }
        }
        _ => Effect::default(),
    }
}

/// PVE's property string: `default,key=value,…` as `(key, value)` pairs, the first bare part
/// under `default_key`. `Err` for a key given twice (two spellings of one setting).
fn property_string<'v>(
    value: &'v str,
    default_key: &'static str,
) -> Result<Vec<(Cow<'v, str>, &'v str)>, String> {
    let mut out: Vec<(Cow<'v, str>, &'v str)> = Vec::new();
    for (i, part) in value.split(',').enumerate() {
        let (key, v) = match part.split_once('=') {
            Some((k, v)) => (Cow::Owned(k.trim().to_ascii_lowercase()), v),
            None if i == 0 => (Cow::Borrowed(default_key), part),
            None => (Cow::Owned(part.trim().to_ascii_lowercase()), ""),
        };
        if out.iter().any(|(k, _)| *k == key) {
            return Err(format!("gives `{key}` twice"));
        }
        out.push((key, v));
    }
    Ok(out)
}

fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn is_disk_slot(name: &str) -> bool {
    ["ide", "sata", "scsi", "virtio", "unused"]
        .iter()
        .any(|p| numbered(name, p))
        || name == "efidisk0"
        || name == "tpmstate0"
}

/// The capabilities a write's parameters use, read as PVE parses them; a parameter the host
/// cannot classify (raw QEMU `args`, raw `lxc.*` keys, a path it does not know) is refused.
pub fn capabilities_used(
    method: Method,
    target: &Target,
    params: &[Param],
) -> Result<Vec<Capability>, Refusal> {
    let mut used = Vec::new();
    let mut add = |c| {
        if !used.contains(&c) {
            used.push(c);
        }
    };
    let refuse = |name: &str, why: String| {
        Refusal::new(Rule::Capability, format!("the parameter `{name}` {why}"))
    };
    let guest_kind = match target {
        Target::Guest { kind, .. } | Target::NewGuest { kind, .. } => Some(*kind),
        _ => None,
    };
    let creates_container = matches!(
        target,
        Target::NewGuest {
            kind: GuestType::Lxc,
            ..
        }
    ) && method == Method::Post;
    if creates_container {
        // PVE creates a privileged container unless told `unprivileged=1`.
        let unprivileged = params
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case("unprivileged"))
            .map(|p| p.value.as_str());
        if unprivileged != Some("1") {
            add(Capability::Privileged);
        }
    }
    for p in params {
        let name = p.name.to_ascii_lowercase();
        let name = name.as_str();
        let value = p.value.as_str();
        if name.contains('.') {
            return Err(refuse(
                name,
                "is a raw configuration key; proxops never sends one for a third-party kind".into(),
            ));
        }
        match name {
            "args" => {
                return Err(refuse(
                    name,
                    "passes raw arguments to QEMU; proxops never sends it for a third-party kind"
                        .into(),
                ));
            }
            "hookscript" => add(Capability::Hookscript),
            "unprivileged" if !creates_container => add(Capability::Privileged),
            "delete" | "revert" => {
                for key in value.split([',', ';', ' ']).filter(|k| !k.is_empty()) {
                    let key = key.trim().to_ascii_lowercase();
                    if key == "unprivileged" {
                        add(Capability::Privileged);
                    }
                    if key.contains('.') || key == "args" {
                        return Err(refuse(name, format!("names the raw key {}", shown(&key))));
                    }
                }
            }
            "features" if guest_kind == Some(GuestType::Lxc) => {
                let parts = property_string(value, "nesting").map_err(|why| refuse(name, why))?;
                if parts.iter().any(|(k, _)| k != "nesting") {
                    add(Capability::Privileged);
                }
            }
            "rootfs" => mount_point(name, value, &mut add)?,
            _ if numbered(name, "mp") => mount_point(name, value, &mut add)?,
            _ if numbered(name, "dev")
                || numbered(name, "hostpci")
                || numbered(name, "usb")
                || numbered(name, "parallel") =>
            {
                add(Capability::Devices)
            }
            _ if numbered(name, "serial") && value.trim() != "socket" => add(Capability::Devices),
            _ if numbered(name, "serial") => {}
            _ if guest_kind == Some(GuestType::Qemu) && is_disk_slot(name) => {
                let parts = property_string(value, "file").map_err(|why| refuse(name, why))?;
                for (k, v) in &parts {
                    if matches!(k.as_ref(), "file" | "import-from" | "volume")
                        && v.trim_start().starts_with('/')
                    {
                        add(Capability::Devices);
                    }
                }
            }
            _ if guest_kind.is_some() && value.trim_start().starts_with('/') => {
                return Err(refuse(
                    name,
                    format!(
                        "carries the path {}, which the host cannot classify",
                        shown(value)
                    ),
                ));
            }
            _ => {}
        }
    }
    Ok(used)
}

/// `rootfs`/`mpN`: the volume (the first bare part or `volume=`; one spelling only) is a
/// storage volume, or a host path: a bind mount (a device under `/dev`).
fn mount_point(name: &str, value: &str, add: &mut impl FnMut(Capability)) -> Result<(), Refusal> {
    let refuse =
        |why: String| Refusal::new(Rule::Capability, format!("the parameter `{name}` {why}"));
    let parts = property_string(value, "volume").map_err(refuse)?;
    let volume = parts
        .iter()
        .find(|(k, _)| k == "volume")
        .map(|(_, v)| v.trim())
        .unwrap_or_default();
    if volume.starts_with('/') {
        add(Capability::BindMounts);
        if volume.starts_with("/dev") {
            add(Capability::Devices);
        }
    } else if !volume.contains(':') {
        return Err(refuse(format!(
            "mounts {}, which is neither a storage volume nor a host path",
            shown(volume)
        )));
    }
    Ok(())
}

/// Whether an action removes a guest: labelled a delete, or holding a `DELETE` of a guest
/// (the request decides, whatever the label says). The mass-prune guard counts these.
pub fn removes_guest(action: &proxops_runtime::kind::Action) -> bool {
    action.operation == proxops_runtime::kind::Operation::Delete
        || action
            .calls
            .iter()
            .chain(action.restore.iter().flat_map(|r| &r.calls))
            .filter(|c| c.method == Method::Delete)
            .any(|c| {
                matches!(
                    Target::of(&pve_view(&c.path), &c.params),
                    Ok(Target::Guest { ref rest, .. }) if rest.is_empty()
                )
            })
}

/// The endpoint capability a mutating request to `path` uses, if it reaches beyond one
/// guest (for the plan's warning mark).
pub fn endpoint_capability(path: &str) -> Option<Capability> {
    match Target::of(&pve_view(path), &[]) {
        Ok(Target::Endpoint { needs, .. }) => Some(needs),
        _ => None,
    }
}

/// `METHOD path` for messages.
pub fn describe_call(call: &Call) -> String {
    format!("{} {}", method_name(call.method), shown(&call.path))
}

#[cfg(test)]
mod tests;
