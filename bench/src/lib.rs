//! The proxops benchmark suite (the `proxops-bench` binary) and the pieces its CI smoke test
//! shares: fixtures on the in-process simulator, the plan cycle, and the VM kind compiled
//! natively to measure what the WebAssembly boundary costs.

pub mod calls;
pub mod cycle;
pub mod fixture;
pub mod floor;
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

/// CPU time this process has used so far (user + system, all threads), from /proc/self/stat
/// in clock ticks of 10 ms (Linux's `USER_HZ` for /proc); zero where /proc is missing.
pub fn process_cpu() -> std::time::Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| cpu_ticks(&s))
        .unwrap_or(0);
    std::time::Duration::from_millis(ticks * 10)
}

/// utime + stime of a /proc/PID/stat line. The command name is in parentheses and may hold
/// spaces and parentheses itself, so the fields are counted from its last `)`: utime and
/// stime are the 12th and 13th after it.
fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(user + system)
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

#[cfg(test)]
mod tests {
    use super::cpu_ticks;

    fn check(stat: &str, expected: Option<u64>) {
        assert_eq!(cpu_ticks(stat), expected, "{stat}");
    }

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        check(
            "4296 (proxops) S 1 4295 4295 0 -1 4194560 17163 0 0 0 312 95 0 0 20 0 24 0",
            Some(407),
        );
        // A command name with a space and a parenthesis of its own.
        check(
            "77 (a) b) R 1 77 77 0 -1 0 0 0 0 0 5 7 0 0 20 0 1 0",
            Some(12),
        );
        check("77 (short) R 1 2 3", None);
        check("no parenthesis at all", None);
    }
}
