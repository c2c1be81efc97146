//! The limits every YAML document proxops reads is held to, checked before the document is
//! turned into values: size, nesting depth and duplicate mapping keys.
//!
//! serde_yaml (libyaml) accepts duplicate keys and keeps the last one, so a reviewer could
//! approve `memory: 2GiB` while `memory: 64GiB` further down is what runs; and its cost grows
//! faster than linearly with nesting depth (an 80,000-deep list took 28 s). So a document is
//! first streamed through yaml-rust2's event parser, which stops at the first key seen twice
//! or the first collection nested deeper than [`MAX_DEPTH`]; only a document that passes
//! reaches serde_yaml. The work before a refusal is linear in the bytes read up to it.

use std::collections::HashSet;

use yaml_rust2::parser::{Event, Parser};

use crate::diag::quote;

/// The largest YAML file proxops reads: manifests, cluster files, `proxops.yaml`, SOPS files.
pub const MAX_BYTES: usize = 1024 * 1024;

/// The deepest nesting of mappings and sequences in a document (a VM manifest needs about 6).
pub const MAX_DEPTH: usize = 64;

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

/// Check size, depth and duplicate keys of every document in `text`.
pub fn check(text: &str) -> Result<(), Problem> {
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
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| Problem {
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
        let at = |stack: &[Frame], message: String| Problem {
            line: mark.line(),
            column: mark.col() + 1,
            path: path_of(stack),
            message,
        };
        match event {
            Event::StreamEnd => return Ok(()),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(at(
                        &stack,
                        format!("nesting deeper than {MAX_DEPTH} levels is refused"),
                    ));
                }
                key_or_value(&mut stack, None);
                stack.push(if matches!(event, Event::MappingStart(..)) {
                    Frame::Map {
                        keys: HashSet::new(),
                        expect_key: true,
                        key: None,
                    }
                } else {
                    Frame::Seq { index: None }
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                stack.pop();
            }
            Event::Scalar(text, ..) => {
                if let Some(Frame::Map {
                    keys,
                    expect_key: true,
                    ..
                }) = stack.last()
                    && keys.contains(&text)
                {
                    let mut problem = at(
                        &stack,
                        format!(
                            "duplicate key `{}`; YAML keeps only the last one, so remove one of them",
                            quote(&text)
                        ),
                    );
                    // The field written twice: `spec.memory`.
                    if !problem.path.is_empty() {
                        problem.path.push('.');
                    }
                    problem.path.push_str(&quote(&text));
                    return Err(problem);
                }
                key_or_value(&mut stack, Some(text));
            }
            Event::Alias(_) => {
                // A key written as an alias would hide a duplicate from the check above.
                if let Some(Frame::Map {
                    expect_key: true, ..
                }) = stack.last()
                {
                    return Err(at(
                        &stack,
                        "an alias (`*name`) used as a mapping key; write the key out".to_string(),
                    ));
                }
                key_or_value(&mut stack, None)
            }
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {}
        }
    }
}

enum Frame {
    Map {
        keys: HashSet<String>,
        /// The next node is a key.
        expect_key: bool,
        /// The key whose value comes next (`None` for a non-scalar key).
        key: Option<String>,
    },
    Seq {
        /// Index of the current item.
        index: Option<usize>,
    },
}

/// A node starts in the innermost collection: a key or a value of a mapping, or an item.
fn key_or_value(stack: &mut [Frame], scalar: Option<String>) {
    match stack.last_mut() {
        Some(Frame::Map {
            keys,
            expect_key,
            key,
        }) => {
            if *expect_key {
                if let Some(text) = &scalar {
                    keys.insert(text.clone());
                }
                *key = scalar;
            }
            *expect_key = !*expect_key;
        }
        Some(Frame::Seq { index }) => *index = Some(index.map_or(0, |i| i + 1)),
        None => {}
    }
}

/// `spec.disks[1].size` for the node being read.
fn path_of(stack: &[Frame]) -> String {
    let mut out = String::new();
    for (i, frame) in stack.iter().enumerate() {
        match frame {
            // The innermost mapping between two entries (`expect_key`) has no current key.
            Frame::Map {
                key: Some(k),
                expect_key,
                ..
            } if i + 1 < stack.len() || !*expect_key => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&quote(k));
            }
            Frame::Map { .. } => {}
            Frame::Seq { index } => out.push_str(&format!("[{}]", index.unwrap_or(0))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
            // Several documents are checked one by one (the caller refuses more than one).
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
        // A hostile 1 MB file: refused within its first kilobyte (yaml-rust2's scanner reads
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
}
