//! SOPS documents read with the committed TEST-ONLY key (host/secrets/tests/it/props.rs,
//! unbounded): nothing panics, and a refused document's error names its file. Seed the corpus
//! with tests/fixtures/sops/*.sops.yaml.
#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use proxops_secrets::{Identities, SopsDocument};

fn key() -> &'static Identities {
    static KEY: OnceLock<Identities> = OnceLock::new();
    KEY.get_or_init(|| {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/sops/TEST-ONLY-age-key.txt");
        Identities::from_file(&file).expect("the TEST-ONLY key loads")
    })
}

fuzz_target!(|bytes: &[u8]| {
    let path = Path::new("secrets/lab.sops.yaml");
    if let Err(e) = SopsDocument::from_bytes(path, bytes, key()) {
        assert!(e.to_string().contains("secrets/lab.sops.yaml"), "{e}");
    }
});
