//! Property tests of SOPS documents: the real sops's fixtures with a byte replaced, a span cut
//! out or any text put in, read with the key they are encrypted to. Nothing panics; a refused
//! document's error names its file. Fixed seed and case count; `fuzz/` runs the same entry
//! point unbounded.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use proxops_secrets::SopsDocument;

use crate::common::{fixture, test_key};

const FIXTURES: [&str; 6] = [
    "cluster.sops.yaml",
    "canary.sops.yaml",
    "encrypted-regex.sops.yaml",
    "key-groups.sops.yaml",
    "multi-doc.sops.yaml",
    "two-recipients.sops.yaml",
];

fn config() -> Config {
    Config {
        cases: 128,
        rng_seed: RngSeed::Fixed(0x0053_4f50),
        failure_persistence: None,
        ..Config::default()
    }
}

/// What an edit does to a fixture's bytes.
#[derive(Debug, Clone)]
enum Edit {
    Replace(prop::sample::Index, u8),
    Cut(prop::sample::Index, usize),
    Insert(prop::sample::Index, String),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Replace(i, b)),
        (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| Edit::Cut(i, n)),
        (any::<prop::sample::Index>(), "[ -~\n]{0,24}").prop_map(|(i, s)| Edit::Insert(i, s)),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    match edit {
        Edit::Replace(i, b) => {
            let at = i.index(bytes.len());
            bytes[at] = *b;
        }
        Edit::Cut(i, n) => {
            let at = i.index(bytes.len());
            let end = (at + n).min(bytes.len());
            bytes.drain(at..end);
        }
        Edit::Insert(i, s) => {
            let at = i.index(bytes.len());
            bytes.splice(at..at, s.bytes());
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn an_edited_document_opens_or_is_refused_naming_its_file(
        which in 0..FIXTURES.len(),
        edits in prop::collection::vec(edit(), 1..4),
    ) {
        let key = test_key();
        let mut bytes = std::fs::read(fixture(FIXTURES[which])).unwrap();
        for e in &edits {
            apply(&mut bytes, e);
        }
        let path = Path::new("secrets/lab.sops.yaml");
        if let Err(e) = SopsDocument::from_bytes(path, &bytes, &key) {
            let said = e.to_string();
            prop_assert!(said.contains("secrets/lab.sops.yaml"), "{edits:?}: {said}");
        }
    }

    #[test]
    fn any_text_opens_or_is_refused(text in any::<String>()) {
        let _ = SopsDocument::from_yaml(Path::new("x.sops.yaml"), &text, &test_key());
    }
}
