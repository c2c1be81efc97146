//! Named PVE formats (`pve-qm-hostpci`, `urlencoded`, `mac-addr`, ...) and the value printers PVE applies on write (sizes, tags, property strings).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use serde_json::{Map, Value, json};

use crate::grammar::matches_pattern;

const PCI_ID: &str = r"(?:[a-fA-F0-9]{4,}:)?[a-fA-F0-9]{2}:[a-fA-F0-9]{2}(?:\.[a-fA-F0-9])?";

/// Property-string formats that PVE's API schema names (`format: pve-qm-...`) but does not
/// inline; their keys follow the `PVE::JSONSchema::register_format` calls in qemu-server's
/// `PVE/QemuServer.pm` and `PVE/QemuServer/Drive.pm`.
pub(crate) fn named_dict(name: &str) -> Option<&'static Map<String, Value>> {
    static DICTS: OnceLock<BTreeMap<&'static str, Value>> = OnceLock::new();
    let dicts = DICTS.get_or_init(|| {
        let hex_id = json!({"optional": 1, "type": "string", "pattern": "0x[0-9a-fA-F]{4}"});
        let mut m = BTreeMap::new();
        m.insert(
            "pve-qm-hostpci",
            json!({
                "host": {"default_key": 1, "optional": 1, "type": "string",
                         "pattern": format!("{PCI_ID}(?:;{PCI_ID})*")},
                "mapping": {"optional": 1, "type": "string", "format": "pve-configid"},
                "pcie": {"optional": 1, "type": "boolean"},
                "x-vga": {"optional": 1, "type": "boolean"},
                "rombar": {"optional": 1, "type": "boolean"},
                "romfile": {"optional": 1, "type": "string"},
                "mdev": {"optional": 1, "type": "string", "pattern": "[^/\\.:]+"},
                "vendor-id": hex_id.clone(),
                "device-id": hex_id.clone(),
                "sub-vendor-id": hex_id.clone(),
                "sub-device-id": hex_id,
                "driver": {"optional": 1, "type": "string", "enum": ["vfio", "keep"]},
                "legacy-igd": {"optional": 1, "type": "boolean"}
            }),
        );
        m.insert(
            "pve-qm-ipconfig",
            json!({
                "ip": {"optional": 1, "type": "string", "format": "pve-ipv4-config"},
                "gw": {"optional": 1, "type": "string", "format": "ipv4"},
                "ip6": {"optional": 1, "type": "string", "format": "pve-ipv6-config"},
                "gw6": {"optional": 1, "type": "string", "format": "ipv6"}
            }),
        );
        m.insert(
            "pve-qm-boot",
            json!({
                "legacy": {"default_key": 1, "optional": 1, "type": "string", "pattern": "[acdn]{1,4}"},
                "order": {"optional": 1, "type": "string", "format": "pve-qm-bootdev-list"}
            }),
        );
        m.insert(
            "pve-qm-smbios1",
            json!({
                "base64": {"optional": 1, "type": "boolean"},
                "family": {"optional": 1, "type": "string"},
                "manufacturer": {"optional": 1, "type": "string"},
                "product": {"optional": 1, "type": "string"},
                "serial": {"optional": 1, "type": "string"},
                "sku": {"optional": 1, "type": "string"},
                "uuid": {"optional": 1, "type": "string",
                         "pattern": "[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}"},
                "version": {"optional": 1, "type": "string"}
            }),
        );
        m.insert(
            "pve-qm-cicustom",
            json!({
                "meta": {"optional": 1, "type": "string", "format": "pve-volume-id"},
                "network": {"optional": 1, "type": "string", "format": "pve-volume-id"},
                "user": {"optional": 1, "type": "string", "format": "pve-volume-id"},
                "vendor": {"optional": 1, "type": "string", "format": "pve-volume-id"}
            }),
        );
        m.insert(
            "pve-vm-cpu-conf",
            json!({
                "cputype": {"default_key": 1, "optional": 1, "type": "string"},
                "flags": {"optional": 1, "type": "string",
                          "pattern": "(?:[+-][a-zA-Z0-9\\-_\\.]+;)*[+-][a-zA-Z0-9\\-_\\.]+"},
                "hidden": {"optional": 1, "type": "boolean"},
                "hv-vendor-id": {"optional": 1, "type": "string", "pattern": "[a-zA-Z0-9]{1,12}"},
                "phys-bits": {"optional": 1, "type": "string", "pattern": "(?:[89]|[1-5][0-9]|6[0-4]|host)"},
                "guest-phys-bits": {"optional": 1, "type": "integer", "minimum": 32, "maximum": 64},
                "reported-model": {"optional": 1, "type": "string"}
            }),
        );
        // pve-common `PVE::JSONSchema`'s `prune-backups` (backup retention).
        let keep = json!({"optional": 1, "type": "integer", "minimum": 1});
        m.insert(
            "prune-backups",
            json!({
                "keep-all": {"optional": 1, "type": "boolean"},
                "keep-last": keep.clone(),
                "keep-hourly": keep.clone(),
                "keep-daily": keep.clone(),
                "keep-weekly": keep.clone(),
                "keep-monthly": keep.clone(),
                "keep-yearly": keep
            }),
        );
        m
    });
    dicts.get(name).and_then(Value::as_object)
}

/// The rules of a named property-string format beyond its keys, on its parsed value
/// (`schema::check_format` parses it with [`named_dict`]).
pub(crate) fn check_parsed(name: &str, parsed: &BTreeMap<String, String>) -> Result<(), String> {
    match name {
        "pve-qm-hostpci" => {
            if parsed.contains_key("host") == parsed.contains_key("mapping") {
                Err("either 'host' or 'mapping' must be set.\n".to_string())
            } else {
                Ok(())
            }
        }
        "pve-qm-ipconfig" => check_ipconfig(parsed),
        // `validate_prune_backups`: `keep-all` alone, or only the other options.
        "prune-backups" => {
            let keep_all = parsed.get("keep-all").is_some_and(|v| v == "1");
            let others = parsed
                .iter()
                .any(|(k, v)| k != "keep-all" && v.parse::<u64>().is_ok_and(|n| n > 0));
            if keep_all && others {
                Err("keep-all cannot be set together with other options.\n".to_string())
            } else {
                Ok(())
            }
        }
        _ => Ok(()),
    }
}

/// Verifies a value against a named format that is not a property string (those are
/// `schema::check_format`'s, which parses them); `Err` is the validator's die text (with its
/// trailing newline).
pub(crate) fn check_named(name: &str, value: &str) -> Result<(), String> {
    if let Some(item) = name.strip_suffix("-list")
        && list_item_format(item)
    {
        for part in split_list(value) {
            check_named(item, part)?;
        }
        return Ok(());
    }
    if let Some(r) = crate::access::check_format(name, value) {
        return r;
    }
    let ok = match name {
        "pve-node" => matches_pattern("[a-zA-Z0-9]([a-zA-Z0-9\\-]*[a-zA-Z0-9])?", value),
        "pve-vmid" => matches_pattern("[1-9][0-9]{2,8}", value),
        "pve-storage-id" => matches_pattern("[a-z][a-z0-9\\-_.]*[a-z0-9]", value),
        "pve-configid" => matches_pattern("[a-z][a-z0-9_-]+", value),
        "pve-poolid" => return verify_poolname(value),
        // pve-common `PVE::CalendarEvent::pve_verify_calendar_event` (proxmox-time's parser).
        "pve-calendar-event" => {
            return proxops_names::calendar::check(value)
                .map_err(|e| format!("invalid calendar event '{value}' - {e}\n"));
        }
        // pve-manager `PVE::API2::Backup::verify_day_of_week`.
        "pve-day-of-week" => matches!(value, "mon" | "tue" | "wed" | "thu" | "fri" | "sat" | "sun"),
        "urlencoded" => matches_pattern("[-%a-zA-Z0-9_.!~*'()]*", value),
        "mac-addr" => matches_pattern("[a-fA-F0-9][02468aceACE](?::[a-fA-F0-9]{2}){5}", value),
        "dns-name" => matches_pattern(
            "(?:[a-zA-Z0-9](?:[a-zA-Z0-9\\-]*[a-zA-Z0-9])?)(?:\\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9\\-]*[a-zA-Z0-9])?))*",
            value,
        ),
        "disk-size" => parse_size(value).is_some(),
        "pve-volume-id" => parse_volume_id(value).is_some(),
        "pve-volume-id-or-qm-path" => {
            value == "none"
                || value == "cdrom"
                || value.starts_with('/')
                || parse_volume_id(value).is_some()
        }
        "pve-volume-id-or-absolute-path" => {
            value.starts_with('/') || parse_volume_id(value).is_some()
        }
        "pve-bridge-id" => matches_pattern("[-_.\\w\\d]+", value),
        "pve-hotplug-features" => hotplug_features(value).is_some(),
        "pve-tag" => matches_pattern("[a-zA-Z0-9_][a-zA-Z0-9_\\-+.]*", value),
        "pve-storage-content" => matches!(
            value,
            "images" | "rootdir" | "vztmpl" | "iso" | "backup" | "snippets" | "import" | "none"
        ),
        "pve-qm-bootdisk" => matches_pattern("(ide|sata|scsi|virtio)\\d+", value),
        "pve-qm-bootdev" => matches_pattern("(?:ide|sata|scsi|virtio|net|usb|hostpci)\\d+", value),
        "address" => value.parse::<std::net::IpAddr>().is_ok(),
        "ipv4" => value.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => value.parse::<Ipv6Addr>().is_ok(),
        "pve-ipv4-config" => value == "dhcp" || cidr_v4(value),
        "pve-ipv6-config" => value == "dhcp" || value == "auto" || cidr_v6(value),
        "pve-startup-order" => startup_order(value),
        // pve-ha-manager `PVE::HA::Tools`: `pve_verify_ha_resource_id`, `..._or_vm_id`, `pve_verify_ha_node`.
        "pve-ha-resource-id" => matches_pattern("[a-z]+:\\S+", value),
        "pve-ha-resource-or-vm-id" => matches_pattern("(?:[a-z]+:\\S+|\\d+)", value),
        "pve-ha-node" => matches_pattern(
            "(?:[a-zA-Z0-9](?:[a-zA-Z0-9\\-]*[a-zA-Z0-9])?)(?::\\d+)?",
            value,
        ),
        "pve-task-status-type" => ["ok", "error", "warning", "unknown"]
            .iter()
            .any(|s| value.eq_ignore_ascii_case(s)),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    Err(match name {
        "pve-node" => "value does not look like a valid node name\n".to_string(),
        "pve-day-of-week" => format!("invalid day '{value}'\n"),
        "pve-vmid" => "value does not look like a valid VM ID\n".to_string(),
        "pve-task-status-type" => format!("invalid status '{value}'\n"),
        "pve-ha-resource-id" | "pve-ha-resource-or-vm-id" => {
            "value does not look like a valid ha resource id\n".to_string()
        }
        "pve-ha-node" => "value does not look like a valid ha node\n".to_string(),
        "pve-storage-id" => format!("storage ID '{value}' contains illegal characters\n"),
        "pve-configid" => format!("invalid configuration ID '{value}'\n"),
        "urlencoded" => format!("invalid urlencoded string: {value}\n"),
        "mac-addr" => "value does not look like a valid unicast MAC address\n".to_string(),
        "dns-name" => "value does not look like a valid DNS name\n".to_string(),
        "disk-size" => format!("value '{value}' is not a valid disk size\n"),
        "pve-volume-id" => format!("unable to parse volume ID '{value}'\n"),
        "pve-volume-id-or-qm-path" | "pve-volume-id-or-absolute-path" => {
            format!("unable to parse volume ID '{value}'\n")
        }
        "pve-bridge-id" => format!("'{value}' is not a valid bridge ID\n"),
        "pve-hotplug-features" => format!("invalid hotplug feature '{value}'\n"),
        "pve-tag" => "invalid characters in tag\n".to_string(),
        "pve-storage-content" => format!("invalid content type '{value}'\n"),
        "pve-qm-bootdev" => format!("invalid boot device '{value}'\n"),
        "pve-startup-order" => "unable to parse startup options\n".to_string(),
        "ipv4" => "value does not look like a valid IPv4 address\n".to_string(),
        "ipv6" => "value does not look like a valid IPv6 address\n".to_string(),
        "address" => format!("value does not look like a valid address: {value}\n"),
        "pve-ipv4-config" => {
            "value does not look like a valid ipv4 network configuration\n".to_string()
        }
        "pve-ipv6-config" => {
            "value does not look like a valid ipv6 network configuration\n".to_string()
        }
        other => format!("value does not match format '{other}'\n"),
    })
}

/// pve-access-control `PVE::AccessControl::verify_poolname`: at most three `/`-separated levels (Perl's `split`
/// drops trailing empty fields), each of letters, digits, `.`, `-` and `_`.
pub(crate) fn verify_poolname(value: &str) -> Result<(), String> {
    let mut fields: Vec<&str> = value.split('/').collect();
    while fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    if fields.len() > 3 {
        return Err(format!(
            "pool name '{value}' nested too deeply (max levels = 3)\n"
        ));
    }
    if !matches_pattern("[A-Za-z0-9\\.\\-_]+(?:/[A-Za-z0-9\\.\\-_]+){0,2}", value) {
        return Err(format!("pool name '{value}' contains invalid characters\n"));
    }
    Ok(())
}

fn list_item_format(item: &str) -> bool {
    matches!(
        item,
        "pve-configid"
            | "pve-userid"
            | "pve-groupid"
            | "pve-roleid"
            | "pve-priv"
            | "pve-tokenid"
            | "pve-ha-resource-id"
            | "pve-ha-node"
            | "pve-tag"
            | "pve-storage-content"
            | "address"
            | "pve-qm-bootdev"
            | "pve-node"
            | "pve-vmid"
            | "pve-storage-id"
            | "pve-task-status-type"
            | "pve-day-of-week"
    )
}

/// PVE's `split_list`: separators are `,`, `;`, whitespace and NUL.
pub(crate) fn split_list(value: &str) -> Vec<&str> {
    value
        .split(|c: char| c == ',' || c == ';' || c.is_whitespace() || c == '\0')
        .filter(|s| !s.is_empty())
        .collect()
}

fn check_ipconfig(parsed: &BTreeMap<String, String>) -> Result<(), String> {
    for (ip, gw) in [("ip", "gw"), ("ip6", "gw6")] {
        if parsed.contains_key(gw) {
            match parsed.get(ip).map(String::as_str) {
                None => {
                    return Err("gateway specified without specifying an IP address\n".to_string());
                }
                Some("dhcp") | Some("auto") => {
                    return Err(
                        "gateways are only supported with an explicit IP address\n".to_string()
                    );
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

fn cidr_v4(value: &str) -> bool {
    let Some((ip, bits)) = value.split_once('/') else {
        return false;
    };
    ip.parse::<Ipv4Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 32)
}

fn cidr_v6(value: &str) -> bool {
    let Some((ip, bits)) = value.split_once('/') else {
        return false;
    };
    ip.parse::<Ipv6Addr>().is_ok() && bits.parse::<u8>().is_ok_and(|b| b <= 128)
}

fn startup_order(value: &str) -> bool {
    for part in value.split(',') {
        let (k, v) = match part.split_once('=') {
            Some((k, v)) => (k, v),
            None => ("order", part),
        };
        if !matches!(k, "order" | "up" | "down") || v.is_empty() {
            return false;
        }
        if !v.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    true
}

/// The hotplug feature set, or `None` when invalid. `1` is the default set, `0` is empty.
pub(crate) fn hotplug_features(value: &str) -> Option<Vec<String>> {
    match value {
        "1" => return Some(vec!["network".into(), "disk".into(), "usb".into()]),
        "0" => return Some(Vec::new()),
        _ => {}
    }
    let mut out = Vec::new();
    for f in value.split(',') {
        if !matches!(
            f,
            "network" | "disk" | "cpu" | "memory" | "usb" | "cloudinit"
        ) {
            return None;
        }
        out.push(f.to_string());
    }
    Some(out)
}

/// Splits `storage:volname`; `None` when it is not a PVE volume id.
pub(crate) fn parse_volume_id(value: &str) -> Option<(&str, &str)> {
    let (storage, name) = value.split_once(':')?;
    if name.is_empty() || !matches_pattern("[a-z][a-z0-9\\-_.]*[a-z0-9]", storage) {
        return None;
    }
    Some((storage, name))
}

/// PVE's `parse_size`: a number with an optional K/M/G/T (or KiB/MiB/...) suffix, no suffix meaning bytes.
pub(crate) fn parse_size(value: &str) -> Option<u64> {
    let v = value.trim();
    let (num, unit) = match v.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(pos) => v.split_at(pos),
        None => (v, ""),
    };
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return None;
    }
    let mult: f64 = match unit {
        "" => 1.0,
        "K" | "KiB" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "T" | "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    Some((n * mult) as u64)
}

/// PVE's `format_size`: the largest of T, G, M, K that divides the byte count exactly, else plain bytes.
pub(crate) fn format_size(bytes: u64) -> String {
    const K: u64 = 1024;
    if bytes == 0 {
        return "0".to_string();
    }
    for (unit, div) in [
        ("T", K * K * K * K),
        ("G", K * K * K),
        ("M", K * K),
        ("K", K),
    ] {
        if bytes.is_multiple_of(div) {
            return format!("{}{unit}", bytes / div);
        }
    }
    bytes.to_string()
}

/// The `format` PVE lists for a container template (`Plugin.pm`'s content listing): `tar` for
/// `name.tar`, else `t` and the compression (`tgz`, `txz`, `tzst`, `tbz2`).
pub(crate) fn vztmpl_format(name: &str) -> String {
    match name.rsplit_once(".tar") {
        Some((_, "")) => "tar".to_string(),
        Some((_, ext)) if ext.starts_with('.') => format!("t{}", &ext[1..]),
        _ => "tgz".to_string(),
    }
}

/// Tags as PVE stores them: lower-cased, de-duplicated, sorted, `;`-joined.
pub(crate) fn normalize_tags(value: &str) -> String {
    let mut tags: Vec<String> = split_list(value).iter().map(|t| t.to_lowercase()).collect();
    tags.sort();
    tags.dedup();
    tags.join(";")
}

/// Prints a parsed property string the way PVE's `print_property_string` does:
/// the default key's bare value first, then every other key sorted.
pub(crate) fn print_property_string(
    default_key: Option<&str>,
    map: &BTreeMap<String, String>,
) -> String {
    let mut parts = Vec::new();
    if let Some(dk) = default_key
        && let Some(v) = map.get(dk)
    {
        parts.push(v.clone());
    }
    for (k, v) in map {
        if Some(k.as_str()) == default_key {
            continue;
        }
        parts.push(format!("{k}={v}"));
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_like_pve() {
        assert_eq!(format_size(34359738368), "32G");
        assert_eq!(format_size(2361393152), "2252M");
        assert_eq!(format_size(1 << 40), "1T");
        assert_eq!(format_size(1025), "1025");
        assert_eq!(parse_size("0.5G"), Some(512 * 1024 * 1024));
        assert_eq!(parse_size("12"), Some(12));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn container_template_formats_follow_the_compression() {
        for (name, format) in [
            ("vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", "tzst"),
            ("vztmpl/alpine-3.20-default_20240908_amd64.tar.xz", "txz"),
            ("vztmpl/centos-7-default.tar.gz", "tgz"),
            ("vztmpl/old.tar.bz2", "tbz2"),
            ("vztmpl/plain.tar", "tar"),
        ] {
            assert_eq!(vztmpl_format(name), format, "{name}");
        }
    }

    #[test]
    fn tags_are_normalised() {
        assert_eq!(normalize_tags("web,Prod db"), "db;prod;web");
        assert_eq!(normalize_tags("k8s;Prod,k8s"), "k8s;prod");
    }

    #[test]
    fn named_formats() {
        // Through the one entry the parameter checks use: property strings parsed there.
        let check = |name: &str, value: &str| crate::schema::check_format(name, value, "p");
        assert!(check("urlencoded", "ssh-rsa AAA").is_err());
        assert!(check("urlencoded", "ssh-rsa%20AAA").is_ok());
        assert!(check("pve-qm-hostpci", "0000:01:00.0,pcie=1").is_ok());
        assert!(check("pve-qm-hostpci", "pcie=1").is_err());
        assert!(check("pve-qm-ipconfig", "ip=dhcp,gw=10.0.0.1").is_err());
        assert!(check("pve-qm-ipconfig", "ip=10.0.0.5/24,gw=10.0.0.1").is_ok());
        assert!(check("pve-qm-boot", "order=scsi0;net0").is_ok());
        assert!(check("pve-qm-boot", "order=scsi0;foo").is_err());
        assert!(check("pve-tag-list", "a;b,c").is_ok());
        assert!(check("pve-tag-list", "a;b!").is_err());
    }
}
