//! PVE's identifier grammars that both sides read: the host's sandbox, which holds every
//! placeholder of a proposed path to them, and the guest kinds, which check manifests and live
//! configs against them. One definition, so the two never disagree. No dependencies, so it
//! builds for wasm32-wasip2 and natively alike.

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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: fn(&str) -> bool, cases: &[(&str, bool)]) {
        for (s, ok) in cases {
            assert_eq!(f(s), *ok, "{s:?}");
        }
    }

    #[test]
    fn names_follow_pves_grammars() {
        check(
            is_node_name,
            &[
                ("pve01", true),
                ("pve-01", true),
                ("p", true),
                ("-pve", false),
                ("pve-", false),
                ("pve.01", false),
                ("", false),
                (&"a".repeat(64), false),
            ],
        );
        check(
            is_storage_id,
            &[
                ("local-lvm", true),
                ("ceph_1.x", true),
                ("Local", false),
                ("a", false),
                ("local-", false),
                ("9local", false),
            ],
        );
    }
}
