//! Property tests of PVE property strings (`virtio,bridge=vmbr0,tag=20`): any text parses or is
//! refused without a panic, and what parses prints canonically in a form that reads back the
//! same. Fixed seed and case count, so `cargo test` is repeatable; `fuzz/` runs the same entry
//! points unbounded.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use proxops_kind_sdk::propstring::PropString;

fn config() -> Config {
    Config {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x5052_4f50),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Text shaped like property strings, so that most cases get past the first character.
fn propish() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9=,:;./ _\\-\"\\\\\u{e9}]{0,40}").unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_parses_or_is_refused(text in any::<String>()) {
        let _ = PropString::parse(&text);
        let _ = PropString::parse_with_default(&text, "file");
    }

    #[test]
    fn the_canonical_form_reads_back_the_same(text in propish()) {
        if let Ok(p) = PropString::parse(&text) {
            let canonical = p.canonical();
            let again = PropString::parse(&canonical);
            prop_assert!(again.is_ok(), "{text:?} -> {canonical:?}: {again:?}");
            prop_assert_eq!(again.unwrap().canonical(), canonical.clone(), "from {:?}", text);
            // Every key keeps its value through the round trip.
            let back = PropString::parse(&canonical).unwrap();
            for key in text.split(',').filter_map(|i| i.split_once('=')).map(|(k, _)| k) {
                prop_assert_eq!(p.get(key), back.get(key), "{} in {:?}", key, text);
            }
        }
    }
}
