//! Property test of the host's manifest loading (`parse_yaml`: YAML limits, then serde_yaml):
//! any text, and YAML built from the constructs that break parsers (anchors, aliases, merge
//! keys, tags, flow collections, deep nesting, several documents, a BOM), never panics; a
//! refused file gets an error naming that file, with a message. Fixed seed and case count;
//! `fuzz/` runs the kinds' validation unbounded.

use proptest::prelude::*;
use proptest::test_runner::{Config as Runner, RngSeed};
use proxops_core::Severity;
use proxops_core::repo::parse_yaml;

const FILE: &str = "vm/lab/web.yaml";

fn runner(cases: u32) -> Runner {
    Runner {
        cases,
        rng_seed: RngSeed::Fixed(0x0059_414d),
        failure_persistence: None,
        ..Runner::default()
    }
}

/// One line of YAML-ish text: a key or list item at some depth with a value that may be an
/// anchor, an alias, a merge key, a tag, a flow collection or a document marker.
fn line() -> impl Strategy<Value = String> {
    let key = prop_oneof![
        Just("apiVersion".to_string()),
        Just("kind".to_string()),
        Just("metadata".to_string()),
        Just("spec".to_string()),
        Just("<<".to_string()),
        Just("? complex".to_string()),
        "[a-z]{1,6}",
    ];
    let value = prop_oneof![
        Just(String::new()),
        Just("&a".to_string()),
        Just("*a".to_string()),
        Just("&a {x: 1}".to_string()),
        Just("!!binary aGVsbG8=".to_string()),
        Just("!custom x".to_string()),
        Just("[1, [2, [3]]]".to_string()),
        Just("{a: {b: {c: *a}}}".to_string()),
        Just("|".to_string()),
        Just("'unterminated".to_string()),
        Just("1e999".to_string()),
        Just("0x7fffffffffffffffff".to_string()),
        Just("~".to_string()),
        "[ -~]{0,16}",
    ];
    let marker = prop_oneof![
        Just("---".to_string()),
        Just("...".to_string()),
        Just("\u{feff}".to_string()),
        Just("%YAML 1.2".to_string()),
    ];
    prop_oneof![
        8 => (0usize..12, any::<bool>(), key, value).prop_map(|(depth, item, k, v)| {
            format!("{}{}{k}: {v}", "  ".repeat(depth), if item { "- " } else { "" })
        }),
        1 => marker,
    ]
}

fn check(text: &str) {
    match parse_yaml(FILE, text) {
        Ok(v) => assert!(v.is_object(), "accepted a non-mapping: {v}"),
        Err(d) => {
            assert_eq!(d.file, FILE, "{d:?}");
            assert_eq!(d.severity, Severity::Error, "{d:?}");
            assert!(!d.message.trim().is_empty(), "{d:?}");
        }
    }
}

#[test]
fn any_text_is_refused_with_the_file_named_or_read_as_a_mapping() {
    proptest!(runner(512), |(text in any::<String>())| check(&text));
}

#[test]
fn yaml_that_breaks_parsers_is_refused_with_the_file_named_or_read_as_a_mapping() {
    proptest!(runner(512), |(lines in prop::collection::vec(line(), 0..40))| {
        check(&lines.join("\n"));
    });
}

#[test]
fn nesting_past_the_limit_is_refused_not_overflowed() {
    proptest!(runner(16), |(depth in 65usize..1_000, flow in any::<bool>())| {
        let text = if flow {
            format!("spec: {}{}", "[".repeat(depth), "]".repeat(depth))
        } else {
            (0..depth)
                .map(|i| format!("{}k{i}:", " ".repeat(i)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let d = parse_yaml(FILE, &text).expect_err("too deep");
        assert_eq!(d.file, FILE);
        assert!(d.message.contains("deep") || d.message.contains("nest"), "{d:?}");
    });
}
