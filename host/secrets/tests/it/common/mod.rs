//! Helpers shared by the integration tests: fixture paths and the committed TEST-ONLY key.
#![allow(dead_code)]

use std::path::PathBuf;

use proxops_secrets::Identities;

/// `tests/fixtures/sops/` at the workspace root.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sops")
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The committed TEST-ONLY key every fixture is encrypted to.
pub fn test_key() -> Identities {
    Identities::from_file(&fixture("TEST-ONLY-age-key.txt")).expect("the test key loads")
}

/// The second TEST-ONLY key, which most fixtures are not encrypted to.
pub fn other_key() -> Identities {
    Identities::from_file(&fixture("TEST-ONLY-other-age-key.txt")).expect("the other key loads")
}
