//! Concurrent runs: two `proxops apply` with conflicting changes to one
//! guest at once, each with its own cache folder so the advisory per-machine lock does not
//! serialise them (two machines): only the config digests protect the guest. Never may both
//! exit 0 while one's change was silently lost: the guest ends exactly as one of the two
//! repositories declares it (not a mix of both, the sign of a lost update), and when a run
//! that exited 0 sees its change reverted, the other run's output shows it reverting it.
//! CI runs a few trials; the soak runs 20 and more.

use crate::served::{Seeded, Served, finish, private_cache};
use crate::support::vm;

/// Figures of a set of trials.
#[derive(Debug, Clone, Copy, Default)]
pub struct Trials {
    pub trials: usize,
    /// Both applies exited 0 (each then converged on its own view, in turn).
    pub both_ok: usize,
    /// One of them failed or needed a human (a stale write it could not re-plan in time).
    pub one_failed: usize,
    /// Writes refused for a stale digest and planned again (the race the digests catch).
    pub stale: usize,
}

/// The guest as one repository declares it: memory in MiB and cores. Stopped, so that both
/// keys change at once rather than pending until a reboot.
fn declared(memory_mib: u64, cores: u32) -> String {
    vm("race", "pve01", 150, "  state: stopped\n")
        .replace("memory: 1GiB", &format!("memory: {memory_mib}MiB"))
        .replace("cores: 1}", &format!("cores: {cores}}}"))
}

/// Runs `trials` races of two applies (with `task_ms` tasks, so writes overlap) and checks
/// every outcome; returns the figures.
pub async fn race(seed: u64, trials: usize, task_ms: u64) -> Trials {
    let served = Served::start(task_ms).await;
    let base = served.repo("base");
    std::fs::create_dir_all(base.join("vm/lab")).unwrap();
    std::fs::write(base.join("vm/lab/race.yaml"), declared(1024, 1)).unwrap();
    let cache_a = private_cache(&served.dir.path().join("a"));
    let cache_b = private_cache(&served.dir.path().join("b"));
    let first = finish(served.apply(&base, &cache_a)).await;
    assert_eq!(first.code, 0, "{}\n{}", first.stdout, first.stderr);
    let mut rng = Seeded(seed);
    let mut figures = Trials::default();
    for trial in 0..trials {
        let (memory, cores) = {
            let st = served.state().await;
            let conf = &st["vms"]["150"]["conf"];
            (
                conf["memory"].as_str().unwrap().parse::<u64>().unwrap(),
                conf["cores"].as_str().unwrap().parse::<u32>().unwrap(),
            )
        };
        // A changes the memory, B the cores; each keeps the other's key as it was.
        let a = (memory + 256 * rng.between(1, 4), cores);
        let b = (memory, cores % 4 + 1);
        let repo_a = served.repo(&format!("a{trial}"));
        let repo_b = served.repo(&format!("b{trial}"));
        for (repo, (m, c)) in [(&repo_a, a), (&repo_b, b)] {
            std::fs::create_dir_all(repo.join("vm/lab")).unwrap();
            std::fs::write(repo.join("vm/lab/race.yaml"), declared(m, c)).unwrap();
        }
        let run_a = served.apply(&repo_a, &cache_a);
        tokio::time::sleep(std::time::Duration::from_millis(rng.between(0, 200))).await;
        let run_b = served.apply(&repo_b, &cache_b);
        let (run_a, run_b) = tokio::join!(finish(run_a), finish(run_b));
        let st = served.state().await;
        let conf = &st["vms"]["150"]["conf"];
        let end = (
            conf["memory"].as_str().unwrap().parse::<u64>().unwrap(),
            conf["cores"].as_str().unwrap().parse::<u32>().unwrap(),
        );
        let said = format!(
            "trial {trial}: A {a:?} exit {} / B {b:?} exit {} / end {end:?}\n--- A\n{}\n--- B\n{}",
            run_a.code, run_b.code, run_a.stdout, run_b.stdout
        );
        for run in [&run_a, &run_b] {
            figures.stale += run.stdout.matches("planned again").count();
            assert!(matches!(run.code, 0 | 1 | 3), "{said}\n{}", run.stderr);
        }
        if run_a.code == 0 && run_b.code == 0 {
            figures.both_ok += 1;
            assert!(end == a || end == b, "a lost update: {said}");
            // The loser's change was reverted in the open: the winner's plan showed it.
            if end == a {
                assert!(
                    run_a.stdout.contains("cores"),
                    "B's change vanished unseen: {said}"
                );
            } else {
                assert!(
                    run_b.stdout.contains("memory"),
                    "A's change vanished unseen: {said}"
                );
            }
        } else {
            figures.one_failed += 1;
        }
        figures.trials += 1;
    }
    figures
}

#[tokio::test(flavor = "multi_thread")]
async fn two_applies_racing_never_both_succeed_with_a_change_lost() {
    let figures = race(11, 3, 200).await;
    eprintln!("concurrency smoke: {figures:?}");
    assert_eq!(figures.trials, 3);
}
