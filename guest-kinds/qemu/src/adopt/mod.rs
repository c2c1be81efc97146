//! `adopt`: the manifest of a live VM or template (its `/cluster/resources` entry and the config
//! read `observe(None, live)` asked for), plus the gaps: what the manifest does not carry.
//!
//! Rules (spec "Adoption", decisions.md "Adopt"):
//! * Everything the kinds model is written from the live keys; a required key PVE leaves absent
//!   (`cpu`, `cores`, `memory`) gets PVE's default, which plan treats as equal to absent.
//! * A live ISO attachment is left unowned (no cdrom block) and listed as a gap.
//! * `sshkeys` becomes `ssh-key-refs` only when every live key line is a SOPS entry under
//!   `cloud-init.ssh-keys`; otherwise the `["*"]` sentinel. `cipassword`, `cicustom` and
//!   `ciupgrade` are gaps, never manifest values.
//! * Unmodelled keys go to `spec.extra` unless owning them needs more than the kind is granted
//!   (`args`, `hookscript`, host devices), is PVE-managed identity (`vmgenid`, `smbios1`) or
//!   is not a config value (`unusedN`, `lock`): those are gaps.
//! * On a running guest with pending changes the manifest carries the pending value (the
//!   operator's last word), so the first plan reports it as pending-until-reboot, not drift.
//! * A guest with an HA resource (the host's `ha` entry) gets `spec.ha`: its state, and the
//!   options that differ from PVE's defaults; `spec.state` follows HA's requested state
//!   (a gap says so when the guest is not there yet). A resource proxops did not create
//!   (no mark in its comment) is a gap: plan leaves it alone while it matches.
//! * The result is checked with `validate`; a guest no valid manifest describes is an error.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::kind::{Adopted, Gap};
use proxops_kind_sdk::manifest::{API_VERSION, MAX_NAME_LEN};
use proxops_kind_sdk::model::Observation;
use proxops_kind_sdk::propstring::{PropString, parse_bool};
use serde_json::{Map, Value, json};

use crate::desired::{Flavour, HaState};
use crate::keys::HOTPLUG_FEATURES;
use crate::live::{Config, Resource, pending_entries, pending_rows};
use crate::secrets::Secrets;
use crate::validate::parse_hotplug;
use crate::{syntax, wire};

mod cloud_init;
mod hardware;
#[cfg(test)]
mod tests;

/// The SOPS prefix `ssh-key-refs` point below.
pub const SSH_KEY_PREFIX: &str = "cloud-init.ssh-keys";

/// Keys PVE manages itself: not config an owner writes, dropped without a gap.
const PVE_MANAGED: &[&str] = &["meta", "parent", "template", "digest"];

/// Keys that are never adopted, with the reason the gap gives.
fn gap_reason(key: &str) -> Option<&'static str> {
    let bus = syntax::split_slot(key).map(|(b, _)| b);
    Some(match (key, bus) {
        ("cipassword", _) => {
            "not adopted: PVE masks cipassword on read-back, the plaintext is unrecoverable; set spec.cloud-init-data.ci-password-ref to a SOPS entry if proxops should own it"
        }
        ("cicustom", _) => {
            "not adopted: cicustom points at snippet files on PVE storage that proxops does not manage; PVE keeps it"
        }
        ("ciupgrade", _) => {
            "not adopted: a PVE-side cloud-init setting proxops does not model; PVE keeps it"
        }
        ("args", _) => {
            "not adopted: raw QEMU arguments are root@pam-only and can do anything to the host; PVE keeps them unowned"
        }
        ("hookscript", _) => {
            "not adopted: a hook script runs on the host and needs an explicit grant; PVE keeps it unowned"
        }
        ("vmgenid" | "smbios1", _) => {
            "not adopted: PVE-generated guest identity (regenerated on clone); PVE keeps it"
        }
        ("lock", _) => {
            "the guest is locked: plan changes nothing until the lock clears (a running task, a backup or a snapshot)"
        }
        ("vmstate" | "runningmachine" | "runningcpu", _) => {
            "PVE state, not configuration; not adopted"
        }
        (_, Some("unused")) => {
            "an unused volume is not configuration proxops owns; PVE keeps it (delete or re-attach it in PVE)"
        }
        (_, Some("usb" | "parallel" | "virtiofs")) => {
            "not adopted: host device or directory passthrough needs root@pam or a resource mapping the kind does not model; PVE keeps it unowned"
        }
        ("arch", _) => "not adopted: `arch` is root@pam-only; PVE keeps it unowned",
        _ => return None,
    })
}

/// Adopt the live guest of `obs` as a `flavour` manifest.
pub fn adopt(
    flavour: Flavour,
    obs: &Observation,
    secrets: &dyn Secrets,
) -> Result<Adopted, String> {
    let text = obs.live.as_deref().ok_or(
        "no live entry to adopt: the host passes the guest's /cluster/resources entry as `live`",
    )?;
    let r = Resource::from_json(text)
        .map_err(|e| format!("the /cluster/resources entry is not JSON: {e}"))?
        .ok_or("the /cluster/resources entry has no node or vmid: not a guest")?;
    if r.kind != "qemu" {
        return Err(format!(
            "guest {} on {} is of type `{}`, not qemu: the {} kind adopts only PVE VMs",
            r.vmid,
            r.node,
            r.kind,
            flavour.kind()
        ));
    }
    match (flavour, r.template) {
        (Flavour::Vm, true) => {
            return Err(format!(
                "VM {} on {} is a PVE template: the TemplateVM kind adopts it",
                r.vmid, r.node
            ));
        }
        (Flavour::Template, false) => {
            return Err(format!(
                "VM {} on {} is not a PVE template (template=0): the VM kind adopts it",
                r.vmid, r.node
            ));
        }
        _ => {}
    }
    let mut a = Adoption {
        gaps: Vec::new(),
        keys: read_config(obs, &r)?,
    };
    let what = format!("{} {} on {}", flavour.noun(), r.vmid, r.node);
    let pending = a.take_pending_note(obs);
    a.gaps.extend(pending);
    if let Some(pool) = &r.pool {
        // spec.pool names a Pool manifest (a reference); written here it would not validate
        // until that manifest exists, and leaving it out leaves the pool as it is.
        a.gaps.push(gap(
            crate::POOL_PATH,
            format!(
                "{what} is in pool {pool}; spec.pool is left out (it must name a Pool manifest of the cluster): adopt the pool with the Pool kind, then add `pool: {pool}`"
            ),
        ));
    }
    let status = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.get("status").and_then(Value::as_str).map(str::to_string));
    let manifest = a.build(flavour, &r, status.as_deref(), secrets)?;
    if let Err(diags) = crate::validate(flavour, &manifest, secrets) {
        let why: Vec<String> = diags
            .iter()
            .map(|d| format!("{}: {}", d.path, d.message))
            .collect();
        return Err(format!(
            "no valid manifest describes {what}: {}; write its manifest by hand",
            why.join("; ")
        ));
    }
    // Sorted by path (stable), so the gap report reads the same on every run.
    a.gaps.sort_by(|x, y| x.path.cmp(&y.path));
    Ok(Adopted {
        manifest,
        gaps: a.gaps,
    })
}

/// `metadata.name` for a PVE name: lower-case, every run of other characters one `-`,
/// trimmed of `-`, at most 63 characters; `vm-<vmid>` when nothing is left.
pub fn metadata_name(pve_name: Option<&str>, vmid: u32) -> String {
    let mut out = String::new();
    for c in pve_name.unwrap_or_default().chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut name: String = out.trim_matches('-').chars().take(MAX_NAME_LEN).collect();
    while name.ends_with('-') {
        name.pop();
    }
    if name.is_empty() {
        format!("vm-{vmid}")
    } else {
        name
    }
}

/// The config to adopt: the `/config` answer, or from `/pending` the applied values with the
/// pending ones laid over them (pending deletes removed).
fn read_config(obs: &Observation, r: &Resource) -> Result<BTreeMap<String, String>, String> {
    let find = |suffix: &str| obs.reads.iter().find(|x| x.call.path.ends_with(suffix));
    let failed = |x: &proxops_kind_sdk::model::Read| {
        let body: String = x.body.chars().take(200).collect();
        format!(
            "reading {} failed with HTTP {}: {}; adopt needs the guest's config",
            x.call.path,
            x.status,
            body.trim()
        )
    };
    if let Some(x) = find("/pending") {
        if x.status != 200 {
            return Err(failed(x));
        }
        let rows = pending_rows(&x.body)
            .map_err(|e| format!("the answer to {} is not what PVE sends: {e}", x.call.path))?;
        let mut keys = Config::from_pending(&rows).keys;
        for (k, p) in pending_entries(&rows) {
            if p.delete {
                keys.remove(&k);
            } else if let Some(v) = p.pending {
                keys.insert(k, v);
            }
        }
        return Ok(keys);
    }
    match find("/config") {
        Some(x) if x.status != 200 => Err(failed(x)),
        Some(x) => Config::from_json(&x.body)
            .map(|c| c.keys)
            .map_err(|e| format!("the answer to {} is not what PVE sends: {e}", x.call.path)),
        None => Err(format!(
            "the observation of VM {} on {} holds no config read; the host must run the reads observe asks for before adopt",
            r.vmid, r.node
        )),
    }
}

/// The live keys still to place, and the gaps so far.
struct Adoption {
    keys: BTreeMap<String, String>,
    gaps: Vec<Gap>,
}

fn gap(path: impl Into<String>, reason: impl Into<String>) -> Gap {
    Gap {
        path: path.into(),
        reason: reason.into(),
    }
}

/// Sorted by bus (scsi, virtio, sata, ide, then any other by name), then numerically by index.
fn slot_order(k: &str) -> (usize, String, u32) {
    const BUSES: &[&str] = &["scsi", "virtio", "sata", "ide"];
    match syntax::split_slot(k) {
        Some((b, n)) => (
            BUSES.iter().position(|x| *x == b).unwrap_or(BUSES.len()),
            b.to_string(),
            n,
        ),
        None => (BUSES.len(), k.to_string(), 0),
    }
}

impl Adoption {
    /// Gaps for the keys with a pending change (the manifest carries the pending value).
    fn take_pending_note(&self, obs: &Observation) -> Vec<Gap> {
        let Some(x) = obs
            .reads
            .iter()
            .find(|x| x.call.path.ends_with("/pending") && x.status == 200)
        else {
            return Vec::new();
        };
        let Ok(rows) = pending_rows(&x.body) else {
            return Vec::new();
        };
        pending_entries(&rows)
            .into_keys()
            .map(|k| {
                gap(
                    k,
                    "has a change pending until the guest's next reboot: adopt read the pending value (the manifest carries it where it models the key), so plan reports it as pending, not as drift (proxops does not reboot)",
                )
            })
            .collect()
    }

    /// The live keys `<bus><n>` with `n <= max`, in slot order.
    fn slots(&self, bus: &str, max: u32) -> Vec<String> {
        let mut keys: Vec<String> = self
            .keys
            .keys()
            .filter(|k| matches!(syntax::split_slot(k), Some((b, n)) if b == bus && n <= max))
            .cloned()
            .collect();
        keys.sort_by_key(|k| slot_order(k));
        keys
    }

    fn take(&mut self, key: &str) -> Option<String> {
        self.keys.remove(key)
    }

    fn gap(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.gaps.push(gap(path, reason));
    }

    /// Gaps for the tokens of `key` the manifest does not own (PVE keeps them verbatim).
    fn leftover(&mut self, key: &str, p: &PropString, owned: &[&str]) {
        for (k, v) in &p.items {
            if !owned.contains(&k.as_str()) {
                self.gap(
                    format!("{key}.{k}"),
                    format!(
                        "token `{k}={v}` is not modelled; PVE keeps it and plan leaves it as is"
                    ),
                );
            }
        }
    }

    fn boolean(&mut self, key: &str, field: &str) -> Option<bool> {
        let v = self.take(key)?;
        let b = parse_bool(&v);
        if b.is_none() {
            self.gap(key, format!("`{v}` is not a boolean; {field} left unowned"));
        }
        b
    }

    fn build(
        &mut self,
        flavour: Flavour,
        r: &Resource,
        status: Option<&str>,
        secrets: &dyn Secrets,
    ) -> Result<Value, String> {
        let mut spec = Map::new();
        spec.insert("node".into(), json!(r.node));
        spec.insert("vmid".into(), json!(r.vmid));
        if let Some(lock) = r.lock.clone().or_else(|| self.keys.get("lock").cloned()) {
            self.keys.remove("lock");
            self.gap(
                "lock",
                format!("{} ({lock})", gap_reason("lock").unwrap_or_default()),
            );
        }
        for k in PVE_MANAGED {
            self.keys.remove(*k);
        }
        if flavour == Flavour::Vm {
            let mut status = self.take_status(r, status);
            if let Some(ha) = self.take_ha(r, &mut status) {
                spec.insert("ha".into(), ha);
            }
            spec.insert("state".into(), json!(status));
        }
        // For a guest without a name PVE's listing says `VM <vmid>` (qemu-server `vmstatus`):
        // that is not a name the guest has.
        let listed = r.name.clone().filter(|n| *n != format!("VM {}", r.vmid));
        let pve_name = self.take("name").or(listed);
        let name = metadata_name(pve_name.as_deref(), r.vmid);
        match &pve_name {
            Some(n) => {
                spec.insert("pve-name".into(), json!(n));
            }
            None => self.gap(
                "name",
                format!("the guest has no PVE name: the manifest's name defaults to `{name}`, which the first apply writes"),
            ),
        }
        if let Some(desc) = self.take("description") {
            if desc.len() > 8192 {
                self.gap(
                    "description",
                    "longer than 8192 bytes (the manifest's limit); left unowned",
                );
            } else {
                spec.insert("pve-description".into(), json!(desc));
            }
        }
        let tags = self.take_tags(r.vmid);
        if !tags.is_empty() {
            spec.insert("tags".into(), json!(tags));
        }
        spec.insert("memory".into(), json!(self.take_memory()?));
        let (cpu, hidden) = self.take_cpu()?;
        spec.insert("cpu".into(), cpu);

        let mut hw = Map::new();
        self.take_machine(&mut hw);
        let ovmf = hw.get("bios").and_then(Value::as_str) == Some("ovmf");
        let q35 = hw.get("machine").and_then(Value::as_str) == Some("q35");
        self.take_efi_tpm(&mut hw, ovmf, q35);
        let networks = self.take_networks()?;
        let nic_slots: BTreeSet<u32> = networks
            .iter()
            .filter_map(|n| n.get("slot").and_then(Value::as_u64))
            .map(|n| n as u32)
            .collect();
        let disks = self.take_drives(&mut hw)?;
        spec.insert("disks".into(), Value::Array(disks));
        spec.insert("networks".into(), Value::Array(networks));
        self.take_pci(&mut hw);
        if !hw.is_empty() {
            spec.insert("hardware".into(), Value::Object(hw));
        }
        let options = self.take_options(hidden);
        if !options.is_empty() {
            spec.insert("options".into(), Value::Object(options));
        }
        let ci = self.take_cloud_init_data(&nic_slots, secrets);
        if !ci.is_empty() {
            spec.insert("cloud-init-data".into(), Value::Object(ci));
        }
        let extra = self.take_rest();
        if !extra.is_empty() {
            spec.insert("extra".into(), Value::Object(extra));
        }
        Ok(json!({
            "apiVersion": API_VERSION,
            "kind": flavour.kind(),
            "metadata": {"name": name},
            "spec": spec,
        }))
    }

    /// `spec.state` from the entry's `status`: running is started; anything else stopped.
    fn take_status(&mut self, r: &Resource, status: Option<&str>) -> &'static str {
        match status {
            _ if r.running => "started",
            Some("stopped") | None => "stopped",
            Some(other) => {
                self.gap(
                    "status",
                    format!("the guest is `{other}`: adopted as state: stopped, so plan leaves its power alone until it runs (then it would shut it down; set state: started to keep it running)"),
                );
                "stopped"
            }
        }
    }

    /// `spec.ha` from the host's `ha` entry: the state always, the other options where they
    /// differ from PVE's defaults. HA's requested state is the operator's intent, so a guest
    /// on its way there (HA asked to start it, or to stop it) is adopted in that state: the
    /// manifest must not contradict HA (validate refuses it).
    fn take_ha(&mut self, r: &Resource, status: &mut &'static str) -> Option<Value> {
        let Some(live) = &r.ha else {
            if let Some(state) = &r.hastate {
                self.gap(
                    "ha",
                    format!("the guest has HA state `{state}` but the host passed no HA resource entry; spec.ha not written (HA membership left unmanaged)"),
                );
            }
            return None;
        };
        let Some(state) = HaState::parse(live.state.as_str()) else {
            self.gap(
                "ha.state",
                format!("HA state `{}` is not one the manifest knows; spec.ha not written (HA membership left unmanaged)", live.state.as_str().unwrap_or_default()),
            );
            return None;
        };
        let wanted = match state {
            HaState::Started => Some("started"),
            HaState::Stopped | HaState::Disabled => Some("stopped"),
            HaState::Ignored => None,
        };
        if let Some(w) = wanted.filter(|w| w != status) {
            self.gap(
                "status",
                format!("the guest is {} but its HA resource asks for `{}`: adopted as state: {w}, which HA is bringing it to", if r.running { "running" } else { "not running" }, state.as_str()),
            );
            *status = w;
        }
        let mut ha = Map::new();
        ha.insert("state".into(), json!(state.as_str()));
        for (key, field) in [
            ("max_restart", "max-restart"),
            ("max_relocate", "max-relocate"),
        ] {
            let w = if key == "max_restart" {
                &live.max_restart
            } else {
                &live.max_relocate
            };
            match w.as_str() {
                None => {}
                Some(v) => match v.trim().parse::<u64>() {
                    Ok(n) if n == crate::desired::Ha::DEFAULT_TRIES => {}
                    Ok(n) if n <= u64::from(u32::MAX) => {
                        ha.insert(field.into(), json!(n));
                    }
                    _ => self.gap(format!("ha.{key}"), format!("`{v}` is not a count the manifest can state; left at PVE's default in spec.ha, so the first plan writes it")),
                },
            }
        }
        match live.failback.as_str().map(parse_bool) {
            None | Some(Some(true)) => {}
            Some(Some(false)) => {
                ha.insert("failback".into(), json!(false));
            }
            Some(None) => self.gap(
                "ha.failback",
                "not a boolean; left at PVE's default in spec.ha, so the first plan writes it",
            ),
        }
        if !crate::plan::ha_marked(live.comment.as_str(), r.vmid) {
            self.gap(
                "ha.comment",
                format!("HA resource vm:{} was not created by proxops: plan leaves it alone while it matches spec.ha, and reports a change as an anomaly. To let proxops change it, add `{}` to its comment", r.vmid, crate::ownership_mark(r.vmid)),
            );
        }
        Some(Value::Object(ha))
    }

    fn take_tags(&mut self, vmid: u32) -> Vec<String> {
        let live = self.take("tags");
        let mut out = Vec::new();
        for t in wire::tags(live.as_deref()) {
            if t == crate::OWNERSHIP_TAG {
                continue;
            }
            if let Some(n) = t.strip_prefix("proxops-") {
                if n != vmid.to_string() {
                    self.gap(
                        "tags",
                        format!("`{t}` is not this guest's ownership mark (`proxops-` tags are reserved for the marks; PVE copies them on clone and restore); dropped: the take-over only adds the ownership tags, so the apply after it removes this one"),
                    );
                }
                continue;
            }
            if syntax::is_tag(&t) {
                out.push(t);
            } else {
                self.gap("tags", format!("`{t}` is not a tag the manifest accepts; dropped: the take-over only adds the ownership tags, so the apply after it removes this one"));
            }
        }
        out
    }

    fn take_memory(&mut self) -> Result<String, String> {
        let Some(v) = self.take("memory") else {
            return Ok("512MiB".into()); // PVE's default
        };
        let mib = PropString::parse_with_default(&v, "current")
            .ok()
            .and_then(|p| p.bare)
            .and_then(|b| b.parse::<u64>().ok())
            .filter(|m| *m >= 16)
            .ok_or_else(|| format!("memory `{v}` is not a MiB count of at least 16"))?;
        Ok(format!("{mib}MiB"))
    }

    /// `spec.cpu` and the `hidden=` token (an option).
    fn take_cpu(&mut self) -> Result<(Value, Option<bool>), String> {
        let cores = match self.take("cores") {
            None => 1, // PVE's default
            Some(c) => c
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|c| (1..=4096).contains(c))
                .ok_or_else(|| format!("cores `{c}` is not a core count between 1 and 4096"))?,
        };
        let (cpu_type, hidden) = match self.take("cpu") {
            None => ("kvm64".to_string(), None), // PVE's default
            Some(v) => {
                let p = PropString::parse_with_default(&v, "cputype")
                    .map_err(|e| format!("cpu `{v}` cannot be read: {e:?}"))?;
                let t = p.bare.clone().unwrap_or_else(|| "kvm64".into());
                if t.contains([',', '=', ' ']) {
                    return Err(format!("cpu `{v}` has no CPU model the manifest can name"));
                }
                let hidden = p.get("hidden").and_then(parse_bool);
                self.leftover("cpu", &p, &["hidden"]);
                (t, hidden)
            }
        };
        Ok((json!({"type": cpu_type, "cores": cores}), hidden))
    }

    fn take_options(&mut self, hidden: Option<bool>) -> Map<String, Value> {
        let mut o = Map::new();
        for (key, field) in [
            ("onboot", "onboot"),
            ("protection", "protection"),
            ("acpi", "acpi"),
            ("tablet", "tablet"),
        ] {
            if let Some(b) = self.boolean(key, &format!("spec.options.{field}")) {
                o.insert(field.into(), json!(b));
            }
        }
        if let Some(v) = self.take("agent") {
            match PropString::parse_with_default(&v, "enabled").ok() {
                Some(p) if p.bare.as_deref().and_then(parse_bool).is_some() => {
                    o.insert(
                        "agent".into(),
                        json!(p.bare.as_deref().and_then(parse_bool)),
                    );
                    self.leftover("agent", &p, &[]);
                }
                _ => self.gap("agent", format!("`{v}` is not modelled; left unowned")),
            }
        }
        if let Some(s) = self.take("startup") {
            if syntax::is_startup(&s) {
                o.insert("startup".into(), json!(s));
            } else {
                self.gap("startup", format!("`{s}` is not modelled; left unowned"));
            }
        }
        if let Some(h) = self.take("hotplug") {
            if parse_hotplug(&h)
                .iter()
                .all(|f| HOTPLUG_FEATURES.contains(&f.as_str()))
            {
                o.insert("hotplug".into(), json!(h));
            } else {
                self.gap(
                    "hotplug",
                    format!("`{h}` names a feature the manifest does not know; left unowned"),
                );
            }
        }
        if let Some(b) = self.take("boot") {
            match wire::boot_order(Some(&b)) {
                Some(devs) if !devs.is_empty() && devs.iter().all(|d| syntax::is_boot_device(d)) => {
                    o.insert("boot-order".into(), json!(devs));
                }
                _ => self.gap("boot", format!("`{b}` is not an `order=` list the manifest can state (the legacy boot form); left unowned")),
            }
        }
        if let Some(h) = hidden {
            o.insert("hidden".into(), json!(h));
        }
        o
    }

    /// The keys left: gaps for those not to own, `spec.extra` for the rest.
    fn take_rest(&mut self) -> Map<String, Value> {
        let mut extra = Map::new();
        for (k, v) in std::mem::take(&mut self.keys) {
            if let Some(reason) = gap_reason(&k) {
                self.gap(k, reason);
                continue;
            }
            if let Some(("serial", _)) = syntax::split_slot(&k)
                && v != "socket"
            {
                self.gap(
                    k,
                    "not adopted: a host serial device needs root@pam; PVE keeps it unowned",
                );
                continue;
            }
            let key_ok = !k.is_empty()
                && k.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            let modelled = syntax::is_disk_key(&k)
                || matches!(
                    syntax::split_slot(&k),
                    Some(("net" | "hostpci" | "ipconfig", _))
                );
            if !key_ok || modelled {
                self.gap(
                    k,
                    format!("`{v}` is not a key the manifest can carry; left unowned"),
                );
                continue;
            }
            extra.insert(k, json!(v));
        }
        extra
    }
}
