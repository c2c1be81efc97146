//! PVE's identifier grammars that both sides read: the host's sandbox, which holds every
//! placeholder of a proposed path to them, and the guest kinds, which check manifests and live
//! configs against them. One definition, so the two never disagree. No dependencies, so it
//! builds for wasm32-wasip2 and natively alike.

pub mod calendar;
pub mod civil;
pub mod firewall;

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

/// proxops's mark on a named PVE object it created (a pool, an HA rule, a backup job): the
/// token `proxops:<id>` in the object's `comment`, bound to the object's own id so that a
/// comment copied to another object does not carry ownership with it.
pub fn named_mark(id: &str) -> String {
    format!("proxops:{id}")
}

/// Whether `comment` carries [`named_mark`] of `id` as a token of its own: not inside a
/// longer id (`proxops:web` does not mark `web-2`, nor does `proxops:web-2` mark `web`).
pub fn has_named_mark(comment: &str, id: &str) -> bool {
    let mark = named_mark(id);
    // `@` and `!` belong to user and token ids (`deploy@pve`, `deploy@pve!ci`).
    let is_id_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@' | '!');
    comment.match_indices(&mark).any(|(at, _)| {
        let before = comment[..at].chars().next_back();
        let after = comment[at + mark.len()..].chars().next();
        !before.is_some_and(is_id_char) && !after.is_some_and(is_id_char)
    })
}

/// The `comment` PVE gets for a named object: the manifest's comment with [`named_mark`]
/// appended (`<comment> (proxops:<id>)`), or the mark alone; a comment that already carries
/// the mark is taken as it is.
pub fn marked_comment(id: &str, comment: Option<&str>) -> String {
    let mark = named_mark(id);
    match comment {
        None | Some("") => mark,
        Some(c) if has_named_mark(c, id) => c.to_string(),
        Some(c) => format!("{c} ({mark})"),
    }
}

/// The manifest's comment for a live `comment`: [`marked_comment`] undone where it can be
/// (`<c> (proxops:<id>)` gives `<c>`, the mark alone gives none); any other comment is kept
/// whole, which [`marked_comment`] gives back unchanged.
pub fn unmarked_comment(id: &str, live: &str) -> Option<String> {
    let mark = named_mark(id);
    if live.is_empty() || live == mark {
        return None;
    }
    if let Some(c) = live.strip_suffix(&format!(" ({mark})"))
        && !c.is_empty()
        && !has_named_mark(c, id)
    {
        return Some(c.to_string());
    }
    Some(live.to_string())
}

#[cfg(test)]
mod mark_tests {
    use super::*;

    /// A manifest's comment survives the round trip through PVE's comment, whatever it holds.
    #[test]
    fn a_marked_comment_round_trips() {
        for (comment, pve) in [
            (None, "proxops:web"),
            (Some("web tier"), "web tier (proxops:web)"),
            (Some("proxops:web first"), "proxops:web first"),
            (Some("(proxops:web)"), "(proxops:web)"),
            (
                Some("tier (proxops:web-2)"),
                "tier (proxops:web-2) (proxops:web)",
            ),
        ] {
            assert_eq!(marked_comment("web", comment), pve, "{comment:?}");
            let back = unmarked_comment("web", pve);
            assert_eq!(
                marked_comment("web", back.as_deref()),
                pve,
                "{comment:?} -> {back:?}"
            );
        }
        assert_eq!(
            unmarked_comment("web", "web tier (proxops:web)").as_deref(),
            Some("web tier")
        );
        assert_eq!(unmarked_comment("web", "proxops:web"), None);
        assert_eq!(
            unmarked_comment("web", "by hand").as_deref(),
            Some("by hand")
        );
    }

    #[test]
    fn a_mark_names_its_object_only() {
        for (comment, id, marked) in [
            ("proxops:web", "web", true),
            ("web pool (proxops:web)", "web", true),
            ("proxops:web; more", "web", true),
            ("proxops:web-2", "web", false),
            ("proxops:web", "web-2", false),
            ("xproxops:web", "web", false),
            ("proxops:prefer-pve02", "prefer-pve02", true),
            ("CI (proxops:deploy@pve)", "deploy@pve", true),
            ("proxops:deploy@pve!ci", "deploy@pve", false),
            ("proxops:deploy@pve!ci", "deploy@pve!ci", true),
            ("proxops:deploy@pve", "deploy", false),
            ("", "web", false),
            ("proxops", "web", false),
        ] {
            assert_eq!(has_named_mark(comment, id), marked, "{comment:?} for {id}");
        }
        assert!(has_named_mark(&named_mark("a.b_c"), "a.b_c"));
    }
}
