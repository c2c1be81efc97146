//! Property tests of what the client reads from PVE without a schema: UPIDs (task ids, in every
//! async answer and task list). Any text parses or is refused without a panic, and a UPID
//! built from any node, type, id and user reads back those parts. Fixed seed and case count;
//! `fuzz/` runs the same entry point unbounded.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use proxops_pve::Upid;

fn config() -> Config {
    Config {
        cases: 512,
        rng_seed: RngSeed::Fixed(0x0055_5049),
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_text_parses_or_is_refused(text in any::<String>()) {
        let _ = Upid::parse(&text);
        let _ = Upid::parse(&format!("UPID:{text}"));
    }

    #[test]
    fn a_built_upid_reads_back_its_parts(
        node in "[a-z][a-z0-9-]{0,15}",
        pid in any::<u32>(),
        pstart in any::<u32>(),
        start in any::<u32>(),
        kind in "[a-z]{2,12}",
        id in "[a-z0-9.-]{0,12}",
        user in "[a-z]{1,8}@(pam|pve)(![a-z0-9]{1,8})?",
    ) {
        let raw = format!("UPID:{node}:{pid:08X}:{pstart:08X}:{start:08X}:{kind}:{id}:{user}:");
        let upid = Upid::parse(&raw);
        prop_assert!(upid.is_some(), "{raw}");
        let upid = upid.unwrap();
        prop_assert_eq!(upid.node, node);
        prop_assert_eq!(upid.task_type, kind);
        prop_assert_eq!(upid.id, id);
        prop_assert_eq!(upid.raw, raw);
    }
}
