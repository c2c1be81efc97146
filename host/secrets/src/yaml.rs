//! Order-preserving YAML tree for SOPS files, with YAML 1.2 scalar resolution as sops (yaml.v3) does it.
//!
//! sops hashes every leaf in document order and types unencrypted scalars the
//! way Go's yaml.v3 resolves them (`0x1F` is the int 31, `TRUE` a bool, a
//! plain `2024-01-02` a timestamp), so the tree keeps the order of mapping
//! keys and, for each scalar, whether it was plain or quoted.
//!
//! The limits every YAML file proxops reads is held to apply here too: a key seen twice in a
//! mapping, or a collection nested deeper than [`MAX_DEPTH`], stops the parse at that event
//! (the parser is driven event by event, so nothing after it is read).

use std::collections::HashSet;

use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Tag};

/// The deepest nesting of mappings and sequences (the same limit as manifests).
pub(crate) const MAX_DEPTH: usize = 64;

/// One YAML node.
#[derive(Clone)]
pub(crate) enum Node {
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
    Scalar(Scalar),
}

/// A scalar as written: its text and whether it was a plain (unquoted) scalar.
#[derive(Clone)]
pub(crate) struct Scalar {
    pub(crate) text: String,
    pub(crate) plain: bool,
}

/// Why a file could not be turned into a tree.
#[derive(Debug)]
pub(crate) enum ParseError {
    /// The YAML itself is broken.
    Syntax {
        line: usize,
        col: usize,
        info: String,
    },
    /// Valid YAML that sops files never contain, or that proxops refuses.
    Unsupported(String),
}

/// A plain scalar's YAML type, resolved like yaml.v3 does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A timestamp, already in Go's `MarshalText` (RFC 3339, nanoseconds trimmed) form.
    Time(String),
    /// An integer that fits u64 but not i64: yaml.v3 makes it a uint64, which sops cannot handle.
    Uint,
    Str,
}

/// Parses a YAML stream, refusing several documents, anchors/aliases, tags other than `!!str` and non-scalar keys.
pub(crate) fn parse(text: &str) -> Result<Option<Node>, ParseError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        match next {
            Ok((event, span)) => {
                let end = matches!(event, Event::StreamEnd);
                builder.on_event(event, span.start);
                if let Some(err) = builder.error.take() {
                    return Err(err);
                }
                if end {
                    break;
                }
            }
            // The scanner looks ahead and has a flow nesting limit of its own (256).
            Err(e) if e.info().contains("recursion limit exceeded") => {
                return Err(ParseError::Unsupported(format!(
                    "nesting deeper than {MAX_DEPTH} levels is refused (line {}, column {})",
                    e.marker().line(),
                    e.marker().col() + 1
                )));
            }
            Err(e) => {
                return Err(ParseError::Syntax {
                    line: e.marker().line(),
                    col: e.marker().col() + 1,
                    info: e.info().to_owned(),
                });
            }
        }
    }
    if builder.documents > 1 {
        return Err(ParseError::Unsupported(format!(
            "it holds {} YAML documents; only single-document files are supported",
            builder.documents
        )));
    }
    Ok(builder.root)
}

enum Frame {
    Map {
        entries: Vec<(String, Node)>,
        keys: HashSet<String>,
        pending_key: Option<String>,
    },
    Seq(Vec<Node>),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    root: Option<Node>,
    documents: usize,
    error: Option<ParseError>,
}

impl Builder {
    fn fail(&mut self, msg: String) {
        if self.error.is_none() {
            self.error = Some(ParseError::Unsupported(msg));
        }
    }

    fn check_props(&mut self, anchor: usize, tag: Option<&Tag>, mark: Marker) -> bool {
        if anchor != 0 {
            self.fail(format!(
                "YAML anchors and aliases are not supported (line {})",
                mark.line()
            ));
            return false;
        }
        if let Some(tag) = tag {
            self.fail(format!(
                "the YAML tag `{}{}` is not supported (line {})",
                tag.handle,
                tag.suffix,
                mark.line()
            ));
            return false;
        }
        true
    }

    fn push_node(&mut self, node: Node, mark: Marker) {
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq(items)) => items.push(node),
            Some(Frame::Map {
                entries,
                keys,
                pending_key,
            }) => match pending_key.take() {
                Some(key) => entries.push((key, node)),
                None => match node {
                    Node::Scalar(s) if keys.contains(&s.text) => {
                        let msg = format!(
                            "duplicate key `{}` at line {}, column {}",
                            shorten(&s.text),
                            mark.line(),
                            mark.col() + 1
                        );
                        self.fail(msg);
                    }
                    Node::Scalar(s) => {
                        keys.insert(s.text.clone());
                        *pending_key = Some(s.text);
                    }
                    _ => self.fail(format!(
                        "mapping keys must be scalars (line {})",
                        mark.line()
                    )),
                },
            },
        }
    }

    fn too_deep(&mut self, mark: Marker) -> bool {
        let deep = self.stack.len() >= MAX_DEPTH;
        if deep {
            self.fail(format!(
                "nesting deeper than {MAX_DEPTH} levels is refused (line {}, column {})",
                mark.line(),
                mark.col() + 1
            ));
        }
        deep
    }

    fn key_expected(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Map {
                pending_key: None,
                ..
            })
        )
    }
}

/// A key cut to 200 characters for messages (keys are not secret, but may be long).
fn shorten(text: &str) -> String {
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn is_str_tag(tag: &Tag) -> bool {
    tag.suffix == "str" && (tag.handle == "!!" || tag.handle == "tag:yaml.org,2002:")
}

impl Builder {
    fn on_event(&mut self, ev: Event<'_>, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        match ev {
            Event::DocumentStart(_) => self.documents += 1,
            Event::Alias(_) => self.fail(format!(
                "YAML anchors and aliases are not supported (line {})",
                mark.line()
            )),
            Event::Scalar(text, style, anchor, tag) => {
                let str_tag = tag.as_deref().is_some_and(is_str_tag);
                let tag = if str_tag { None } else { tag };
                if !self.check_props(anchor, tag.as_deref(), mark) {
                    return;
                }
                let plain = style == ScalarStyle::Plain && !str_tag;
                let text = text.into_owned();
                if self.key_expected() && plain {
                    // sops refuses keys that yaml.v3 does not read as strings.
                    let r = resolve_plain(&text);
                    if r != Resolved::Str {
                        self.fail(format!(
                            "the mapping key on line {} is not a string; sops supports only string keys",
                            mark.line()
                        ));
                        return;
                    }
                }
                self.push_node(Node::Scalar(Scalar { text, plain }), mark);
            }
            Event::SequenceStart(anchor, tag) => {
                if self.check_props(anchor, tag.as_deref(), mark) {
                    if self.key_expected() {
                        self.fail(format!(
                            "mapping keys must be scalars (line {})",
                            mark.line()
                        ));
                        return;
                    }
                    if self.too_deep(mark) {
                        return;
                    }
                    self.stack.push(Frame::Seq(Vec::new()));
                }
            }
            Event::MappingStart(anchor, tag) => {
                if self.check_props(anchor, tag.as_deref(), mark) {
                    if self.key_expected() {
                        self.fail(format!(
                            "mapping keys must be scalars (line {})",
                            mark.line()
                        ));
                        return;
                    }
                    if self.too_deep(mark) {
                        return;
                    }
                    self.stack.push(Frame::Map {
                        entries: Vec::new(),
                        keys: HashSet::new(),
                        pending_key: None,
                    });
                }
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items)) = self.stack.pop() {
                    self.push_node(Node::Seq(items), mark);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { entries, .. }) = self.stack.pop() {
                    self.push_node(Node::Map(entries), mark);
                }
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
    }
}

impl Scalar {
    /// The scalar's type: quoted and block scalars are strings, plain ones are resolved.
    pub(crate) fn resolve(&self) -> Resolved {
        if self.plain {
            resolve_plain(&self.text)
        } else {
            Resolved::Str
        }
    }
}

/// Resolves a plain scalar like yaml.v3's `resolve` (null, bool, int, float, timestamp, else string).
pub(crate) fn resolve_plain(text: &str) -> Resolved {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let first = text.as_bytes()[0];
    if first == b'.' {
        return match text.parse::<f64>() {
            Ok(f) => Resolved::Float(f),
            Err(_) => Resolved::Str,
        };
    }
    if !(first.is_ascii_digit() || first == b'+' || first == b'-') {
        return Resolved::Str;
    }
    if let Some(t) = canonical_timestamp(text, true) {
        return Resolved::Time(t);
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    match parse_go_int(&plain) {
        Some(Ok(i)) => return Resolved::Int(i),
        Some(Err(())) => return Resolved::Uint,
        None => {}
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        return Resolved::Float(f);
    }
    Resolved::Str
}

/// Go's `strconv.ParseInt(s, 0, 64)`: optional sign, then `0x`, `0o`, `0b`, a leading `0` (octal) or decimal.
/// `Some(Err(()))` when only `ParseUint` would accept it.
fn parse_go_int(s: &str) -> Option<Result<i64, ()>> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0o").or(body.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = body.strip_prefix("0b").or(body.strip_prefix("0B")) {
        (2, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        0i64.checked_sub_unsigned(magnitude).map(Ok)
    } else if s.starts_with('+') {
        i64::try_from(magnitude).ok().map(Ok)
    } else {
        Some(i64::try_from(magnitude).map_err(|_| ()))
    }
}

/// yaml.v3's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`: shortest round-trip digits, never an exponent.
pub(crate) fn go_format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f == f64::INFINITY {
        "+Inf".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Inf".to_owned()
    } else {
        format!("{f}")
    }
}

/// Go's `strconv.ParseBool`.
pub(crate) fn go_parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Parses a timestamp in one of the layouts yaml.v3 accepts and returns it as Go's
/// `time.Time.MarshalText` prints it (`with_nanos`) or as `Format(time.RFC3339)` (without).
///
/// Layouts: `2006-1-2T15:4:5.999999999Z07:00` (also with `t`), `2006-1-2 15:4:5.999999999`
/// (UTC) and `2006-1-2` (UTC midnight).
pub(crate) fn canonical_timestamp(s: &str, with_nanos: bool) -> Option<String> {
    let mut cur = Cursor {
        s: s.as_bytes(),
        i: 0,
    };
    let year = cur.number(4, 4)?;
    cur.expect(b'-')?;
    let month = cur.number(1, 2)?;
    cur.expect(b'-')?;
    let day = cur.number(1, 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if cur.done() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let zoned = match cur.next()? {
        b'T' | b't' => true,
        b' ' => false,
        _ => return None,
    };
    let hour = cur.number(1, 2)?;
    cur.expect(b':')?;
    let minute = cur.number(1, 2)?;
    cur.expect(b':')?;
    let second = cur.number(1, 2)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut nanos = String::new();
    if cur.peek() == Some(b'.') || cur.peek() == Some(b',') {
        cur.i += 1;
        let start = cur.i;
        while cur.peek().is_some_and(|c| c.is_ascii_digit()) {
            cur.i += 1;
        }
        let digits = &s[start..cur.i];
        if digits.is_empty() || digits.len() > 9 {
            return None;
        }
        nanos = digits.trim_end_matches('0').to_owned();
    }
    let zone = if zoned {
        match cur.next()? {
            b'Z' => "Z".to_owned(),
            sign @ (b'+' | b'-') => {
                let h = cur.number(2, 2)?;
                cur.expect(b':')?;
                let m = cur.number(2, 2)?;
                if h > 23 || m > 59 {
                    return None;
                }
                if h == 0 && m == 0 {
                    "Z".to_owned()
                } else {
                    format!("{}{h:02}:{m:02}", sign as char)
                }
            }
            _ => return None,
        }
    } else {
        "Z".to_owned()
    };
    if !cur.done() {
        return None;
    }
    let frac = if with_nanos && !nanos.is_empty() {
        format!(".{nanos}")
    } else {
        String::new()
    };
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{frac}{zone}"
    ))
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }
    fn done(&self) -> bool {
        self.i == self.s.len()
    }
    fn expect(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }
    fn number(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.i;
        while self.i - start < max && self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.s[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_like_yaml_v3() {
        let cases: &[(&str, Resolved)] = &[
            ("", Resolved::Null),
            ("~", Resolved::Null),
            ("TRUE", Resolved::Bool(true)),
            ("False", Resolved::Bool(false)),
            ("yes", Resolved::Str),
            ("on", Resolved::Str),
            ("0x1F", Resolved::Int(31)),
            ("0o17", Resolved::Int(15)),
            ("017", Resolved::Int(15)),
            ("0b101", Resolved::Int(5)),
            ("-12", Resolved::Int(-12)),
            ("1_000", Resolved::Int(1000)),
            ("1.50", Resolved::Float(1.5)),
            ("1e3", Resolved::Float(1000.0)),
            (".5", Resolved::Float(0.5)),
            ("-.inf", Resolved::Float(f64::NEG_INFINITY)),
            ("99999999999999999999", Resolved::Float(1e20)),
            ("18446744073709551615", Resolved::Uint),
            ("9223372036854775807", Resolved::Int(i64::MAX)),
            ("1.2.3", Resolved::Str),
            ("2024-01-02", Resolved::Time("2024-01-02T00:00:00Z".into())),
            (
                "2024-1-2T3:04:05.500+02:00",
                Resolved::Time("2024-01-02T03:04:05.5+02:00".into()),
            ),
            (
                "2024-01-02 03:04:05",
                Resolved::Time("2024-01-02T03:04:05Z".into()),
            ),
            ("2024-02-30", Resolved::Str),
            ("hello", Resolved::Str),
            ("-", Resolved::Str),
        ];
        for (text, want) in cases {
            assert_eq!(&resolve_plain(text), want, "resolving {text:?}");
        }
    }

    #[test]
    fn floats_print_like_go() {
        for (f, want) in [
            (1.5, "1.5"),
            (1000.0, "1000"),
            (1e21, "1000000000000000000000"),
            (1e-7, "0.0000001"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_format_float(f), want);
        }
    }

    #[test]
    fn timestamps_for_the_mac_aad_drop_fractions() {
        assert_eq!(
            canonical_timestamp("2026-11-29T14:06:29.25Z", false).as_deref(),
            Some("2026-11-29T14:06:29Z")
        );
        assert_eq!(
            canonical_timestamp("2026-11-29T14:06:29+00:00", true).as_deref(),
            Some("2026-11-29T14:06:29Z")
        );
    }

    #[test]
    fn refuses_what_sops_never_writes() {
        for (text, needle) in [
            ("a: &x 1\nb: *x\n", "anchors"),
            ("a: 1\n---\nb: 2\n", "2 YAML documents"),
            ("a: 1\na: 2\n", "duplicate key `a` at line 2, column 1"),
            (
                "a:\n  b: 1\n  c: 2\n  'b': 3\n",
                "duplicate key `b` at line 4, column 3",
            ),
            ("a: !!binary aGk=\n", "tag"),
            ("1: x\n", "not a string"),
            ("? [a]\n: x\n", "scalars"),
        ] {
            match parse(text) {
                Err(ParseError::Unsupported(msg)) => {
                    assert!(msg.contains(needle), "{text:?}: {msg}")
                }
                Err(ParseError::Syntax { info, .. }) => panic!("{text:?}: syntax error {info}"),
                Ok(_) => panic!("{text:?} was accepted"),
            }
        }
    }

    #[test]
    fn depth_is_bounded_and_refused_early() {
        let nested = |n: usize| format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(parse(&nested(MAX_DEPTH - 1)).is_ok());
        for text in [
            nested(MAX_DEPTH),
            "[".repeat(1_000_000),
            "- ".repeat(500_000),
        ] {
            match parse(&text) {
                Err(ParseError::Unsupported(msg)) => {
                    assert!(msg.contains("nesting deeper than 64 levels"), "{msg}")
                }
                Err(ParseError::Syntax { info, .. }) => panic!("syntax error {info}"),
                Ok(_) => panic!("accepted"),
            }
        }
    }

    #[test]
    fn keeps_order_and_quoting() {
        let Some(Node::Map(entries)) = parse("b: 1\na: '2'\nc: !!str 3\n").unwrap() else {
            panic!("not a map")
        };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        let plain: Vec<_> = entries
            .iter()
            .map(|(_, v)| matches!(v, Node::Scalar(s) if s.plain))
            .collect();
        assert_eq!(plain, [true, false, false]);
    }
}
