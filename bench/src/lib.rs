//! The proxops benchmark suite (the `proxops-bench` binary) and the pieces its CI smoke test
//! shares: fixtures on the in-process simulator, the plan cycle, and the VM kind compiled
//! natively to measure what the WebAssembly boundary costs.

pub mod calls;
pub mod cycle;
pub mod fixture;
pub mod many;
pub mod native;

/// Peak resident set size of this process (VmHWM), in bytes; 0 where /proc is missing.
pub fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// The simulator's request counters, as `(endpoint, count)` pairs minus a `before` snapshot.
pub fn counter_delta(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> std::collections::BTreeMap<String, u64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}
