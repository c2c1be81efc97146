//! The executor's pure pieces: stale digests, restore steps, publishing an outcome.

use super::*;
use proxops_pve::PveError;
use proxops_runtime::kind::{Method, Param, Restore};

fn action(paths: &[&str]) -> Action {
    Action {
        operation: Operation::Update,
        summary: String::new(),
        calls: paths
            .iter()
            .map(|p| Call {
                method: Method::Post,
                path: p.to_string(),
                params: Vec::<Param>::new(),
            })
            .collect(),
        changes: Vec::new(),
        disturbs_availability: true,
        destructive: false,
        restore: None,
    }
}

/// An action whose restore step starts the guest again from its call `after` on.
fn restoring(paths: &[&str], after: u32, start: &str) -> Action {
    let mut a = action(paths);
    a.restore = Some(Restore {
        after,
        calls: action(&[start]).calls,
    });
    a
}

#[test]
fn a_stale_digest_is_read_from_qemu_server_and_pve_container_words() {
    let guarded = |mut a: Action| {
        a.calls[0].params.push(Param {
            name: "digest".into(),
            value: "d1".into(),
            sensitive: false,
        });
        a.calls.remove(0)
    };
    let write = guarded(action(&["/nodes/pve01/lxc/200/config"]));
    let download = action(&["/nodes/pve01/storage/local/download-url"])
        .calls
        .remove(0);
    let api = |message: &str| {
        CallError::from(PveError::Api {
            method: "PUT".into(),
            path: "/nodes/pve01/lxc/200/config".into(),
            status: 500,
            message: message.into(),
            errors: Default::default(),
        })
    };
    let task = |exitstatus: &str| CallError::Task {
        method: "POST",
        path: "/nodes/pve01/lxc/200/config".into(),
        error: Box::new(PveError::TaskFailed {
            upid: "UPID:pve01:1:2:3:vzset:200:root@pam:".into(),
            exitstatus: exitstatus.into(),
        }),
    };
    let stale = CallError::Stale {
        path: "/nodes/pve01/lxc/200/config".into(),
    };
    for (call, error, expected) in [
        (
            &write,
            api("checksum mismatch (file change by other user?)"),
            true,
        ),
        (
            &write,
            api("detected modified configuration - file changed by other user? Try again."),
            true,
        ),
        (&write, task("config file has been modified"), true),
        (&write, stale.clone(), true),
        (&write, api("got a disk error"), false),
        (
            &download,
            task("checksum mismatch: got 'a' != expect 'b'"),
            false,
        ),
    ] {
        assert_eq!(stale_digest(call, &error), expected, "{error}");
    }
    // What the operator reads: the host's own words for the typed cases.
    assert_eq!(
        stale.to_string(),
        "GET /nodes/pve01/lxc/200/config: the config changed since it was planned (its digest differs), so the guest was not stopped"
    );
    assert_eq!(
        task("config file has been modified").to_string(),
        "POST /nodes/pve01/lxc/200/config: task failed: config file has been modified"
    );
}

#[test]
fn a_failure_at_or_after_the_disturbing_call_runs_the_restore_step() {
    let base = "/nodes/pve01/qemu/100";
    let start_path = format!("{base}/status/start");
    let stop_write_start = restoring(
        &[
            &format!("{base}/status/shutdown"),
            &format!("{base}/config"),
            &format!("{base}/resize"),
            &start_path,
        ],
        0,
        &start_path,
    );
    let start = |a: &Action, failed| {
        restore_calls(a, failed).map(|c| c.iter().map(|c| c.path.clone()).collect::<String>())
    };
    for (failed, restores) in [(0, true), (1, true), (2, true), (3, false)] {
        assert_eq!(
            start(&stop_write_start, failed).is_some(),
            restores,
            "call {failed} failed"
        );
    }
    assert_eq!(
        start(&stop_write_start, 1).as_deref(),
        Some("/nodes/pve01/qemu/100/status/start")
    );
    // Stopped on purpose (declared stopped): the kind proposes no restore.
    let stop_then_write = action(&[
        &format!("{base}/status/shutdown"),
        &format!("{base}/config"),
    ]);
    assert_eq!(start(&stop_then_write, 1), None);
    // A failure before the disturbing call: the guest was never disturbed.
    let write_stop_start = restoring(
        &[
            &format!("{base}/config"),
            &format!("{base}/status/shutdown"),
            &start_path,
        ],
        1,
        &start_path,
    );
    assert_eq!(start(&write_stop_start, 0), None);
    assert!(start(&write_stop_start, 1).is_some());
}

#[tokio::test]
async fn an_outcome_published_before_anyone_waits_is_seen() {
    let (tx, first) = watch::channel(None);
    drop(first);
    let acted = Finished {
        acted: HashSet::from(["pve01".to_string()]),
        failed: HashSet::new(),
    };
    publish(&tx, acted);
    let mut late = tx.subscribe();
    let seen = tokio::time::timeout(Duration::from_secs(5), late.wait_for(Option::is_some))
        .await
        .expect("the outcome is there for a late subscriber")
        .expect("sender alive")
        .clone()
        .expect("some outcome");
    assert!(seen.serves(Some("pve01")));
    assert!(seen.acted.contains("pve01"));
}
