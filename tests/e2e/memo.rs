//! The memo of validated manifests (`proxops_reconcile::Memo`), end to end: a second run of
//! the real binary answers unchanged files from it, and no edit, removal or warning is ever
//! lost to it.

use crate::support::{Lab, vm};

/// A VM whose validation warns (two disks name different SCSI controllers).
fn warned(name: &str, vmid: u32) -> String {
    vm(name, "pve01", vmid, "")
        .replace(
            "  disks:\n    - {storage: local-lvm, size: 4GiB}\n",
            "  disks:\n    - {storage: local-lvm, size: 4GiB, controller: virtio-scsi-pci}\n    - {storage: local-lvm, size: 4GiB, controller: lsi}\n",
        )
}

/// How many manifests the run's `-vv` log says the memo answered (0 when it says nothing).
fn answered(run: &crate::support::Run) -> usize {
    run.stderr
        .lines()
        .find_map(|l| {
            let (before, _) = l.split_once(" answered from the memo")?;
            before.rsplit('(').next()?.parse().ok()
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_run_answers_from_the_memo_and_sees_every_edit() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    lab.write("vm/lab/db.yaml", &vm("db", "pve02", 101, ""));
    lab.write("vm/lab/odd.yaml", &warned("odd", 102));
    let first = lab.run(&["-vv", "plan"]).await;
    assert_eq!(first.code, 2, "{}\n{}", first.stdout, first.stderr);
    let warning = "vm/lab/odd.yaml: warning: spec.disks[1].controller: ignored";
    assert!(first.stderr.contains(warning), "{}", first.stderr);

    // Nothing changed: the kinds are not asked again, and the plan and warning are the same.
    let second = lab.run(&["-vv", "plan"]).await;
    assert_eq!(second.code, 2, "{}", second.stderr);
    assert_eq!(answered(&second), 3, "{}", second.stderr);
    assert_eq!(second.stdout, first.stdout);
    assert!(
        second.stderr.contains(warning),
        "a remembered warning is still shown"
    );

    // A broken edit is refused on the next run, with nothing sent to PVE.
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 100, "").replace("memory: 1GiB", "memory: lots"),
    );
    lab.clear();
    let broken = lab.run(&["-vv", "plan"]).await;
    assert_eq!(broken.code, 1, "{}\n{}", broken.stdout, broken.stderr);
    let out = format!("{}{}", broken.stdout, broken.stderr);
    assert!(
        out.contains("vm/lab/web.yaml") && out.contains("spec.memory"),
        "{out}"
    );
    assert_eq!(answered(&broken), 2, "{}", broken.stderr);
    assert!(lab.sim.requests().is_empty(), "{:?}", lab.sim.requests());

    // Broken again on the run after: an error is never remembered.
    let still = lab.run(&["plan"]).await;
    assert_eq!(still.code, 1, "{}", still.stdout);

    // A valid edit is planned as written; a removed file is gone from the plan.
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 100, "").replace("memory: 1GiB", "memory: 3GiB"),
    );
    lab.remove("vm/lab/db.yaml");
    let edited = lab.run(&["-vv", "plan"]).await;
    assert_eq!(edited.code, 2, "{}", edited.stderr);
    assert_eq!(
        answered(&edited),
        1,
        "only odd.yaml is unchanged: {}",
        edited.stderr
    );
    assert!(edited.stdout.contains("3072"), "{}", edited.stdout);
    assert!(!edited.stdout.contains("db"), "{}", edited.stdout);

    // Applying converges, and a plan after it from the memo is clean.
    lab.apply().await;
    let clean = lab.run(&["-vv", "plan", "--detailed-exitcode"]).await;
    assert_eq!(clean.code, 0, "{}\n{}", clean.stdout, clean.stderr);
    assert_eq!(answered(&clean), 2, "{}", clean.stderr);
    assert_eq!(
        lab.config(100).get("memory").map(String::as_str),
        Some("3072")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_memo_is_ignored_and_no_cache_keeps_none() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 100, ""));
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().display().to_string();
    let with_cache = |extra: &'static [&'static str]| {
        let mut args = vec!["--cache-dir", cache_dir.as_str(), "-vv"];
        args.extend_from_slice(extra);
        args
    };
    let first = lab.run(&with_cache(&["plan"])).await;
    assert_eq!(first.code, 2, "{}", first.stderr);
    let memos: Vec<_> = std::fs::read_dir(cache.path().join("manifests"))
        .expect("the memo folder")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    let again = lab.run(&with_cache(&["plan"])).await;
    assert_eq!(answered(&again), 1, "{}", again.stderr);

    // Every byte flipped in turn would take long; the middle and the end will do.
    let bytes = std::fs::read(&memos[0]).unwrap();
    for at in [bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x20;
        std::fs::write(&memos[0], &damaged).unwrap();
        let run = lab.run(&with_cache(&["plan"])).await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert_eq!(answered(&run), 0, "a damaged memo answers nothing");
        assert_eq!(run.stdout, first.stdout);
    }

    let nocache = tempfile::tempdir().unwrap();
    let dir = nocache.path().display().to_string();
    let run = lab
        .run(&["--cache-dir", dir.as_str(), "--no-cache", "plan"])
        .await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        !nocache.path().join("manifests").exists(),
        "--no-cache writes no memo"
    );
}
