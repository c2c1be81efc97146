//! Adding string entries to a SOPS file the way `sops set` does: the new values are
//! encrypted with the file's data key, the MAC is recomputed and re-encrypted under a new
//! `lastmodified`, and every other byte of the file (other ciphertexts, comments, order,
//! indentation) stays as it was, so a git diff shows the new lines and two metadata lines.
//!
//! The edit is made on the text, line by line, for block-style YAML as sops writes it. The
//! result is then read back in full (every value decrypted, the new MAC checked, every old
//! value compared) before it is returned; anything unexpected is refused, never written.

use std::path::Path;

use crate::cipher::encrypt;
use crate::document::Decoded;
use crate::error::SopsError;
use crate::identity::Identities;

/// Adds `entries` (name, value) as strings under the mapping at `parent` (key segments, such
/// as `["cloud-init", "ssh-keys"]`) of the SOPS file `text`, and returns the new text.
///
/// `now` is the new `sops.lastmodified` in Unix seconds. Refused (with an error naming the
/// file and the path, never a value): a file that does not verify, a name that is taken, not
/// a plain key, or a value that is empty or spans lines, a path the file's rules leave
/// unencrypted, and a parent that is not a block mapping. `path` is used for messages only.
pub fn add_strings(
    path: &Path,
    text: &str,
    identities: &Identities,
    parent: &[&str],
    entries: &[(&str, &str)],
    now: u64,
) -> Result<String, SopsError> {
    edit_strings(path, text, identities, parent, entries, now, false)
}

/// [`add_strings`], except that an entry whose name is taken by a string is replaced (its
/// line rewritten in place), as `sops set` does; a name taken by anything else is refused.
pub fn set_strings(
    path: &Path,
    text: &str,
    identities: &Identities,
    parent: &[&str],
    entries: &[(&str, &str)],
    now: u64,
) -> Result<String, SopsError> {
    edit_strings(path, text, identities, parent, entries, now, true)
}

fn edit_strings(
    path: &Path,
    text: &str,
    identities: &Identities,
    parent: &[&str],
    entries: &[(&str, &str)],
    now: u64,
    replace: bool,
) -> Result<String, SopsError> {
    let refuse = |reason: String| SopsError::Edit {
        file: path.to_owned(),
        reason,
    };
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let before = Decoded::read(path, body, identities)?;
    before.verify_mac()?;
    let shown_parent = parent.join(".");
    // `parent.name` as the reader writes paths (`name` alone at the top).
    let dotted = |name: &str| match parent {
        [] => name.to_string(),
        _ => format!("{shown_parent}.{name}"),
    };
    match before.describe_at(parent) {
        None | Some("a mapping") => {}
        Some(what) => {
            return Err(refuse(format!("`{shown_parent}` is {what}, not a mapping")));
        }
    }
    let mut names: Vec<&str> = Vec::new();
    let mut replaced: Vec<&str> = Vec::new();
    for (name, value) in entries {
        let shown = dotted(name);
        if !plain_key(name) {
            return Err(refuse(format!(
                "`{}` is not a plain key (letters, digits, `-` and `_`)",
                shown.escape_debug()
            )));
        }
        if names.contains(name) {
            return Err(refuse(format!("`{shown}` is given twice")));
        }
        names.push(name);
        let mut segments: Vec<&str> = parent.to_vec();
        segments.push(name);
        match before.describe_at(&segments) {
            None => {}
            Some("a string") if replace => replaced.push(name),
            Some(_) => return Err(refuse(format!("`{shown}` already exists"))),
        }
        if value.is_empty() || value.contains(['\n', '\r']) {
            return Err(refuse(format!(
                "the value for `{shown}` is empty or spans lines"
            )));
        }
        let key_path: Vec<String> = segments.iter().map(|s| s.to_string()).collect();
        if !before.encrypts(&key_path) {
            return Err(refuse(format!(
                "the file's encryption rules leave `{shown}` unencrypted; proxops writes secrets encrypted only"
            )));
        }
    }
    if entries.is_empty() {
        return Ok(text.to_owned());
    }

    let mut lines = Lines::new(body);
    let unit = lines.indent_unit();
    let mut new_lines = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        // sops's AAD is the key path joined by `:`, ending in `:` (`a:b:name:`, `name:` at the top).
        let mut key_path: Vec<&str> = parent.to_vec();
        key_path.push(name);
        let aad = format!("{}:", key_path.join(":"));
        let encrypted = encrypt(&before.key, value, &aad, "str");
        if replaced.contains(name) {
            let mut segments: Vec<&str> = parent.to_vec();
            segments.push(name);
            lines.replace_leaf(&segments, &encrypted).map_err(refuse)?;
        } else {
            new_lines.push((*name, encrypted));
        }
    }
    if !new_lines.is_empty() {
        lines
            .insert_under(parent, &new_lines, unit)
            .map_err(refuse)?;
    }

    // The MAC is over the values in their final order, so it is computed from the edited text.
    let stamp = rfc3339(now);
    lines
        .replace_meta("lastmodified", &format!("\"{stamp}\""))
        .map_err(refuse)?;
    let edited = lines.text();
    let hashed = Decoded::read(path, &edited, identities)?;
    let mac = encrypt(&before.key, &hashed.computed_mac, &stamp, "str");
    lines.replace_meta("mac", &mac).map_err(refuse)?;
    let out = format!("{bom}{}", lines.text());

    // Read it back as any reader would, and prove nothing else changed.
    let after = Decoded::read(path, &out, identities)?;
    after.verify_mac()?;
    let (old, new) = (before.into_document(), after.into_document());
    let old_entries = old.entries("");
    let new_entries = new.entries("");
    let is_replaced = |p: &str| replaced.iter().any(|name| p == dotted(name));
    let kept = old_entries
        .iter()
        .filter(|(p, _)| !is_replaced(p))
        .all(|(p, v)| {
            new_entries
                .iter()
                .any(|(q, w)| q == p && w.as_bytes() == v.as_bytes())
        });
    let added = entries.iter().all(|(name, value)| {
        let full = dotted(name);
        new_entries
            .iter()
            .any(|(q, w)| *q == full && w.as_bytes() == value.as_bytes())
    });
    if !kept || !added || new_entries.len() != old_entries.len() + entries.len() - replaced.len() {
        return Err(refuse(
            "the edited file did not read back as the old values plus the new ones; nothing was written (edit it with `sops set` instead)".to_owned(),
        ));
    }
    Ok(out)
}

/// A key written unquoted by any YAML emitter and addressable by a dot-path.
fn plain_key(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `YYYY-MM-DDTHH:MM:SSZ` for Unix seconds, as sops writes `lastmodified` (UTC, whole seconds).
pub(crate) fn rfc3339(unix: u64) -> String {
    let c = proxops_names::civil::from_unix(unix);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// The file as lines, each with its end of line, and what a block-style reader needs of them.
struct Lines {
    lines: Vec<String>,
}

/// A line that carries structure: not blank, not a comment.
struct Shape<'a> {
    indent: usize,
    /// The mapping key the line starts with, unquoted; `None` for a list item or a continuation.
    key: Option<String>,
    /// What follows `key:` on the line, trimmed (empty when the value is a nested block).
    rest: &'a str,
}

impl Lines {
    fn new(text: &str) -> Lines {
        Lines {
            lines: text.split_inclusive('\n').map(str::to_owned).collect(),
        }
    }

    fn text(&self) -> String {
        self.lines.concat()
    }

    fn shape(&self, i: usize) -> Option<Shape<'_>> {
        let line = self.lines[i].trim_end_matches(['\n', '\r']);
        let trimmed = line.trim_start_matches(' ');
        if trimmed.is_empty() || trimmed.starts_with('#') {
            return None;
        }
        let indent = line.len() - trimmed.len();
        let (key, rest) = split_key(trimmed).map_or((None, ""), |(k, r)| (Some(k), r));
        Some(Shape { indent, key, rest })
    }

    /// The indentation step of the file (sops writes 4 unless configured otherwise).
    fn indent_unit(&self) -> usize {
        (0..self.lines.len())
            .filter_map(|i| self.shape(i))
            .map(|s| s.indent)
            .find(|&n| n > 0)
            .unwrap_or(4)
    }

    /// The end (exclusive) of the block that starts after line `at`, whose lines are indented
    /// deeper than `indent`, and the index just after its last structural line.
    fn block_end(&self, at: usize, indent: usize) -> (usize, usize) {
        let mut last = at + 1;
        let mut i = at + 1;
        while i < self.lines.len() {
            match self.shape(i) {
                Some(s) if s.indent <= indent => break,
                Some(_) => last = i + 1,
                None => {}
            }
            i += 1;
        }
        (i, last)
    }

    /// Adds `name: value` lines under the mapping at `parent`, creating the missing mappings.
    fn insert_under(
        &mut self,
        parent: &[&str],
        new: &[(&str, String)],
        unit: usize,
    ) -> Result<(), String> {
        // The top level: lines 0.. at indent 0. Walk down the existing part of `parent`.
        let (mut from, mut to, mut indent) = (0usize, self.lines.len(), 0usize);
        let mut at_top = true;
        let mut depth = 0;
        while depth < parent.len() {
            let want = parent[depth];
            let found = (from..to).find(|&i| {
                self.shape(i)
                    .is_some_and(|s| s.indent == indent && s.key.as_deref() == Some(want))
            });
            let Some(line) = found else { break };
            let shape = self.shape(line).expect("a structural line");
            if !shape.rest.is_empty() && !shape.rest.starts_with('#') {
                return Err(format!(
                    "`{}` is written inline (`{}`), not as a block mapping; add the entries with `sops set`",
                    parent[..=depth].join("."),
                    shape.rest
                ));
            }
            let (end, last) = self.block_end(line, indent);
            let child = (line + 1..end)
                .find_map(|i| self.shape(i))
                .map(|s| s.indent);
            match child {
                Some(c) if c > indent => indent = c,
                _ => {
                    return Err(format!(
                        "`{}` has no entries written as a block; add the entries with `sops set`",
                        parent[..=depth].join(".")
                    ));
                }
            }
            from = line + 1;
            to = last;
            at_top = false;
            depth += 1;
        }
        // Insert after the block's last structural line, or before `sops:` at the top level.
        let insert_at = if at_top {
            (0..self.lines.len())
                .find(|&i| {
                    self.shape(i)
                        .is_some_and(|s| s.indent == 0 && s.key.as_deref() == Some("sops"))
                })
                .ok_or("the file has no top-level `sops:` line")?
        } else {
            to
        };
        let mut added = Vec::new();
        for (level, seg) in parent[depth..].iter().enumerate() {
            added.push(format!("{}{seg}:\n", " ".repeat(indent + level * unit)));
        }
        let leaf_indent = indent + (parent.len() - depth) * unit;
        for (name, value) in new {
            added.push(format!("{}{name}: {value}\n", " ".repeat(leaf_indent)));
        }
        if insert_at > 0 && !self.lines[insert_at - 1].ends_with('\n') {
            self.lines[insert_at - 1].push('\n');
        }
        self.lines.splice(insert_at..insert_at, added);
        Ok(())
    }

    /// Rewrites the value of the scalar at `segments` (a key on one line, under block
    /// mappings), keeping its indentation and end of line.
    fn replace_leaf(&mut self, segments: &[&str], value: &str) -> Result<(), String> {
        let (mut from, mut to, mut indent) = (0usize, self.lines.len(), 0usize);
        for (depth, want) in segments.iter().enumerate() {
            let line = (from..to)
                .find(|&i| {
                    self.shape(i)
                        .is_some_and(|s| s.indent == indent && s.key.as_deref() == Some(*want))
                })
                .ok_or_else(|| {
                    format!(
                        "`{}` is not written as a block key",
                        segments[..=depth].join(".")
                    )
                })?;
            if depth + 1 == segments.len() {
                let eol = if self.lines[line].ends_with("\r\n") {
                    "\r\n"
                } else if self.lines[line].ends_with('\n') {
                    "\n"
                } else {
                    ""
                };
                let rest = self
                    .shape(line)
                    .map(|s| s.rest.to_string())
                    .unwrap_or_default();
                if !rest.starts_with("ENC[") {
                    return Err(format!(
                        "`{}` is not one encrypted value on its line; edit it with `sops set`",
                        segments.join(".")
                    ));
                }
                self.lines[line] = format!("{}{want}: {value}{eol}", " ".repeat(indent));
                return Ok(());
            }
            let (end, last) = self.block_end(line, indent);
            indent = (line + 1..end)
                .find_map(|i| self.shape(i))
                .map(|s| s.indent)
                .filter(|&c| c > indent)
                .ok_or_else(|| {
                    format!(
                        "`{}` has no entries written as a block",
                        segments[..=depth].join(".")
                    )
                })?;
            from = line + 1;
            to = last;
        }
        Err("no key to replace".to_string())
    }

    /// Replaces the value of `sops.<key>` (a scalar on one line).
    fn replace_meta(&mut self, key: &str, value: &str) -> Result<(), String> {
        let sops = (0..self.lines.len())
            .find(|&i| {
                self.shape(i)
                    .is_some_and(|s| s.indent == 0 && s.key.as_deref() == Some("sops"))
            })
            .ok_or("the file has no top-level `sops:` line")?;
        let (end, _) = self.block_end(sops, 0);
        let child = (sops + 1..end)
            .find_map(|i| self.shape(i))
            .map(|s| s.indent);
        let line = (sops + 1..end)
            .find(|&i| {
                self.shape(i)
                    .is_some_and(|s| Some(s.indent) == child && s.key.as_deref() == Some(key))
            })
            .ok_or_else(|| format!("the file has no `sops.{key}` line"))?;
        let eol = if self.lines[line].ends_with("\r\n") {
            "\r\n"
        } else if self.lines[line].ends_with('\n') {
            "\n"
        } else {
            ""
        };
        let indent = child.unwrap_or(0);
        self.lines[line] = format!("{}{key}: {value}{eol}", " ".repeat(indent));
        Ok(())
    }
}

/// `key: rest` at the start of a line (the key plain, or quoted without escapes); `None`
/// for a list item or anything else.
fn split_key(line: &str) -> Option<(String, &str)> {
    if line.starts_with("- ") || line == "-" {
        return None;
    }
    let (key, after) = match line.chars().next()? {
        q @ ('"' | '\'') => {
            let close = line[1..].find(q)? + 1;
            let key = &line[1..close];
            if key.contains('\\') {
                return None;
            }
            (key.to_owned(), &line[close + 1..])
        }
        _ => {
            let colon = line
                .match_indices(':')
                .map(|(i, _)| i)
                .find(|&i| matches!(line.as_bytes().get(i + 1), None | Some(b' ')))?;
            (line[..colon].trim_end().to_owned(), &line[colon..])
        }
    };
    let rest = after.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some((key, rest.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_matches_known_instants() {
        for (unix, want) in [
            (0, "1970-01-01T00:00:00Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (1_764_420_389, "2025-11-29T12:46:29Z"),
            (4_107_542_399, "2100-02-28T23:59:59Z"),
        ] {
            assert_eq!(rfc3339(unix), want, "{unix}");
        }
    }

    #[test]
    fn keys_are_split_like_a_block_reader() {
        let check = |line: &str, want: Option<(&str, &str)>| {
            assert_eq!(
                split_key(line).map(|(k, r)| (k, r.to_owned())),
                want.map(|(k, r)| (k.to_owned(), r.to_owned())),
                "{line}"
            );
        };
        check("ssh-keys:", Some(("ssh-keys", "")));
        check("alice: ENC[x]", Some(("alice", "ENC[x]")));
        check("bob@host.example: v", Some(("bob@host.example", "v")));
        check("\"cloud-init\":", Some(("cloud-init", "")));
        check("'a b': c", Some(("a b", "c")));
        check("url: http://x", Some(("url", "http://x")));
        check("- item", None);
        check("plain continuation", None);
        check("\"esc\\\"\": v", None);
    }

    #[test]
    fn inline_or_empty_parents_are_left_to_sops() {
        let new = [("x", "ENC[v]".to_owned())];
        let check = |text: &str, says: &str| {
            let err = Lines::new(text)
                .insert_under(&["a", "b"], &new, 4)
                .unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        };
        check("a: {b: {c: d}}\nsops:\n    x: y\n", "`a` is written inline");
        check(
            "a:\n    b: {}\nsops:\n    x: y\n",
            "`a.b` is written inline",
        );
        check(
            "a:\n    b:\nc: d\nsops:\n    x: y\n",
            "`a.b` has no entries",
        );
    }

    #[test]
    fn inserts_follow_the_files_indentation() {
        let new = [("x", "ENC[v]".to_owned())];
        let mut two = Lines::new("a:\n  b:\n    c: ENC[c]\n  d: ENC[d]\nsops:\n  mac: m\n");
        let unit = two.indent_unit();
        assert_eq!(unit, 2);
        two.insert_under(&["a", "b"], &new, unit).unwrap();
        assert_eq!(
            two.text(),
            "a:\n  b:\n    c: ENC[c]\n    x: ENC[v]\n  d: ENC[d]\nsops:\n  mac: m\n"
        );
        let mut fresh = Lines::new("z: ENC[z]\nsops:\n  mac: m\n");
        fresh.insert_under(&["a", "b"], &new, 2).unwrap();
        assert_eq!(
            fresh.text(),
            "z: ENC[z]\na:\n  b:\n    x: ENC[v]\nsops:\n  mac: m\n"
        );
        fresh.replace_meta("mac", "n").unwrap();
        assert!(fresh.text().ends_with("sops:\n  mac: n\n"));
        assert!(fresh.replace_meta("lastmodified", "t").is_err());
    }

    #[test]
    fn plain_keys_only() {
        assert!(plain_key("adopted-0123abcd"));
        assert!(plain_key("a_b"));
        for bad in ["", "-a", "a.b", "a b", "a:b", "é"] {
            assert!(!plain_key(bad), "{bad}");
        }
    }
}
