//! The status page's HTTP server (axum): the pages, the stylesheet, the graph as SVG, the
//! metrics of `watch` (the same registry as `--metrics-listen`), `/healthz`, and a sink
//! that counts Content-Security-Policy violation reports. Only GET reads state; the one
//! POST route counts a report and stores nothing of it. Every answer carries the strict CSP
//! and refuses framing and sniffing; with a token, every route but `/healthz` needs it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use maud::Markup;
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

use super::pages::{self, Show};
use super::{ClusterView, Fleet, Settings, Ui};
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
    /// Rendered pages by route, with the fleet's generation they show: a page is rendered
    /// once per change of the fleet, however many clients load it.
    cache: Arc<Mutex<HashMap<String, (u64, Bytes)>>>,
}

/// Rendered pages kept at most; past it the cache starts again.
const CACHED: usize = 64;

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
        cache: Arc::default(),
    };
    tokio::spawn(accept(listener, router(app), Limits::DEFAULT));
    Ok(bound)
}

/// What one client can hold of the server: a page is a few KiB rendered once, so the
/// bounds are on connections, not on work.
#[derive(Clone, Copy)]
struct Limits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    connections: usize,
    /// The longest a connection stays open, keep-alive included: a client that sends its
    /// request a byte at a time is cut off here, and a browser simply reconnects.
    per_connection: Duration,
}

impl Limits {
    const DEFAULT: Limits = Limits {
        connections: 256,
        per_connection: Duration::from_secs(30),
    };
}

/// Serve `router` on `listener` within `limits`, until the process ends.
async fn accept(listener: tokio::net::TcpListener, router: Router, limits: Limits) {
    let open = Arc::new(Semaphore::new(limits.connections));
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, mostly: wait rather than spin.
                errln!("ui: accept: {}", inline(&e.to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            drop(tcp);
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service);
            if let Ok(Err(e)) = tokio::time::timeout(limits.per_connection, conn).await
                && !e.is_incomplete_message()
            {
                errln!("ui: {}", inline(&e.to_string()));
            }
            drop(permit);
        });
    }
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

/// The page `key` from the cache when the fleet has not changed since it was rendered, else
/// rendered by `render` (an error is a 404 with its message, never cached).
fn page(app: &App, key: String, render: impl FnOnce(&Fleet) -> Result<Markup, String>) -> Response {
    let fleet = app.ui.read();
    let generation = fleet.generation;
    let hit = {
        let cache = app.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .get(&key)
            .filter(|(g, _)| *g == generation)
            .map(|(_, body)| body.clone())
    };
    let body = match hit {
        Some(body) => body,
        None => match render(&fleet) {
            Ok(markup) => {
                let body = Bytes::from(markup.into_string());
                let mut cache = app.cache.lock().unwrap_or_else(|e| e.into_inner());
                if cache.len() >= CACHED {
                    cache.clear();
                }
                cache.insert(key, (generation, body.clone()));
                body
            }
            Err(missing) => return html(StatusCode::NOT_FOUND, pages::not_found(&missing)),
        },
    };
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Cluster `name` of the fleet, or the message of a 404.
fn of<'a>(fleet: &'a Fleet, name: &str) -> Result<&'a ClusterView, String> {
    fleet
        .clusters
        .get(name)
        .ok_or_else(|| format!("No cluster {name} in this watch."))
}

async fn fleet(State(app): State<App>) -> Response {
    page(&app, "/".into(), |fleet| Ok(pages::fleet(fleet)))
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
    let show = Show::parse(q.show.as_deref());
    page(&app, format!("cluster {name:?} {show:?}"), |fleet| {
        Ok(pages::cluster(&name, of(fleet, &name)?, show))
    })
}

async fn history(State(app): State<App>, Path(name): Path<String>) -> Response {
    page(&app, format!("history {name:?}"), |fleet| {
        Ok(pages::history(&name, of(fleet, &name)?, fleet.keep))
    })
}

async fn live(State(app): State<App>, Path(name): Path<String>) -> Response {
    page(&app, format!("live {name:?}"), |fleet| {
        Ok(pages::live(&name, of(fleet, &name)?))
    })
}

async fn graph(State(app): State<App>, Path(name): Path<String>) -> Response {
    page(&app, format!("graph {name:?}"), |fleet| {
        Ok(pages::graph(&name, of(fleet, &name)?))
    })
}

async fn graph_svg(State(app): State<App>, Path(name): Path<String>) -> Response {
    let fleet = app.ui.read();
    match of(&fleet, &name) {
        Ok(c) => (
            [(header::CONTENT_TYPE, "image/svg+xml")],
            super::svg::render(&c.graph, c.plan.as_deref()).into_string(),
        )
            .into_response(),
        Err(missing) => html(StatusCode::NOT_FOUND, pages::not_found(&missing)),
    }
}

async fn object(
    State(app): State<App>,
    Path((name, kind, object)): Path<(String, String, String)>,
) -> Response {
    page(
        &app,
        format!("object {name:?} {kind:?} {object:?}"),
        |fleet| {
            let c = of(fleet, &name)?;
            c.plan
                .as_ref()
                .and_then(|p| {
                    p.objects
                        .iter()
                        .find(|o| o.object.id.kind == kind && o.object.id.name == object)
                })
                .map(|o| pages::object(c, o, c.last()))
                .ok_or_else(|| format!("No {kind} {object} in the last plan of {name}."))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page is rendered once per change of the fleet, however often it is loaded.
    #[test]
    fn pages_are_rendered_again_only_when_the_fleet_changes() {
        let (metrics, registry) = Metrics::new();
        let app = App {
            ui: Ui::new(5),
            registry: Arc::new(registry),
            metrics,
            token: None,
            cache: Arc::default(),
        };
        let renders = std::cell::Cell::new(0);
        let load = || {
            page(&app, "/".into(), |fleet| {
                renders.set(renders.get() + 1);
                Ok(pages::fleet(fleet))
            })
            .status()
        };
        for expected in [1, 1, 1] {
            assert_eq!(load(), StatusCode::OK);
            assert_eq!(renders.get(), expected);
        }
        let record = super::super::CycleRecord {
            number: 1,
            outcome: "clean",
            ..Default::default()
        };
        app.ui.write().record("lab", record, None, None);
        load();
        load();
        assert_eq!(renders.get(), 2);
        let missing = page(&app, "x".into(), |_| Err("gone".into()));
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    /// A client cannot hold the server: past the connection limit a new connection is closed
    /// at once, a connection that never finishes its request is closed at the time limit, and
    /// the freed place serves the next client.
    #[tokio::test]
    async fn connections_are_bounded_in_number_and_time() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (metrics, registry) = Metrics::new();
        let app = App {
            ui: Ui::new(5),
            registry: Arc::new(registry),
            metrics,
            token: None,
            cache: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = Limits {
            connections: 2,
            per_connection: Duration::from_millis(400),
        };
        tokio::spawn(accept(listener, router(app), limits));
        let connect = || tokio::net::TcpStream::connect(addr);
        // Two clients that send half a request and stop.
        let mut slow = Vec::new();
        for _ in 0..2 {
            let mut c = connect().await.unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.unwrap();
            slow.push(c);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // A third is closed without an answer.
        let mut third = connect().await.unwrap();
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_millis(300), third.read_to_end(&mut buf));
        assert_eq!(read.await.expect("closed at once").unwrap(), 0);
        // The slow ones are cut off at the time limit.
        for mut c in slow {
            let read = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf));
            assert_eq!(read.await.expect("closed at the limit").unwrap(), 0);
        }
        // And the freed places serve the next client.
        let mut next = connect().await.unwrap();
        next.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        next.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.ends_with("ok\n"), "{answer}");
    }

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
