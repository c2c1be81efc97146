//! Crash safety: `proxops apply` killed with SIGKILL at seeded points
//! against `proxops sim serve --task-duration` (its tasks outlive the apply, as PVE's do),
//! restarted each time; the end state is the declared one (no duplicate guest, no clone with
//! its template's identity, nothing locked or left stopped), no disk of a declared guest was
//! deleted and no create was sent again blindly. CI runs a smoke of 5 kill points; the soak
//! (the ignored `soak` test, README "Soak") runs 30 and more.

use std::time::Duration;

use crate::fleet;
use crate::served::{Seeded, Served, finish};
use crate::support::{serve_files, sha256_hex, shared_cache, vm};

/// Figures of one crash run.
#[derive(Debug, Clone, Copy)]
pub struct Crashes {
    /// Applies killed while they ran.
    pub killed: usize,
    /// Applies that ended before their kill point (not counted as kills).
    pub finished_first: usize,
    /// Runs without a kill it took to converge afterwards.
    pub runs_to_converge: usize,
}

/// Kills `kills` applies of the fleet (examples/homelab plus `generated` VMs) at seeded points
/// up to `max_ms` into each run, then converges and checks the simulator's state and log.
pub async fn crash_run(
    seed: u64,
    kills: usize,
    generated: u32,
    task_ms: u64,
    max_ms: u64,
) -> Crashes {
    let served = Served::start(task_ms).await;
    let repo = served.repo("repo");
    let declared = fleet::write(&repo, generated);
    let mut rng = Seeded(seed);
    let mut figures = Crashes {
        killed: 0,
        finished_first: 0,
        runs_to_converge: 0,
    };
    // A run that ends before its kill point does not count as a kill; later points are drawn
    // within how long that run took, so that they land in what is left of the work. Bounded.
    let mut window = max_ms;
    while figures.killed < kills && figures.killed + figures.finished_first < 3 * kills {
        let started = std::time::Instant::now();
        let mut child = served.apply(&repo, &shared_cache());
        tokio::time::sleep(Duration::from_millis(rng.between(50, window))).await;
        if child.try_wait().unwrap().is_some() {
            figures.finished_first += 1;
            window = (started.elapsed().as_millis() as u64).clamp(100, max_ms);
        } else {
            child.start_kill().unwrap();
            figures.killed += 1;
        }
        child.wait().await.unwrap();
    }
    let mut last = None;
    while figures.runs_to_converge < 5 {
        figures.runs_to_converge += 1;
        let run = finish(served.apply(&repo, &shared_cache())).await;
        let clean = run.code == 0;
        last = Some(run);
        if clean {
            break;
        }
    }
    let last = last.expect("one run");
    assert_eq!(
        last.code, 0,
        "seed {seed}: not converged after the kills:\n{}\n{}",
        last.stdout, last.stderr
    );
    let problems = fleet::state_problems(&served.state().await, &declared);
    assert!(problems.is_empty(), "seed {seed}: {problems:#?}");
    let log = served.requests().await;
    let blind = fleet::blind_repeats(&log);
    assert!(blind.is_empty(), "seed {seed}: {blind:#?}");
    let deleted: Vec<String> = log
        .iter()
        .filter(|r| r.method == "DELETE")
        .filter(|r| {
            declared.iter().any(|g| {
                r.path.ends_with(&format!("/qemu/{}", g.vmid))
                    || r.path.contains(&format!("-{}-disk-", g.vmid))
            })
        })
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        deleted.is_empty(),
        "seed {seed}: declared disks deleted: {deleted:?}"
    );
    figures
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_killed_at_seeded_points_converges_without_loss() {
    // 600 ms tasks: a new running VM is one task now (`start=1`), so with 300 ms the fleet
    // converged early and later kill points often fell after a no-op run had ended (up to 12
    // of the 15 attempts), leaving fewer than 5 kills.
    let figures = crash_run(7, 5, 10, 600, 1500).await;
    eprintln!("crash smoke: {figures:?}");
    assert_eq!(figures.killed, 5, "{figures:?}");
}

/// A run killed while its create task runs: the next run finds the task (the node's active
/// task list), waits for it and goes on from what it made, instead of creating again.
#[tokio::test(flavor = "multi_thread")]
async fn a_create_left_running_by_a_killed_apply_is_waited_for() {
    let served = Served::start(2000).await;
    let repo = served.repo("repo");
    std::fs::create_dir_all(repo.join("vm/lab")).unwrap();
    std::fs::write(repo.join("vm/lab/solo.yaml"), vm("solo", "pve01", 400, "")).unwrap();
    let mut child = served.apply(&repo, &shared_cache());
    let create_seen = |log: &[proxops_sim::RequestRecord]| {
        log.iter()
            .any(|r| r.method == "POST" && r.path == "/nodes/pve01/qemu" && r.status == 200)
    };
    let mut waited = 0;
    while !create_seen(&served.requests().await) {
        assert!(waited < 600, "apply never sent its create");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    let before = served.requests().await.len();
    let run = finish(served.apply(&repo, &shared_cache())).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("waited for a task already running: qmcreate 400 on pve01"),
        "{}",
        run.stdout
    );
    let after: Vec<_> = served.requests().await.split_off(before);
    assert!(
        after.iter().any(|r| r.path == "/nodes/pve01/tasks"
            && r.params
                .contains(&("source".to_string(), "active".to_string()))),
        "the node's active tasks were not read"
    );
    assert!(
        !after
            .iter()
            .any(|r| r.method == "POST" && r.path == "/nodes/pve01/qemu"),
        "the create was sent again"
    );
    let state = served.state().await;
    assert_eq!(
        state["vms"]["400"]["running"], true,
        "{}",
        state["vms"]["400"]
    );
    assert!(state["vms"]["400"]["conf"].get("lock").is_none());
}

/// A run killed while PVE downloads a DiskImage: the next run finds the download task, waits
/// for it and never sends a second `download-url` (PVE would refuse it: "refusing to override
/// existing file").
#[tokio::test(flavor = "multi_thread")]
async fn a_download_left_running_by_a_killed_apply_is_not_sent_again() {
    download_killed_then(&["apply"]).await;
}

/// The same, when the next run is a `watch --apply` cycle.
#[tokio::test(flavor = "multi_thread")]
async fn watch_apply_waits_for_a_download_a_killed_apply_left_running() {
    download_killed_then(&["watch", "--apply", "--cycles", "1", "--interval", "1s"]).await;
}

/// Kill an apply while PVE downloads a DiskImage, then run `next`: it waits for the task and
/// sends no second download; a later apply has nothing to do.
async fn download_killed_then(next: &[&str]) {
    let bytes: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
    let (base, _files) = serve_files(vec![("/noble.raw", bytes.clone())]).await;
    let served = Served::start(2000).await;
    let repo = served.repo("repo");
    std::fs::create_dir_all(repo.join("diskimage/lab")).unwrap();
    std::fs::write(
        repo.join("diskimage/lab/noble.yaml"),
        format!(
            "apiVersion: proxops/v1alpha1\nkind: DiskImage\nmetadata: {{name: noble}}\nspec:\n  url: {base}/noble.raw\n  storage: local\n  nodes: [pve01]\n  checksum: {}\n  checksum-algorithm: sha256\n",
            sha256_hex(&bytes)
        ),
    )
    .unwrap();
    let downloads = |log: &[proxops_sim::RequestRecord]| {
        log.iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/download-url"))
            .count()
    };
    let mut child = served.apply(&repo, &shared_cache());
    let mut waited = 0;
    while downloads(&served.requests().await) == 0 {
        assert!(waited < 600, "apply never sent its download");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    let run = finish(served.run(next, &repo, &shared_cache())).await;
    assert_eq!(run.code, 0, "{next:?}: {}\n{}", run.stdout, run.stderr);
    // The pause is announced before it starts, and its end after.
    let announced = run
        .stdout
        .find("waiting for a task an earlier run left running: download ")
        .unwrap_or_else(|| panic!("{}", run.stdout));
    let ended = run
        .stdout
        .find("waited for a task already running")
        .unwrap_or_else(|| panic!("{}", run.stdout));
    assert!(announced < ended, "{}", run.stdout);
    let log = served.requests().await;
    assert_eq!(downloads(&log), 1, "the download was sent again");
    assert!(
        !log.iter()
            .any(|r| r.status >= 400 && r.path.ends_with("/download-url")),
        "a download was refused"
    );
    // The volume is there, and a further run has nothing to do.
    let again = finish(served.apply(&repo, &shared_cache())).await;
    assert_eq!(again.code, 0, "{}\n{}", again.stdout, again.stderr);
    assert!(again.stdout.contains("No changes"), "{}", again.stdout);
    assert_eq!(downloads(&served.requests().await), 1);
}
