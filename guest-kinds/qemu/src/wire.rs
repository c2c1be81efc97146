//! Desired values printed as PVE wire strings, and semantic comparison of the values PVE prints
//! back, so that PVE's normalisation (key order, MAC case, size units, default tokens, tag order)
//! never reads as drift.

use proxops_kind_sdk::propstring::{PropString, parse_bool, print_bool};
use proxops_kind_sdk::sets;
use proxops_kind_sdk::size;

use crate::desired::*;
use crate::keys::NIC_MODELS;

/// `true` -> `1`.
pub fn b(v: bool) -> String {
    print_bool(v).to_string()
}

/// A rate as PVE prints a number: integral values without a fraction.
pub fn rate(r: f64) -> String {
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// The PVE machine type for the manifest's `machine`. PVE has no `i440fx` type: its i440fx
/// machine is `pc` (or a pinned `pc-i440fx-<ver>`).
pub fn machine_type(m: &str) -> &str {
    if m == "i440fx" { "pc" } else { m }
}

/// The manifest family (`i440fx`/`q35`) of a live `machine` value (absent = PVE's default `pc`).
pub fn machine_family(live: Option<&str>) -> String {
    let t = live
        .and_then(|l| PropString::parse_with_default(l, "type").ok())
        .and_then(|p| p.bare)
        .unwrap_or_else(|| "pc".into());
    if t == "q35" || t.starts_with("pc-q35-") {
        "q35".into()
    } else if t == "pc" || t.starts_with("pc-") {
        "i440fx".into()
    } else {
        t
    }
}

/// The storage of a volume id (`local-lvm:vm-100-disk-0` -> `local-lvm`).
pub fn pool(volume: &str) -> &str {
    volume.split_once(':').map(|(s, _)| s).unwrap_or(volume)
}

/// A drive string read leniently: bare volume first (`file=` folded in).
pub fn drive(live: &str) -> PropString {
    PropString::parse_with_default(live, "file").unwrap_or_else(|_| PropString::with_bare(live))
}

/// Whether a drive holds (or is) a CD/DVD.
pub fn is_cdrom(d: &PropString) -> bool {
    d.get("media") == Some("cdrom") || matches!(d.bare.as_deref(), Some("none" | "cdrom"))
}

/// Whether a drive is a cloud-init volume.
pub fn is_cloudinit(d: &PropString) -> bool {
    d.bare.as_deref().is_some_and(|v| {
        v.split_once(':')
            .is_some_and(|(_, name)| name.contains("cloudinit"))
    })
}

/// The options a disk owns, as `(token, value)`; `ssd`/`iothread` false pin `0`.
pub fn disk_tokens(d: &Disk) -> Vec<(&'static str, String)> {
    let mut t = Vec::new();
    if let Some(v) = &d.aio {
        t.push(("aio", v.clone()));
    }
    if let Some(v) = &d.discard {
        t.push(("discard", v.clone()));
    }
    if let Some(v) = d.iothread {
        t.push(("iothread", b(v)));
    }
    if let Some(v) = d.ssd {
        t.push(("ssd", b(v)));
    }
    t
}

/// PVE's value for an absent disk token.
pub fn disk_token_default(token: &str) -> Option<&'static str> {
    match token {
        "discard" => Some("ignore"),
        "iothread" | "ssd" => Some("0"),
        _ => None,
    }
}

/// Whether two disk token values mean the same (booleans in any spelling).
pub fn token_eq(a: &str, b: &str) -> bool {
    match (parse_bool(a), parse_bool(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The create form of a disk: `<storage>:<GiB>` plus its options.
pub fn new_disk(d: &Disk) -> String {
    let mut p = PropString::with_bare(format!("{}:{}", d.storage, d.size_gib.unwrap_or(0)));
    for (k, v) in disk_tokens(d) {
        p.set(k, v);
    }
    p.canonical()
}

/// The create form of an image-seeded disk: `<storage>:0,import-from=<source>` plus its options
/// (PVE takes the size from the image and rejects a non-zero size with `import-from`).
pub fn import_disk(d: &Disk, source: &str) -> String {
    let mut p = PropString::with_bare(format!("{}:0", d.storage));
    p.set("import-from", source.to_string());
    for (k, v) in disk_tokens(d) {
        p.set(k, v);
    }
    p.canonical()
}

/// The live size of a drive in bytes, when printed.
pub fn drive_size(d: &PropString) -> Option<u64> {
    d.get("size").and_then(|s| size::parse_pve(s).ok())
}

/// A NIC as PVE reads it: model, MAC and the other tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveNic {
    /// Model.
    pub model: String,
    /// MAC, verbatim.
    pub mac: Option<String>,
    /// Other tokens in order.
    pub rest: PropString,
}

/// Read a `netN` value (`virtio=BC:..,bridge=vmbr0` or `model=virtio,macaddr=..`).
pub fn live_nic(s: &str) -> Option<LiveNic> {
    let mut p = PropString::parse(s).ok()?;
    let mut model = p.remove("model").or_else(|| p.bare.take());
    let mut mac = p.remove("macaddr");
    if model.is_none() {
        let pos = p
            .items
            .iter()
            .position(|(k, _)| NIC_MODELS.contains(&k.as_str()))?;
        let (m, a) = p.items.remove(pos);
        model = Some(m);
        mac = Some(a);
    }
    p.bare = None;
    Some(LiveNic {
        model: model?,
        mac,
        rest: p,
    })
}

/// Print a NIC the way PVE does: `<model>[=<MAC>]` then the other tokens sorted.
pub fn print_nic(model: &str, mac: Option<&str>, rest: &PropString) -> String {
    let mut items: Vec<(String, String)> = rest.items.clone();
    items.sort();
    let mut parts = vec![match mac {
        Some(m) => format!("{model}={m}"),
        None => model.to_string(),
    }];
    parts.extend(items.into_iter().map(|(k, v)| format!("{k}={v}")));
    parts.join(",")
}

/// The owned tokens of a NIC (besides model and MAC).
pub fn nic_tokens(n: &Nic) -> Vec<(&'static str, String)> {
    let mut t = vec![("bridge", n.bridge.clone())];
    if let Some(f) = n.firewall {
        t.push(("firewall", b(f)));
    }
    if let Some(r) = n.rate_limit {
        t.push(("rate", rate(r)));
    }
    if let Some(v) = n.vlan {
        t.push(("tag", v.to_string()));
    }
    t
}

/// The create form of a NIC.
pub fn new_nic(n: &Nic) -> String {
    let mut rest = PropString::new();
    for (k, v) in nic_tokens(n) {
        rest.set(k, v);
    }
    print_nic(&n.model, n.mac.as_deref(), &rest)
}

/// Whether two NIC token values mean the same.
pub fn nic_token_eq(token: &str, live: Option<&str>, desired: &str) -> bool {
    match token {
        "firewall" => token_eq(live.unwrap_or("0"), desired),
        "rate" => live.and_then(|l| l.parse::<f64>().ok()) == desired.parse::<f64>().ok(),
        _ => live == Some(desired),
    }
}

/// The create form of a PCI device.
pub fn new_pci(p: &PciDevice) -> String {
    let mut s = match (&p.device, &p.mapping) {
        (Some(d), _) => PropString::with_bare(d.clone()),
        (None, Some(m)) => {
            let mut s = PropString::default();
            s.set("mapping", m.clone());
            s
        }
        (None, None) => PropString::default(),
    };
    if let Some(e) = p.pcie {
        s.set("pcie", b(e));
    }
    s.canonical()
}

/// A PCI address compared without case and without the default `0000:` domain.
pub fn pci_eq(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let l = s.to_ascii_lowercase();
        l.strip_prefix("0000:").map(str::to_string).unwrap_or(l)
    };
    norm(a) == norm(b)
}

/// The create form of the EFI vars disk. `efitype` is `4m` unless pinned (what PVE recommends
/// and Secure Boot needs; PVE's own default `2m` is kept for old VMs only). `pre-enrolled-keys`
/// is written only when `secure-boot` is declared: omitted, it is not owned, and PVE's default
/// (no keys enrolled) applies.
pub fn new_efidisk(e: &EfiDisk) -> String {
    let mut p = PropString::with_bare(format!("{}:1", e.storage));
    p.set("efitype", e.template.clone().unwrap_or_else(|| "4m".into()));
    if let Some(on) = e.secure_boot {
        p.set("pre-enrolled-keys", b(on));
    }
    p.canonical()
}

/// The create form of the TPM state volume.
pub fn new_tpm(t: &Tpm) -> String {
    format!("{}:1,version={}", t.storage, t.version)
}

/// The CD/DVD value for an attached ISO volume (PVE requires `media=cdrom` for iso volumes).
pub fn iso_cdrom(volid: &str) -> String {
    format!("{volid},media=cdrom")
}

/// The CD/DVD value for `iso: none`.
pub fn empty_cdrom(c: &Cdrom) -> String {
    format!("none,media={}", c.media)
}

/// The `cpu` value for a desired CPU, keeping unowned live tokens (`flags`, ...).
pub fn cpu_value(d: &Desired, live: Option<&str>) -> String {
    let mut p = live
        .and_then(|l| PropString::parse_with_default(l, "cputype").ok())
        .unwrap_or_default();
    p.bare = Some(d.cpu.cpu_type.clone());
    match d.options.hidden {
        Some(true) => p.set("hidden", "1"),
        Some(false) => {
            p.remove("hidden");
        }
        None => {}
    }
    p.canonical()
}

/// Whether a live `cpu` satisfies the desired CPU (absent = PVE's default `kvm64`).
pub fn cpu_eq(d: &Desired, live: Option<&str>) -> bool {
    let p = live
        .and_then(|l| PropString::parse_with_default(l, "cputype").ok())
        .unwrap_or_default();
    let t = p.bare.clone().unwrap_or_else(|| "kvm64".into());
    let hidden = p.get("hidden").and_then(parse_bool).unwrap_or(false);
    t == d.cpu.cpu_type && d.options.hidden.is_none_or(|h| h == hidden)
}

/// `startup` as `(order, up, down)`.
pub fn startup(s: &str) -> Option<(Option<String>, Option<String>, Option<String>)> {
    let p = PropString::parse_with_default(s, "order").ok()?;
    Some((
        p.bare.clone(),
        p.get("up").map(str::to_string),
        p.get("down").map(str::to_string),
    ))
}

/// Tags of a live `tags` value, lower-cased, as a set.
pub fn tags(live: Option<&str>) -> Vec<String> {
    let live = live.unwrap_or_default();
    let lower = match live.bytes().any(|b| b.is_ascii_uppercase()) {
        true => std::borrow::Cow::Owned(live.to_ascii_lowercase()),
        false => std::borrow::Cow::Borrowed(live),
    };
    // Sorted and each once, as `sets::normalize` leaves a list.
    let mut tags = sets::split_list(&lower, &[';', ',', ' ']);
    tags.sort_unstable();
    tags.dedup();
    tags
}

/// Boot devices of a live `boot` value (`order=a;b`); `None` for the legacy form.
pub fn boot_order(live: Option<&str>) -> Option<Vec<String>> {
    let p = PropString::parse(live?).ok()?;
    Some(
        p.get("order")?
            .split(';')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nics() {
        for (input, model, mac, rest) in [
            (
                "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,tag=20",
                "virtio",
                Some("BC:24:11:5E:0A:1F"),
                "bridge=vmbr0,firewall=1,tag=20",
            ),
            (
                "model=e1000,macaddr=bc:24:11:00:00:01,bridge=vmbr1",
                "e1000",
                Some("bc:24:11:00:00:01"),
                "bridge=vmbr1",
            ),
            ("virtio,bridge=vmbr0", "virtio", None, "bridge=vmbr0"),
        ] {
            let n = live_nic(input).unwrap();
            assert_eq!(
                (
                    n.model.as_str(),
                    n.mac.as_deref(),
                    n.rest.to_string().as_str()
                ),
                (model, mac, rest),
                "{input}"
            );
        }
        let mut rest = PropString::parse("tag=20,bridge=vmbr0,firewall=1").unwrap();
        rest.set("mtu", "1");
        assert_eq!(
            print_nic("virtio", Some("BC:24:11:5E:0A:1F"), &rest),
            "virtio=BC:24:11:5E:0A:1F,bridge=vmbr0,firewall=1,mtu=1,tag=20"
        );
    }

    #[test]
    fn machines_and_pci() {
        for (live, fam) in [
            (None, "i440fx"),
            (Some("pc"), "i440fx"),
            (Some("pc-i440fx-9.2+pve1"), "i440fx"),
            (Some("q35"), "q35"),
            (Some("pc-q35-9.2"), "q35"),
            (Some("type=q35,viommu=intel"), "q35"),
        ] {
            assert_eq!(machine_family(live), fam, "{live:?}");
        }
        assert!(pci_eq("0000:01:00.0", "01:00.0"));
        assert!(pci_eq("0000:0A:00.0", "0000:0a:00.0"));
        assert!(!pci_eq("01:00.0", "01:00.1"));
    }

    #[test]
    fn rates_and_tags() {
        assert_eq!(rate(10.0), "10");
        assert_eq!(rate(12.5), "12.5");
        assert_eq!(tags(Some("db;prod;web")), vec!["db", "prod", "web"]);
        assert_eq!(tags(Some("Web,Prod db")), vec!["db", "prod", "web"]);
        assert_eq!(tags(Some("web;DB; web;;db")), vec!["db", "web"]);
        assert_eq!(tags(None), Vec::<String>::new());
        assert_eq!(
            boot_order(Some("order=scsi0;ide2;net0")),
            Some(vec!["scsi0".into(), "ide2".into(), "net0".into()])
        );
    }
}
