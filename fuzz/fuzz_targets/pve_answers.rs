//! PVE's answers as the kinds and the client read them: a guest config, its pending rows, a
//! `/cluster/resources` entry and a UPID (guest-kinds/qemu/tests/props.rs and
//! host/pve/tests/props.rs, unbounded). Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use proxops_kind_qemu::live::{Config, Resource, pending_rows};
use proxops_pve::Upid;

fuzz_target!(|text: &str| {
    let _ = Config::from_json(text);
    let _ = pending_rows(text);
    let _ = Resource::from_json(text);
    let _ = Upid::parse(text);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = Config::from_value(&v);
        let _ = Resource::from_value(&v);
    }
});
