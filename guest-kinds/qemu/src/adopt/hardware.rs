//! Adopting the hardware: machine and firmware, the EFI and TPM state volumes, disks with the
//! cloud-init and CD/DVD drives, network interfaces and PCI passthrough.

use serde_json::{Map, Value, json};

use proxops_kind_sdk::propstring::{PropString, parse_bool};
use proxops_kind_sdk::size::{self, GIB};

use super::{Adoption, slot_order};
use crate::desired::Desired;
use crate::keys::{NIC_MODELS, SCSIHW, VGA_TYPES};
use crate::{syntax, wire};

impl Adoption {
    pub(super) fn take_machine(&mut self, hw: &mut Map<String, Value>) {
        if let Some(m) = self.take("machine") {
            let fam = wire::machine_family(Some(&m));
            if fam == "i440fx" || fam == "q35" {
                hw.insert("machine".into(), json!(fam));
                if let Ok(p) = PropString::parse_with_default(&m, "type") {
                    let bare = p.bare.clone().unwrap_or_default();
                    if bare != "pc" && bare != "q35" {
                        self.gap("machine", format!("the version pin `{bare}` is not modelled (the manifest says {fam}); PVE keeps it"));
                    }
                    self.leftover("machine", &p, &[]);
                }
            } else {
                self.gap(
                    "machine",
                    format!("machine `{m}` is neither i440fx nor q35; left unowned"),
                );
            }
        }
        if let Some(b) = self.take("bios") {
            if b == "seabios" || b == "ovmf" {
                hw.insert("bios".into(), json!(b));
            } else {
                self.gap("bios", format!("bios `{b}` is not modelled; left unowned"));
            }
        }
        if let Some(v) = self.take("vga") {
            let p = PropString::parse_with_default(&v, "type").unwrap_or_default();
            let t = p.bare.clone().unwrap_or_else(|| "std".into());
            if VGA_TYPES.contains(&t.as_str()) {
                hw.insert("display".into(), json!(t));
                self.leftover("vga", &p, &[]);
            } else {
                self.gap(
                    "vga",
                    format!("display `{v}` is not modelled; left unowned"),
                );
            }
        }
        if let Some(s) = self.take("serial0") {
            if s == "socket" || (s.starts_with("/dev/") && s.len() > 5) {
                hw.insert("serial0".into(), json!(s));
            } else {
                self.gap("serial0", format!("`{s}` is not modelled; left unowned"));
            }
        }
        if let Some(s) = self.take("sockets") {
            match s
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|s| (1..=64).contains(s))
            {
                Some(n) => {
                    hw.insert("sockets".into(), json!(n));
                }
                None => self.gap(
                    "sockets",
                    format!("`{s}` is not a socket count between 1 and 64; left unowned"),
                ),
            }
        }
        if let Some(n) = self.boolean("numa", "spec.hardware.numa") {
            hw.insert("numa".into(), json!(n));
        }
    }

    pub(super) fn take_efi_tpm(&mut self, hw: &mut Map<String, Value>, ovmf: bool, q35: bool) {
        if let Some(v) = self.take("efidisk0") {
            let drv = wire::drive(&v);
            let pool = wire::pool(drv.bare.as_deref().unwrap_or_default()).to_string();
            if !ovmf {
                self.gap(
                    "efidisk0",
                    "an EFI disk without bios: ovmf is not modelled; left unowned",
                );
            } else if !proxops_names::is_storage_id(&pool) {
                self.gap(
                    "efidisk0",
                    format!("`{v}` is not on a PVE storage; left unowned"),
                );
            } else {
                let mut e = Map::new();
                e.insert("storage".into(), json!(pool));
                let template = drv.get("efitype").filter(|t| *t == "2m" || *t == "4m");
                if let Some(t) = template {
                    e.insert("template".into(), json!(t));
                }
                if let Some(sb) = drv.get("pre-enrolled-keys").and_then(parse_bool) {
                    if sb && template.is_none_or(|t| t == "2m") {
                        self.gap("efidisk0.pre-enrolled-keys", "enrolled keys on 2m EFI vars cannot be stated (the manifest needs template 4m); left unowned");
                    } else {
                        e.insert(
                            "secure-boot".into(),
                            json!(if sb { "enabled" } else { "disabled" }),
                        );
                    }
                }
                self.leftover(
                    "efidisk0",
                    &drv,
                    &["efitype", "pre-enrolled-keys", "size", "ms-cert"],
                );
                hw.insert("efi-disk".into(), Value::Object(e));
            }
        }
        if let Some(v) = self.take("tpmstate0") {
            let drv = wire::drive(&v);
            let pool = wire::pool(drv.bare.as_deref().unwrap_or_default()).to_string();
            let version = drv.get("version").unwrap_or("v1.2").to_string(); // PVE's default
            if !(ovmf && q35) {
                self.gap(
                    "tpmstate0",
                    "a TPM without bios: ovmf and machine: q35 is not modelled; left unowned",
                );
            } else if !proxops_names::is_storage_id(&pool)
                || !(version == "v1.2" || version == "v2.0")
            {
                self.gap("tpmstate0", format!("`{v}` is not modelled; left unowned"));
            } else {
                hw.insert("tpm".into(), json!({"storage": pool, "version": version}));
                self.leftover("tpmstate0", &drv, &["version", "size"]);
            }
        }
    }

    /// Disks, the cloud-init drive and the CD/DVD drive (all on disk slots).
    pub(super) fn take_drives(
        &mut self,
        hw: &mut Map<String, Value>,
    ) -> Result<Vec<Value>, String> {
        let mut slots: Vec<String> = self
            .keys
            .keys()
            .filter(|k| syntax::is_disk_key(k))
            .cloned()
            .collect();
        slots.sort_by_key(|k| slot_order(k));
        let mut ci_on_ide2 = false;
        let mut cdroms = Vec::new();
        let mut disks = Vec::new();
        for slot in slots {
            let v = self.take(&slot).unwrap_or_default();
            let drv = wire::drive(&v);
            if wire::is_cloudinit(&drv) {
                let pool = wire::pool(drv.bare.as_deref().unwrap_or_default()).to_string();
                if slot == "ide2" && proxops_names::is_storage_id(&pool) {
                    ci_on_ide2 = true;
                    hw.insert(
                        "cloud-init".into(),
                        json!({"enabled": true, "storage": pool}),
                    );
                } else {
                    self.gap(&slot, format!("the cloud-init drive `{v}` is not on ide2, where the kind keeps it; left unowned (plan reports it only if the manifest enables cloud-init)"));
                }
            } else if wire::is_cdrom(&drv) {
                cdroms.push((slot, v, drv));
            } else if let Some(d) = self.disk(&slot, &v, &drv) {
                disks.push(d);
            }
        }
        let cd_slot = Desired::cdrom_slot(ci_on_ide2);
        for (slot, _, drv) in cdroms {
            match drv.bare.as_deref() {
                Some("none") if slot == cd_slot => {
                    let media = drv.get("media").unwrap_or("disk");
                    hw.insert("cdrom".into(), json!({"iso": "none", "media": media}));
                    self.leftover(&slot, &drv, &["media"]);
                }
                Some("none") => self.gap(&slot, format!("an empty CD/DVD drive on {slot}; the kind keeps it on {cd_slot}, so it is left unowned")),
                Some("cdrom") => self.gap(&slot, "the host's physical CD/DVD drive is passed through; not modelled, left unowned"),
                _ => self.gap(&slot, format!("the ISO `{}` is attached: adopt leaves a live ISO unowned (no cdrom block); declare spec.hardware.cdrom.iso with an ISO object to own it", drv.bare.as_deref().unwrap_or_default())),
            }
        }
        if let Some(hw_ctl) = self.take("scsihw") {
            match disks.first_mut().and_then(Value::as_object_mut) {
                Some(first) if SCSIHW.contains(&hw_ctl.as_str()) => {
                    first.insert("controller".into(), json!(hw_ctl));
                }
                _ => self.gap(
                    "scsihw",
                    format!("`{hw_ctl}` cannot be stated on a disk; left unowned"),
                ),
            }
        }
        if disks.is_empty() {
            return Err("the guest has no disk the manifest can declare (spec.disks needs one); see the gaps of its drives".into());
        }
        Ok(disks)
    }

    pub(super) fn disk(&mut self, slot: &str, v: &str, drv: &PropString) -> Option<Value> {
        let vol = drv.bare.clone().unwrap_or_default();
        let pool = wire::pool(&vol).to_string();
        if !vol.contains(':') || !proxops_names::is_storage_id(&pool) {
            self.gap(slot, format!("`{v}` is not a volume on a PVE storage (a passed-through device or path); left unowned, plan reports it as undeclared"));
            return None;
        }
        let Some(bytes) = wire::drive_size(drv) else {
            self.gap(
                slot,
                format!("`{v}` prints no size; left unowned, plan reports it as undeclared"),
            );
            return None;
        };
        if bytes < GIB {
            self.gap(slot, format!("`{v}` is smaller than 1GiB, the manifest's smallest disk; left unowned, plan reports it as undeclared"));
            return None;
        }
        if bytes % GIB != 0 {
            self.gap(format!("{slot}.size"), format!("{} is not a whole number of GiB; the manifest says {}GiB and plan reports that PVE cannot shrink the disk", size::format_human(bytes), bytes / GIB));
        }
        let mut d = Map::new();
        d.insert("interface".into(), json!(slot));
        d.insert("storage".into(), json!(pool));
        d.insert("size".into(), json!(format!("{}GiB", bytes / GIB)));
        let bus = syntax::split_slot(slot).map(|(b, _)| b).unwrap_or_default();
        if let Some(t) = drv.get("iothread") {
            match parse_bool(t) {
                Some(b) if bus == "scsi" || bus == "virtio" => {
                    d.insert("iothread".into(), json!(b));
                }
                _ => self.gap(
                    format!("{slot}.iothread"),
                    format!("`iothread={t}` is not modelled on {bus}; left unowned"),
                ),
            }
        }
        if let Some(t) = drv.get("discard") {
            if t == "on" || t == "ignore" {
                d.insert("discard".into(), json!(t));
            } else {
                self.gap(
                    format!("{slot}.discard"),
                    format!("`discard={t}` is not modelled; left unowned"),
                );
            }
        }
        if let Some(t) = drv.get("ssd") {
            match parse_bool(t) {
                Some(b) if bus != "virtio" => {
                    d.insert("ssd".into(), json!(b));
                }
                _ => self.gap(
                    format!("{slot}.ssd"),
                    format!("`ssd={t}` is not modelled on {bus}; left unowned"),
                ),
            }
        }
        if let Some(t) = drv.get("aio") {
            if ["native", "threads", "io_uring"].contains(&t) {
                d.insert("aio".into(), json!(t));
            } else {
                self.gap(
                    format!("{slot}.aio"),
                    format!("`aio={t}` is not modelled; left unowned"),
                );
            }
        }
        self.leftover(slot, drv, &["size", "iothread", "discard", "ssd", "aio"]);
        Some(Value::Object(d))
    }

    pub(super) fn take_networks(&mut self) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        for key in self.slots("net", 31) {
            let v = self.take(&key).unwrap_or_default();
            let n = syntax::split_slot(&key).map(|(_, n)| n).unwrap_or_default();
            // plan owns the NIC set and deletes an undeclared netN: a NIC the manifest cannot
            // state means no manifest.
            let l = wire::live_nic(&v).filter(|l| NIC_MODELS.contains(&l.model.as_str())).ok_or_else(|| {
                format!("{key} `{v}` has no NIC model the manifest can state; a manifest without it would delete it")
            })?;
            let bridge = l.rest.get("bridge").filter(|b| syntax::is_bridge(b)).ok_or_else(|| {
                format!("{key} `{v}` is on no bridge (the manifest requires one); a manifest without it would delete it")
            })?;
            let mut nic = Map::new();
            nic.insert("slot".into(), json!(n));
            nic.insert("model".into(), json!(l.model));
            nic.insert("bridge".into(), json!(bridge));
            match l.mac.as_deref() {
                Some(m) if syntax::is_unicast_mac(m) => {
                    nic.insert("mac".into(), json!(m.to_ascii_uppercase()));
                }
                Some(m) => self.gap(
                    format!("{key}.mac"),
                    format!("`{m}` is not a unicast MAC; left unpinned"),
                ),
                None => {}
            }
            if let Some(t) = l.rest.get("tag") {
                match t.parse::<u16>().ok().filter(|t| (1..=4094).contains(t)) {
                    Some(t) => {
                        nic.insert("vlan".into(), json!(t));
                    }
                    None => self.gap(
                        format!("{key}.tag"),
                        format!("`tag={t}` is not a VLAN 1-4094; left unowned"),
                    ),
                }
            }
            if let Some(r) = l.rest.get("rate") {
                match r.parse::<f64>().ok().filter(|r| r.is_finite() && *r >= 0.0) {
                    Some(r) => {
                        nic.insert("rate-limit".into(), json!(r));
                    }
                    None => self.gap(
                        format!("{key}.rate"),
                        format!("`rate={r}` is not a rate; left unowned"),
                    ),
                }
            }
            if let Some(f) = l.rest.get("firewall") {
                match parse_bool(f) {
                    Some(f) => {
                        nic.insert("firewall".into(), json!(f));
                    }
                    None => self.gap(
                        format!("{key}.firewall"),
                        format!("`firewall={f}` is not a boolean; left unowned"),
                    ),
                }
            }
            self.leftover(&key, &l.rest, &["bridge", "tag", "rate", "firewall"]);
            out.push(Value::Object(nic));
        }
        if out.is_empty() {
            return Err("the guest has no network interface (spec.networks needs one)".into());
        }
        Ok(out)
    }

    pub(super) fn take_pci(&mut self, hw: &mut Map<String, Value>) {
        let mut out = Vec::new();
        for key in self.slots("hostpci", 999) {
            let v = self.take(&key).unwrap_or_default();
            let n = syntax::split_slot(&key).map(|(_, n)| n).unwrap_or_default();
            let Ok(p) = PropString::parse_with_default(&v, "host") else {
                self.gap(
                    &key,
                    format!("`{v}` cannot be read; left unowned (plan reports it as undeclared)"),
                );
                continue;
            };
            let mut d = Map::new();
            d.insert("slot".into(), json!(n));
            match (p.bare.as_deref(), p.get("mapping")) {
                (None, Some(m)) if syntax::is_mapping_id(m) => {
                    d.insert("mapping".into(), json!(m));
                }
                (Some(dev), None) if syntax::is_pci_bdf(&dev.to_ascii_lowercase()) => {
                    d.insert("device".into(), json!(dev.to_ascii_lowercase()));
                }
                _ => {
                    self.gap(&key, format!("`{v}` is not one mapping or one PCI address; left unowned (plan reports it as undeclared)"));
                    continue;
                }
            }
            if let Some(e) = p.get("pcie").and_then(parse_bool) {
                d.insert("pcie".into(), json!(e));
            }
            self.leftover(&key, &p, &["mapping", "pcie"]);
            out.push(Value::Object(d));
        }
        if !out.is_empty() {
            hw.insert("pci-devices".into(), Value::Array(out));
        }
    }
}
