//! Reading YAML: one pass over saphyr's event stream (a YAML 1.2 parser) that holds every
//! document to the limits (size, nesting depth, duplicate mapping keys, alias expansion) and
//! builds its JSON value at the same time.
//!
//! Why the limits: a YAML library that accepts duplicate keys keeps the last one, so a
//! reviewer could approve `memory: 2GiB` while `memory: 64GiB` further down is what runs; and
//! libyaml's cost grows faster than linearly with nesting depth (an 80,000-deep list took 28 s
//! in serde_yaml). The event parser stops at the first key seen twice or the first collection
//! nested deeper than [`MAX_DEPTH`], so the work before a refusal is linear in the bytes read
//! up to it.
//!
//! Why one pass: proxops used to stream each document through an event parser for the limits
//! and then parse it again with serde_yaml; on the 10,000 manifests of the plan at scale the
//! two passes were a quarter of a whole plan's CPU (`proxops-bench`, section 6).
//!
//! Values are what serde_yaml 0.9 gives for the same text read into `serde_json::Value` (the
//! YAML 1.2 core schema as serde_yaml applies it), which manifests have always been read
//! with; a differential property test (`host/core/tests/props.rs`) holds the two to it. Where
//! this reader deliberately differs (GAPS.md): a mapping key must be a non-empty scalar; a
//! local tag (`!foo`) is refused with its own message; aliases may copy at most
//! [`MAX_ALIAS_WEIGHT`] into a document, where serde_yaml bounded only the number of jumps;
//! and a few flow-collection forms YAML 1.2 allows and libyaml (YAML 1.1) refused are read.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle as TScalarStyle, Tag};
use serde_json::{Map, Number, Value};

use crate::diag::quote;

/// The largest YAML file proxops reads: manifests, cluster files, `proxops.yaml`, SOPS files.
pub const MAX_BYTES: usize = 1024 * 1024;

/// The deepest nesting of mappings and sequences in a document (a VM manifest needs about 6).
pub const MAX_DEPTH: usize = 64;

/// How much aliases may copy into one document: the weight (one per node plus the bytes of
/// every string and key) of everything they expand to. A document whose aliases copy more is
/// refused (a few lines of anchors can otherwise stand for gigabytes).
pub const MAX_ALIAS_WEIGHT: usize = 8 * MAX_BYTES;

/// The prefix of the YAML core schema's tags (`!!int` is `tag:yaml.org,2002:int`).
const CORE_TAG: &str = "tag:yaml.org,2002:";

/// Why a document was refused, located at the offending event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based; 0 when the problem is about the whole text (its size).
    pub line: usize,
    pub column: usize,
    /// Field path of the offending node, e.g. `spec.memory`; empty for the document.
    pub path: String,
    pub message: String,
}

/// The text without a leading UTF-8 byte order mark (editors on Windows write one).
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Every document of `text` as JSON, in order, each held to the limits. A text with no
/// document (empty, or only comments) gives none; an empty document is `null`.
pub fn parse(text: &str) -> Result<Vec<Value>, Problem> {
    if text.len() > MAX_BYTES {
        return Err(Problem {
            line: 0,
            column: 0,
            path: String::new(),
            message: format!(
                "the file is {} bytes; proxops reads YAML files of at most {MAX_BYTES} bytes",
                text.len()
            ),
        });
    }
    let mut reader = Reader::default();
    let mut parser = Parser::new_from_str(text);
    loop {
        let Some(next) = parser.next_event() else {
            return Ok(reader.documents);
        };
        let (event, span) = next.map_err(|e| Problem {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            path: String::new(),
            // The scanner looks ahead and has a flow nesting limit of its own (256).
            message: if e.info().contains("recursion limit exceeded") {
                format!("nesting deeper than {MAX_DEPTH} levels is refused")
            } else {
                format!("invalid YAML: {}", e.info())
            },
        })?;
        if let Event::StreamEnd = event {
            return Ok(reader.documents);
        }
        let mark = span.start;
        reader.event(event).map_err(|refused| {
            let mut path = path_of(&reader.stack);
            // A duplicate key is located at the field written twice: `spec.memory`.
            if let Some(field) = refused.field {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&quote(&field));
            }
            Problem {
                line: mark.line(),
                column: mark.col() + 1,
                path,
                message: refused.message,
            }
        })?;
    }
}

/// A collection being read.
enum Frame {
    Map {
        map: Map<String, Value>,
        /// The key whose value comes next; `None` while a key is expected.
        key: Option<String>,
        anchor: usize,
    },
    Seq {
        items: Vec<Value>,
        anchor: usize,
    },
}

/// What an anchor names: a scalar (resolved where an alias uses it, since the same scalar is
/// a plain string as a key and may be a number as a value) or a finished collection.
enum Anchored {
    Scalar {
        text: String,
        style: TScalarStyle,
        tag: Option<Tag>,
    },
    Node {
        value: Value,
        weight: usize,
    },
}

/// Why an event was refused: the message, and the key it is about when that key is not yet
/// part of the path (a duplicate).
struct Refused {
    message: String,
    field: Option<String>,
}

impl From<String> for Refused {
    fn from(message: String) -> Self {
        Refused {
            message,
            field: None,
        }
    }
}

impl From<&str> for Refused {
    fn from(message: &str) -> Self {
        message.to_string().into()
    }
}

#[derive(Default)]
struct Reader {
    stack: Vec<Frame>,
    documents: Vec<Value>,
    anchors: HashMap<usize, Anchored>,
    /// Weight the document's aliases have copied so far.
    copied: usize,
}

impl Reader {
    /// Take one event; a refusal becomes a [`Problem`] located at the event.
    fn event(&mut self, event: Event) -> Result<(), Refused> {
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) if self.expects_key() => {
                Err("a mapping key must be a plain value, not a list or a mapping".into())
            }
            Event::SequenceStart(anchor, tag) => {
                self.open(tag.as_deref())?;
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    anchor,
                });
                Ok(())
            }
            Event::MappingStart(anchor, tag) => {
                self.open(tag.as_deref())?;
                self.stack.push(Frame::Map {
                    map: Map::new(),
                    key: None,
                    anchor,
                });
                Ok(())
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
                    Some(Frame::Seq { items, anchor }) => (Value::Array(items), anchor),
                    None => return Err("the end of a collection that never started".into()),
                };
                if anchor != 0 {
                    let weight = weight(&value);
                    self.anchors.insert(
                        anchor,
                        Anchored::Node {
                            value: value.clone(),
                            weight,
                        },
                    );
                }
                self.node(value);
                Ok(())
            }
            Event::Scalar(text, style, anchor, tag) => {
                let (text, tag) = (text.into_owned(), tag.map(|t| t.into_owned()));
                if self.expects_key() {
                    return self.key(text, anchor, style, tag);
                }
                let value = scalar(&text, style, tag.as_ref())?;
                if anchor != 0 {
                    self.anchors
                        .insert(anchor, Anchored::Scalar { text, style, tag });
                }
                self.node(value);
                Ok(())
            }
            Event::Alias(anchor) => {
                if self.expects_key() {
                    // A key written as an alias would hide a duplicate from the check.
                    return Err(
                        "an alias (`*name`) used as a mapping key; write the key out".into(),
                    );
                }
                let (value, weight) = match self.anchors.get(&anchor) {
                    Some(Anchored::Scalar { text, style, tag }) => {
                        (scalar(text, *style, tag.as_ref())?, 1 + text.len())
                    }
                    Some(Anchored::Node { value, weight }) => (value.clone(), *weight),
                    None => {
                        return Err(
                            "an alias (`*name`) of the collection it is inside; a document cannot contain itself".into(),
                        );
                    }
                };
                self.copied += weight;
                if self.copied > MAX_ALIAS_WEIGHT {
                    return Err(format!(
                        "aliases (`*name`) expand this document by more than {MAX_ALIAS_WEIGHT} bytes; write the values out"
                    )
                    .into());
                }
                self.node(value);
                Ok(())
            }
            Event::DocumentStart(_) => {
                self.anchors.clear();
                self.copied = 0;
                Ok(())
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => Ok(()),
        }
    }

    /// The next node is a key of the innermost mapping.
    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    /// A collection starts: within the depth limit, with no tag a JSON value cannot carry.
    fn open(&self, tag: Option<&Tag>) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!("nesting deeper than {MAX_DEPTH} levels is refused"));
        }
        match tag.map(full_tag) {
            Some(t) if t.starts_with('!') => Err(local_tag(&t)),
            _ => Ok(()),
        }
    }

    /// A key of the innermost mapping: its text as written (a key is a string whatever it
    /// looks like, as in serde_yaml), refused when the mapping has it already.
    fn key(
        &mut self,
        text: String,
        anchor: usize,
        style: TScalarStyle,
        tag: Option<Tag>,
    ) -> Result<(), Refused> {
        let Some(Frame::Map { map, key, .. }) = self.stack.last_mut() else {
            unreachable!("a key is read in a mapping");
        };
        if text.is_empty() && style == TScalarStyle::Plain {
            // `: value` would be an entry with an empty key; libyaml refuses it too.
            return Err("a mapping entry without a key (write the key, or quote an empty one: `\"\": value`)".into());
        }
        if map.contains_key(&text) {
            return Err(Refused {
                message: format!(
                    "duplicate key `{}`; YAML keeps only the last one, so remove one of them",
                    quote(&text)
                ),
                field: Some(text),
            });
        }
        if anchor != 0 {
            self.anchors.insert(
                anchor,
                Anchored::Scalar {
                    text: text.clone(),
                    style,
                    tag,
                },
            );
        }
        *key = Some(text);
        Ok(())
    }

    /// A finished node goes into its collection, or is a document.
    fn node(&mut self, value: Value) {
        match self.stack.last_mut() {
            Some(Frame::Map { map, key, .. }) => {
                let key = key.take().expect("a value follows its key");
                map.insert(key, value);
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            None => self.documents.push(value),
        }
    }
}

/// `spec.disks[1].size` for the node being read (for a duplicate key, the mapping it is in;
/// the caller adds the key).
fn path_of(stack: &[Frame]) -> String {
    let mut out = String::new();
    for frame in stack {
        match frame {
            Frame::Map { key: Some(k), .. } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&quote(k));
            }
            Frame::Map { key: None, .. } => {}
            Frame::Seq { items, .. } => out.push_str(&format!("[{}]", items.len())),
        }
    }
    out
}

/// One per node, plus the bytes of every string and key: what copying `value` costs.
fn weight(value: &Value) -> usize {
    match value {
        Value::String(s) => 1 + s.len(),
        Value::Array(items) => 1 + items.iter().map(weight).sum::<usize>(),
        Value::Object(map) => 1 + map.iter().map(|(k, v)| k.len() + weight(v)).sum::<usize>(),
        _ => 1,
    }
}

fn full_tag(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

fn local_tag(tag: &str) -> String {
    format!(
        "the YAML tag `{}` is not supported (proxops files hold plain values); remove it",
        quote(tag)
    )
}

/// A scalar's value: plain scalars are resolved (null, booleans, numbers), quoted and block
/// scalars are strings, core-schema tags (`!!int`, `!!str`, …) decide for themselves.
fn scalar(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> Result<Value, String> {
    let Some(tag) = tag else {
        return Ok(if style == TScalarStyle::Plain {
            plain(text)?
        } else {
            Value::String(text.to_string())
        });
    };
    let tag = full_tag(tag);
    let expected = |what: &str| {
        format!(
            "`{}` is tagged `!!{}` but is not {what}",
            quote(text),
            tag.trim_start_matches(CORE_TAG)
        )
    };
    match tag.strip_prefix(CORE_TAG) {
        Some("bool") => boolean(text)
            .map(Value::Bool)
            .ok_or_else(|| expected("true or false")),
        Some("int") => integer(text).unwrap_or_else(|| Err(expected("an integer"))),
        Some("float") => float(text)
            .map(float_value)
            .ok_or_else(|| expected("a number")),
        Some("null") => is_null(text)
            .then_some(Value::Null)
            .ok_or_else(|| expected("null (`~` or `null`)")),
        _ if tag.starts_with('!') => Err(local_tag(&tag)),
        // `!!str`, and every other tag a JSON value has no type for: the text.
        _ => Ok(Value::String(text.to_string())),
    }
}

/// A plain scalar: empty or `null` is null, then a boolean, an integer, a number; anything
/// else is the string as written. Digits with a leading zero (`007`) stay a string.
fn plain(text: &str) -> Result<Value, String> {
    if text.is_empty() || is_null(text) {
        return Ok(Value::Null);
    }
    if let Some(b) = boolean(text) {
        return Ok(Value::Bool(b));
    }
    if let Some(number) = integer(text) {
        return number;
    }
    if !leading_zero_digits(text)
        && let Some(f) = float(text)
    {
        return Ok(float_value(f));
    }
    Ok(Value::String(text.to_string()))
}

fn is_null(text: &str) -> bool {
    matches!(text, "~" | "null" | "Null" | "NULL")
}

fn boolean(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// `007`, `-007`, `+00`: digits after a leading zero, which YAML 1.2 reads as a string.
fn leading_zero_digits(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    digits.len() > 1 && digits.starts_with('0') && digits[1..].bytes().all(|b| b.is_ascii_digit())
}

/// `None` when `text` is not written as an integer; else the number, or why it cannot be one
/// (JSON numbers are 64-bit).
fn integer(text: &str) -> Option<Result<Value, String>> {
    let out_of_range = || {
        format!(
            "`{}` is out of range for a number (at most 64 bits)",
            quote(text)
        )
    };
    if let Some(n) = unsigned(text) {
        return Some(
            u64::try_from(n)
                .map(|n| Value::Number(n.into()))
                .map_err(|_| out_of_range()),
        );
    }
    let n = negative(text)?;
    Some(
        i64::try_from(n)
            .map(|n| Value::Number(n.into()))
            .map_err(|_| out_of_range()),
    )
}

/// Integers without a minus sign: an optional `+`, then `0x`, `0o` or `0b` digits, or decimal
/// digits (without a leading zero).
fn unsigned(text: &str) -> Option<u128> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = digits.strip_prefix(prefix) {
            if rest.starts_with(['+', '-']) {
                return None;
            }
            if let Ok(n) = u128::from_str_radix(rest, radix) {
                return Some(n);
            }
        }
    }
    if digits.starts_with(['+', '-']) || leading_zero_digits(text) {
        return None;
    }
    digits.parse::<u128>().ok()
}

/// Integers with a minus sign: `-0x`, `-0o`, `-0b` digits, or decimal.
fn negative(text: &str) -> Option<i128> {
    for (prefix, radix) in [("-0x", 16), ("-0o", 8), ("-0b", 2)] {
        if let Some(rest) = text.strip_prefix(prefix)
            && let Ok(n) = i128::from_str_radix(&format!("-{rest}"), radix)
        {
            return Some(n);
        }
    }
    if leading_zero_digits(text) {
        return None;
    }
    text.parse::<i128>().ok()
}

/// A finite decimal number, or `.inf`, `-.inf`, `.nan` (in three spellings each).
fn float(text: &str) -> Option<f64> {
    let unsigned = match text.strip_prefix('+') {
        Some(rest) if rest.starts_with(['+', '-']) => return None,
        Some(rest) => rest,
        None => text,
    };
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") {
        return Some(f64::INFINITY);
    }
    if matches!(text, "-.inf" | "-.Inf" | "-.INF") {
        return Some(f64::NEG_INFINITY);
    }
    if matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// JSON has no infinity or NaN: those are null.
fn float_value(f: f64) -> Value {
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// The first document of `text` held to the limits, for callers that only need the check.
#[cfg(test)]
fn check(text: &str) -> Result<(), Problem> {
    parse(text).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `expected`: `None` for accepted, else `line:column: path: message` (a prefix of it).
    fn check_case(text: &str, expected: Option<&str>) {
        let got = check(text)
            .err()
            .map(|p| format!("{}:{}: {}: {}", p.line, p.column, p.path, p.message));
        match (got.as_deref(), expected) {
            (None, None) => {}
            (Some(got), Some(want)) => assert!(got.starts_with(want), "{text:?}: {got}"),
            (got, want) => panic!("{text:?}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn duplicate_keys_are_located() {
        let cases: &[(&str, Option<&str>)] = &[
            ("a: 1\nb: 2\n", None),
            ("a: 1\na: 2\n", Some("2:1: a: duplicate key `a`")),
            (
                "spec:\n  memory: 2GiB\n  node: pve01\n  memory: 64GiB\n",
                Some("4:3: spec.memory: duplicate key `memory`"),
            ),
            ("a: 1\n'a': 2\n", Some("2:1: a: duplicate key `a`")),
            (
                "kind: VM\nkind: Computer\n",
                Some("2:1: kind: duplicate key `kind`"),
            ),
            (
                "spec:\n  disks:\n    - {size: 1GiB, size: 2GiB}\n",
                Some("3:20: spec.disks[0].size: duplicate key `size`"),
            ),
            // The same key in two different mappings is fine.
            ("a: {x: 1}\nb: {x: 1}\nc: [{x: 1}, {x: 2}]\n", None),
            // A value equal to a key is not a key.
            ("a: b\nb: a\n", None),
            ("a: [a, a]\n", None),
            // Several documents are read one by one (the caller refuses more than one).
            ("a: 1\n---\na: 2\n", None),
            // An alias as a key would hide a duplicate; an alias as a value is fine.
            (
                "spec:\n  &k memory: 2GiB\n  *k : 64GiB\n",
                Some("3:3: spec: an alias (`*name`) used as a mapping key"),
            ),
            ("a: &v 1\nb: *v\n", None),
        ];
        for (text, want) in cases {
            check_case(text, *want);
        }
    }

    #[test]
    fn depth_is_bounded() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        check_case(&nested(MAX_DEPTH), None);
        check_case(
            &nested(MAX_DEPTH + 1),
            Some(&format!("1:{}: ", MAX_DEPTH + 1)),
        );
        let block = |n: usize| {
            (0..n)
                .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
                .collect::<String>()
        };
        check_case(&block(MAX_DEPTH), None);
        check_case(&block(MAX_DEPTH + 1), Some(&format!("{}:", MAX_DEPTH + 1)));
        // A hostile 1 MB file: refused within its first kilobyte (the scanner reads
        // a little ahead and stops at its own limit of 256 flow levels).
        let hostile = "[".repeat(1_000_000);
        let p = check(&hostile).unwrap_err();
        assert!(p.line == 1 && p.column <= 1024, "{p:?}");
        assert!(p.message.contains("nesting deeper than 64"), "{p:?}");
        let hostile = "- ".repeat(500_000);
        assert!(check(&hostile).unwrap_err().message.contains("nesting"));
    }

    #[test]
    fn size_is_bounded_before_parsing() {
        let big = format!("a: '{}'\n", "x".repeat(MAX_BYTES));
        let p = check(&big).unwrap_err();
        assert_eq!((p.line, p.column), (0, 0));
        assert!(p.message.contains("at most 1048576 bytes"), "{p:?}");
        check_case(&format!("a: '{}'\n", "x".repeat(MAX_BYTES - 10)), None);
    }

    #[test]
    fn syntax_errors_are_located() {
        check_case("a: [1, 2\n", Some("2:1: : invalid YAML:"));
    }

    #[test]
    fn a_bom_is_stripped() {
        assert_eq!(strip_bom("\u{feff}a: 1\n"), "a: 1\n");
        assert_eq!(strip_bom("a: 1\n"), "a: 1\n");
    }

    /// `value: <text>` read as a document: its value, or the start of the refusal.
    fn check_value(text: &str, expected: Result<Value, &str>) {
        let got = parse(&format!("value: {text}\n"))
            .map(|mut docs| docs.remove(0)["value"].take())
            .map_err(|p| p.message);
        match (&got, &expected) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{text:?}"),
            (Err(got), Err(want)) => assert!(got.starts_with(want), "{text:?}: {got}"),
            _ => panic!("{text:?}: got {got:?}, expected {expected:?}"),
        }
    }

    #[test]
    fn plain_scalars_are_resolved_as_serde_yaml_does() {
        let cases: &[(&str, Result<Value, &str>)] = &[
            ("", Ok(Value::Null)),
            ("~", Ok(Value::Null)),
            ("null", Ok(Value::Null)),
            ("NULL", Ok(Value::Null)),
            ("nULL", Ok(json!("nULL"))),
            ("true", Ok(json!(true))),
            ("False", Ok(json!(false))),
            ("tRue", Ok(json!("tRue"))),
            // YAML 1.1's booleans are strings.
            ("yes", Ok(json!("yes"))),
            ("off", Ok(json!("off"))),
            ("0", Ok(json!(0))),
            ("42", Ok(json!(42))),
            ("+42", Ok(json!(42))),
            ("-42", Ok(json!(-42))),
            ("-0", Ok(json!(0))),
            ("0x1F", Ok(json!(31))),
            ("0o17", Ok(json!(15))),
            ("0b101", Ok(json!(5))),
            ("-0x10", Ok(json!(-16))),
            ("+0x10", Ok(json!(16))),
            ("0x", Ok(json!("0x"))),
            ("0x+1", Ok(json!("0x+1"))),
            ("0X1F", Ok(json!("0X1F"))),
            ("007", Ok(json!("007"))),
            ("-007", Ok(json!("-007"))),
            ("1_000", Ok(json!("1_000"))),
            ("18446744073709551615", Ok(json!(u64::MAX))),
            ("-9223372036854775808", Ok(json!(i64::MIN))),
            (
                "18446744073709551616",
                Err("`18446744073709551616` is out of range"),
            ),
            (
                "-9223372036854775809",
                Err("`-9223372036854775809` is out of range"),
            ),
            // Past 128 bits it is not an integer at all, but still a number.
            (
                "1000000000000000000000000000000000000000000",
                Ok(json!(1e42)),
            ),
            ("1.5", Ok(json!(1.5))),
            ("-1.5e3", Ok(json!(-1500.0))),
            ("1e3", Ok(json!(1000.0))),
            (".5", Ok(json!(0.5))),
            ("1.", Ok(json!(1.0))),
            ("007.5", Ok(json!(7.5))),
            ("1e999", Ok(json!("1e999"))),
            (".inf", Ok(Value::Null)),
            ("-.Inf", Ok(Value::Null)),
            (".NaN", Ok(Value::Null)),
            ("inf", Ok(json!("inf"))),
            ("nan", Ok(json!("nan"))),
            ("++1", Ok(json!("++1"))),
            ("8GiB", Ok(json!("8GiB"))),
            ("'42'", Ok(json!("42"))),
            ("\"true\"", Ok(json!("true"))),
            ("|\n  7\n", Ok(json!("7\n"))),
        ];
        for (text, want) in cases {
            check_value(text, want.clone());
        }
    }

    #[test]
    fn tags_of_the_core_schema_decide_the_type() {
        let cases: &[(&str, Result<Value, &str>)] = &[
            ("!!str 42", Ok(json!("42"))),
            ("!!str true", Ok(json!("true"))),
            ("!!int 42", Ok(json!(42))),
            ("!!int '42'", Ok(json!(42))),
            (
                "!!int x",
                Err("`x` is tagged `!!int` but is not an integer"),
            ),
            ("!!float 1", Ok(json!(1.0))),
            ("!!float 007", Ok(json!(7.0))),
            ("!!bool true", Ok(json!(true))),
            ("!!bool yes", Err("`yes` is tagged `!!bool`")),
            ("!!null ~", Ok(Value::Null)),
            ("!!null ''", Err("`` is tagged `!!null`")),
            ("!!binary aGVsbG8=", Ok(json!("aGVsbG8="))),
            ("!custom x", Err("the YAML tag `!custom` is not supported")),
            (
                "!custom {a: 1}",
                Err("the YAML tag `!custom` is not supported"),
            ),
            ("!!map {a: 1}", Ok(json!({"a": 1}))),
        ];
        for (text, want) in cases {
            check_value(text, want.clone());
        }
    }

    #[test]
    fn keys_are_strings_as_written_and_aliases_copy_values() {
        let docs = parse("1: a\ntrue: b\n~: c\n0x10: d\n'q': e\n").unwrap();
        assert_eq!(
            docs[0],
            json!({"1": "a", "true": "b", "~": "c", "0x10": "d", "q": "e"})
        );
        // An anchored key aliased as a value is resolved as a value.
        let docs = parse("&k 12: x\nv: *k\nl: &l [1, {a: 2}]\nm: *l\n").unwrap();
        assert_eq!(
            docs[0],
            json!({"12": "x", "v": 12, "l": [1, {"a": 2}], "m": [1, {"a": 2}]})
        );
        // Merge keys are not applied (serde_yaml does not either).
        let docs = parse("a: &a {x: 1}\nb: {<<: *a}\n").unwrap();
        assert_eq!(docs[0]["b"], json!({"<<": {"x": 1}}));
        assert!(
            parse("? [a]\n: b\n")
                .unwrap_err()
                .message
                .contains("mapping key")
        );
        assert!(
            parse("a: &x [*x]\n")
                .unwrap_err()
                .message
                .contains("inside")
        );
    }

    #[test]
    fn aliases_cannot_blow_a_document_up() {
        // Ten levels of ten aliases each: 10^10 copies of the first string.
        let mut text = String::from("l0: &l0 [\"a long string, repeated\"]\n");
        for i in 1..10 {
            let prev = format!("*l{}", i - 1);
            text.push_str(&format!(
                "l{i}: &l{i} [{}]\n",
                [prev.as_str(); 10].join(", ")
            ));
        }
        let p = parse(&text).unwrap_err();
        assert!(p.message.contains("expand this document"), "{p:?}");
        assert!(p.path.starts_with('l'), "{p:?}");
    }

    #[test]
    fn documents_are_listed_in_order() {
        assert_eq!(parse("").unwrap(), Vec::<Value>::new());
        assert_eq!(parse("# only a comment\n").unwrap(), Vec::<Value>::new());
        assert_eq!(parse("---\n").unwrap(), vec![Value::Null]);
        assert_eq!(
            parse("a: 1\n---\n- 2\n").unwrap(),
            vec![json!({"a": 1}), json!([2])]
        );
    }
}
