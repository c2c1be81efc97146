//! `plan`: desired state + observation -> actions, drift and anomalies.
//!
//! Decisions (mirroring the VM kind where PVE behaves alike):
//! * Absent -> one Create action: `POST /nodes/{node}/lxc` with every modelled parameter,
//!   `unprivileged` always (PVE's API default is a privileged container), the tags with the
//!   ownership marks, and `start=1` when the container should run.
//! * Present -> one Update action: a single `PUT .../config` carrying the `digest` of the
//!   config read (a concurrent edit makes PVE refuse the write; the next cycle plans again;
//!   so does a shutdown that applied pending changes before the write),
//!   with `delete=` for undeclared NICs, then grow-only `PUT .../resize` calls (no digest).
//! * What PVE cannot change in place is an anomaly, never a write: `unprivileged`, the
//!   template a container was created from (detected through `ostype`/`arch` where the
//!   template's file name says them), the storage of the root volume or of a mount point, a
//!   shrink, a volume mount point turned bind mount (or back). A live mount point the manifest
//!   does not declare is reported, not removed (PVE would detach its volume).
//! * Power: `POST .../status/start`; `POST .../status/shutdown` with `forceStop=1` and
//!   `timeout=180` (a clean shutdown that ends stopped). A container that must stop is shut
//!   down before the config write, so changes PVE cannot hot-apply land at once.
//! * Prune: `POST .../status/stop` when running, then `DELETE /nodes/{node}/lxc/{vmid}` with
//!   `purge=1`; one destructive action whose restore starts the container again when the
//!   delete fails. A protected container is not pruned.
//! * A lock (in the config, the status or the listing entry) is an `Anomaly::locked` and no
//!   action: the host waits for the task that holds it.
//! * HA (`spec.ha`, decided in [`crate::ha`]): the HA resource is planned last, after the
//!   power actions. A container HA manages that is on another node than `spec.node` was put
//!   there by HA: it is planned where it is, every call addressed to its live node (no
//!   anomaly, no drift for the node; proxops does not migrate containers). While HA moves,
//!   fences or recovers it, an anomaly and no action; an HA resource in the `error` state
//!   takes only `state: disabled`.
//! * Changes PVE keeps pending on a running container appear in the config read (PVE's
//!   default view merges them), so they are not written again; they are not reported as
//!   pending either (a known gap, see `docs/kinds.md`).

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal, Restore,
};
use proxops_kind_sdk::propstring::{PropString, parse_bool, print_bool};
use proxops_kind_sdk::sets;
use proxops_kind_sdk::size;
use serde_json::Value;

use crate::desired::*;
use crate::ha;
use crate::live::{Config, Entry, TAG_SEPARATORS, observed};
use crate::wire;

/// `/nodes/{node}/lxc/{vmid}`.
pub fn base_path(node: &str, vmid: u32) -> String {
    format!("/nodes/{node}/lxc/{vmid}")
}

/// Plan one container. `desired` none means a live container the kind claimed with no
/// manifest (a prune candidate).
pub fn plan(desired: Option<&Container>, obs: &Observation) -> Result<Proposal, Vec<Diag>> {
    let entry = match &obs.live {
        None => None,
        Some(text) => {
            let v: Value = serde_json::from_str(text).map_err(|e| {
                vec![Diag::error(
                    "",
                    format!("the /cluster/resources entry is not JSON: {e}"),
                )]
            })?;
            Some(Entry::from_value(&v).ok_or_else(|| {
                vec![Diag::error(
                    "",
                    "the /cluster/resources entry has no node or vmid",
                )]
            })?)
        }
    };
    match (desired, entry) {
        (None, None) => Ok(Proposal::default()),
        (None, Some(e)) => prune(&e, obs),
        (Some(d), None) => Ok(create(d)),
        (Some(d), Some(e)) => update(d, &e, obs),
    }
}

/// What an operator does about a lock no task holds any more.
fn unlock_hint(vmid: u32) -> String {
    format!(
        "If a task is still running for it, wait for it; if none is (the run that took the lock was killed), clear the lock with `pct unlock {vmid}` on its node"
    )
}

fn locked(what: &str, lock: &str, vmid: u32, doing: &str) -> Anomaly {
    Anomaly::locked(
        "",
        format!(
            "{what} is locked ({lock}); not {doing} it this cycle. {}",
            unlock_hint(vmid)
        ),
    )
}

fn power_call(node: &str, vmid: u32, verb: &str) -> Call {
    let c = Call::new(
        Method::Post,
        format!("{}/status/{verb}", base_path(node, vmid)),
    );
    if verb == "shutdown" {
        c.param("forceStop", "1").param("timeout", "180")
    } else {
        c
    }
}

fn power_action(node: &str, vmid: u32, start: bool) -> Action {
    let (verb, old, new, word) = if start {
        ("start", "stopped", "running", "start")
    } else {
        ("shutdown", "running", "stopped", "shut down")
    };
    Action {
        operation: Operation::step("power"),
        summary: format!("{word} CT {vmid} on {node}"),
        calls: vec![power_call(node, vmid, verb)],
        changes: vec![Change::new("status", Some(old.into()), Some(new.into()))],
        disturbs_availability: !start,
        destructive: false,
        restore: None,
    }
}

/// The create action, then the HA resource when `spec.ha` asks for one (PVE needs the
/// container first).
pub fn create(d: &Container) -> Proposal {
    let mut params: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| params.push((k.to_string(), v));
    put("vmid", d.vmid.to_string());
    put("ostemplate", d.ostemplate.clone());
    put("hostname", d.hostname.clone());
    put("memory", d.memory_mib.to_string());
    if let Some(s) = d.swap_mib {
        put("swap", s.to_string());
    }
    if let Some(c) = d.cores {
        put("cores", c.to_string());
    }
    put(
        "rootfs",
        wire::new_volume(&d.rootfs.storage, d.rootfs.size_bytes),
    );
    for m in &d.mount_points {
        put(&format!("mp{}", m.slot), wire::new_mount_point(m));
    }
    for n in &d.nics {
        put(&format!("net{}", n.slot), wire::new_nic(n));
    }
    if !d.features.tokens().is_empty() {
        put("features", wire::features(&d.features, None));
    }
    put("unprivileged", print_bool(d.unprivileged).into());
    if let Some(o) = d.onboot {
        put("onboot", print_bool(o).into());
    }
    put("tags", wire::tags(&d.tags));
    if let Some(desc) = &d.description {
        put("description", desc.clone());
    }
    let mut changes: Vec<Change> = params
        .iter()
        .map(|(k, v)| Change::new(k.clone(), None, Some(v.clone())))
        .collect();
    let start = d.state == PowerState::Running;
    if start {
        params.push(("start".into(), "1".into()));
        changes.push(Change::new("status", None, Some("running".into())));
    }
    let mut call = Call::new(Method::Post, format!("/nodes/{}/lxc", d.node));
    for (k, v) in params {
        call = call.param(k, v);
    }
    let what = format!("CT {} `{}` on {}", d.vmid, d.hostname, d.node);
    let mut out = Proposal {
        actions: vec![Action {
            operation: Operation::Create,
            summary: format!(
                "create {what} from {}{}",
                d.ostemplate,
                if start { " and start it" } else { "" }
            ),
            calls: vec![call],
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        }],
        drift: vec![Drift::new("", None, Some(what))],
        ..Proposal::default()
    };
    ha::plan_new(d, &mut out);
    out
}

/// Accumulates the config changes of one update.
struct Diff<'a> {
    cfg: &'a Config,
    vmid: u32,
    sets: Vec<(String, String)>,
    deletes: Vec<String>,
    /// `(disk, new size, old size)`.
    resizes: Vec<(String, String, Option<String>)>,
    drift: Vec<Drift>,
    anomalies: Vec<Anomaly>,
}

impl Diff<'_> {
    /// Write `key = value` when `same(live)` is false, reporting drift at `path`.
    fn scalar(
        &mut self,
        key: &str,
        path: &str,
        value: String,
        same: impl Fn(Option<&str>) -> bool,
    ) {
        let live = self.cfg.get(key);
        if !same(live) {
            self.drift.push(Drift::new(
                path,
                live.map(str::to_string),
                Some(value.clone()),
            ));
            self.sets.push((key.to_string(), value));
        }
    }

    fn set(&mut self, key: String, value: String, drift: Vec<Drift>) {
        self.drift.extend(drift);
        self.sets.push((key, value));
    }

    fn anomaly(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.anomalies.push(Anomaly::new(path, message));
    }

    /// Compare a live volume's size with the desired one: grow by resize, refuse a shrink.
    fn size(&mut self, disk: &str, path: &str, live: &PropString, desired: u64) {
        let Some(live_size) = live.get("size").and_then(|s| size::parse_pve(s).ok()) else {
            return;
        };
        if desired > live_size {
            let new = size::format_pve(desired);
            self.drift.push(Drift::new(
                path,
                Some(size::format_human(live_size)),
                Some(size::format_human(desired)),
            ));
            self.resizes
                .push((disk.to_string(), new, live.get("size").map(str::to_string)));
        } else if desired < live_size {
            self.anomaly(
                path,
                format!(
                    "CT {}'s {disk} volume is {}, the manifest says {}; PVE cannot shrink a volume. Set the size to at least {}",
                    self.vmid,
                    size::format_human(live_size),
                    size::format_human(desired),
                    size::format_human(live_size)
                ),
            );
        }
    }
}

/// `storage` of a volume id `storage:volume`; `None` for a path (bind mount or device).
fn volume_storage(volume: &str) -> Option<&str> {
    if volume.starts_with('/') {
        return None;
    }
    volume.split_once(':').map(|(s, _)| s)
}

/// The distribution and architecture a template's file name announces, as PVE's `ostype` and
/// `arch` values (`debian-12-standard_12.7-1_amd64.tar.zst` -> `debian`, `amd64`).
pub fn template_facts(ostemplate: &str) -> (Option<&'static str>, Option<&'static str>) {
    let file = ostemplate.rsplit('/').next().unwrap_or_default();
    let distro = file
        .split(['-', '_'])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let ostype = match distro.as_str() {
        "debian" => Some("debian"),
        "ubuntu" => Some("ubuntu"),
        "alpine" => Some("alpine"),
        "fedora" => Some("fedora"),
        "archlinux" => Some("archlinux"),
        "gentoo" => Some("gentoo"),
        "devuan" => Some("devuan"),
        "nixos" => Some("nixos"),
        "opensuse" => Some("opensuse"),
        "centos" | "rockylinux" | "almalinux" => Some("centos"),
        _ => None,
    };
    let arch = ["amd64", "i386", "arm64", "armhf", "riscv64"]
        .into_iter()
        .find(|a| file.contains(&format!("_{a}.")) || file.contains(&format!("_{a}_")));
    (ostype, arch)
}

fn diff_fixed(d: &Container, x: &mut Diff<'_>) {
    let live_unpriv = x
        .cfg
        .get("unprivileged")
        .and_then(parse_bool)
        .unwrap_or(false);
    if live_unpriv != d.unprivileged {
        x.anomaly(
            "spec.unprivileged",
            format!(
                "CT {} is {} (unprivileged={}) but the manifest says unprivileged: {}; PVE cannot change this on an existing container. Set spec.unprivileged to {}, or recreate the container with the other setting (back it up and `pct restore --unprivileged {}`, or delete it and apply)",
                d.vmid,
                if live_unpriv { "unprivileged" } else { "privileged" },
                print_bool(live_unpriv),
                d.unprivileged,
                live_unpriv,
                print_bool(d.unprivileged),
            ),
        );
    }
    let (ostype, arch) = template_facts(&d.ostemplate);
    let live_ostype = x.cfg.get("ostype");
    if let (Some(want), Some(live)) = (ostype, live_ostype)
        && want != live
    {
        x.anomaly(
            "spec.ostemplate",
            format!(
                "CT {} runs a `{live}` system but spec.ostemplate is a `{want}` template; the template is used only at create and cannot change in place. Set spec.ostemplate back, or recreate the container (delete it, then apply)",
                d.vmid
            ),
        );
    }
    let live_arch = x.cfg.get("arch").unwrap_or("amd64");
    if let Some(want) = arch
        && want != live_arch
    {
        x.anomaly(
            "spec.ostemplate",
            format!(
                "CT {} is an `{live_arch}` container but spec.ostemplate is an `{want}` template; the template is used only at create and cannot change in place. Set spec.ostemplate back, or recreate the container",
                d.vmid
            ),
        );
    }
}

fn diff_scalars(d: &Container, x: &mut Diff<'_>) {
    x.scalar("hostname", "spec.hostname", d.hostname.clone(), |l| {
        l == Some(d.hostname.as_str())
    });
    let mem = d.memory_mib.to_string();
    x.scalar("memory", "spec.memory", mem.clone(), |l| {
        l == Some(mem.as_str())
    });
    if let Some(s) = d.swap_mib {
        let s = s.to_string();
        x.scalar("swap", "spec.swap", s.clone(), |l| l == Some(s.as_str()));
    }
    if let Some(c) = d.cores {
        let c = c.to_string();
        x.scalar("cores", "spec.cores", c.clone(), |l| l == Some(c.as_str()));
    }
    if let Some(o) = d.onboot {
        x.scalar("onboot", "spec.onboot", print_bool(o).into(), |l| {
            l.and_then(parse_bool).unwrap_or(false) == o
        });
    }
    if let Some(desc) = &d.description {
        // PVE keeps the description as comment lines and reads it back with a final newline.
        x.scalar("description", "spec.description", desc.clone(), |l| {
            l.map(|l| l.trim_end_matches('\n')) == Some(desc.trim_end_matches('\n'))
        });
    }
    x.scalar("tags", "spec.tags", wire::tags(&d.tags), |l| {
        let live = l
            .map(|l| sets::split_list(l, TAG_SEPARATORS))
            .unwrap_or_default();
        sets::same(&live, &d.tags)
    });
    let owned = d.features.tokens();
    if !owned.is_empty() {
        let live = x
            .cfg
            .get("features")
            .and_then(|f| PropString::parse(f).ok());
        let mut drift = Vec::new();
        for (k, want) in &owned {
            let have = live
                .as_ref()
                .and_then(|p| p.get(k))
                .and_then(parse_bool)
                .unwrap_or(false);
            if have != *want {
                drift.push(Drift::new(
                    format!("spec.features.{k}"),
                    Some(have.to_string()),
                    Some(want.to_string()),
                ));
            }
        }
        if !drift.is_empty() {
            let v = wire::features(&d.features, live.as_ref());
            x.set("features".into(), v, drift);
        }
    }
}

fn diff_rootfs(d: &Container, x: &mut Diff<'_>) {
    let Some(live) = x
        .cfg
        .get("rootfs")
        .and_then(|r| PropString::parse_with_default(r, "volume").ok())
    else {
        x.anomaly(
            "spec.rootfs",
            format!(
                "CT {} has no readable rootfs in its config; check it in PVE",
                d.vmid
            ),
        );
        return;
    };
    let volume = live.bare.clone().unwrap_or_default();
    match volume_storage(&volume) {
        Some(s) if s != d.rootfs.storage => x.anomaly(
            "spec.rootfs.storage",
            format!(
                "CT {}'s root volume `{volume}` is on `{s}`, the manifest says `{}`; a volume cannot move by a config write. Move it in PVE (`pct move-volume {} rootfs {}`) or set spec.rootfs.storage to `{s}`",
                d.vmid, d.rootfs.storage, d.vmid, d.rootfs.storage
            ),
        ),
        Some(_) => x.size("rootfs", "spec.rootfs.size", &live, d.rootfs.size_bytes),
        None => x.anomaly(
            "spec.rootfs.storage",
            format!(
                "CT {}'s root file system is the host path `{volume}`, not a volume on `{}`; it cannot change in place",
                d.vmid, d.rootfs.storage
            ),
        ),
    }
}

fn diff_mount_points(d: &Container, x: &mut Diff<'_>) {
    for (i, m) in d.mount_points.iter().enumerate() {
        let path = format!("spec.mount-points[{i}]");
        let key = format!("mp{}", m.slot);
        let live_text = x.cfg.get(&key).map(str::to_string);
        let Some(live) = live_text
            .as_deref()
            .and_then(|t| PropString::parse_with_default(t, "volume").ok())
        else {
            let v = wire::new_mount_point(m);
            x.set(key, v.clone(), vec![Drift::new(&path, live_text, Some(v))]);
            continue;
        };
        let volume = live.bare.clone().unwrap_or_default();
        let mut next = live.clone();
        let mut drift = Vec::new();
        match (&m.source, volume_storage(&volume)) {
            (
                MountSource::Volume {
                    storage,
                    size_bytes,
                },
                Some(s),
            ) => {
                if s != storage {
                    x.anomaly(
                        format!("{path}.storage"),
                        format!(
                            "CT {}'s {key} volume `{volume}` is on `{s}`, the manifest says `{storage}`; a volume cannot move by a config write. Move it in PVE (`pct move-volume {} {key} {storage}`) or set the storage to `{s}`",
                            d.vmid, d.vmid
                        ),
                    );
                    continue;
                }
                x.size(&key, &format!("{path}.size"), &live, *size_bytes);
                if let Some(b) = m.backup
                    && live.get("backup").and_then(parse_bool).unwrap_or(false) != b
                {
                    drift.push(Drift::new(
                        format!("{path}.backup"),
                        live.get("backup").map(str::to_string),
                        Some(print_bool(b).into()),
                    ));
                    next.set("backup", print_bool(b));
                }
            }
            (MountSource::Bind { host_path }, None) => {
                if &volume != host_path {
                    drift.push(Drift::new(
                        format!("{path}.host-path"),
                        Some(volume.clone()),
                        Some(host_path.clone()),
                    ));
                    next.bare = Some(host_path.clone());
                }
            }
            (MountSource::Volume { .. }, None) | (MountSource::Bind { .. }, Some(_)) => {
                x.anomaly(
                    &path,
                    format!(
                        "CT {}'s {key} is `{volume}`, {}; proxops does not swap a volume for a bind mount or back in place. Use another slot, or change {key} in PVE",
                        d.vmid,
                        if matches!(m.source, MountSource::Volume { .. }) {
                            "a bind mount, and the manifest declares a volume"
                        } else {
                            "a volume, and the manifest declares a bind mount"
                        }
                    ),
                );
                continue;
            }
        }
        if live.get("mp") != Some(m.path.as_str()) {
            drift.push(Drift::new(
                format!("{path}.path"),
                live.get("mp").map(str::to_string),
                Some(m.path.clone()),
            ));
            next.set("mp", m.path.clone());
        }
        if let Some(ro) = m.read_only
            && live.get("ro").and_then(parse_bool).unwrap_or(false) != ro
        {
            drift.push(Drift::new(
                format!("{path}.read-only"),
                live.get("ro").map(str::to_string),
                Some(print_bool(ro).into()),
            ));
            next.set("ro", print_bool(ro));
        }
        if !drift.is_empty() {
            x.set(key, wire::print_ordered(&next, "mp"), drift);
        }
    }
    let owned: Vec<String> = d
        .mount_points
        .iter()
        .map(|m| format!("mp{}", m.slot))
        .collect();
    let extra: Vec<(String, String)> = x
        .cfg
        .keys
        .iter()
        .filter(|(k, _)| crate::syntax::mp_slot(k).is_some() && !owned.contains(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in extra {
        x.anomaly(
            "spec.mount-points",
            format!(
                "CT {} has {k} (`{v}`), which the manifest does not declare; proxops does not remove mount points (PVE would detach the volume). Declare it, or remove it in PVE",
                d.vmid
            ),
        );
    }
}

fn diff_nics(d: &Container, x: &mut Diff<'_>) {
    for (i, n) in d.nics.iter().enumerate() {
        let path = format!("spec.nics[{i}]");
        let key = format!("net{}", n.slot);
        let live_text = x.cfg.get(&key).map(str::to_string);
        let Some(live) = live_text.as_deref().and_then(|t| PropString::parse(t).ok()) else {
            let v = wire::new_nic(n);
            x.set(
                key,
                v,
                vec![Drift::new(&path, live_text, Some(wire::new_nic(n)))],
            );
            continue;
        };
        let mut next = live.clone();
        let mut drift = Vec::new();
        for (tok, want) in wire::nic_tokens(n) {
            let have = live.get(tok);
            let same = match tok {
                "hwaddr" => have.is_some_and(|h| h.eq_ignore_ascii_case(&want)),
                "firewall" => have.and_then(parse_bool).unwrap_or(false) == (want == "1"),
                _ => have == Some(want.as_str()),
            };
            if !same {
                let field = match tok {
                    "tag" => "vlan",
                    "hwaddr" => "mac",
                    other => other,
                };
                drift.push(Drift::new(
                    format!("{path}.{field}"),
                    have.map(str::to_string),
                    Some(want.clone()),
                ));
                next.set(tok, want);
            }
        }
        // A static address that turned into DHCP takes its gateway with it.
        if n.ip.as_deref() == Some("dhcp") && n.gw.is_none() && live.has("gw") {
            drift.push(Drift::new(
                format!("{path}.gw"),
                live.get("gw").map(str::to_string),
                None,
            ));
            next.remove("gw");
        }
        if !drift.is_empty() {
            // The live (PVE-assigned) hwaddr and unowned tokens (rate, mtu, ip6) survive.
            x.set(key, wire::print_ordered(&next, "name"), drift);
        }
    }
    // The manifest owns the NIC set: an undeclared netN is removed.
    let owned: Vec<String> = d.nics.iter().map(|n| format!("net{}", n.slot)).collect();
    let extra: Vec<(String, String)> = x
        .cfg
        .keys
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix("net")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                && !owned.contains(k)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in extra {
        x.drift
            .push(Drift::new(format!("spec.nics ({k})"), Some(v), None));
        x.deletes.push(k);
    }
}

fn update(d: &Container, e: &Entry, obs: &Observation) -> Result<Proposal, Vec<Diag>> {
    let mut out = Proposal::default();
    let what = format!("CT {} on {}", e.vmid, e.node);
    if e.kind != "lxc" {
        out.anomalies.push(Anomaly::new(
            "spec.vmid",
            format!(
                "vmid {} on {} is a {} guest, not a container; pick another vmid",
                e.vmid, e.node, e.kind
            ),
        ));
        return Ok(out);
    }
    // A container HA manages was put on another node by HA: planned where it is (the host
    // says so in the plan). One without HA elsewhere was moved by hand.
    if e.node != d.node && !e.ha_managed() {
        out.anomalies.push(Anomaly::new(
            "spec.node",
            format!(
                "CT {} lives on node {}, the manifest says {}; proxops does not migrate containers (migrate it in PVE or fix the manifest)",
                e.vmid, e.node, d.node
            ),
        ));
        return Ok(out);
    }
    if let Some(lock) = &e.lock {
        out.anomalies.push(locked(&what, lock, e.vmid, "changing"));
        return Ok(out);
    }
    let o = observed(obs, e)?;
    if let Some(lock) = o.config.get("lock").map(str::to_string).or(o.lock.clone()) {
        out.anomalies.push(locked(&what, &lock, e.vmid, "changing"));
        return Ok(out);
    }
    if e.template || o.config.get("template").and_then(parse_bool) == Some(true) {
        out.anomalies.push(Anomaly::new(
            "",
            format!(
                "{what} is a PVE container template; a kind: Container manages ordinary containers. Pick another vmid, or convert it in PVE"
            ),
        ));
        return Ok(out);
    }
    if let Some(state) = e.hastate.as_deref() {
        if let Some(why) = ha::busy(state) {
            out.anomalies.push(Anomaly::new(
                "",
                format!("{what}: HA {why} (HA state `{state}`); proxops changes nothing until HA is done"),
            ));
            return Ok(out);
        }
        if state == "error" {
            out.anomalies.push(Anomaly::new(
                "spec.ha",
                format!("HA resource {} is in the error state: PVE takes no request for it but `state: disabled`. Set spec.ha.state: disabled (with spec.state: stopped), fix the cause, then set it back", ha::sid(e.vmid)),
            ));
            if d.ha.is_some_and(|h| h.state == HaState::Disabled) {
                ha::plan(d, e, &mut out, false);
            }
            return Ok(out);
        }
    }
    let mut x = Diff {
        cfg: &o.config,
        vmid: e.vmid,
        sets: vec![],
        deletes: vec![],
        resizes: vec![],
        drift: vec![],
        anomalies: vec![],
    };
    diff_fixed(d, &mut x);
    diff_scalars(d, &mut x);
    diff_rootfs(d, &mut x);
    diff_mount_points(d, &mut x);
    diff_nics(d, &mut x);
    let Diff {
        sets,
        deletes,
        resizes,
        drift,
        anomalies,
        ..
    } = x;
    out.drift = drift;
    out.anomalies = anomalies;

    let base = base_path(&e.node, e.vmid);
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    if !sets.is_empty() || !deletes.is_empty() {
        let mut call = Call::new(Method::Put, format!("{base}/config"));
        if let Some(dg) = &o.config.digest {
            call = call.param("digest", dg);
        }
        for (k, v) in &sets {
            call = call.param(k, v);
            changes.push(Change::new(
                k.clone(),
                o.config.get(k).map(str::to_string),
                Some(v.clone()),
            ));
        }
        if !deletes.is_empty() {
            call = call.param("delete", deletes.join(","));
            for k in &deletes {
                changes.push(Change::new(
                    k.clone(),
                    o.config.get(k).map(str::to_string),
                    None,
                ));
            }
        }
        calls.push(call);
    }
    for (disk, new, old) in &resizes {
        calls.push(
            Call::new(Method::Put, format!("{base}/resize"))
                .param("disk", disk)
                .param("size", new),
        );
        changes.push(Change::new(
            format!("{disk}.size"),
            old.clone(),
            Some(new.clone()),
        ));
    }

    let want_running = d.state == PowerState::Running;
    if o.running != want_running {
        let (l, w) = if o.running {
            ("running", "stopped")
        } else {
            ("stopped", "running")
        };
        out.drift
            .push(Drift::new("spec.state", Some(l.into()), Some(w.into())));
    }
    if o.running && !want_running {
        out.actions.push(power_action(&e.node, e.vmid, false));
    }
    if !calls.is_empty() {
        let keys: Vec<&str> = changes.iter().map(|c| c.key.as_str()).collect();
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!("update {what}: {}", keys.join(", ")),
            calls,
            changes,
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }
    if !o.running && want_running {
        out.actions.push(power_action(&e.node, e.vmid, true));
    }
    // The HA resource last, after the power actions (whose HA requests rewrite the resources
    // config, so a write after one carries no digest).
    let power_first = out.actions.iter().any(|a| a.operation.is_step("power"));
    ha::plan(d, e, &mut out, power_first);
    Ok(out)
}

fn prune(e: &Entry, obs: &Observation) -> Result<Proposal, Vec<Diag>> {
    let mut out = Proposal::default();
    let what = match &e.name {
        Some(name) => format!("CT {} `{name}` on {}", e.vmid, e.node),
        None => format!("CT {} on {}", e.vmid, e.node),
    };
    if e.kind != "lxc" || e.template || !e.tagged() {
        out.anomalies.push(Anomaly::new(
            "",
            format!("{what} is not a proxops-owned container; not deleting it"),
        ));
        return Ok(out);
    }
    if let Some(lock) = &e.lock {
        out.anomalies.push(locked(&what, lock, e.vmid, "deleting"));
        return Ok(out);
    }
    let o = observed(obs, e)?;
    if let Some(lock) = o.config.get("lock").map(str::to_string).or(o.lock.clone()) {
        out.anomalies.push(locked(&what, &lock, e.vmid, "deleting"));
        return Ok(out);
    }
    if o.config.get("protection").and_then(parse_bool) == Some(true) {
        out.anomalies.push(Anomaly::new(
            "",
            format!("{what} has no manifest but protection=1 is set; not deleting it (clear protection to let proxops prune it)"),
        ));
        return Ok(out);
    }
    let mut calls = Vec::new();
    if o.running {
        calls.push(power_call(&e.node, e.vmid, "stop"));
    }
    calls.push(Call::new(Method::Delete, base_path(&e.node, e.vmid)).param("purge", "1"));
    out.drift.push(Drift::new("", Some(what.clone()), None));
    out.actions.push(Action {
        operation: Operation::Delete,
        summary: format!(
            "delete {what} (no manifest){}",
            if o.running { ", stopping it first" } else { "" }
        ),
        calls,
        changes: vec![Change::new("vmid", Some(e.vmid.to_string()), None)],
        disturbs_availability: o.running,
        destructive: true,
        // A failed delete must not leave a container down that was running.
        restore: o.running.then(|| Restore {
            after: 0,
            calls: vec![power_call(&e.node, e.vmid, "start")],
        }),
    });
    Ok(out)
}
