//! `watch --ui-listen`: the status pages in a real browser (Debian's `chromium`, headless)
//! against `watch` on the simulator. A change made behind proxops's back shows on the fleet
//! page (its counts are the metrics'), on the object's page and in the history; no page
//! breaks its Content-Security-Policy. One screenshot per page lands in
//! `target/ui-screenshots/` (CI keeps them).

use std::path::{Path, PathBuf};
use std::time::Duration;

use proxops_pve::Method::Put;

use crate::gitops::{Watching, get, wait_metric};
use crate::support::{Lab, vm};

/// The browser, or `None` (and a note) when it is absent outside CI; under CI (`CI` set)
/// its absence fails the test.
fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {name}")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
        if found.is_some() {
            return found;
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but chromium is not installed (.ci/run installs Debian's chromium)"
    );
    eprintln!("skipped: chromium is not installed (apt-get install chromium); CI runs this test");
    None
}

/// What a headless chromium made of `url`: the DOM it built and its console (stderr).
fn load(chromium: &Path, profile: &Path, url: &str, screenshot: &Path) -> (String, String) {
    let run = |mode: &[String]| {
        let out = std::process::Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--enable-logging=stderr",
                "--v=0",
                "--window-size=1280,860",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(mode)
            .arg(url)
            .output()
            .expect("run chromium");
        assert!(
            out.status.success(),
            "chromium {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (dom, console) = run(&["--dump-dom".to_string()]);
    let (_, shot_console) = run(&[format!("--screenshot={}", screenshot.display())]);
    assert!(
        std::fs::metadata(screenshot).is_ok_and(|m| m.len() > 1000),
        "no screenshot of {url}"
    );
    (dom, format!("{console}\n{shot_console}"))
}

/// The number in the fleet table's `data-count="what"` cell of the one cluster.
fn cell(dom: &str, what: &str) -> f64 {
    let at = dom
        .find(&format!("data-count=\"{what}\""))
        .unwrap_or_else(|| panic!("no {what} cell in\n{dom}"));
    let rest = &dom[at..];
    let end = rest.find("</a>").expect("a link");
    let start = rest[..end].rfind('>').expect("its text") + 1;
    rest[start..end]
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{what}: {}", &rest[..end]))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_sees_the_fleet_the_drift_and_the_cycle_that_found_it() {
    let Some(chromium) = chromium() else {
        return;
    };
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    lab.write("vm/lab/db.yaml", &vm("db", "pve02", 151, ""));
    lab.apply().await;
    let w = Watching::start(&lab, &["--interval", "1s", "--ui-listen", "127.0.0.1:0"]);
    let line = w.wait_for(&["watch: status page on http://"], 1).await;
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    w.wait_for(&["[lab] cycle", "clean"], 1).await;

    // Behind proxops's back.
    lab.pve(Put, "/nodes/pve01/qemu/150/config", &[("memory", "2048")])
        .await;
    let found = w.wait_for(&["[lab] new: ~ VM app"], 1).await;
    let cycle_line = w.wait_for(&["[lab] cycle", "changes"], 1).await;
    let samples = wait_metric(
        &addr,
        "proxops_watch_objects_in_drift{cluster=\"lab\"}",
        1.0,
    )
    .await;
    // The page is served with its policy.
    let (status, _) = get(&addr, "/").await;
    assert!(status.contains(" 200 "), "{status}");

    let shots = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("ui-screenshots");
    std::fs::create_dir_all(&shots).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let mut consoles = String::new();
    let mut doms = std::collections::BTreeMap::new();
    for (page, path) in [
        ("fleet", "/"),
        ("cluster-drift", "/c/lab?show=drift"),
        ("object", "/c/lab/o/VM/app"),
        ("history", "/c/lab/history"),
        ("graph", "/c/lab/graph"),
        ("live", "/c/lab/live"),
    ] {
        let url = format!("http://{addr}{path}");
        let (dom, console) = load(
            &chromium,
            profile.path(),
            &url,
            &shots.join(format!("{page}.png")),
        );
        consoles.push_str(&console);
        doms.insert(page, dom);
    }

    // The fleet: the counts are the metrics'.
    let fleet = &doms["fleet"];
    assert!(fleet.contains("data-cluster=\"lab\""), "{fleet}");
    for (what, metric) in [
        ("drift", "proxops_watch_objects_in_drift"),
        ("anomalies", "proxops_watch_anomalies"),
        ("pending", "proxops_watch_pending_until_reboot"),
    ] {
        let sample = format!("{metric}{{cluster=\"lab\"}}");
        assert_eq!(
            Some(&cell(fleet, what)),
            samples.get(&sample),
            "{what} vs {sample}"
        );
    }
    assert_eq!(cell(fleet, "all"), 2.0, "two objects");
    assert!(fleet.contains("data-outcome=\"changes\""), "{fleet}");
    // The object: live 2048 against desired 1024, the action and its call.
    let object = &doms["object"];
    assert!(
        object.contains("<td>memory</td><td>2048</td><td>1024</td>"),
        "{object}"
    );
    assert!(
        object.contains(" /nodes/pve01/qemu/150/config "),
        "{object}"
    );
    // The drift filter lists app only.
    let drift = &doms["cluster-drift"];
    assert!(
        drift.contains("/c/lab/o/VM/app") && !drift.contains("/c/lab/o/VM/db"),
        "{drift}"
    );
    // The history: the cycle that found it, with what it found.
    let number = cycle_line
        .split("cycle ")
        .nth(1)
        .and_then(|s| s.split(':').next())
        .unwrap();
    assert!(
        doms["object"].contains(&format!("/c/lab/history#cycle-{number}")),
        "the object links the cycle that found it: {}",
        doms["object"]
    );
    let history = &doms["history"];
    assert!(
        history.contains(&format!("id=\"cycle-{number}\"")),
        "{history}"
    );
    assert!(history.contains("<h3>Found</h3>"), "{found}\n{history}");
    assert!(history.contains("memory"), "{history}");
    // The graph is inline SVG.
    assert!(doms["graph"].contains("<svg"), "{}", doms["graph"]);

    // No page broke its Content-Security-Policy: none in the console, none reported.
    for sign in [
        "Content Security Policy",
        "Content-Security-Policy",
        "Refused to",
    ] {
        assert!(!consoles.contains(sign), "{sign}:\n{consoles}");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, metrics) = get(&addr, "/metrics").await;
    assert!(
        metrics.contains("proxops_watch_ui_csp_reports_total 0"),
        "{metrics}"
    );
    assert_eq!(w.stop("TERM").await, 143);
}

/// GET (or another method) `path` with an optional bearer token: (status line, headers and
/// body).
async fn request(addr: &str, method: &str, path: &str, token: Option<&str>) -> (String, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    tcp.write_all(
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).await.unwrap();
    let status = raw.lines().next().unwrap_or_default().to_string();
    (status, raw)
}

/// `watch --apply --ui-token-file`: the live page shows the apply's progress; every route
/// but `/healthz` needs the token; the page has no write route (what is not GET is refused,
/// the report sink only counts), and all PVE writes are the apply's own.
#[tokio::test(flavor = "multi_thread")]
async fn the_live_page_follows_an_apply_and_the_token_guards_every_page() {
    let lab = Lab::start().await;
    lab.write("vm/lab/app.yaml", &vm("app", "pve01", 150, ""));
    let token = "ui-e2e-bearer-token-0123456789";
    let file = lab.repo.path().join("../ui-token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let w = Watching::start(
        &lab,
        &[
            "--apply",
            "--interval",
            "1s",
            "--ui-listen",
            "127.0.0.1:0",
            "--ui-token-file",
            file.to_str().unwrap(),
        ],
    );
    let line = w.wait_for(&["watch: status page on http://"], 1).await;
    let addr = line
        .split("http://")
        .nth(1)
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    // The create, then a clean cycle.
    w.wait_for(&["[lab] cycle", "clean"], 1).await;
    let writes = lab.mutations();
    assert!(!writes.is_empty(), "the apply wrote");

    for (method, path, token, status) in [
        ("GET", "/", None, " 401 "),
        ("GET", "/", Some("wrong-token-wrong-token-00"), " 401 "),
        ("GET", "/metrics", None, " 401 "),
        ("GET", "/healthz", None, " 200 "),
        ("GET", "/", Some(token), " 200 "),
        ("POST", "/", Some(token), " 405 "),
        ("PUT", "/c/lab", Some(token), " 405 "),
        ("DELETE", "/c/lab/o/VM/app", Some(token), " 405 "),
        ("GET", "/c/nope", Some(token), " 404 "),
        ("POST", "/csp-report", Some(token), " 204 "),
    ] {
        let (got, raw) = request(&addr, method, path, token).await;
        assert!(got.contains(status), "{method} {path} {token:?}: {raw}");
        assert!(
            raw.to_ascii_lowercase()
                .contains("content-security-policy: default-src 'none'"),
            "{method} {path}: {raw}"
        );
    }
    // The live page: the apply's lines, as they came.
    let (_, live) = request(&addr, "GET", "/c/lab/live", Some(token)).await;
    assert!(live.contains("✓ VM app: create"), "{live}");
    assert!(live.contains("data-done=\"true\""), "{live}");
    // The one report counted; the token never on a page.
    let (_, metrics) = request(&addr, "GET", "/metrics", Some(token)).await;
    assert!(
        metrics.contains("proxops_watch_ui_csp_reports_total 1"),
        "{metrics}"
    );
    for path in [
        "/",
        "/c/lab",
        "/c/lab/history",
        "/c/lab/o/VM/app",
        "/c/lab/live",
    ] {
        let (_, page) = request(&addr, "GET", path, Some(token)).await;
        assert!(!page.contains(token), "{path}: {page}");
    }
    // Nothing the page was asked wrote to PVE.
    assert_eq!(lab.mutations(), writes);
    assert_eq!(w.stop("TERM").await, 143);
}
