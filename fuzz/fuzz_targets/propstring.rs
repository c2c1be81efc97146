//! PVE property strings: parsing never panics, and the canonical form reads back the same
//! (the property test in guest-kinds/sdk/tests/props.rs, unbounded).
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxops_kind_sdk::propstring::PropString;

fuzz_target!(|text: &str| {
    let _ = PropString::parse_with_default(text, "file");
    if let Ok(p) = PropString::parse(text) {
        let canonical = p.canonical();
        let again = PropString::parse(&canonical).expect("a canonical form parses");
        assert_eq!(again.canonical(), canonical);
    }
});
