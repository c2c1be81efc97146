//! Config flocks and digests as PVE races them: checks under the lock at apply time, tasks serialised per guest,
//! lock waits and timeouts from real contention, long tasks that show their locks, and `unlock`.

use std::time::Duration;

use super::T;
use crate::SimConfig;

const VM: &str = "/nodes/pve01/qemu/100";
const MISMATCH: &str = "checksum mismatch (file change by other user?)";
const TIMEOUT: &str = "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout";

async fn digest(t: &T) -> String {
    t.config(100).await["digest"]
        .as_str()
        .expect("digest")
        .to_string()
}

#[tokio::test]
async fn two_async_writes_planned_against_one_digest_one_lands_one_task_fails() {
    let t = T::new().await;
    t.create(100, &[("name", "base")]).await;
    let d = digest(&t).await;
    let guard = t.hold_flock(100, false);
    // Both pass PVE's early check (the config is unchanged), then queue for the lock in their workers.
    let a = t
        .upid(
            "POST",
            &format!("{VM}/config"),
            &[("name", "a"), ("digest", &d)],
        )
        .await;
    let b = t
        .upid(
            "POST",
            &format!("{VM}/config"),
            &[("name", "b"), ("digest", &d)],
        )
        .await;
    t.until_flock_waiters(2).await;
    drop(guard);
    let (ea, eb) = (t.wait(&a).await, t.wait(&b).await);
    let name = t.config(100).await["name"].as_str().unwrap().to_string();
    let (landed, failed) = match (ea.as_str(), eb.as_str()) {
        ("OK", e) => (("a", &a), (e.to_string(), &b)),
        (e, "OK") => (("b", &b), (e.to_string(), &a)),
        other => panic!("exactly one write must land: {other:?}"),
    };
    assert_eq!(name, landed.0);
    assert_eq!(failed.0, MISMATCH);
    let log = t.task_log(failed.1).await;
    assert!(
        log.contains(&"trying to acquire lock...".to_string()),
        "{log:?}"
    );
    assert_eq!(log.last().unwrap(), &format!("TASK ERROR: {MISMATCH}"));
    assert_ne!(digest(&t).await, d);
}

#[tokio::test]
async fn two_sync_writes_planned_against_one_digest_one_lands_one_gets_500() {
    let t = T::new().await;
    t.create(100, &[("name", "base")]).await;
    let d = digest(&t).await;
    let guard = t.hold_flock(100, false);
    let path = format!("{VM}/config");
    let a = [("name", "a"), ("digest", d.as_str())];
    let b = [("name", "b"), ("digest", d.as_str())];
    let (ra, rb, ()) = tokio::join!(t.req("PUT", &path, &a), t.req("PUT", &path, &b), async {
        t.until_flock_waiters(2).await;
        drop(guard);
    });
    let mut statuses = [ra.0, rb.0];
    statuses.sort();
    assert_eq!(statuses, [200, 500], "{ra:?} {rb:?}");
    let (loser, winner) = if ra.0 == 500 { (ra, "b") } else { (rb, "a") };
    assert_eq!(loser.1["message"], format!("{MISMATCH}\n"));
    assert_eq!(t.config(100).await["name"], winner);
}

/// One case: what holds the lock, the request, and what it must answer.
async fn check_timeout(method: &str, path: &str, params: &[(&str, &str)], expect_task: bool) {
    let t = T::with(SimConfig {
        lock_timeout: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    t.create(100, &[("name", "base")]).await;
    let before = t.sim.vm_config(100).unwrap();
    let _guard = t.hold_flock(100, false);
    if expect_task {
        let upid = t.upid(method, path, params).await;
        assert_eq!(t.wait(&upid).await, TIMEOUT, "{method} {path}");
        let log = t.task_log(&upid).await;
        assert_eq!(log[0], "trying to acquire lock...", "{log:?}");
    } else {
        t.check(method, path, params, 500, TIMEOUT).await;
    }
    assert_eq!(t.sim.vm_config(100).unwrap(), before, "{method} {path}");
}

#[tokio::test]
async fn a_held_lock_times_out_sync_writes_and_fails_tasks() {
    let config = format!("{VM}/config");
    check_timeout("PUT", &config, &[("name", "x")], false).await;
    check_timeout("PUT", &format!("{VM}/unlink"), &[("idlist", "name")], false).await;
    check_timeout("POST", &config, &[("name", "x")], true).await;
    check_timeout("POST", &format!("{VM}/status/start"), &[], true).await;
    check_timeout("POST", &format!("{VM}/template"), &[], true).await;
    check_timeout("DELETE", VM, &[], true).await;
    check_timeout(
        "PUT",
        &format!("{VM}/resize"),
        &[("disk", "scsi0"), ("size", "+1G")],
        true,
    )
    .await;
}

#[tokio::test]
async fn a_running_task_holds_the_lock_a_sync_write_waits_or_times_out() {
    let t = T::with(SimConfig {
        task_duration: Duration::from_millis(300),
        lock_timeout: Duration::from_millis(20),
        ..SimConfig::default()
    })
    .await;
    t.create(100, &[("name", "base")]).await;
    // A real task, not an injected fault: the start worker holds the flock while it runs.
    let start = t.upid("POST", &format!("{VM}/status/start"), &[]).await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "x")],
        500,
        TIMEOUT,
    )
    .await;
    assert_eq!(t.wait(&start).await, "OK");
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "x")],
        200,
        "null",
    )
    .await;
    assert_eq!(t.config(100).await["name"], "x");
}

#[tokio::test]
async fn tasks_on_one_guest_run_one_after_the_other() {
    let t = T::new().await;
    t.create(100, &[("name", "base")]).await;
    let guard = t.hold_flock(100, false);
    let a = t
        .upid("POST", &format!("{VM}/config"), &[("cores", "2")])
        .await;
    let b = t
        .upid("POST", &format!("{VM}/config"), &[("memory", "1024")])
        .await;
    t.until_flock_waiters(2).await;
    // Nothing applies while another worker holds the lock.
    assert!(!t.sim.vm_config(100).unwrap().contains_key("cores"));
    drop(guard);
    assert_eq!(t.wait(&a).await, "OK");
    assert_eq!(t.wait(&b).await, "OK");
    let conf = t.config(100).await;
    assert_eq!(
        (conf["cores"].as_i64(), conf["memory"].as_str()),
        (Some(2), Some("1024"))
    );
    for upid in [&a, &b] {
        let log = t.task_log(upid).await;
        assert_eq!(log[..2], ["trying to acquire lock...", " OK"], "{log:?}");
    }
}

#[tokio::test]
async fn clones_share_a_stopped_source_and_wait_at_most_a_second() {
    let t = T::with(SimConfig {
        lock_timeout: Duration::from_millis(50),
        ..SimConfig::default()
    })
    .await;
    t.create(100, &[("scsi0", "local-lvm:1")]).await;
    assert_eq!(t.task("POST", &format!("{VM}/template"), &[]).await, "OK");
    // Shared: a clone's reader lock on the template does not block another clone.
    let reader = t.hold_flock(100, true);
    for newid in ["101", "102"] {
        let exit = t
            .task("POST", &format!("{VM}/clone"), &[("newid", newid)])
            .await;
        assert_eq!(exit, "OK", "clone {newid}");
    }
    drop(reader);
    // Exclusive (a config write on the template): the clone gives up and leaves no placeholder.
    let _writer = t.hold_flock(100, false);
    let exit = t
        .task("POST", &format!("{VM}/clone"), &[("newid", "103")])
        .await;
    assert_eq!(exit, TIMEOUT);
    assert!(t.sim.vm_config(103).is_none());
    assert_eq!(t.sim.vm_count(), 3);
}

#[tokio::test]
async fn resize_checks_the_digest_in_its_task() {
    let t = T::new().await;
    t.create(100, &[("scsi0", "local-lvm:1")]).await;
    let stale = digest(&t).await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "x")],
        200,
        "null",
    )
    .await;
    let upid = t
        .upid(
            "PUT",
            &format!("{VM}/resize"),
            &[("disk", "scsi0"), ("size", "2G"), ("digest", &stale)],
        )
        .await;
    assert_eq!(t.wait(&upid).await, MISMATCH);
    assert_eq!(
        t.config(100).await["scsi0"],
        "local-lvm:vm-100-disk-0,size=1G"
    );
}

#[tokio::test]
async fn long_tasks_show_their_locks_and_run_in_the_task_list() {
    let t = T::with(SimConfig {
        task_duration: Duration::from_millis(400),
        ..SimConfig::default()
    })
    .await;
    let create = t
        .upid(
            "POST",
            "/nodes/pve01/qemu",
            &[("vmid", "100"), ("name", "slow")],
        )
        .await;
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert_eq!(res[0]["lock"], "create", "{res}");
    let active = t
        .get(
            "/nodes/pve01/tasks",
            &[("source", "active"), ("vmid", "100")],
        )
        .await;
    assert_eq!(active[0]["upid"], create.as_str(), "{active}");
    assert_eq!(active[0]["status"], "RUNNING");
    assert_eq!(t.wait(&create).await, "OK");
    let res = t.get("/cluster/resources", &[("type", "vm")]).await;
    assert!(res[0].get("lock").is_none(), "{res}");
}

#[tokio::test]
async fn unlock_clears_a_lock_left_by_a_simulator_stopped_mid_task() {
    let dir = std::env::temp_dir().join(format!("proxops-sim-unlock-{}", std::process::id()));
    let file = dir.join("state.json");
    let _ = std::fs::remove_dir_all(&dir);
    {
        let t = T::with(SimConfig {
            state_file: Some(file.clone()),
            task_duration: Duration::from_secs(3600),
            ..SimConfig::default()
        })
        .await;
        t.upid("POST", "/nodes/pve01/qemu", &[("vmid", "100")])
            .await;
        // Dropped while the create task runs: the VM stays `lock: create`, as on PVE.
    }
    let t = T::with(SimConfig {
        state_file: Some(file.clone()),
        ..SimConfig::default()
    })
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "x")],
        500,
        "VM is locked (create)",
    )
    .await;
    drop(t);
    assert!(crate::state_has_vm(&file, 100).unwrap());
    assert!(!crate::state_has_vm(&file, 101).unwrap());
    assert_eq!(
        crate::unlock(&file, 100).unwrap().as_deref(),
        Some("create")
    );
    assert_eq!(crate::unlock(&file, 100).unwrap(), None);
    let err = crate::unlock(&file, 101).unwrap_err().to_string();
    assert!(err.ends_with("no VM 101 in the simulator state"), "{err}");
    let t = T::with(SimConfig {
        state_file: Some(file.clone()),
        ..SimConfig::default()
    })
    .await;
    t.check(
        "PUT",
        &format!("{VM}/config"),
        &[("name", "x")],
        200,
        "null",
    )
    .await;
    drop(t);
    let _ = std::fs::remove_dir_all(&dir);
}
