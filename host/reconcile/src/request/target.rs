//! What a mutating request touches, in PVE's view of its path, and what it does to it.

use proxops_core::grant::Capability;
use proxops_runtime::kind::{Method, Param};

use proxops_names::is_node_name;

use super::form::{canonical_vmid, is_volume_id, pve_view};
use super::{Refusal, Rule, shown};

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
    /// `/cluster/ha/resources[/{sid}[/…]]`: a guest's HA resource (its sid `vm:N`, `ct:N` or
    /// PVE's bare `N`, in the path or, for a create, in the `sid` parameter), which belongs to
    /// the guest it names. `rest` is what follows the sid (`migrate`, `relocate`); `create` is
    /// a write to the collection.
    HaResource {
        vmid: u64,
        create: bool,
        rest: Vec<String>,
    },
    /// A named object of one of the writing kind's listings ([`Target::named_in`]): the
    /// collection (`POST <listing>` with the id in the listing's id parameter, a create, unless
    /// `rename` equals the id: PVE's comment update of a security group or an ipset) or an
    /// item (`<listing>/<id>[/…]`, or the collection with the id parameter for PVE's
    /// collection-level updates). Owned by the mark in its `comment` (`proxops:<id>`).
    Named {
        listing: String,
        id: String,
        create: bool,
    },
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
            ["cluster", "ha", "resources", rest @ ..] => {
                let sid = match rest {
                    [] => params
                        .iter()
                        .find(|p| p.name.eq_ignore_ascii_case("sid"))
                        .map(|p| p.value.as_str()),
                    [sid, ..] => Some(*sid),
                };
                let Some(vmid) = sid.and_then(ha_sid_vmid) else {
                    return Err(Refusal::new(
                        Rule::Target,
                        format!(
                            "{} names no guest's HA resource (a sid is `vm:<vmid>` or `ct:<vmid>`, the vmid canonical)",
                            shown(&joined())
                        ),
                    ));
                };
                Target::HaResource {
                    vmid,
                    create: rest.is_empty(),
                    rest: rest.iter().skip(1).map(|t| t.to_string()).collect(),
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
            Target::Guest { vmid, .. }
            | Target::NewGuest { vmid, .. }
            | Target::HaResource { vmid, .. } => Some(*vmid),
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
            Target::HaResource { .. } | Target::Named { .. } => None,
        }
    }

    /// An endpoint write re-read against the writing kind's `listings` (path, id field): one
    /// that reaches an object of a listing becomes [`Target::Named`]. `segments` is the
    /// call's path as PVE routes it. A write to a listing's collection that names no id is
    /// refused. Any other target is returned unchanged.
    pub fn named_in(
        self,
        method: Method,
        segments: &[String],
        params: &[Param],
        listings: &[(String, String)],
    ) -> Result<Target, Refusal> {
        let Target::Endpoint { .. } = self else {
            return Ok(self);
        };
        for (path, id_field) in listings {
            let listing: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            if segments.len() < listing.len()
                || segments.iter().zip(&listing).any(|(s, l)| s != l)
                || listing.first().is_some_and(|l| *l == "nodes")
            {
                continue;
            }
            let rest = &segments[listing.len()..];
            let param = params
                .iter()
                .find(|p| p.name == *id_field)
                .map(|p| p.value.clone())
                .filter(|v| !v.is_empty());
            // PVE's firewall collections (security groups, ipsets) update an object by a
            // `POST` to the collection with `rename`: equal to the id it changes the object's
            // comment (not a create); another id renames that object, which is a write to two
            // objects and never proposed.
            let rename = params
                .iter()
                .find(|p| p.name == "rename")
                .map(|p| p.value.as_str())
                .filter(|v| !v.is_empty());
            let (id, create) = match (rest.first(), param) {
                (Some(id), _) => (id.clone(), false),
                (None, Some(id)) if method == Method::Post && rename.is_some() => {
                    if rename != Some(id.as_str()) {
                        return Err(Refusal::new(
                            Rule::Target,
                            format!(
                                "a write to the collection {} renames {} to {}; proxops does not rename named objects",
                                shown(path),
                                shown(rename.unwrap_or_default()),
                                shown(&id)
                            ),
                        ));
                    }
                    (id, false)
                }
                (None, Some(id)) => (id, method == Method::Post),
                (None, None) => {
                    return Err(Refusal::new(
                        Rule::Target,
                        format!(
                            "a write to the collection {} names no object (no `{id_field}` parameter)",
                            shown(path)
                        ),
                    ));
                }
            };
            return Ok(Target::Named {
                listing: path.clone(),
                id,
                create,
            });
        }
        Ok(self)
    }
}

/// The vmid an HA resource id names: `vm:100`, `ct:100`, or PVE's bare `100` (canonical
/// decimals only).
pub fn ha_sid_vmid(sid: &str) -> Option<u64> {
    let id = match sid.split_once(':') {
        Some(("vm" | "ct", id)) => id,
        Some(_) => return None,
        None => sid,
    };
    canonical_vmid(id)
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
pub fn effect(method: Method, target: &Target, params: &[Param]) -> Effect {
    let stops = Effect {
        destroys: false,
        disturbs: true,
    };
    match (method, target) {
        (Method::Delete, Target::Guest { rest, .. }) if rest.is_empty() => Effect {
            destroys: true,
            disturbs: true,
        },
        (Method::Delete, Target::Volume { .. } | Target::Named { .. }) => Effect {
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
            stops
        }
        // HA stops a guest whose resource it is told to keep `stopped` or `disabled`.
        (Method::Post | Method::Put, Target::HaResource { rest, .. })
            if rest.is_empty()
                && params.iter().any(|p| {
                    p.name.eq_ignore_ascii_case("state")
                        && matches!(p.value.as_str(), "stopped" | "disabled")
                }) =>
        {
            stops
        }
        _ => Effect::default(),
    }
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
