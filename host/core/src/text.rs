//! Text that leaves the host: the process-wide secret redactor and terminal escaping.
//!
//! Every secret value is [`register`]ed the moment the host resolves it (SOPS values, the API
//! token). From then on [`redact`] replaces it, in every encoding in which it can appear
//! ([`encodings`]), with `(sensitive)`. [`escape_control`] and [`escape_inline`] make guest-,
//! file- and PVE-provided text safe for a terminal. The CLI's output module applies both to
//! every line it prints; the PVE client applies both to PVE's messages.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::RwLock;

/// What a secret is replaced with.
pub const REDACTED: &str = "(sensitive)";

/// Shortest secret value the host accepts: scrubbing a shorter one (a 1-character password)
/// would scrub every occurrence of a common string from all output.
pub const MIN_SECRET_LEN: usize = 8;

/// Every registered pattern: a set to tell new ones, and a list longest first to search.
struct Registry {
    known: BTreeSet<String>,
    longest_first: Vec<String>,
}

static REGISTRY: RwLock<Registry> = RwLock::new(Registry {
    known: BTreeSet::new(),
    longest_first: Vec::new(),
});

/// A secret value shorter than [`MIN_SECRET_LEN`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the value is shorter than {MIN_SECRET_LEN} bytes; proxops refuses such short secrets")]
pub struct TooShort;

/// Register a secret value: from now on [`redact`] hides it in all its [`encodings`].
/// A value shorter than [`MIN_SECRET_LEN`] bytes is refused (and not registered).
pub fn register(value: &str) -> Result<(), TooShort> {
    if value.len() < MIN_SECRET_LEN {
        return Err(TooShort);
    }
    let new: Vec<String> = {
        let registry = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
        encodings(value)
            .into_iter()
            .filter(|e| !registry.known.contains(e))
            .collect()
    };
    if new.is_empty() {
        return Ok(());
    }
    let mut registry = REGISTRY.write().unwrap_or_else(|e| e.into_inner());
    for e in new {
        if registry.known.insert(e.clone()) {
            registry.longest_first.push(e);
        }
    }
    registry
        .longest_first
        .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    Ok(())
}

/// How many patterns are registered (for tests and logs).
pub fn registered() -> usize {
    REGISTRY
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .longest_first
        .len()
}

/// The forms in which `value` can reach a text: as stored; percent-encoded (every byte but
/// `A-Za-z0-9-_.~`, upper- and lower-case hex, once and twice, as PVE's `urlencoded` values
/// are form-encoded again); form-encoded (space as `+`); with `encodeURIComponent`'s set;
/// JSON-escaped; Rust-`Debug`-escaped; and each line of a multi-line value that is at least
/// [`MIN_SECRET_LEN`] bytes long after trimming (shorter lines would match ordinary text),
/// in each of those forms. Forms shorter than [`MIN_SECRET_LEN`] are dropped.
pub fn encodings(value: &str) -> BTreeSet<String> {
    let mut bases: Vec<&str> = vec![value];
    if value.contains(['\n', '\r']) {
        bases.extend(
            value
                .split(['\n', '\r'])
                .map(str::trim)
                .filter(|l| l.len() >= MIN_SECRET_LEN),
        );
    }
    let mut out = BTreeSet::new();
    for base in bases {
        let upper = percent(base, b"-_.~", true);
        out.insert(percent(&upper, b"-_.~", true));
        out.insert(percent(&percent(base, b"-_.~", false), b"-_.~", false));
        out.insert(upper);
        out.insert(percent(base, b"-_.~", false));
        out.insert(percent(base, b"-_.!~*'()", true));
        out.insert(percent(base, b"-_.!~*'()", false));
        out.insert(form(base));
        let json = serde_json::to_string(base).unwrap_or_else(|_| "\"\"".into());
        // Always a quoted string: drop the quotes.
        out.insert(json[1..json.len() - 1].to_string());
        out.insert(base.escape_debug().to_string());
        out.insert(base.escape_default().to_string());
        out.insert(base.to_string());
    }
    out.retain(|s| s.len() >= MIN_SECRET_LEN);
    out
}

/// Percent-encode every byte outside `A-Za-z0-9` and `keep`.
fn percent(s: &str, keep: &[u8], upper: bool) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(char::from(b));
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// `application/x-www-form-urlencoded`: space as `+`, `A-Za-z0-9*-._` kept, upper-case hex.
fn form(s: &str) -> String {
    percent(s, b"*-._ ", true).replace(' ', "+")
}

/// `text` with every registered secret, in every encoding, replaced by [`REDACTED`].
/// Overlapping occurrences are merged and replaced once.
pub fn redact(text: &str) -> Cow<'_, str> {
    let registry = REGISTRY.read().unwrap_or_else(|e| e.into_inner());
    let patterns = &registry.longest_first;
    if patterns.is_empty() || text.len() < MIN_SECRET_LEN {
        return Cow::Borrowed(text);
    }
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for p in patterns.iter() {
        let mut from = 0;
        while let Some(at) = text[from..].find(p.as_str()) {
            let start = from + at;
            spans.push((start, start + p.len()));
            // The next possible start is the next character: occurrences may overlap.
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
    }
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < spans.len() {
        let (start, mut end) = spans[i];
        i += 1;
        while i < spans.len() && spans[i].0 < end {
            end = end.max(spans[i].1);
            i += 1;
        }
        out.push_str(&text[copied..start]);
        out.push_str(REDACTED);
        copied = end;
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Characters a terminal may act on: C0 controls, DEL, C1 controls, and the Unicode
/// bidirectional overrides and isolates (which reorder what is shown).
fn is_unsafe(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escape<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !text.chars().any(|c| is_unsafe(c) && !keep.contains(&c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) && !keep.contains(&c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Escape every control character but newline and tab (`ESC` becomes `\u{1b}`), for whole
/// texts of several lines.
pub fn escape_control(text: &str) -> Cow<'_, str> {
    escape(text, &['\n', '\t'])
}

/// Escape every control character including newline and tab, for one value shown inside a
/// line (a guest's message, a file name, PVE's text): it cannot start a line of its own.
pub fn escape_inline(text: &str) -> Cow<'_, str> {
    escape(text, &[])
}

/// [`redact`], then [`escape_control`]: a text ready for a terminal or a log.
pub fn clean(text: &str) -> Cow<'_, str> {
    match redact(text) {
        Cow::Borrowed(b) => escape_control(b),
        Cow::Owned(o) => Cow::Owned(escape_control(&o).into_owned()),
    }
}

/// [`redact`], then [`escape_inline`]: one value of foreign origin inside a line.
pub fn clean_inline(text: &str) -> Cow<'_, str> {
    match redact(text) {
        Cow::Borrowed(b) => escape_inline(b),
        Cow::Owned(o) => Cow::Owned(escape_inline(&o).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The registry is process-wide: every test registers its own values, distinct from the
    // others', and only checks texts that contain its own.

    const PASSWORD: &str = "p@ss w+rd/ü\"x";
    const KEY: &str = "ssh-ed25519 AAAAC3Nza+Fake/Key== alice@laptop";
    const MULTI: &str = "-----BEGIN KEY-----\nQUJDREVGR0hJSktMTU5PUA==\nshort\n-----END KEY-----\n";

    fn check(text: &str, expected: &str) {
        register(PASSWORD).unwrap();
        register(KEY).unwrap();
        register(MULTI).unwrap();
        assert_eq!(redact(text), expected, "redacting {text:?}");
    }

    #[test]
    fn every_encoding_of_a_secret_is_redacted() {
        for (text, expected) in [
            ("password is p@ss w+rd/ü\"x.", "password is (sensitive)."),
            // Percent-encoded, upper and lower hex.
            ("p%40ss%20w%2Brd%2F%C3%BC%22x", "(sensitive)"),
            ("p%40ss%20w%2brd%2f%c3%bc%22x", "(sensitive)"),
            // Form-encoded: space as `+`.
            (
                "cipassword=p%40ss+w%2Brd%2F%C3%BC%22x&x=1",
                "cipassword=(sensitive)&x=1",
            ),
            // JSON- and Debug-escaped.
            (r#"{"v":"p@ss w+rd/ü\"x"}"#, r#"{"v":"(sensitive)"}"#),
            // PVE's urlencoded sshkeys, and that form-encoded again.
            (
                "sshkeys=ssh-ed25519%20AAAAC3Nza%2BFake%2FKey%3D%3D%20alice%40laptop",
                "sshkeys=(sensitive)",
            ),
            (
                "ssh-ed25519%2520AAAAC3Nza%252BFake%252FKey%253D%253D%2520alice%2540laptop",
                "(sensitive)",
            ),
            // Each long line of a multi-line value, alone or Debug-joined.
            ("got QUJDREVGR0hJSktMTU5PUA== here", "got (sensitive) here"),
            (
                "\"-----BEGIN KEY-----\\nQUJDREVGR0hJSktMTU5PUA==\\nshort\"",
                "\"(sensitive)\\n(sensitive)\\nshort\"",
            ),
            // Two secrets side by side, and overlapping ones, go in one piece each.
            (
                "p@ss w+rd/ü\"xssh-ed25519 AAAAC3Nza+Fake/Key== alice@laptop",
                "(sensitive)(sensitive)",
            ),
            // Nothing else is touched: the short line, and text that merely resembles.
            ("short p@ss w+rd", "short p@ss w+rd"),
            ("", ""),
        ] {
            check(text, expected);
        }
    }

    #[test]
    fn short_values_are_refused_and_not_registered() {
        assert_eq!(register("1234567"), Err(TooShort));
        assert_eq!(redact("1234567 and 1234567"), "1234567 and 1234567");
        assert!(TooShort.to_string().contains("shorter than 8 bytes"));
        register("12345678-long-enough").unwrap();
        assert_eq!(redact("x12345678-long-enoughx"), "x(sensitive)x");
    }

    #[test]
    fn encodings_of_a_plain_token_collapse_to_itself() {
        let e = encodings("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d");
        assert_eq!(
            e.into_iter().collect::<Vec<_>>(),
            ["8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d"]
        );
    }

    fn check_escape(text: &str, control: &str, inline: &str) {
        assert_eq!(escape_control(text), control, "escape_control({text:?})");
        assert_eq!(escape_inline(text), inline, "escape_inline({text:?})");
    }

    #[test]
    fn control_characters_are_made_visible() {
        for (text, control, inline) in [
            ("plain text ✓", "plain text ✓", "plain text ✓"),
            (
                "\u{1b}[2J\u{1b}[Hcleared",
                "\\u{1b}[2J\\u{1b}[Hcleared",
                "\\u{1b}[2J\\u{1b}[Hcleared",
            ),
            ("bell\u{7}", "bell\\u{7}", "bell\\u{7}"),
            ("over\rwrite", "over\\u{d}write", "over\\u{d}write"),
            ("a\nb\tc", "a\nb\tc", "a\\u{a}b\\u{9}c"),
            (
                "csi\u{9b}31m del\u{7f}",
                "csi\\u{9b}31m del\\u{7f}",
                "csi\\u{9b}31m del\\u{7f}",
            ),
            (
                "bidi\u{202e}txt\u{2066}",
                "bidi\\u{202e}txt\\u{2066}",
                "bidi\\u{202e}txt\\u{2066}",
            ),
        ] {
            check_escape(text, control, inline);
        }
    }

    #[test]
    fn clean_redacts_before_it_escapes() {
        register("tab\tinside-secret").unwrap();
        assert_eq!(clean("[tab\tinside-secret]\u{1b}"), "[(sensitive)]\\u{1b}");
        assert_eq!(clean_inline("a\ntab\tinside-secret"), "a\\u{a}(sensitive)");
    }
}
