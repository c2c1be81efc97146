//! The soak, by hand: the fault, crash and concurrency scenarios of `faults`, `crash` and
//! `concurrency` at full size (100 generated VMs under faults, 30 kills, 20 races) with a new
//! seed each round, for `PROXOPS_SOAK_MINUTES` (default 5), printing every round's figures and
//! the totals. A failure panics with the seed that reproduces it (`PROXOPS_SOAK_SEED`).
//!
//! `PROXOPS_SOAK_MINUTES=30 cargo test --workspace --test e2e -- --ignored soak --nocapture`

use std::time::{Duration, Instant};

use crate::concurrency::{Trials, race};
use crate::crash::crash_run;
use crate::faults::{RATES, converge};
use crate::served::Seeded;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "the soak runs for minutes; run it by hand (see the module doc)"]
async fn soak() {
    let minutes = env_u64("PROXOPS_SOAK_MINUTES").unwrap_or(5);
    let first = env_u64("PROXOPS_SOAK_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let deadline = Instant::now() + Duration::from_secs(minutes * 60);
    let mut seeds = Seeded(first);
    let (mut rounds, mut most_runs, mut kills, mut races) = (0, 0, 0, Trials::default());
    let mut runs_seen = Vec::new();
    eprintln!("soak: {minutes} min from seed {first}");
    while Instant::now() < deadline {
        let seed = seeds.next();
        let started = Instant::now();
        let runs = converge(seed, RATES, 100).await;
        let crashes = crash_run(seed, 30, 20, 300, 3000).await;
        let trials = race(seed, 20, 200).await;
        rounds += 1;
        most_runs = most_runs.max(runs);
        runs_seen.push(runs);
        kills += crashes.killed;
        races.trials += trials.trials;
        races.both_ok += trials.both_ok;
        races.one_failed += trials.one_failed;
        races.stale += trials.stale;
        eprintln!(
            "soak round {rounds} (seed {seed}, {:.0?}): faults converged in {runs} run(s); {} kills survived ({} runs ended first), converged {} run(s) later; {} races: {} both exit 0, {} one failed, {} stale writes re-planned; nothing lost",
            started.elapsed(),
            crashes.killed,
            crashes.finished_first,
            crashes.runs_to_converge,
            trials.trials,
            trials.both_ok,
            trials.one_failed,
            trials.stale,
        );
    }
    eprintln!(
        "soak total: {rounds} rounds; runs to converge under faults {runs_seen:?} (most {most_runs}); {kills} kills survived; {} races ({} both exit 0, {} one failed, {} stale writes re-planned); nothing lost",
        races.trials, races.both_ok, races.one_failed, races.stale
    );
    assert!(rounds > 0, "the soak ran no round");
}
