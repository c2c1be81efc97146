//! `watch --metrics-listen ADDR`: per-cluster Prometheus metrics (text format, via
//! prometheus-client) served on `GET /metrics`, and `GET /healthz`, over the same hyper
//! stack as the simulator. Label values are cleaned (secrets redacted, control characters
//! escaped) and escaped for the exposition format.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use axum::body::Body;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::output::{errln, inline};

/// A cluster name as a label value: cleaned, and `\`, `"` and newline escaped as the text
/// format wants (prometheus-client writes label values as they are).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name(pub String);

impl EncodeLabelValue for Name {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        encoder.write_str(&label_value(&self.0))
    }
}

/// `value` safe inside the double quotes of a label in the text format.
pub fn label_value(value: &str) -> String {
    inline(value)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ClusterLabel {
    pub cluster: Name,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct OutcomeLabel {
    pub cluster: Name,
    /// One of [`OUTCOMES`].
    pub outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabel {
    pub cluster: Name,
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PolicyLabel {
    pub cluster: Name,
    pub policy: Name,
    /// `enforce`, `warn` or `monitor`.
    pub mode: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct BudgetLabel {
    pub cluster: Name,
    /// A disruption budget's name.
    pub budget: Name,
}

/// A cycle's outcome, as `outcome` label values.
pub const OUTCOMES: [&str; 4] = ["clean", "changes", "attention", "error"];

type PerCluster<M> = Family<ClusterLabel, M>;

/// Every metric of `watch`, per cluster.
#[derive(Debug, Default, Clone)]
pub struct Metrics {
    pub last_cycle: PerCluster<Gauge<f64, AtomicU64>>,
    pub outcome: Family<OutcomeLabel, Gauge>,
    pub drift: PerCluster<Gauge>,
    pub anomalies: PerCluster<Gauge>,
    pub pending: PerCluster<Gauge>,
    pub applied: PerCluster<Counter>,
    pub failed: PerCluster<Counter>,
    pub duration: PerCluster<Gauge<f64, AtomicU64>>,
    pub consecutive_errors: PerCluster<Gauge>,
    pub stale: PerCluster<Gauge>,
    pub requests: Family<RequestLabel, Counter>,
    /// `watch --audit`: running guests each policy finds in violation (not `proxops_watch_`
    /// prefixed: it is what `proxops audit` reports, whoever runs it).
    pub policy_violations: Family<PolicyLabel, Gauge>,
    pub rollout_done: Family<BudgetLabel, Gauge>,
    pub rollout_left: Family<BudgetLabel, Gauge>,
    pub rollout_halted: Family<BudgetLabel, Gauge>,
    /// Content-Security-Policy violations browsers reported to the status page (`--ui-listen`).
    pub csp_reports: Counter,
}

impl Metrics {
    /// The metrics and the registry that exposes them.
    pub fn new() -> (Metrics, Registry) {
        let m = Metrics::default();
        let mut root = Registry::default();
        root.register(
            "proxops_policy_violations",
            "Running guests in violation of a site policy, from watch --audit's last audit of the cluster",
            m.policy_violations.clone(),
        );
        let r = root.sub_registry_with_prefix("proxops_watch");
        // (field, name, help): one row per metric.
        macro_rules! register {
            ($($field:ident, $name:literal, $help:literal;)*) => {
                $(r.register($name, $help, m.$field.clone());)*
            };
        }
        register! {
            last_cycle, "last_cycle_timestamp_seconds", "When the cluster's last cycle ended (Unix time)";
            outcome, "last_cycle_outcome", "1 for the outcome of the cluster's last cycle: clean, changes, attention or error";
            drift, "objects_in_drift", "Objects whose live state differs from the manifests (actions or reported drift)";
            anomalies, "anomalies", "Anomalies that need a human";
            pending, "pending_until_reboot", "Changes pending until their guests reboot";
            applied, "actions_applied", "Actions watch --apply ran that succeeded";
            failed, "actions_failed", "Actions watch --apply ran that failed or were blocked";
            duration, "cycle_duration_seconds", "How long the cluster's last cycle took";
            consecutive_errors, "consecutive_errors", "Cycles in a row that ended in an error (the next cycle backs off)";
            stale, "stale_desired_state", "1 while the repository fails validation: the last good one is planned, nothing is applied";
            requests, "pve_requests", "Requests sent to PVE by the cluster's cycles, by method (every attempt)";
            rollout_done, "rollout_members_done", "Members of a disruption budget whose disturbing change the last applying cycle completed";
            rollout_left, "rollout_members_left", "Members of a disruption budget whose disturbing change is still to do after the last applying cycle";
            rollout_halted, "rollout_halted", "1 when the budget's rollout halted in the last applying cycle (a health gate ran out or a change failed)";
            csp_reports, "ui_csp_reports", "Content-Security-Policy violations browsers reported to the status page (--ui-listen); 0 unless a page breaks its policy";
        }
        (m, root)
    }

    /// Record the outcome of a cluster's cycle: 1 for it, 0 for the others.
    pub fn set_outcome(&self, cluster: &str, outcome: &'static str) {
        for o in OUTCOMES {
            self.outcome
                .get_or_create(&OutcomeLabel {
                    cluster: Name(cluster.to_string()),
                    outcome: o,
                })
                .set(i64::from(o == outcome));
        }
    }
}

/// The label set of `budget` in `cluster`.
pub fn budget(cluster: &str, budget: &str) -> BudgetLabel {
    BudgetLabel {
        cluster: Name(cluster.to_string()),
        budget: Name(budget.to_string()),
    }
}

/// The label set of `cluster`.
pub fn cluster(name: &str) -> ClusterLabel {
    ClusterLabel {
        cluster: Name(name.to_string()),
    }
}

/// The registry in the text format.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("writing to a String does not fail");
    text
}

/// Bind `addr` (an error names the address) and serve `/metrics` and `/healthz` until the
/// process ends.
pub async fn serve(addr: SocketAddr, registry: Arc<Registry>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("--metrics-listen {addr}: cannot listen: {e}; choose a free address")
    })?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let registry = registry.clone();
                    async move { Ok::<_, std::convert::Infallible>(answer(&registry, &req)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tcp), service);
                // A client that never finishes its request does not hold a task forever.
                let served = tokio::time::timeout(std::time::Duration::from_secs(30), conn).await;
                if let Ok(Err(e)) = served {
                    errln!("metrics: {}", inline(&e.to_string()));
                }
            });
        }
    });
    Ok(bound)
}

fn answer<B>(registry: &Registry, req: &Request<B>) -> Response<Body> {
    let reply = |status: StatusCode, content_type: &str, body: String| {
        Response::builder()
            .status(status)
            .header("Content-Type", content_type)
            .body(Body::from(body))
            .expect("a valid response")
    };
    if req.method() != Method::GET {
        return reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        );
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            encode(registry),
        ),
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found; try /metrics or /healthz\n".into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_cannot_break_out_of_a_label() {
        for (name, shown) in [
            ("lab", "lab"),
            ("a\"b", "a\\\"b"),
            ("a\\b", "a\\\\b"),
            ("a\nb} 1\nfake 2", "a\\\\u{a}b} 1\\\\u{a}fake 2"),
        ] {
            let (m, registry) = Metrics::new();
            m.anomalies.get_or_create(&cluster(name)).set(1);
            let text = encode(&registry);
            let line = format!("proxops_watch_anomalies{{cluster=\"{shown}\"}} 1");
            assert!(text.contains(&line), "{line} not in\n{text}");
            assert!(!text.lines().any(|l| l.starts_with("fake")), "{text}");
        }
    }
}
