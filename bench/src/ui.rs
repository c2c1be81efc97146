//! `ui`: does the status page (`watch --ui-listen`) slow the cycle? `proxops watch --cycles N`
//! (the binary built beside the bench) on a converged fleet, with no page served, then with
//! the page served to 50 clients that each load a page every second (fleet, cluster, history,
//! an object, in turn: 50 open tabs with the live page's refresh, twice as often), then to 50
//! clients loading pages back to back (a stress of the shared cores, once, shown without a
//! goal); the runs alternate, the table shows the median of each and their ratio.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proxops_bench::fixture::{Endpoint, TOKEN_VAR};

use super::{Table, median_duration};

/// Clients of the page, and how often each loads one.
pub const CLIENTS: usize = 50;
const EVERY: Duration = Duration::from_secs(1);
/// Cycles per run, and runs per variant (alternating).
const CYCLES: u32 = 20;
const RUNS: usize = 3;

/// The pages a client loads, in turn.
const PAGES: [&str; 4] = [
    "/",
    "/c/bench",
    "/c/bench/history",
    "/c/bench/o/VM/vm-00000",
];

/// One `watch --cycles` run, with the page served to clients loading one every `every` (back
/// to back when zero) or not served: its wall time, and the pages its clients loaded.
fn run(
    exe: &Path,
    endpoint: &Endpoint,
    repo: &Path,
    cache: &Path,
    every: Option<Duration>,
) -> (Duration, u64) {
    let ui = every.is_some();
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("--cache-dir")
        .arg(cache)
        .args([
            "watch",
            "--interval",
            "1ms",
            "--cycles",
            &CYCLES.to_string(),
        ])
        .arg(repo)
        .env(TOKEN_VAR, &endpoint.token_secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if ui {
        cmd.args(["--ui-listen", "127.0.0.1:0"]);
    }
    let t = Instant::now();
    let mut child = cmd.spawn().expect("run proxops watch");
    let stderr = child.stderr.take().expect("piped");
    let stop = Arc::new(AtomicBool::new(false));
    let loaded = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    let mut lines = BufReader::new(stderr).lines();
    if ui {
        let addr = loop {
            let line = lines
                .next()
                .expect("watch prints the page's address")
                .expect("read stderr");
            if let Some(url) = line.split("status page on http://").nth(1) {
                break url.trim_end_matches('/').to_string();
            }
        };
        for i in 0..CLIENTS {
            let (addr, stop, loaded) = (addr.clone(), stop.clone(), loaded.clone());
            clients.push(std::thread::spawn(move || {
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    let start = Instant::now();
                    if fetch(&addr, PAGES[n % PAGES.len()]) {
                        loaded.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                    let rest = every.unwrap_or_default().saturating_sub(start.elapsed());
                    std::thread::sleep(rest);
                }
            }));
        }
    }
    // Drain stderr so watch never blocks on it.
    for _ in lines {}
    let status = child.wait().expect("wait for watch");
    let wall = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.join();
    }
    assert!(status.success(), "watch of the converged fleet must exit 0");
    (wall, loaded.load(Ordering::Relaxed))
}

/// GET `path` over HTTP/1.1; whether it answered 200 with a body.
fn fetch(addr: &str, path: &str) -> bool {
    let Ok(mut tcp) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if tcp.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 200") && answer.len() > 200
}

/// The scenario: the ratio of the cycles' wall time with the page under load to without.
pub fn ui_load(endpoint: &Endpoint, repo: &Path, cache: &Path, vms: usize, table: &mut Table) {
    let Some(exe) = std::env::current_exe()
        .ok()
        .map(|e| e.with_file_name("proxops"))
        .filter(|e| e.exists())
    else {
        table.add(
            "ui",
            "watch with the status page under load",
            "skipped",
            "build proxops beside the bench: cargo build --release -p proxops",
            None,
        );
        return;
    };
    // A first run warms the component cache and the memo.
    run(&exe, endpoint, repo, cache, None);
    let (mut bare, mut paced, mut stressed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut paced_pages, mut stressed_pages) = (0, 0);
    for _ in 0..RUNS {
        bare.push(run(&exe, endpoint, repo, cache, None).0);
        let (wall, n) = run(&exe, endpoint, repo, cache, Some(EVERY));
        paced.push(wall);
        paced_pages += n;
    }
    // The stress once: it holds both cores.
    let (wall, n) = run(&exe, endpoint, repo, cache, Some(Duration::ZERO));
    stressed.push(wall);
    stressed_pages += n;
    let bare = median_duration(bare);
    for (clients, walls, pages, goal) in [
        ("1 load/s each", paced, paced_pages, true),
        ("back to back, one run", stressed, stressed_pages, false),
    ] {
        let wall = median_duration(walls);
        let ratio = wall.as_secs_f64() / bare.as_secs_f64();
        table.add(
            "ui",
            format!(
                "{CYCLES} watch cycles of {vms} VMs, page served to {CLIENTS} clients ({clients}) / no page"
            ),
            format!(
                "{ratio:.3}x ({} / {} ms; {pages} pages loaded)",
                wall.as_millis(),
                bare.as_millis()
            ),
            if goal { "<= 1.05x" } else { "" },
            goal.then_some(ratio <= 1.05),
        );
    }
}
