//! Where teams run GitOps: `plan --format markdown` for pull requests, `watch` (drift as it
//! appears, `--apply`, the last good repository, metrics, signals), the Kubernetes example's
//! one-writer settings, completions and the man page.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_pve::Method::Put;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use crate::support::{Lab, TOKEN_VAR, proxops, vm, workspace};

/// A description with every kind of markup a manifest could smuggle into a comment.
const HOSTILE: &str = "  pve-description: 'x ``` y ` <script>alert(1)</script> | a | @team **b** [l](javascript:z)'\n";

#[tokio::test(flavor = "multi_thread")]
async fn plan_markdown_is_stable_escaped_and_keeps_the_exit_codes() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, HOSTILE));
    lab.write("vm/lab/db.yaml", &vm("db", "pve02", 151, ""));
    // An anomaly (a raw PCI device), for the "Needs attention" section.
    lab.write(
        "vm/lab/gpu.yaml",
        &vm(
            "gpu",
            "pve01",
            152,
            "  hardware:\n    pci-devices: [{slot: 0, device: '0000:01:00.0'}]\n",
        ),
    );
    let args = ["plan", "--format", "markdown", "--detailed-exitcode"];
    let first = lab.run(&args).await;
    assert_eq!(first.code, 2, "{}\n{}", first.stdout, first.stderr);
    let second = lab.run(&args).await;
    assert_eq!(
        first.stdout, second.stdout,
        "two runs over one state differ"
    );
    let md = &first.stdout;
    assert!(
        !outside_fences(md).contains("<script"),
        "raw HTML from a value:\n{md}"
    );
    // The description sits in a code block whose fence outgrows its ``` run.
    assert!(md.contains("\n````diff\n"), "{md}");
    assert!(md.contains("- **lab**: Plan: "), "{md}");
    assert!(
        md.contains("#### Needs attention\n\n- **lab** ! VM gpu: "),
        "{md}"
    );
    insta::assert_snapshot!("plan_markdown", md);

    // --json stays as it was, and --format json is the same.
    let json = lab.run(&["plan", "--json"]).await;
    let format_json = lab.run(&["plan", "--format", "json"]).await;
    assert_eq!(json.code, 2, "{}", json.stderr);
    assert_eq!(json.stdout, format_json.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_markdown_shows_secrets_as_sensitive() {
    let lab = Lab::start().await;
    let root = workspace().join("tests/fixtures/sops");
    lab.write(
        "secrets/lab.sops.yaml",
        &std::fs::read_to_string(root.join("cluster.sops.yaml")).unwrap(),
    );
    lab.write(
        "vm/lab/app.yaml",
        &vm(
            "app",
            "pve01",
            150,
            "  hardware: {cloud-init: {enabled: true, storage: local-lvm}}\n  cloud-init-data:\n    ci-user: deploy\n    ci-password-ref: cloud-init.passwords.root\n    ssh-key-refs: [cloud-init.ssh-keys.alice]\n",
        ),
    );
    let identity = root.join("TEST-ONLY-age-key.txt");
    let run = lab
        .run(&[
            "--age-identity",
            identity.to_str().unwrap(),
            "plan",
            "--format",
            "markdown",
        ])
        .await;
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("(sensitive)"), "{}", run.stdout);
    // The values of tests/fixtures/sops/cluster.sops.yaml.
    for secret in [
        "correct horse battery staple",
        "AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly",
    ] {
        assert!(!run.stdout.contains(secret), "{secret} in:\n{}", run.stdout);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_markdown_over_the_limit_is_cut_with_a_note() {
    let lab = Lab::start().await;
    for i in 0..40 {
        let name = format!("vm-{i:02}");
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(&name, "pve01", 200 + i, HOSTILE),
        );
    }
    for (limit, cut) in [("4000", true), ("0", false)] {
        let run = lab
            .run(&[
                "plan",
                "--format",
                "markdown",
                "--max-chars",
                limit,
                "--detailed-exitcode",
            ])
            .await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        let chars = run.stdout.trim_end().chars().count();
        assert_eq!(run.stdout.contains("**Truncated:**"), cut, "{}", run.stdout);
        if cut {
            assert!(chars <= 4000, "{chars} characters");
            assert!(run.stdout.contains("--max-chars 0"), "{}", run.stdout);
        } else {
            assert_eq!(run.stdout.matches("<details>").count(), 40);
        }
    }
    // A limit with no room for the plan is a usage error, not an empty comment.
    let tiny = lab
        .run(&["plan", "--format", "markdown", "--max-chars", "10"])
        .await;
    assert_eq!(tiny.code, 1, "{}", tiny.stdout);
    assert!(tiny.stderr.contains("at least 1000"), "{}", tiny.stderr);
}

/// The lines of a Markdown text that are not inside a fenced code block.
fn outside_fences(md: &str) -> String {
    let mut fence: Option<&str> = None;
    let mut out = String::new();
    for line in md.lines() {
        let ticks = &line[..line.len() - line.trim_start_matches('`').len()];
        match fence {
            Some(f) if ticks == f && line.trim_end() == f => fence = None,
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert_eq!(fence, None, "an unclosed fence in:\n{md}");
    out
}

/// A `proxops watch` child whose output lines are collected as they come.
pub(crate) struct Watching {
    child: tokio::process::Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watching {
    pub(crate) fn start(lab: &Lab, args: &[&str]) -> Watching {
        let secret = lab.sim.token().split_once('=').unwrap().1.to_string();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
            .arg("--cache-dir")
            .arg(crate::support::shared_cache())
            .arg("watch")
            .args(args)
            .arg(lab.repo.path())
            .env(TOKEN_VAR, secret)
            .env_remove("PROXOPS_LOG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run proxops watch");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for (pipe, tag) in [
            (
                Box::new(out) as Box<dyn tokio::io::AsyncRead + Send + Unpin>,
                "",
            ),
            (Box::new(err), "stderr: "),
        ] {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().unwrap().push(format!("{tag}{line}"));
                }
            });
        }
        Watching { child, lines }
    }

    /// Wait (bounded, generously) for `count` lines that contain every one of `parts`; returns the last.
    pub(crate) async fn wait_for(&self, parts: &[&str], count: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let found: Vec<String> = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| parts.iter().all(|p| l.contains(p)))
                .cloned()
                .collect();
            if found.len() >= count {
                return found.last().unwrap().clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {count} lines with {parts:?} in:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn output(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The metrics address watch printed.
    pub(crate) async fn metrics_addr(&self) -> String {
        let line = self.wait_for(&["watch: metrics on http://"], 1).await;
        let url = line.split("http://").nth(1).unwrap();
        url.trim_end_matches("/metrics").to_string()
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Send `signal` and wait (bounded) for the exit code.
    pub(crate) async fn stop(mut self, signal: &str) -> i32 {
        self.signal(signal);
        let status = tokio::time::timeout(Duration::from_secs(120), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("watch did not exit on {signal}:\n{}", self.output()))
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

/// GET `path` from `addr` over plain HTTP/1.1: (status line, body).
pub(crate) async fn get(addr: &str, path: &str) -> (String, String) {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The samples of a Prometheus text exposition: `name{labels}` -> value.
async fn scrape(addr: &str) -> BTreeMap<String, f64> {
    let (status, body) = get(addr, "/metrics").await;
    assert!(status.contains(" 200 "), "{status}");
    assert!(body.trim_end().ends_with("# EOF"), "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap();
            (
                name.to_string(),
                value.parse().unwrap_or_else(|_| panic!("{l}")),
            )
        })
        .collect()
}

/// Scrape until `sample` has `value` (bounded).
pub(crate) async fn wait_metric(addr: &str, sample: &str, value: f64) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let samples = scrape(addr).await;
        if samples.get(sample) == Some(&value) {
            return samples;
        }
        assert!(
            Instant::now() < deadline,
            "{sample} never became {value}: {samples:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

const LAB: &str = "{cluster=\"lab\"}";

#[tokio::test(flavor = "multi_thread")]
async fn watch_reports_drift_survives_pve_errors_and_exits_143_on_sigterm() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    let w = Watching::start(
        &lab,
        &["--interval", "1s", "--metrics-listen", "127.0.0.1:0"],
    );
    let addr = w.metrics_addr().await;
    w.wait_for(&["[lab] cycle", "clean"], 1).await;
    let (status, body) = get(&addr, "/healthz").await;
    assert!(
        status.contains(" 200 ") && body == "ok\n",
        "{status} {body}"
    );

    lab.pve(Put, "/nodes/pve01/qemu/150/config", &[("memory", "2048")])
        .await;
    let new = w.wait_for(&["[lab] new: ~ VM app"], 1).await;
    w.wait_for(&["[lab]", "memory"], 1).await;
    assert!(!new.contains("resolved"), "{new}");
    let samples = wait_metric(&addr, &format!("proxops_watch_objects_in_drift{LAB}"), 1.0).await;
    assert_eq!(
        samples.get("proxops_watch_last_cycle_outcome{cluster=\"lab\",outcome=\"changes\"}"),
        Some(&1.0),
        "{samples:?}"
    );
    // Requests by method: a watch without --apply reads and never writes.
    let requests = |method: &str| {
        samples
            .get(&format!(
                "proxops_watch_pve_requests_total{{cluster=\"lab\",method=\"{method}\"}}"
            ))
            .copied()
    };
    assert!(requests("GET").is_some_and(|n| n >= 2.0), "{samples:?}");
    for write in ["POST", "PUT", "DELETE"] {
        assert_eq!(requests(write), Some(0.0), "{write}: {samples:?}");
    }
    // Reported once, not again every cycle.
    let before = w.wait_for(&["[lab] cycle", "changes"], 3).await;
    assert!(before.contains("changes"), "{before}");
    assert_eq!(
        w.output().matches("[lab] new: ~ VM app").count(),
        1,
        "{}",
        w.output()
    );

    // PVE unreachable (every request fails) is an error cycle, then watch carries on.
    lab.sim.set_faults(vec![proxops_sim::FaultRule {
        method: "*".into(),
        path: "*".into(),
        kind: proxops_sim::FaultKind::Status {
            code: 503,
            message: "down for maintenance".into(),
        },
        probability: None,
        times: None,
    }]);
    w.wait_for(&["[lab] cycle", "error", "1 error in a row"], 1)
        .await;
    wait_metric(
        &addr,
        &format!("proxops_watch_consecutive_errors{LAB}"),
        1.0,
    )
    .await;
    lab.sim.set_faults(Vec::new());
    wait_metric(
        &addr,
        &format!("proxops_watch_consecutive_errors{LAB}"),
        0.0,
    )
    .await;

    assert_eq!(w.stop("TERM").await, 143);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_apply_converges_and_keeps_the_last_good_repository() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    let w = Watching::start(
        &lab,
        &[
            "--interval",
            "1s",
            "--apply",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
    );
    let addr = w.metrics_addr().await;
    w.wait_for(&["[lab] Apply complete"], 1).await;
    w.wait_for(&["[lab] cycle", "clean"], 1).await;
    assert_eq!(lab.config(150)["memory"], "1024");
    let samples = wait_metric(
        &addr,
        &format!("proxops_watch_stale_desired_state{LAB}"),
        0.0,
    )
    .await;
    assert!(
        samples[&format!("proxops_watch_actions_applied_total{LAB}")] >= 1.0,
        "{samples:?}"
    );

    // An edit that fails validation, and drift the last good repository would revert.
    lab.write(
        "vm/lab/app.yaml",
        &vm("app", "pve01", 150, "").replace("memory: 1GiB", "memory: lots"),
    );
    w.wait_for(&["stderr: watch: the repository fails validation"], 1)
        .await;
    lab.pve(Put, "/nodes/pve01/qemu/150/config", &[("memory", "4096")])
        .await;
    lab.clear();
    wait_metric(
        &addr,
        &format!("proxops_watch_stale_desired_state{LAB}"),
        1.0,
    )
    .await;
    let stale = w
        .wait_for(&["[lab] cycle", "not applied", "stale desired state"], 2)
        .await;
    assert!(stale.contains("changes"), "{stale}");
    assert_eq!(lab.mutations(), Vec::<String>::new(), "{}", w.output());

    // Fixed: the next cycle applies again.
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    w.wait_for(&["stderr: watch: the repository validates again"], 1)
        .await;
    wait_metric(
        &addr,
        &format!("proxops_watch_stale_desired_state{LAB}"),
        0.0,
    )
    .await;
    w.wait_for(&["[lab] Apply complete"], 2).await;
    assert!(!lab.mutations().is_empty(), "{}", w.output());
    assert_eq!(lab.config(150)["memory"], "1024");
    assert_eq!(w.stop("TERM").await, 143);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_apply_takes_the_apply_lock() {
    let lab = Lab::with(proxops_sim::SimConfig {
        task_duration: Duration::from_millis(3000),
        ..proxops_sim::SimConfig::default()
    })
    .await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 192, ""));
    let mut first = lab.spawn(&["apply"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while lab.mutations().is_empty() {
        assert!(Instant::now() < deadline, "the apply sent nothing");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let watch = lab
        .run(&["watch", "--apply", "--interval", "1s", "--cycles", "1"])
        .await;
    assert_eq!(watch.code, 1, "{}\n{}", watch.stdout, watch.stderr);
    assert!(
        watch
            .stdout
            .contains("[lab] cycle 1: error: another proxops apply holds the lock"),
        "{}",
        watch.stdout
    );
    let first = first.wait().await.unwrap();
    assert_eq!(first.code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_cycles_on_sighup_and_exits_130_on_sigint() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    // An hour between cycles: a second cycle can only come from SIGHUP.
    // A warning (a file that is not read), printed once, not every cycle.
    lab.write("vm/lab/notes.txt", "not a manifest");
    let w = Watching::start(&lab, &["--interval", "1h"]);
    w.wait_for(&["[lab] cycle 1:", "changes"], 1).await;
    w.signal("HUP");
    w.wait_for(&["[lab] cycle 2:", "changes"], 1).await;
    assert_eq!(w.output().matches("notes.txt").count(), 1, "{}", w.output());
    assert_eq!(w.stop("INT").await, 130);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_cycles_ends_with_the_status_of_the_last_cycle() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    for (args, code) in [
        (&["watch", "--interval", "1s", "--cycles", "2"][..], 2),
        (
            &["watch", "--interval", "1s", "--cycles", "1", "--apply"][..],
            0,
        ),
        (
            &[
                "watch",
                "--interval",
                "1s",
                "--cycles",
                "1",
                "--cluster",
                "nope",
            ][..],
            1,
        ),
    ] {
        let run = lab.run(args).await;
        assert_eq!(run.code, code, "{args:?}\n{}\n{}", run.stdout, run.stderr);
    }
}

/// `--cycles N` counts each cluster's own cycles and exits with the worst of their last ones:
/// a cluster that is down (backing off, so it runs fewer wake-ups) fails the run even when
/// the other cluster's last cycle was clean, and each cycle line counts its own cluster's.
#[tokio::test(flavor = "multi_thread")]
async fn watch_cycles_waits_for_every_cluster_and_a_cluster_down_fails_it() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.apply().await;
    let lab_file = std::fs::read_to_string(lab.repo.path().join("clusters/lab.yaml")).unwrap();
    // Nothing listens on port 9: connection refused, every cycle an error.
    lab.write(
        "clusters/edge.yaml",
        &lab_file
            .replace("{name: lab}", "{name: edge}")
            .replace(&lab.sim.base_url(), "https://127.0.0.1:9"),
    );
    let run = lab
        .run(&["watch", "--interval", "1s", "--cycles", "2"])
        .await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    for line in [
        "[lab] cycle 1: clean",
        "[lab] cycle 2: clean",
        "[edge] cycle 1: error",
        "[edge] cycle 2: error",
    ] {
        assert!(
            run.stdout.contains(line),
            "missing {line:?} in:\n{}",
            run.stdout
        );
    }
    // The reason on stderr names its cluster (no `Cluster edge` heading precedes it).
    assert!(
        run.stderr.contains("Cluster edge: cannot plan: "),
        "{}",
        run.stderr
    );
}

/// The Kubernetes example runs one writer per cluster: a Deployment of exactly one watch that
/// is replaced, never overlapped, and a CronJob whose runs never overlap nor retry.
#[test]
fn kubernetes_example_keeps_one_writer_per_cluster() {
    let dir = workspace().join("examples/deploy");
    let mut docs = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value: serde_yaml::Value = serde::Deserialize::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            docs.push(value);
        }
    }
    let of = |kind: &str| -> Vec<&serde_yaml::Value> {
        docs.iter().filter(|d| d["kind"] == kind).collect()
    };
    let secrets: Vec<&str> = of("Secret")
        .iter()
        .map(|s| s["metadata"]["name"].as_str().unwrap())
        .collect();
    // The documented grace: task-timeout-seconds (default 600) times 3.
    let grace = 3 * 600;

    let deployments = of("Deployment");
    let cronjobs = of("CronJob");
    assert_eq!((deployments.len(), cronjobs.len()), (1, 1), "{files:?}");
    let deployment = deployments[0];
    assert_eq!(deployment["spec"]["replicas"], 1);
    assert_eq!(deployment["spec"]["strategy"]["type"], "Recreate");
    let cronjob = cronjobs[0];
    assert_eq!(cronjob["spec"]["concurrencyPolicy"], "Forbid");
    assert_eq!(cronjob["spec"]["jobTemplate"]["spec"]["backoffLimit"], 0);

    let mut writers = Vec::new();
    for (pod, command) in [
        (&deployment["spec"]["template"]["spec"], "watch"),
        (
            &cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            "apply",
        ),
    ] {
        assert!(
            pod["terminationGracePeriodSeconds"].as_u64() >= Some(grace),
            "{command}: {pod:?}"
        );
        let containers = pod["containers"].as_sequence().unwrap();
        let container = containers
            .iter()
            .find(|c| c["name"] == "proxops")
            .unwrap_or_else(|| panic!("{command}: no proxops container"));
        let args: Vec<&str> = container["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args.first(), Some(&command), "{args:?}");
        let cluster = args
            .windows(2)
            .find(|w| w[0] == "--cluster")
            .map(|w| w[1])
            .unwrap_or_else(|| panic!("{command} without --cluster: {args:?}"));
        if command == "apply" || args.contains(&"--apply") {
            writers.push(cluster);
        }
        // The arguments are ones the CLI accepts.
        let mut check = args.clone();
        check.push("--help");
        let help = proxops(&check);
        assert_eq!(help.code, 0, "{args:?}: {}", help.stderr);
        // The token comes from a Secret of the example.
        let env = container["env"].as_sequence().unwrap();
        let from_secret: Vec<&str> = env
            .iter()
            .filter_map(|e| e["valueFrom"]["secretKeyRef"]["name"].as_str())
            .collect();
        assert!(
            !from_secret.is_empty() && from_secret.iter().all(|s| secrets.contains(s)),
            "{command}: {from_secret:?} vs {secrets:?}"
        );
        // The repository comes from git-sync, read-only.
        assert!(
            pod["initContainers"]
                .as_sequence()
                .into_iter()
                .chain(pod["containers"].as_sequence())
                .flatten()
                .any(|c| c["image"].as_str().is_some_and(|i| i.contains("git-sync"))),
            "{command}: no git-sync"
        );
        assert_eq!(
            container["securityContext"]["readOnlyRootFilesystem"], true,
            "{command}"
        );
        assert_eq!(
            container["securityContext"]["runAsNonRoot"], true,
            "{command}"
        );
    }
    // The status page: served by watch, exposed by a Service that selects the watch's pod
    // and targets its `ui` port.
    let services = of("Service");
    assert_eq!(services.len(), 1, "{files:?}");
    let service = services[0];
    let pod = &deployment["spec"]["template"];
    for (key, value) in service["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&pod["metadata"]["labels"][key], value, "selector {key:?}");
    }
    let container = &pod["spec"]["containers"][0];
    let target = service["spec"]["ports"][0]["targetPort"].as_str().unwrap();
    let port = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == target)
        .unwrap_or_else(|| panic!("no port {target}"));
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let listen = args
        .windows(2)
        .find(|w| w[0] == "--ui-listen")
        .map(|w| w[1])
        .unwrap_or_else(|| panic!("watch without --ui-listen: {args:?}"));
    let port = port["containerPort"].as_u64().unwrap();
    assert_eq!(listen, format!("0.0.0.0:{port}"), "{args:?}");
    let mut distinct = writers.clone();
    distinct.sort();
    distinct.dedup();
    writers.sort();
    assert_eq!(distinct, writers, "two writers for one cluster");
}

#[test]
fn completions_and_man_pages_name_real_subcommands() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["completions", "powershell"],
        &["man"],
        &["man", "watch"],
    ] {
        let run = proxops(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for sub in ["plan", "watch"] {
            assert!(run.stdout.contains(sub), "{args:?} does not name {sub}");
        }
    }
    let man = proxops(&["man", "watch"]);
    assert!(
        man.stdout.contains("\\-\\-metrics\\-listen"),
        "{}",
        man.stdout
    );
    let bad = proxops(&["man", "nope"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("no subcommand `nope`"),
        "{}",
        bad.stderr
    );
}

/// A pipeline reading `plan --json` learns why a cluster was not planned: the cluster is in
/// the array with its errors (before, the array was empty and only stderr said why).
#[tokio::test(flavor = "multi_thread")]
async fn plan_json_names_a_cluster_that_was_not_planned_and_why() {
    let lab = Lab::start().await;
    lab.write(
        "vm/lab/web.yaml",
        &vm("web", "pve01", 150, "").replace("memory: 1GiB", "memory: lots"),
    );
    let run = lab.run(&["plan", "--json"]).await;
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let views: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    assert_eq!(
        views,
        serde_json::json!([{
            "cluster": "lab",
            "counts": {"create": 0, "update": 0, "delete": 0, "power": 0, "anomalies": 0, "pending": 0, "errors": 1},
            "objects": [],
            "errors": [
                "Cluster lab: not planned; fix these first (no PVE call was made):",
                "vm/lab/web.yaml: error: spec.memory: size `lots` does not start with a number; expected e.g. 512MiB or 8GiB",
            ],
        }])
    );
    assert!(lab.sim.requests().is_empty());
}
