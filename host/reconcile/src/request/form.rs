//! The canonical form of a proposed request: the grammars of placeholder values, the path
//! matched against the declared templates and rebuilt by the host, plain and unrepeated
//! parameter names, and PVE's view of the path it routes.

use std::borrow::Cow;

use proxops_runtime::kind::{Call, CallPattern, Method, Param};

use super::{Refusal, Rule, shown};
use crate::plan::method_name;

/// `vmid` as a canonical decimal (no sign, no leading zero, no space; at most 9 digits, as
/// PVE's `pve-vmid`), or `None`.
pub fn canonical_vmid(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || b.len() > 9 || b[0] == b'0' || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    text.parse().ok()
}

use proxops_names::{is_node_name, is_storage_id};

/// One name of a volume's path (`vm-100-disk-0`, `iso`, `debian-12_amd64.tar.zst`): starts with
/// a letter, digit or `_`, so it is never `.` or `..`.
fn is_volume_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'+' | b'@' | b'=')
        })
}

/// PVE's `pve-volume-id`: `storage:name[/name…]`, every name plain (no dot segment).
pub fn is_volume_id(s: &str) -> bool {
    match s.split_once(':') {
        Some((storage, name)) => is_storage_id(storage) && name.split('/').all(is_volume_part),
        None => false,
    }
}

/// A value of a placeholder with no grammar of its own: a plain token (no `/`, no `%`, no
/// space or control character, never `.` or `..`).
fn is_plain_value(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 255
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'-' | b'_' | b'.' | b':' | b'@' | b'!' | b'+' | b'=' | b',' | b'~'
                )
        })
}

/// Whether `value` fits the grammar of placeholder `name`.
fn fits(name: &str, value: &str) -> bool {
    match name {
        "vmid" | "newid" => canonical_vmid(value).is_some(),
        "node" => is_node_name(value),
        "storage" => is_storage_id(value),
        "volume" => is_volume_id(value) || value.split('/').all(is_volume_part),
        _ => is_plain_value(value),
    }
}

/// Percent-encode one path segment: everything but ASCII letters, digits and `-_.~`.
pub fn encode_segment(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Decode `%XX` escapes once; `None` for a broken escape or text that is not UTF-8.
pub(super) fn percent_decode(s: &str) -> Option<Cow<'_, str>> {
    if !s.contains('%') {
        return Some(Cow::Borrowed(s));
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let text = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(text, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

/// Bytes a proposed path may hold before decoding: RFC 3986's path characters. Anything
/// else (`\`, `?`, `#`, space, a control or non-ASCII character) the URL parser or PVE could
/// read another way.
fn raw_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'/' | b'-'
                | b'.'
                | b'_'
                | b'~'
                | b'%'
                | b':'
                | b'@'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

/// The canonical form of `path` for `method`, checked against the kind's `patterns`: the URL
/// the host sends (borrowed when the kind already wrote it so). The refusal names the rule.
pub fn canonical<'p>(
    method: Method,
    path: &'p str,
    patterns: &[CallPattern],
) -> Result<Cow<'p, str>, Refusal> {
    let shown_call = || format!("{} {}", method_name(method), shown(path));
    if let Some(bad) = path.bytes().find(|b| !raw_path_byte(*b)) {
        return Err(Refusal::new(
            Rule::Path,
            format!(
                "{} holds {}, which the URL parser or PVE could read as another path",
                shown_call(),
                shown(&(bad as char).to_string())
            ),
        ));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Refusal::new(
            Rule::Path,
            format!("{} does not start with `/`", shown_call()),
        ));
    };
    let mut segments: Vec<Cow<'p, str>> = Vec::with_capacity(8);
    for raw in rest.split('/') {
        let Some(decoded) = percent_decode(raw) else {
            return Err(Refusal::new(
                Rule::Path,
                format!("{} holds a broken percent escape", shown_call()),
            ));
        };
        if decoded.is_empty() || decoded == "." || decoded == ".." {
            return Err(Refusal::new(
                Rule::Path,
                format!(
                    "{} has an empty, `.` or `..` segment (spelt {})",
                    shown_call(),
                    shown(raw)
                ),
            ));
        }
        segments.push(decoded);
    }
    // The first template of the method whose literal segments all match; its placeholders'
    // values must then fit their grammar (a value that does not is a path refusal, not an
    // undeclared call: the kind declared the shape).
    let mut shape_matched: Option<(&str, &str)> = None;
    'patterns: for p in patterns.iter().filter(|p| p.method == method) {
        let Some(template) = p.path.strip_prefix('/') else {
            continue;
        };
        if template.split('/').count() != segments.len() {
            continue;
        }
        for (t, v) in template.split('/').zip(&segments) {
            if !is_placeholder(t) && t != v.as_ref() {
                continue 'patterns;
            }
        }
        let bad = template
            .split('/')
            .zip(&segments)
            .filter_map(|(t, v)| Some((placeholder_name(t)?, v.as_ref())))
            .find(|(name, v)| !fits(name, v));
        match bad {
            Some((name, value)) => {
                shape_matched.get_or_insert((name, value));
                continue;
            }
            None => return Ok(build(path, template, &segments)),
        }
    }
    Err(match shape_matched {
        Some((name, value)) => Refusal::new(
            Rule::Path,
            format!(
                "{}: the value {} of `{{{name}}}` is not a {}",
                shown_call(),
                shown(value),
                grammar_name(name)
            ),
        ),
        None => Refusal::new(
            Rule::Declared,
            format!("{} is not among the calls the kind declared", shown_call()),
        ),
    })
}

fn grammar_name(placeholder: &str) -> &'static str {
    match placeholder {
        "vmid" | "newid" => "canonical vmid (a decimal without sign or leading zero)",
        "node" => "PVE node name",
        "storage" => "PVE storage id",
        "volume" => "PVE volume id (`storage:name`, no dot segment)",
        _ => "plain value (letters, digits and `-_.:@!+=,~`, never a dot segment)",
    }
}

fn is_placeholder(t: &str) -> bool {
    t.starts_with('{') && t.ends_with('}')
}

fn placeholder_name(t: &str) -> Option<&str> {
    t.strip_prefix('{')?.strip_suffix('}')
}

/// The URL built from the template's literals and the decoded values, each encoded once.
fn build<'p>(raw: &'p str, template: &str, values: &[Cow<'_, str>]) -> Cow<'p, str> {
    let mut out = String::with_capacity(raw.len() + 8);
    for (t, v) in template.split('/').zip(values) {
        out.push('/');
        if is_placeholder(t) {
            encode_segment(v, &mut out);
        } else {
            out.push_str(t);
        }
    }
    if out == raw {
        Cow::Borrowed(raw)
    } else {
        Cow::Owned(out)
    }
}

/// Parameter names: plain (letters, digits, `-_.`), and none twice (case folded: PVE's
/// parser keeps one of them, the host's check would see the other).
pub fn check_params(params: &[Param]) -> Result<(), Refusal> {
    for (i, p) in params.iter().enumerate() {
        let plain = !p.name.is_empty()
            && p.name.len() <= 64
            && p.name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !plain {
            return Err(Refusal::new(
                Rule::Params,
                format!("the parameter name {} is not a plain name", shown(&p.name)),
            ));
        }
        if params[..i]
            .iter()
            .any(|q| q.name.eq_ignore_ascii_case(&p.name))
        {
            return Err(Refusal::new(
                Rule::Params,
                format!(
                    "the parameter `{}` is given twice (PVE would use one of them, the check another)",
                    p.name
                ),
            ));
        }
    }
    Ok(())
}

/// A call in canonical form: its path replaced by the one the host builds. The refusal
/// names the rule; the call is otherwise unchanged.
pub fn canonicalize(call: &mut Call, patterns: &[CallPattern]) -> Result<(), Refusal> {
    check_params(&call.params)?;
    if let Cow::Owned(path) = canonical(call.method, &call.path, patterns)? {
        call.path = path;
    }
    Ok(())
}

/// The segments PVE routes `path` (a canonical path) by: it decodes the whole path first.
pub fn pve_view(path: &str) -> Vec<String> {
    let decoded = percent_decode(path).map_or_else(|| path.to_string(), Cow::into_owned);
    decoded
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}
