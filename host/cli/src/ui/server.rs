//! The status page's HTTP server (axum): the pages, the stylesheet, the graph as SVG, the
//! metrics of `watch` (the same registry as `--metrics-listen`), `/healthz`, and a sink
//! that counts Content-Security-Policy violation reports. Only GET reads state; the one
//! POST route counts a report and stores nothing of it. Every answer carries the strict CSP
//! and refuses framing and sniffing; with a token, every route but `/healthz` needs it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use maud::Markup;
use prometheus_client::registry::Registry;

use super::pages::{self, Show};
use super::{Settings, Ui};
use crate::metrics::{self, Metrics};
use crate::output::{errln, inline};

/// The pages load their own stylesheet and nothing else: no script, no inline style, no
/// frame, no form; violations are reported to `/csp-report`.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'; report-uri /csp-report";

#[derive(Clone)]
struct App {
    ui: Ui,
    registry: Arc<Registry>,
    metrics: Metrics,
    token: Option<Arc<str>>,
}

/// Bind `settings.listen` (an error names the address) and serve until the process ends.
pub(crate) async fn serve(
    settings: &Settings,
    ui: Ui,
    registry: Arc<Registry>,
    metrics: Metrics,
) -> anyhow::Result<SocketAddr> {
    let addr = settings.listen;
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("--ui-listen {addr}: cannot listen: {e}; choose a free address")
    })?;
    let bound = listener.local_addr()?;
    let app = App {
        ui,
        registry,
        metrics,
        token: settings.token.as_deref().map(Arc::from),
    };
    let router = router(app);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            errln!("ui: {}", inline(&e.to_string()));
        }
    });
    Ok(bound)
}

fn router(app: App) -> Router {
    Router::new()
        .route("/", get(fleet))
        .route("/style.css", get(style))
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/csp-report", post(csp_report))
        .route("/c/{cluster}", get(cluster))
        .route("/c/{cluster}/history", get(history))
        .route("/c/{cluster}/live", get(live))
        .route("/c/{cluster}/graph", get(graph))
        .route("/c/{cluster}/graph.svg", get(graph_svg))
        .route("/c/{cluster}/o/{kind}/{name}", get(object))
        .fallback(|| async { html(StatusCode::NOT_FOUND, pages::not_found("No such page.")) })
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// The bearer token (when one is set) and the headers every answer carries.
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    let open = request.uri().path() == "/healthz";
    let mut response = match &app.token {
        Some(token) if !open && !authorized(request.headers(), token) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "a bearer token is required (watch --ui-token-file)\n",
        )
            .into_response(),
        _ => next.run(request).await,
    };
    let h = response.headers_mut();
    for (name, value) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `Authorization: Bearer <token>`, compared without an early exit.
fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

fn missing(what: &str) -> Response {
    html(StatusCode::NOT_FOUND, pages::not_found(what))
}

async fn fleet(State(app): State<App>) -> Response {
    html(StatusCode::OK, pages::fleet(&app.ui.read()))
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        pages::STYLE,
    )
        .into_response()
}

async fn metrics_text(State(app): State<App>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics::encode(&app.registry),
    )
        .into_response()
}

/// A browser's report of a CSP violation: counted (`proxops_watch_ui_csp_reports_total`),
/// nothing of it kept.
async fn csp_report(State(app): State<App>) -> StatusCode {
    app.metrics.csp_reports.inc();
    StatusCode::NO_CONTENT
}

#[derive(serde::Deserialize)]
struct ShowQuery {
    show: Option<String>,
}

async fn cluster(
    State(app): State<App>,
    Path(name): Path<String>,
    Query(q): Query<ShowQuery>,
) -> Response {
    let fleet = app.ui.read();
    match fleet.clusters.get(&name) {
        Some(c) => html(
            StatusCode::OK,
            pages::cluster(&name, c, Show::parse(q.show.as_deref())),
        ),
        None => missing(&format!("No cluster {name} in this watch.")),
    }
}

async fn history(State(app): State<App>, Path(name): Path<String>) -> Response {
    let fleet = app.ui.read();
    match fleet.clusters.get(&name) {
        Some(c) => html(StatusCode::OK, pages::history(&name, c, fleet.keep)),
        None => missing(&format!("No cluster {name} in this watch.")),
    }
}

async fn live(State(app): State<App>, Path(name): Path<String>) -> Response {
    let fleet = app.ui.read();
    match fleet.clusters.get(&name) {
        Some(c) => html(StatusCode::OK, pages::live(&name, c)),
        None => missing(&format!("No cluster {name} in this watch.")),
    }
}

async fn graph(State(app): State<App>, Path(name): Path<String>) -> Response {
    let fleet = app.ui.read();
    match fleet.clusters.get(&name) {
        Some(c) => html(StatusCode::OK, pages::graph(&name, c)),
        None => missing(&format!("No cluster {name} in this watch.")),
    }
}

async fn graph_svg(State(app): State<App>, Path(name): Path<String>) -> Response {
    let fleet = app.ui.read();
    match fleet.clusters.get(&name) {
        Some(c) => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            super::svg::render(&c.graph, c.plan.as_deref()).into_string(),
        )
            .into_response(),
        None => missing(&format!("No cluster {name} in this watch.")),
    }
}

async fn object(
    State(app): State<App>,
    Path((name, kind, object)): Path<(String, String, String)>,
) -> Response {
    let fleet = app.ui.read();
    let Some(c) = fleet.clusters.get(&name) else {
        return missing(&format!("No cluster {name} in this watch."));
    };
    let found = c.plan.as_ref().and_then(|p| {
        p.objects
            .iter()
            .find(|o| o.object.id.kind == kind && o.object.id.name == object)
    });
    match found {
        Some(o) => html(StatusCode::OK, pages::object(c, o, c.last())),
        None => missing(&format!("No {kind} {object} in the last plan of {name}.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let check = |value: Option<&str>, expected: bool| {
            let mut headers = HeaderMap::new();
            if let Some(v) = value {
                headers.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            }
            assert_eq!(
                authorized(&headers, "s3cret-token-0123"),
                expected,
                "{value:?}"
            );
        };
        check(Some("Bearer s3cret-token-0123"), true);
        check(Some("Bearer s3cret-token-0124"), false);
        check(Some("Bearer s3cret-token-012"), false);
        check(Some("bearer s3cret-token-0123"), false);
        check(Some("Basic s3cret-token-0123"), false);
        check(None, false);
    }
}
