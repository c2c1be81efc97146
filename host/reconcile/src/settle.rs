//! Waiting until a guest really is in the state a request asked for. PVE's HA manager answers
//! start, stop and shutdown of an HA-managed guest with a task (`hastart`, `hastop`) that only
//! records the request and ends at once, and a migration through HA with no task at all; its
//! CRM carries the request out later. Every wait for such a real state change goes through
//! [`until`]: bounded, polled with backoff, reported once when it starts, and when its bound
//! runs out a failure that says what was last seen (the caller then runs the action's
//! restore step; the next call of the action is never sent). A disruption budget's health gate
//! ([`healthy`]) waits through the same loop (`poll`) for a disturbed guest to be running,
//! its agent answering and up long enough.

use std::time::Duration;

use proxops_pve::{Client, PveError};
use serde_json::Value;

/// What the guest must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// Its `status/current` says this `status` (`running`, `stopped`).
    Status(&'static str),
    /// It lives on this node (its `status/current` answers there).
    On(String),
}

impl std::fmt::Display for Want {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Want::Status(s) => write!(f, "{s}"),
            Want::On(node) => write!(f, "on node {node}"),
        }
    }
}

/// One guest's wait: where it is read and what it must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// `qemu` or `lxc`.
    pub kind: String,
    pub vmid: u64,
    /// The node its status is read on now (for [`Want::On`], the target).
    pub node: String,
    pub want: Want,
}

impl Wait {
    /// What must happen, for messages: `VM 100 to be running`.
    pub fn describe(&self) -> String {
        let noun = if self.kind == "lxc" { "CT" } else { "VM" };
        format!("{noun} {} to be {}", self.vmid, self.want)
    }

    fn status_path(&self) -> String {
        format!(
            "/nodes/{}/{}/{}/status/current",
            self.node, self.kind, self.vmid
        )
    }
}

/// Why a wait ended without the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettleError {
    #[error(
        "waited {seconds} s for {what}, as PVE's HA manager was asked to do, but it is still {seen}; nothing more was sent for this action"
    )]
    Timeout {
        what: String,
        seen: String,
        seconds: u64,
    },
}

/// The first pause between two reads, and the longest.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MOST_PAUSE: Duration = Duration::from_secs(2);

/// Read the guest's state until it is what `wait` wants, or `bound` has passed. Returns how
/// long it took. A read that fails counts as "not there yet" (a guest on its way to another
/// node answers errors on it); the last answer is what a timeout reports.
pub async fn until(client: &Client, wait: &Wait, bound: Duration) -> Result<Duration, SettleError> {
    poll(bound, || async {
        match client.get(&wait.status_path(), &[]).await {
            Ok(status) => match &wait.want {
                Want::On(_) => Ok(()),
                Want::Status(want) => {
                    let now = status.get("status").and_then(Value::as_str).unwrap_or("");
                    if now == *want {
                        Ok(())
                    } else {
                        Err(format!("{} ({now})", wait.node))
                    }
                }
            },
            Err(e) => Err(seen_from(&e)),
        }
    })
    .await
    .map_err(|seen| SettleError::Timeout {
        what: wait.describe(),
        seen,
        seconds: bound.as_secs(),
    })
}

/// The one polling loop of every wait: `probe` until it answers `Ok`, pausing between two
/// probes from [`FIRST_PAUSE`], doubling up to [`MOST_PAUSE`]; when the next pause would
/// pass `bound`, the last `Err` is returned (what was last seen).
async fn poll<E, F, Fut>(bound: Duration, mut probe: F) -> Result<Duration, E>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
{
    let started = tokio::time::Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        let seen = match probe().await {
            Ok(()) => return Ok(started.elapsed()),
            Err(seen) => seen,
        };
        if started.elapsed() + pause > bound {
            return Err(seen);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MOST_PAUSE);
    }
}

/// How long one TCP connection attempt of a health gate may take.
const TCP_CONNECT: Duration = Duration::from_secs(2);

/// A disruption budget's health gate for one guest that was disturbed: what it must show
/// before the next member of its budget is disturbed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Healthy {
    /// `qemu` or `lxc`.
    pub kind: String,
    pub vmid: u64,
    /// The node it runs on.
    pub node: String,
    /// Its QEMU guest agent must answer `agent/ping` (a container has no such agent: not
    /// asked).
    pub agent: bool,
    /// It must have been up this long.
    pub uptime: Duration,
    /// A TCP port that must accept a connection from here: the port, and the address (else
    /// the guest's first configured one, `ipconfig0` or `net0`).
    pub tcp: Option<(u16, Option<std::net::IpAddr>)>,
}

/// The check of a health gate that did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Check {
    /// `status/current` says `running`.
    Running,
    /// The guest agent answers `agent/ping`.
    Agent,
    /// `status/current`'s `uptime` reached the minimum.
    Uptime,
    /// The TCP port accepted a connection from where proxops runs.
    Tcp,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Check::Running => "running",
            Check::Agent => "guest agent",
            Check::Uptime => "uptime",
            Check::Tcp => "tcp port",
        })
    }
}

/// A health gate whose bound ran out: the check that last failed and what it saw.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not healthy after {seconds} s: {check} check failed ({seen})")]
pub struct Unhealthy {
    pub check: Check,
    pub seen: String,
    pub seconds: u64,
}

impl Healthy {
    fn noun(&self) -> &'static str {
        if self.kind == "lxc" { "CT" } else { "VM" }
    }

    fn asks_agent(&self) -> bool {
        self.agent && self.kind == "qemu"
    }

    /// What the gate waits for, for messages: `VM 100 to be running, its guest agent
    /// answering, up 30 s`.
    pub fn describe(&self) -> String {
        let mut what = format!("{} {} to be running", self.noun(), self.vmid);
        if self.asks_agent() {
            what.push_str(", its guest agent answering");
        }
        if !self.uptime.is_zero() {
            what.push_str(&format!(", up {} s", self.uptime.as_secs_f64().ceil()));
        }
        match self.tcp {
            Some((port, Some(address))) => {
                what.push_str(&format!(", TCP port {port} of {address} answering"))
            }
            Some((port, None)) => what.push_str(&format!(", its TCP port {port} answering")),
            None => {}
        }
        what
    }

    /// The address of the TCP check: the one given, else the guest's first configured one
    /// (`ip=` of a VM's `ipconfig0`, of a container's `net0`), read from its config.
    async fn tcp_address(
        &self,
        client: &Client,
        given: Option<std::net::IpAddr>,
    ) -> Result<std::net::IpAddr, String> {
        if let Some(a) = given {
            return Ok(a);
        }
        let base = format!("/nodes/{}/{}/{}", self.node, self.kind, self.vmid);
        let config = client
            .get(&format!("{base}/config"), &[])
            .await
            .map_err(|e| seen_from(&e))?;
        let key = if self.kind == "lxc" {
            "net0"
        } else {
            "ipconfig0"
        };
        config
            .get(key)
            .and_then(Value::as_str)
            .and_then(|v| {
                v.split(',')
                    .find_map(|p| p.strip_prefix("ip="))
                    .and_then(|ip| ip.split('/').next())
                    .and_then(|ip| ip.parse().ok())
            })
            .ok_or_else(|| {
                format!("no static address in {key}; give health.tcp.address in the budget")
            })
    }

    /// One look: running, then up long enough (both from one `status/current`), then the
    /// agent (`POST agent/ping`, only when the others hold).
    async fn probe(&self, client: &Client) -> Result<(), (Check, String)> {
        let base = format!("/nodes/{}/{}/{}", self.node, self.kind, self.vmid);
        let status = client
            .get(&format!("{base}/status/current"), &[])
            .await
            .map_err(|e| (Check::Running, seen_from(&e)))?;
        let now = status.get("status").and_then(Value::as_str).unwrap_or("");
        if now != "running" {
            return Err((Check::Running, format!("{now} on {}", self.node)));
        }
        let up = status.get("uptime").and_then(Value::as_u64).unwrap_or(0);
        if Duration::from_secs(up) < self.uptime {
            return Err((Check::Uptime, format!("up {up} s")));
        }
        if self.asks_agent() {
            client
                .request(
                    proxops_pve::Method::Post,
                    &format!("{base}/agent/ping"),
                    &[],
                    false,
                )
                .await
                .map_err(|e| (Check::Agent, e.to_string()))?;
        }
        if let Some((port, given)) = self.tcp {
            let address = self
                .tcp_address(client, given)
                .await
                .map_err(|seen| (Check::Tcp, seen))?;
            let target = std::net::SocketAddr::new(address, port);
            match tokio::time::timeout(TCP_CONNECT, tokio::net::TcpStream::connect(target)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err((Check::Tcp, format!("{target}: {e}"))),
                Err(_) => {
                    return Err((
                        Check::Tcp,
                        format!("{target}: no answer within {} s", TCP_CONNECT.as_secs()),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Wait until the guest passes `gate`, or `bound` has passed; polled as [`until`] is.
pub async fn healthy(
    client: &Client,
    gate: &Healthy,
    bound: Duration,
) -> Result<Duration, Unhealthy> {
    poll(bound, || gate.probe(client))
        .await
        .map_err(|(check, seen)| Unhealthy {
            check,
            seen,
            seconds: bound.as_secs(),
        })
}

fn seen_from(e: &PveError) -> String {
    format!("not readable there ({e})")
}

/// The wait a finished request needs, if PVE handed it to its HA manager: an `hastart` or
/// `hastop` task (`task_type`) on `…/{qemu|lxc}/{vmid}/status/{start|stop|shutdown}`, or a
/// migration through HA (`POST /cluster/ha/resources/{sid}/migrate` with `node`).
pub fn needed(
    path_segments: &[String],
    params: &[proxops_runtime::kind::Param],
    task_type: Option<&str>,
) -> Option<Wait> {
    let s: Vec<&str> = path_segments.iter().map(String::as_str).collect();
    match (s.as_slice(), task_type) {
        (["nodes", node, kind @ ("qemu" | "lxc"), vmid, "status", op], Some(t))
            if t == "hastart" || t == "hastop" =>
        {
            let want = match *op {
                "start" => "running",
                "stop" | "shutdown" => "stopped",
                _ => return None,
            };
            Some(Wait {
                kind: kind.to_string(),
                vmid: vmid.parse().ok()?,
                node: node.to_string(),
                want: Want::Status(want),
            })
        }
        (["cluster", "ha", "resources", sid, "migrate" | "relocate"], _) => {
            let node = params
                .iter()
                .find(|p| p.name == "node")
                .map(|p| p.value.clone())?;
            let vmid = crate::request::target::ha_sid_vmid(sid)?;
            let kind = if sid.starts_with("ct:") {
                "lxc"
            } else {
                "qemu"
            };
            Some(Wait {
                kind: kind.to_string(),
                vmid,
                node: node.clone(),
                want: Want::On(node),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_runtime::kind::Param;

    fn check(path: &str, params: &[(&str, &str)], task: Option<&str>, expected: Option<&str>) {
        let segments = crate::request::form::pve_view(path);
        let params: Vec<Param> = params
            .iter()
            .map(|(n, v)| Param {
                name: n.to_string(),
                value: v.to_string(),
                sensitive: false,
            })
            .collect();
        let got = needed(&segments, &params, task);
        assert_eq!(
            got.as_ref()
                .map(|w| format!("{} via {}", w.describe(), w.node))
                .as_deref(),
            expected,
            "{path} {task:?}"
        );
    }

    #[test]
    fn waits_follow_what_pve_handed_to_ha() {
        let start = "/nodes/pve01/qemu/100/status/start";
        check(
            start,
            &[],
            Some("hastart"),
            Some("VM 100 to be running via pve01"),
        );
        check(start, &[], Some("qmstart"), None);
        check(start, &[], None, None);
        check(
            "/nodes/pve02/lxc/7/status/shutdown",
            &[],
            Some("hastop"),
            Some("CT 7 to be stopped via pve02"),
        );
        check(
            "/nodes/pve01/qemu/100/status/stop",
            &[],
            Some("hastop"),
            Some("VM 100 to be stopped via pve01"),
        );
        check(
            "/cluster/ha/resources/vm%3A100/migrate",
            &[("node", "pve03")],
            None,
            Some("VM 100 to be on node pve03 via pve03"),
        );
        check("/cluster/ha/resources/vm%3A100/migrate", &[], None, None);
        check(
            "/cluster/ha/resources/vm%3A100",
            &[("node", "x")],
            None,
            None,
        );
    }
}
