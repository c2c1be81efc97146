//! Small hand-written matchers for PVE value syntaxes (no regex engine in the guests): slots,
//! MACs, PCI addresses, storage ids, DNS names, tags, IP addresses.

/// Disk buses PVE 9.2 accepts, with their highest index.
pub const DISK_BUSES: &[(&str, u32)] = &[("ide", 3), ("sata", 5), ("scsi", 30), ("virtio", 15)];

/// Split `scsi10` into `("scsi", 10)`.
pub fn split_slot(s: &str) -> Option<(&str, u32)> {
    let pos = s.find(|c: char| c.is_ascii_digit())?;
    let (bus, n) = s.split_at(pos);
    if bus.is_empty()
        || (n.len() > 1 && n.starts_with('0'))
        || !n.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some((bus, n.parse().ok()?))
}

/// Why `slot` is not a PVE disk slot, or `None`.
pub fn disk_slot_problem(slot: &str) -> Option<String> {
    let Some((bus, n)) = split_slot(slot) else {
        return Some(format!(
            "`{slot}` is not a disk slot; expected a bus and an index such as scsi0, sata1, virtio0 or ide0"
        ));
    };
    if bus == "nvme" {
        return Some(format!(
            "`{slot}`: PVE 9.2 has no nvme disk bus; use scsi, sata, virtio or ide"
        ));
    }
    match DISK_BUSES.iter().find(|(b, _)| *b == bus) {
        None => Some(format!(
            "`{slot}` has unknown bus `{bus}`; expected scsi, sata, virtio or ide"
        )),
        Some((_, max)) if n > *max => Some(format!(
            "`{slot}`: {bus} slots go from {bus}0 to {bus}{max}"
        )),
        Some(_) => None,
    }
}

/// Whether `key` is a disk slot key (`scsi3`, `ide2`, ...): what [`disk_slot_problem`]
/// accepts, without writing the reason for the keys it does not (plan asks this of every
/// key of the live config).
pub fn is_disk_key(key: &str) -> bool {
    split_slot(key).is_some_and(|(bus, n)| DISK_BUSES.iter().any(|(b, max)| *b == bus && n <= *max))
}

/// Whether `s` is a unicast MAC (`^[a-f0-9][02468ace](:[a-f0-9]{2}){5}$`, any case).
pub fn is_unicast_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6
        || parts
            .iter()
            .any(|p| p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return false;
    }
    let second = parts[0].as_bytes()[1].to_ascii_lowercase();
    b"02468ace".contains(&second)
}

/// Whether `s` is a PVE `pve-configid` (resource mapping ids use it): a letter, then at least
/// one letter, digit, `_` or `-`.
pub fn is_mapping_id(s: &str) -> bool {
    let mut b = s.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.len() >= 2
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Whether `s` (already lower-cased) is a PCI address PVE accepts:
/// `([a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(\.[a-f0-9])?`.
pub fn is_pci_bdf(s: &str) -> bool {
    let hex = |p: &str, n: usize| {
        p.len() == n && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let (rest, func) = match s.split_once('.') {
        Some((r, f)) => (r, Some(f)),
        None => (s, None),
    };
    if let Some(f) = func
        && !hex(f, 1)
    {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    match parts.as_slice() {
        [bus, slot] => hex(bus, 2) && hex(slot, 2),
        [domain, bus, slot] => {
            domain.len() >= 4 && hex(domain, domain.len()) && hex(bus, 2) && hex(slot, 2)
        }
        _ => false,
    }
}

/// Whether `s` matches PVE's `dns-name` format (labels of letters, digits and inner `-`).
pub fn is_dns_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Whether `s` (lower-cased) is a PVE tag (`[a-z0-9_][a-z0-9_\-+.]*`).
pub fn is_tag(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit() || b[0] == b'_')
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'+' | b'.')
        })
}

/// Whether `s` is a PVE bridge id (`[-_.\w\d]+`).
pub fn is_bridge(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Whether `s` is an IPv4 address.
pub fn is_ipv4(s: &str) -> bool {
    s.parse::<std::net::Ipv4Addr>().is_ok()
}

/// Whether `s` is an IP address (v4 or v6).
pub fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
}

/// Whether `s` is an IPv4 CIDR such as `192.168.0.50/24`.
pub fn is_ipv4_cidr(s: &str) -> bool {
    match s.split_once('/') {
        Some((a, p)) => is_ipv4(a) && p.parse::<u8>().is_ok_and(|p| p <= 32) && !p.starts_with('+'),
        None => false,
    }
}

/// Whether `s` is a PVE `startup` value: `[[order=]\d+][,up=\d+][,down=\d+]`.
pub fn is_startup(s: &str) -> bool {
    let num = |v: &str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
    !s.is_empty()
        && s.split(',')
            .enumerate()
            .all(|(i, item)| match item.split_once('=') {
                Some(("order" | "up" | "down", v)) => num(v),
                None => i == 0 && num(item),
                _ => false,
            })
}

/// Whether `s` is a boot device name PVE accepts in `boot: order=`.
pub fn is_boot_device(s: &str) -> bool {
    if is_disk_key(s) {
        return true;
    }
    match split_slot(s) {
        Some(("net", n)) => n <= 31,
        Some(("hostpci", n)) => n <= 15,
        Some(("usb", n)) => n <= 14,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_names::is_storage_id;

    fn check(f: fn(&str) -> bool, cases: &[(&str, bool)]) {
        for (input, want) in cases {
            assert_eq!(f(input), *want, "{input:?}");
        }
    }

    #[test]
    fn matchers() {
        check(
            is_unicast_mac,
            &[
                ("BC:24:11:AA:BB:CC", true),
                ("bc:24:11:aa:bb:cc", true),
                ("01:24:11:aa:bb:cc", false),
                ("BC:24:11:AA:BB", false),
                ("BC-24-11-AA-BB-CC", false),
                ("BC:24:11:AA:BB:CG", false),
            ],
        );
        check(
            is_pci_bdf,
            &[
                ("0000:01:00.0", true),
                ("01:00", true),
                ("01:00.1", true),
                ("10000:01:00.0", true),
                ("000:01:00.0", false),
                ("01:00.10", false),
                ("1:00.0", false),
                ("0000:0g:00.0", false),
            ],
        );
        check(
            is_storage_id,
            &[
                ("local-lvm", true),
                ("local", true),
                ("Local", false),
                ("a", false),
                ("ceph_1.x", true),
            ],
        );
        check(
            is_dns_name,
            &[
                ("web-01", true),
                ("Web01.lab", true),
                ("web_01", false),
                ("-a", false),
                ("", false),
            ],
        );
        check(
            is_tag,
            &[
                ("proxops", true),
                ("k8s", true),
                ("_x", true),
                ("a+b.c-d", true),
                ("-a", false),
                ("a b", false),
            ],
        );
        check(
            is_ipv4_cidr,
            &[
                ("192.168.0.50/24", true),
                ("10.0.0.1/33", false),
                ("10.0.0.1", false),
                ("::1/64", false),
            ],
        );
        check(
            is_startup,
            &[
                ("order=10", true),
                ("10", true),
                ("order=1,up=30,down=60", true),
                ("up=x", false),
                ("", false),
                ("foo=1", false),
            ],
        );
        check(
            is_boot_device,
            &[
                ("scsi0", true),
                ("net0", true),
                ("ide2", true),
                ("net32", false),
                ("cdrom", false),
            ],
        );
        check(
            is_bridge,
            &[("vmbr0", true), ("vmbr0.10", true), ("a b", false)],
        );
    }

    #[test]
    fn disk_slots() {
        for (slot, want) in [
            ("scsi0", None),
            ("scsi30", None),
            ("virtio15", None),
            ("sata5", None),
            ("ide3", None),
            (
                "scsi31",
                Some("`scsi31`: scsi slots go from scsi0 to scsi30"),
            ),
            (
                "nvme0",
                Some("`nvme0`: PVE 9.2 has no nvme disk bus; use scsi, sata, virtio or ide"),
            ),
            (
                "usb0",
                Some("`usb0` has unknown bus `usb`; expected scsi, sata, virtio or ide"),
            ),
            (
                "scsi",
                Some(
                    "`scsi` is not a disk slot; expected a bus and an index such as scsi0, sata1, virtio0 or ide0",
                ),
            ),
            (
                "scsi01",
                Some(
                    "`scsi01` is not a disk slot; expected a bus and an index such as scsi0, sata1, virtio0 or ide0",
                ),
            ),
        ] {
            assert_eq!(disk_slot_problem(slot).as_deref(), want, "{slot}");
            assert_eq!(is_disk_key(slot), want.is_none(), "{slot}");
        }
    }
}
