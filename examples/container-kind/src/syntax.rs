//! Syntax checks for the values a container manifest holds: storage ids, template volume ids,
//! host names, paths, MACs, IPv4 addresses and tags. Each returns why a value is wrong (so the
//! caller can put it next to the field path), or `None` when it is fine.

use std::net::Ipv4Addr;

/// Why `s` is not a PVE storage id (`[a-z][a-z0-9\-_.]*[a-z0-9]`).
pub fn storage_problem(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let ok = b.len() >= 2
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_' | b'.')
        });
    (!ok).then(|| format!("`{s}` is not a PVE storage id; use lower-case letters, digits, `-`, `_` and `.`, starting with a letter (e.g. `local-lvm`)"))
}

/// Archive suffixes PVE accepts for container templates.
pub const TEMPLATE_SUFFIXES: &[&str] =
    &[".tar", ".tar.gz", ".tgz", ".tar.xz", ".tar.zst", ".tar.bz2"];

/// Why `s` is not a container template volume `<storage>:vztmpl/<file>`.
pub fn ostemplate_problem(s: &str) -> Option<String> {
    let example = "e.g. `local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst`";
    let Some((storage, rest)) = s.split_once(':') else {
        return Some(format!(
            "`{s}` is not a template volume; write `<storage>:vztmpl/<file>`, {example}"
        ));
    };
    if let Some(p) = storage_problem(storage) {
        return Some(p);
    }
    let Some(file) = rest.strip_prefix("vztmpl/") else {
        return Some(format!(
            "`{s}` does not name a container template; the volume must be `{storage}:vztmpl/<file>`, {example}"
        ));
    };
    if file.is_empty() || file.contains('/') || file.starts_with('.') {
        return Some(format!(
            "`{file}` is not a template file name; name one file in the storage's vztmpl content, {example}"
        ));
    }
    if !TEMPLATE_SUFFIXES.iter().any(|x| file.ends_with(x)) {
        return Some(format!(
            "`{file}` is not a template archive; PVE reads {} files",
            TEMPLATE_SUFFIXES.join(", ")
        ));
    }
    None
}

/// Why `s` is not a host name PVE and DNS accept: dot-separated DNS labels (lower-case
/// letters, digits and inner `-`, at most 63 characters each), at most 253 characters.
pub fn hostname_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return Some("must not be empty".into());
    }
    if s.len() > 253 {
        return Some(format!("must be at most 253 characters, got {}", s.len()));
    }
    for label in s.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Some(format!(
                "`{s}` has a label of {} characters; each dot-separated part must have 1 to 63",
                label.len()
            ));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Some(format!(
                "`{s}` contains `{c}`; use lower-case letters, digits and `-` (DNS labels), separated by `.`"
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some(format!(
                "`{s}`: each label must start and end with a letter or digit"
            ));
        }
    }
    None
}

/// Whether `s` is a PVE node name (DNS name: labels of letters, digits and inner `-`).
pub fn is_node_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// Why `s` is not an absolute path PVE accepts for a mount point (no `.`/`..` segments).
pub fn path_problem(s: &str) -> Option<String> {
    if !s.starts_with('/') {
        return Some(format!("`{s}` is not an absolute path; start it with `/`"));
    }
    if s.split('/').any(|seg| seg == "." || seg == "..") {
        return Some(format!(
            "`{s}` contains `.` or `..` segments; write the path without them"
        ));
    }
    if s.contains(',') || s.contains('=') || s.chars().any(char::is_control) {
        return Some(format!(
            "`{s}` contains `,`, `=` or a control character, which PVE's property strings cannot carry"
        ));
    }
    None
}

/// Whether `s` is a unicast MAC address (`XX:XX:XX:XX:XX:XX`, any case, even first octet).
pub fn is_unicast_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
        && u8::from_str_radix(parts[0], 16).is_ok_and(|b| b & 1 == 0)
}

/// Whether `s` is an IPv4 address.
pub fn is_ipv4(s: &str) -> bool {
    s.parse::<Ipv4Addr>().is_ok()
}

/// Whether `s` is an IPv4 CIDR such as `192.168.0.50/24`.
pub fn is_ipv4_cidr(s: &str) -> bool {
    match s.split_once('/') {
        Some((a, p)) => {
            is_ipv4(a)
                && !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u8>().is_ok_and(|p| p <= 32)
        }
        None => false,
    }
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

/// Whether `s` is a PVE bridge id (`[-_.\w]+`).
pub fn is_bridge(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `mp3` -> 3, for `mp0` to `mp255`.
pub fn mp_slot(s: &str) -> Option<u32> {
    let n = s.strip_prefix("mp")?;
    if n.is_empty() || (n.len() > 1 && n.starts_with('0')) || !n.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    n.parse().ok().filter(|n| *n <= crate::MAX_MOUNT_POINT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f(input)` is `None` exactly when `ok`.
    fn check(f: fn(&str) -> Option<String>, cases: &[(&str, bool)]) {
        for (input, ok) in cases {
            assert_eq!(f(input).is_none(), *ok, "{input:?}: {:?}", f(input));
        }
    }

    #[test]
    fn templates() {
        check(
            ostemplate_problem,
            &[
                ("local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst", true),
                (
                    "nfs-tpl:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz",
                    true,
                ),
                ("local:vztmpl/x.tgz", true),
                ("local:iso/debian.iso", false),
                ("debian-12.tar.zst", false),
                ("Local:vztmpl/x.tar.gz", false),
                ("local:vztmpl/", false),
                ("local:vztmpl/a/b.tar.gz", false),
                ("local:vztmpl/debian.qcow2", false),
            ],
        );
    }

    #[test]
    fn hostnames_and_paths() {
        check(
            hostname_problem,
            &[
                ("web-01", true),
                ("web.lab.example", true),
                ("Web", false),
                ("-web", false),
                ("web..lab", false),
                ("web_1", false),
                ("", false),
            ],
        );
        check(
            path_problem,
            &[
                ("/data", true),
                ("/srv/www/html", true),
                ("data", false),
                ("/data/../etc", false),
                ("/a/./b", false),
                ("/a,b", false),
            ],
        );
        check(
            storage_problem,
            &[
                ("local-lvm", true),
                ("zfs.pool_1", true),
                ("Local", false),
                ("a", false),
            ],
        );
    }

    #[test]
    fn small_values() {
        for (s, ok) in [
            ("BC:24:11:AA:BB:CC", true),
            ("bc:24:11:aa:bb:cc", true),
            ("BD:24:11:AA:BB:CC", false),
            ("BC:24:11:AA:BB", false),
        ] {
            assert_eq!(is_unicast_mac(s), ok, "{s}");
        }
        for (s, ok) in [
            ("10.0.0.5/24", true),
            ("10.0.0.5/33", false),
            ("10.0.0.5", false),
            ("10.0.0.5/+4", false),
        ] {
            assert_eq!(is_ipv4_cidr(s), ok, "{s}");
        }
        for (s, want) in [
            ("mp0", Some(0)),
            ("mp255", Some(255)),
            ("mp256", None),
            ("mp01", None),
            ("mp", None),
            ("net0", None),
        ] {
            assert_eq!(mp_slot(s), want, "{s}");
        }
        assert!(is_tag("web") && is_tag("_x+y.z") && !is_tag("-x") && !is_tag(""));
        assert!(is_bridge("vmbr0") && !is_bridge("vmbr 0"));
        assert!(is_node_name("pve01") && is_node_name("PVE-1.lab") && !is_node_name("pve_1"));
    }
}
