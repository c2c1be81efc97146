//! `validate`: a `kind: Container` manifest (JSON) to its normalised [`Container`], failing
//! closed with one diagnostic per problem, each naming the field path and what to write.
//!
//! A privileged container (`unprivileged: false`) and a bind mount (`host-path`) are accepted
//! as written: whether this kind may propose them is the operator's grant, checked by the host
//! against the parameters of every call (see `docs/kinds.md`), not the manifest's business.

use std::collections::BTreeMap;

use proxops_kind_sdk::check::{Checker, Diag, index, join};
use proxops_kind_sdk::manifest;
use proxops_kind_sdk::sets;
use proxops_kind_sdk::size;
use serde_json::{Map, Value};

use crate::desired::*;
use crate::syntax;
use crate::{KIND, MAX_NICS, OWNERSHIP_TAG, ownership_mark};

type Obj = Map<String, Value>;

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &[
    "vmid",
    "node",
    "hostname",
    "ostemplate",
    "cores",
    "memory",
    "swap",
    "rootfs",
    "mount-points",
    "nics",
    "features",
    "unprivileged",
    "onboot",
    "tags",
    "description",
    "state",
    "ha",
];
/// Keys of `spec.rootfs`.
pub const ROOTFS_KEYS: &[&str] = &["storage", "size"];
/// Keys of a `spec.mount-points[]` entry.
pub const MP_KEYS: &[&str] = &[
    "slot",
    "storage",
    "size",
    "host-path",
    "path",
    "read-only",
    "backup",
];
/// Keys of a `spec.nics[]` entry.
pub const NIC_KEYS: &[&str] = &["name", "bridge", "ip", "gw", "firewall", "vlan", "mac"];
/// Keys of `spec.features`.
pub const FEATURE_KEYS: &[&str] = &["nesting", "keyctl", "fuse"];
/// Keys of `spec.ha`.
pub const HA_KEYS: &[&str] = &["state", "max-restart", "max-relocate", "failback"];

/// Check a manifest and normalise it; warnings come back with the desired state.
pub fn validate(doc: &Value) -> Result<(Container, Vec<Diag>), Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = manifest::envelope(&mut c, doc, KIND);
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let vmid = c
        .int(spec, "spec", "vmid", true, 100, 999_999_999)
        .map(|v| v as u32);
    let node = c.string(spec, "spec", "node", true);
    if let Some(n) = &node
        && !syntax::is_node_name(n)
    {
        c.error(
            "spec.node",
            format!("`{n}` is not a PVE node name; use letters, digits and `-` (e.g. `pve01`)"),
        );
    }
    let hostname = match c.string(spec, "spec", "hostname", false) {
        Some(h) => match syntax::hostname_problem(&h) {
            Some(p) => {
                c.error("spec.hostname", p);
                None
            }
            None => Some(h),
        },
        None => name.clone(),
    };
    let ostemplate = c.string(spec, "spec", "ostemplate", true);
    if let Some(t) = &ostemplate
        && let Some(p) = syntax::ostemplate_problem(t)
    {
        c.error("spec.ostemplate", p);
    }
    let cores = c
        .int(spec, "spec", "cores", false, 1, 8192)
        .map(|v| v as u32);
    let memory_mib = mib(&mut c, spec, "memory", true, 16);
    let swap_mib = mib(&mut c, spec, "swap", false, 0);
    let rootfs = rootfs(&mut c, spec);
    let mount_points = mount_points(&mut c, spec);
    let nics = nics(&mut c, spec);
    let features = features(&mut c, spec);
    let unprivileged = c
        .boolean(spec, "spec", "unprivileged", false)
        .unwrap_or(true);
    let onboot = c.boolean(spec, "spec", "onboot", false);
    let tags = tags(&mut c, spec, vmid);
    let description = c.string(spec, "spec", "description", false);
    let state = match c
        .enumeration(spec, "spec", "state", false, &["running", "stopped"])
        .as_deref()
    {
        Some("stopped") => Some(PowerState::Stopped),
        Some(_) => Some(PowerState::Running),
        // Absent: the default; present but refused (the error is recorded): unknown.
        None if spec.get("state").is_none_or(Value::is_null) => Some(PowerState::Running),
        None => None,
    };
    let ha = ha(&mut c, spec, state);
    let warnings = c.finish()?;
    let missing = || vec![Diag::error("", "internal: a checked field has no value")];
    Ok((
        Container {
            name: name.ok_or_else(missing)?,
            vmid: vmid.ok_or_else(missing)?,
            node: node.ok_or_else(missing)?,
            hostname: hostname.ok_or_else(missing)?,
            ostemplate: ostemplate.ok_or_else(missing)?,
            cores,
            memory_mib: memory_mib.ok_or_else(missing)?,
            swap_mib,
            rootfs: rootfs.ok_or_else(missing)?,
            mount_points,
            nics,
            features,
            unprivileged,
            onboot,
            tags,
            description,
            state: state.ok_or_else(missing)?,
            ha,
        },
        warnings,
    ))
}

/// A size field that PVE stores as whole MiB, at least `min` MiB.
fn mib(c: &mut Checker, obj: &Obj, key: &str, required: bool, min: u64) -> Option<u64> {
    let path = join("spec", key);
    let bytes = c.size(obj, "spec", key, required)?;
    match size::exact_mib(bytes) {
        None => {
            c.error(
                path,
                format!(
                    "must be a whole number of MiB (PVE stores MiB), got {bytes} bytes; write e.g. `512MiB` or `2GiB`"
                ),
            );
            None
        }
        Some(m) if m < min => {
            c.error(
                path,
                format!(
                    "must be at least {min}MiB (PVE's minimum), got {}",
                    size::format_human(bytes)
                ),
            );
            None
        }
        Some(m) => Some(m),
    }
}

/// A volume size: positive, a whole number of GiB (PVE allocates `<storage>:<GiB>`).
fn gib_size(c: &mut Checker, obj: &Obj, path: &str) -> Option<u64> {
    let bytes = c.size(obj, path, "size", true)?;
    let p = join(path, "size");
    if bytes == 0 {
        c.error(p, "must be positive; write e.g. `8GiB`");
        return None;
    }
    if size::exact_gib(bytes).is_none() {
        c.error(
            p,
            format!(
                "must be a whole number of GiB (PVE allocates container volumes in GiB), got {}; round it, e.g. `{}GiB`",
                size::format_human(bytes),
                bytes.div_ceil(size::GIB)
            ),
        );
        return None;
    }
    Some(bytes)
}

fn storage(c: &mut Checker, obj: &Obj, path: &str) -> Option<String> {
    let s = c.string(obj, path, "storage", true)?;
    match syntax::storage_problem(&s) {
        Some(p) => {
            c.error(join(path, "storage"), p);
            None
        }
        None => Some(s),
    }
}

fn rootfs(c: &mut Checker, spec: &Obj) -> Option<Rootfs> {
    let r = c.object_field(spec, "spec", "rootfs", true, ROOTFS_KEYS)?;
    let storage = storage(c, r, "spec.rootfs");
    let size_bytes = gib_size(c, r, "spec.rootfs");
    Some(Rootfs {
        storage: storage?,
        size_bytes: size_bytes?,
    })
}

fn mount_points(c: &mut Checker, spec: &Obj) -> Vec<MountPoint> {
    let mut out = Vec::new();
    let Some(items) = c.array(spec, "spec", "mount-points", false) else {
        return out;
    };
    let mut slots: BTreeMap<u32, usize> = BTreeMap::new();
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.mount-points", i);
        let Some(m) = c.object(item, &path, MP_KEYS) else {
            continue;
        };
        let slot = match c.string(m, &path, "slot", false) {
            None => Some(i as u32),
            Some(s) => match syntax::mp_slot(&s) {
                Some(n) => Some(n),
                None => {
                    c.error(
                        join(&path, "slot"),
                        format!(
                            "`{s}` is not a mount point slot; write `mp0` to `mp{}`",
                            crate::MAX_MOUNT_POINT
                        ),
                    );
                    None
                }
            },
        };
        if let Some(n) = slot
            && let Some(first) = slots.insert(n, i)
        {
            c.error(
                join(&path, "slot"),
                format!("slot `mp{n}` is already used by spec.mount-points[{first}]; give each mount point its own slot"),
            );
        }
        let inside = c.string(m, &path, "path", true);
        if let Some(p) = &inside {
            if let Some(problem) = syntax::path_problem(p) {
                c.error(join(&path, "path"), problem);
            } else if p == "/" {
                c.error(
                    join(&path, "path"),
                    "`/` is the root file system; configure it under spec.rootfs",
                );
            } else if let Some(first) = paths.insert(p.trim_end_matches('/').to_string(), i) {
                c.error(
                    join(&path, "path"),
                    format!(
                        "`{p}` is already mounted by spec.mount-points[{first}]; use another path"
                    ),
                );
            }
        }
        let read_only = c.boolean(m, &path, "read-only", false);
        let backup = c.boolean(m, &path, "backup", false);
        let host_path = c.string(m, &path, "host-path", false);
        let has_volume = m.get("storage").is_some_and(|v| !v.is_null())
            || m.get("size").is_some_and(|v| !v.is_null());
        let source = match (host_path, has_volume) {
            (Some(_), true) => {
                c.error(
                    &path,
                    "has both `host-path` and `storage`/`size`; a mount point is either a new volume (storage and size) or a bind mount (host-path)",
                );
                None
            }
            (Some(h), false) => {
                if let Some(problem) = syntax::path_problem(&h) {
                    c.error(join(&path, "host-path"), problem);
                    None
                } else {
                    if backup.is_some() {
                        c.error(
                            join(&path, "backup"),
                            "applies to volume mount points only (PVE never backs up a bind mount); remove it",
                        );
                    }
                    Some(MountSource::Bind { host_path: h })
                }
            }
            (None, true) => {
                let storage = storage(c, m, &path);
                let size_bytes = gib_size(c, m, &path);
                match (storage, size_bytes) {
                    (Some(storage), Some(size_bytes)) => Some(MountSource::Volume {
                        storage,
                        size_bytes,
                    }),
                    _ => None,
                }
            }
            (None, false) => {
                c.error(
                    &path,
                    "needs `storage` and `size` (a new volume) or `host-path` (a bind mount)",
                );
                None
            }
        };
        if let (Some(slot), Some(source), Some(path)) = (slot, source, inside) {
            out.push(MountPoint {
                slot,
                source,
                path,
                read_only,
                backup,
            });
        }
    }
    out
}

fn nics(c: &mut Checker, spec: &Obj) -> Vec<Nic> {
    let mut out = Vec::new();
    let Some(items) = c.array(spec, "spec", "nics", false) else {
        return out;
    };
    if items.len() > MAX_NICS as usize {
        c.error(
            "spec.nics",
            format!(
                "has {} entries; a container has at most {MAX_NICS} (net0 to net{})",
                items.len(),
                MAX_NICS - 1
            ),
        );
        return out;
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = index("spec.nics", i);
        let Some(n) = c.object(item, &path, NIC_KEYS) else {
            continue;
        };
        let name = c
            .string(n, &path, "name", false)
            .unwrap_or_else(|| format!("eth{i}"));
        let name_ok = if name.len() > 15
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            c.error(
                join(&path, "name"),
                format!("`{name}` is not an interface name; use up to 15 letters, digits, `-`, `_` or `.` (e.g. `eth0`)"),
            );
            false
        } else if let Some(first) = names.insert(name.clone(), i) {
            c.error(
                join(&path, "name"),
                format!("`{name}` is already the name of spec.nics[{first}]; give each interface its own name"),
            );
            false
        } else {
            true
        };
        let bridge = c.string(n, &path, "bridge", true);
        if let Some(b) = &bridge
            && !syntax::is_bridge(b)
        {
            c.error(
                join(&path, "bridge"),
                format!("`{b}` is not a bridge name; use letters, digits, `-`, `_` and `.` (e.g. `vmbr0`)"),
            );
        }
        let ip = c.string(n, &path, "ip", false);
        let ip_ok = match ip.as_deref() {
            None | Some("dhcp") => true,
            Some(s) if syntax::is_ipv4_cidr(s) => true,
            Some(s) => {
                c.error(
                    join(&path, "ip"),
                    format!("`{s}` is neither `dhcp` nor an IPv4 address with prefix length (e.g. `192.168.1.20/24`)"),
                );
                false
            }
        };
        let gw = c.string(n, &path, "gw", false);
        if let Some(g) = &gw {
            if !syntax::is_ipv4(g) {
                c.error(
                    join(&path, "gw"),
                    format!("`{g}` is not an IPv4 address (e.g. `192.168.1.1`)"),
                );
            } else if ip_ok && !ip.as_deref().is_some_and(syntax::is_ipv4_cidr) {
                c.error(
                    join(&path, "gw"),
                    "a gateway needs a static `ip` (a CIDR); set `ip` or remove `gw` (DHCP supplies the gateway)",
                );
            }
        }
        let firewall = c.boolean(n, &path, "firewall", false);
        let vlan = c.int(n, &path, "vlan", false, 1, 4094).map(|v| v as u16);
        let mac = c.string(n, &path, "mac", false);
        let mac = match mac {
            Some(m) if syntax::is_unicast_mac(&m) => Some(m.to_ascii_uppercase()),
            Some(m) => {
                c.error(
                    join(&path, "mac"),
                    format!("`{m}` is not a unicast MAC address; write six hex pairs with an even first octet (e.g. `BC:24:11:12:34:56`), or remove it to keep the one PVE assigned"),
                );
                None
            }
            None => None,
        };
        if let (Some(bridge), true) = (bridge, name_ok) {
            out.push(Nic {
                slot: i as u32,
                name,
                bridge,
                ip,
                gw,
                firewall,
                vlan,
                mac,
            });
        }
    }
    out
}

fn features(c: &mut Checker, spec: &Obj) -> Features {
    let Some(f) = c.object_field(spec, "spec", "features", false, FEATURE_KEYS) else {
        return Features::default();
    };
    Features {
        nesting: c.boolean(f, "spec.features", "nesting", false),
        keyctl: c.boolean(f, "spec.features", "keyctl", false),
        fuse: c.boolean(f, "spec.features", "fuse", false),
    }
}

/// `spec.ha`: options with PVE's defaults, and a state that agrees with `spec.state` (it
/// defaults to it): HA acts on its requested state, so a contradiction would have HA and
/// proxops undo each other's work on every cycle. `power` is none when `spec.state` is
/// itself wrong (then the state is not compared).
fn ha(c: &mut Checker, spec: &Obj, power: Option<PowerState>) -> Option<Ha> {
    let p = "spec.ha";
    // `comment` is not an unknown field but the one proxops writes itself: said so, and then
    // left out of the checks (the rare manifest with it is copied).
    let without_comment;
    let spec = match spec.get("ha") {
        Some(Value::Object(ha)) if ha.contains_key("comment") => {
            c.error(
                join(p, "comment"),
                "the HA resource's comment is proxops's ownership mark (`managed by proxops (proxops-<vmid>)`), written by proxops; remove it from the manifest",
            );
            let mut ha = ha.clone();
            ha.remove("comment");
            let mut copy = spec.clone();
            copy.insert("ha".into(), Value::Object(ha));
            without_comment = copy;
            &without_comment
        }
        _ => spec,
    };
    let ha = c.object_field(spec, "spec", "ha", false, HA_KEYS)?;
    let state = c.enumeration(ha, p, "state", false, HaState::ALL);
    let max_restart = c.int(ha, p, "max-restart", false, 0, i64::from(u32::MAX));
    let max_relocate = c.int(ha, p, "max-relocate", false, 0, i64::from(u32::MAX));
    let failback = c.boolean(ha, p, "failback", false);
    let power = power?;
    let state = match state.as_deref() {
        None if ha.get("state").is_some_and(|v| !v.is_null()) => return None,
        None => match power {
            PowerState::Running => HaState::Started,
            PowerState::Stopped => HaState::Stopped,
        },
        Some(s) => HaState::parse(Some(s))?,
    };
    let clash = match (state, power) {
        (HaState::Started, PowerState::Stopped) => Some(
            "`started` has HA keep the container running while spec.state is `stopped`: HA would start what proxops stops. Set spec.state: running, or spec.ha.state: stopped (or leave spec.ha.state out: it follows spec.state)",
        ),
        (HaState::Stopped, PowerState::Running) => Some(
            "`stopped` has HA keep the container stopped while spec.state is `running` (the default): proxops's start would turn HA's state back to `started`. Set spec.state: stopped, or spec.ha.state: started (or leave spec.ha.state out: it follows spec.state)",
        ),
        (HaState::Disabled, PowerState::Running) => Some(
            "`disabled` has HA keep the container stopped while spec.state is `running` (the default): proxops's start would turn HA's state to `started`. Set spec.state: stopped with spec.ha.state: disabled, or use spec.ha.state: started",
        ),
        _ => None,
    };
    if let Some(why) = clash {
        c.error(join(p, "state"), why);
        return None;
    }
    Some(Ha {
        state,
        max_restart: max_restart.map_or(Ha::DEFAULT_TRIES, |n| n as u64),
        max_relocate: max_relocate.map_or(Ha::DEFAULT_TRIES, |n| n as u64),
        failback: failback.unwrap_or(true),
    })
}

/// The user's tags plus the ownership tag and the vmid-bound mark; `proxops-*` is reserved.
fn tags(c: &mut Checker, spec: &Obj, vmid: Option<u32>) -> Vec<String> {
    let mut tags = vec![OWNERSHIP_TAG.to_string()];
    if let Some(vmid) = vmid {
        tags.push(ownership_mark(vmid));
    }
    if let Some(list) = c.string_list(spec, "spec", "tags") {
        for (i, t) in list.iter().enumerate() {
            let lower = t.to_ascii_lowercase();
            if lower.starts_with("proxops-") {
                c.error(
                    index("spec.tags", i),
                    format!("`{t}`: tags starting with `proxops-` are reserved for proxops's ownership marks; rename it"),
                );
            } else if syntax::is_tag(&lower) {
                tags.push(lower);
            } else {
                c.error(
                    index("spec.tags", i),
                    format!("`{t}` is not a PVE tag; use letters, digits, `_`, `-`, `+` and `.`, not starting with `-`, `+` or `.`"),
                );
            }
        }
    }
    sets::normalize(&tags)
}
