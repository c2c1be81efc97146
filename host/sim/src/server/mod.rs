//! The HTTP(S) front: TLS, token auth, PVE's request decoding and routing, envelopes, faults, the request log and the `/_sim` admin endpoints.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::api::{ApiError, Reply};
use crate::faults::FaultRule;
use crate::sim::Sim;
use crate::{RequestRecord, ha};

pub(crate) mod routes;

use routes::call;
pub(crate) use routes::{index, route, served};

/// Returned by the service to make hyper drop the connection without answering (the `reset` fault).
#[derive(Debug)]
struct Reset;

impl std::fmt::Display for Reset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by fault injection")
    }
}

impl std::error::Error for Reset {}

/// Pause after a failed accept.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(20);
/// Longest a TLS handshake may take (short in tests, which wait for it).
const HANDSHAKE_TIMEOUT: std::time::Duration = if cfg!(test) {
    std::time::Duration::from_millis(300)
} else {
    std::time::Duration::from_secs(10)
};

/// Accepts connections until `shutdown` flips.
pub(crate) async fn run(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    sim: Arc<Sim>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => break,
        };
        let Ok((tcp, _peer)) = accepted else {
            // Out of file descriptors and the like: back off instead of spinning a worker.
            tokio::time::sleep(ACCEPT_BACKOFF).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let sim = Arc::clone(&sim);
        let tls = tls.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _open = sim.connections.open();
            let sim = Arc::clone(&sim);
            match tls {
                Some(acceptor) => {
                    // A peer that never finishes the handshake does not hold a task forever.
                    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
                    if let Ok(Ok(stream)) = handshake.await {
                        serve_connection(stream, sim, stop).await;
                    }
                }
                None => serve_connection(tcp, sim, stop).await,
            }
        });
    }
}

async fn serve_connection<S>(io: S, sim: Arc<Sim>, mut stop: watch::Receiver<bool>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let sim = Arc::clone(&sim);
        async move { handle(sim, req).await }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(io), service);
    tokio::select! {
        _ = conn => {}
        _ = stop.changed() => {}
    }
}

fn response(status: u16, reason: Option<&str>, body: Option<String>) -> Response<Body> {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = Response::builder()
        .status(code)
        .header("Server", "pve-api-daemon/3.0")
        .header("Cache-Control", "max-age=0")
        .header("Pragma", "no-cache")
        .header("Content-Type", "application/json;charset=UTF-8");
    if status >= 400 {
        builder = builder.header("Connection", "close");
    }
    let mut resp = builder
        .body(match body {
            Some(b) => Body::from(b),
            None => Body::empty(),
        })
        .unwrap_or_else(|_| Response::new(Body::empty()));
    if let Some(reason) = reason {
        let line = reason.lines().next().unwrap_or("").trim_end();
        if let Ok(phrase) = hyper::ext::ReasonPhrase::try_from(line.as_bytes().to_vec()) {
            resp.extensions_mut().insert(phrase);
        }
    }
    resp
}

fn error_response(err: &ApiError) -> Response<Body> {
    match err {
        ApiError::Param(errors) => {
            let body = json!({
                "data": null,
                "errors": errors,
                "message": "Parameter verification failed.\n",
            });
            response(
                400,
                Some("Parameter verification failed."),
                Some(body.to_string()),
            )
        }
        // AnyEvent::HTTP's connect error, passed on by pveproxy's `proxy_request` without a body.
        ApiError::Unreachable => response(595, Some("No route to host"), None),
        ApiError::Invalid { message, errors } => {
            let body = json!({"data": null, "errors": errors, "message": message});
            response(400, Some(message), Some(body.to_string()))
        }
        ApiError::Status { code, message } => {
            let body = json!({"data": null, "message": message});
            response(*code, Some(message), Some(body.to_string()))
        }
    }
}

fn ok_response(reply: &Reply) -> Response<Body> {
    if let Some(raw) = &reply.raw {
        let mut text = String::with_capacity(raw.len() + 12);
        text.push_str("{\"data\":");
        text.push_str(raw);
        text.push('}');
        return response(200, Some("OK"), Some(text));
    }
    // Written out rather than built as a map: that would copy the whole answer first.
    let mut text = String::from("{\"data\":");
    text.push_str(&reply.data.to_string());
    if let Some(total) = reply.total {
        text.push_str(&format!(",\"total\":{total}"));
    }
    text.push('}');
    response(200, Some("OK"), Some(text))
}

/// Checks the `Authorization: PVEAPIToken=USER@REALM!ID=SECRET` header against the simulator's own token and
/// the tokens created through `/access`; returns the token id or the 401 reason.
fn authenticate(sim: &Sim, headers: &hyper::HeaderMap) -> Result<String, &'static str> {
    let Some(value) = headers
        .get_all(hyper::header::AUTHORIZATION)
        .iter()
        .find_map(|v| v.to_str().ok().and_then(token_value))
    else {
        return Err("No ticket");
    };
    let decoded = percent_encoding::percent_decode_str(&value)
        .decode_utf8_lossy()
        .to_string();
    let Some((id, secret)) = decoded.rsplit_once('=') else {
        return Err("Authentication failed!");
    };
    if id == sim.token_id {
        return if secret == sim.token_secret {
            Ok(id.to_string())
        } else {
            Err("Authentication failed!")
        };
    }
    // A token created through `/access` (`AccessControl::verify_token`).
    match crate::access::authenticate(&sim.read(), id, secret) {
        Ok(()) => Ok(id.to_string()),
        Err(_) => Err("Authentication failed!"),
    }
}

/// The value after `PVEAPIToken=` (or `PVEAPIToken `) up to a `;`.
fn token_value(header: &str) -> Option<String> {
    let mut search = header;
    loop {
        let pos = search.find("PVEAPIToken")?;
        let before_ok = pos == 0 || search[..pos].ends_with(char::is_whitespace);
        let rest = &search[pos + "PVEAPIToken".len()..];
        if before_ok && (rest.starts_with('=') || rest.starts_with(' ')) {
            let v = &rest[1..];
            return Some(v.split(';').next().unwrap_or("").to_string());
        }
        search = rest;
    }
}

fn form_pairs(text: &str) -> Vec<(String, String)> {
    url::form_urlencoded::parse(text.as_bytes())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn json_pairs(body: &[u8]) -> Result<Vec<(String, String)>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("malformed JSON body: {e}"))?;
    let Value::Object(map) = v else {
        return Err("JSON body must be an object".to_string());
    };
    let mut out = Vec::new();
    for (k, v) in map {
        match v {
            Value::Null => {}
            Value::Bool(b) => out.push((k, if b { "1" } else { "0" }.to_string())),
            Value::Number(n) => out.push((k, n.to_string())),
            Value::String(s) => out.push((k, s)),
            Value::Array(items) => {
                for item in items {
                    let s = match item {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    out.push((k.clone(), s));
                }
            }
            Value::Object(_) => out.push((k, v.to_string())),
        }
    }
    Ok(out)
}

/// What one API request resolved to, for logging.
struct Outcome {
    template: Option<&'static str>,
    response: Result<Response<Body>, Reset>,
    status: u16,
}

/// Now, in microseconds since the UNIX epoch ([`RequestRecord::received_us`]).
fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

async fn handle(sim: Arc<Sim>, req: Request<Incoming>) -> Result<Response<Body>, Reset> {
    let received_us = now_us();
    let method = req.method().as_str().to_ascii_uppercase();
    let raw_path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(Body::new(req.into_body()), 512 * 1024 + 1).await {
        Ok(b) => b,
        Err(_) => return Ok(response(501, Some("for data too large"), None)),
    };
    if let Some(admin) = raw_path.strip_prefix("/_sim/") {
        return Ok(handle_admin(&sim, &method, admin, &headers, &body));
    }
    let api_raw = match raw_path.strip_prefix("/api2/json") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.to_string(),
        _ => {
            // Logged too, by its whole decoded path: a request that escaped the API root
            // (`/api2/json/../access`) is as much a request as any other.
            let body = json!({"data": null, "message": "no such uri"});
            let whole = percent_encoding::percent_decode_str(&raw_path)
                .decode_utf8_lossy()
                .to_string();
            return Ok(log_and_return(
                &sim,
                (&method, &whole, received_us),
                Vec::new(),
                None,
                response(501, Some("no such uri"), Some(body.to_string())),
            ));
        }
    };
    let api_path = percent_encoding::percent_decode_str(&api_raw)
        .decode_utf8_lossy()
        .to_string();
    let mut params = Vec::new();
    if method == "POST" || method == "PUT" {
        let ct = headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/x-www-form-urlencoded")
            .to_string();
        if ct.starts_with("application/json") {
            match json_pairs(&body) {
                Ok(p) => params = p,
                Err(e) => {
                    let err = ApiError::Status {
                        code: 400,
                        message: e,
                    };
                    return Ok(log_and_return(
                        &sim,
                        (&method, &api_path, received_us),
                        Vec::new(),
                        None,
                        error_response(&err),
                    ));
                }
            }
        } else if ct.starts_with("application/x-www-form-urlencoded") {
            params = form_pairs(&String::from_utf8_lossy(&body));
        } else if ct.starts_with("multipart/form-data") && is_upload_path(&api_path) {
            // pveproxy takes multipart bodies on the upload endpoints only; the simulator
            // serves none of them, so the request goes on to be answered 501 as any path
            // it does not serve (Ansible's proxmox_template uploads this way).
        } else if !body.is_empty() {
            let msg = format!("upload 'Content-Type '{ct}' not implemented");
            return Ok(response(506, Some(&msg), Some(msg.clone())));
        }
    } else if !body.is_empty() {
        let msg = format!("Unexpected content for method '{method}'");
        return Ok(response(501, Some(&msg), Some(msg.clone())));
    }
    params.extend(form_pairs(&query));
    params.retain(|(k, _)| k != "_dc");
    // A node's API worker serves the request, when the pool is modelled.
    let worker = sim.workers.serve(&api_path).await;
    let outcome = dispatch(&sim, &method, &api_path, &headers, &params).await;
    drop(worker);
    if let Some(t) = outcome.template {
        let mut counters = sim.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(format!("{method} {t}")).or_insert(0) += 1;
    }
    let record = RequestRecord {
        seq: sim.next_seq(),
        method: method.clone(),
        path: api_path,
        params,
        status: outcome.status,
        received_us,
    };
    sim.log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(record);
    outcome.response
}

/// `/nodes/{node}/storage/{storage}/upload`: the API path pveproxy accepts a multipart body on.
fn is_upload_path(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    matches!(parts.as_slice(), ["nodes", _, "storage", _, "upload"])
}

fn log_and_return(
    sim: &Sim,
    (method, path, received_us): (&str, &str, u64),
    params: Vec<(String, String)>,
    template: Option<&str>,
    resp: Response<Body>,
) -> Response<Body> {
    if let Some(t) = template {
        let mut counters = sim.counters.lock().unwrap_or_else(|e| e.into_inner());
        *counters.entry(format!("{method} {t}")).or_insert(0) += 1;
    }
    let record = RequestRecord {
        seq: sim.next_seq(),
        method: method.to_string(),
        path: path.to_string(),
        params,
        status: resp.status().as_u16(),
        received_us,
    };
    sim.log
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(record);
    resp
}

async fn dispatch(
    sim: &Arc<Sim>,
    method: &str,
    api_path: &str,
    headers: &hyper::HeaderMap,
    params: &[(String, String)],
) -> Outcome {
    let user = match authenticate(sim, headers) {
        Ok(u) => u,
        Err(reason) => {
            return Outcome {
                template: None,
                response: Ok(response(401, Some(reason), None)),
                status: 401,
            };
        }
    };
    let segments: Vec<&str> = api_path.split('/').filter(|s| !s.is_empty()).collect();
    let routed = route(&segments);
    let Some((template, path_params)) = routed.filter(|(t, _)| served(method, t)) else {
        let err = ApiError::not_implemented(method, api_path);
        return Outcome {
            template: None,
            response: Ok(error_response(&err)),
            status: 501,
        };
    };
    let drawn = sim
        .faults
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .draw(method, template);
    if drawn.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(drawn.latency_ms)).await;
    }
    if drawn.reset {
        return Outcome {
            template: Some(template),
            response: Err(Reset),
            status: 0,
        };
    }
    if let Some((code, message)) = &drawn.status {
        let err = ApiError::Status {
            code: *code,
            message: message.clone(),
        };
        return Outcome {
            template: Some(template),
            response: Ok(error_response(&err)),
            status: *code,
        };
    }
    let lose_answer = drawn.lose_answer;
    let result = call(sim, method, template, &user, params, &path_params, drawn).await;
    if lose_answer {
        // The request ran (its change and task are real); only the answer is lost.
        return Outcome {
            template: Some(template),
            response: Err(Reset),
            status: 0,
        };
    }
    let response = match &result {
        Ok(reply) => ok_response(reply),
        Err(e) => error_response(e),
    };
    let status = response.status().as_u16();
    Outcome {
        template: Some(template),
        response: Ok(response),
        status,
    }
}

fn admin_json(status: u16, v: Value) -> Response<Body> {
    let mut r = response(status, None, Some(v.to_string()));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn handle_admin(
    sim: &Arc<Sim>,
    method: &str,
    path: &str,
    headers: &hyper::HeaderMap,
    body: &axum::body::Bytes,
) -> Response<Body> {
    if let Err(reason) = authenticate(sim, headers) {
        return response(401, Some(reason), None);
    }
    match (method, path.trim_end_matches('/')) {
        ("GET", "requests") => {
            let log = sim.log.lock().unwrap_or_else(|e| e.into_inner()).clone();
            admin_json(200, json!({"data": log}))
        }
        ("DELETE", "requests") => {
            sim.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
            admin_json(200, json!({"data": null}))
        }
        ("GET", "counters") => {
            let c = sim
                .counters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            admin_json(200, json!({"data": c}))
        }
        ("GET", "faults") => {
            let rules = sim.faults.lock().unwrap_or_else(|e| e.into_inner()).rules();
            admin_json(200, json!({"data": rules}))
        }
        ("PUT", "faults") => match serde_json::from_slice::<Vec<FaultRule>>(body) {
            Ok(rules) => {
                sim.faults
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .set(rules);
                admin_json(200, json!({"data": null}))
            }
            Err(e) => admin_json(400, json!({"data": null, "message": e.to_string()})),
        },
        ("GET", "nodes") => {
            let st = sim.read();
            let nodes: serde_json::Map<String, Value> = sim
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        json!({
                            "online": !st.offline_nodes.contains(n),
                            "maintenance": st.ha.maintenance.contains(n),
                            "hastate": ha::node_state(&st, n),
                        }),
                    )
                })
                .collect();
            admin_json(200, json!({"data": nodes}))
        }
        ("PUT", p) if p.starts_with("nodes/") => {
            let node = &p["nodes/".len()..];
            let Ok(v) = serde_json::from_slice::<Value>(body) else {
                return admin_json(400, json!({"data": null, "message": "body must be JSON"}));
            };
            let mut result = Ok(());
            if let Some(online) = v.get("online").and_then(Value::as_bool) {
                result = result.and_then(|()| sim.set_node_online(node, online));
            }
            if let Some(m) = v.get("maintenance").and_then(Value::as_bool) {
                result = result.and_then(|()| sim.set_node_maintenance(node, m));
            }
            match result {
                Ok(()) => admin_json(200, json!({"data": null})),
                Err(e) => admin_json(404, json!({"data": null, "message": e.to_string()})),
            }
        }
        ("GET", "state") => {
            let st = sim.read();
            match serde_json::to_value(&*st) {
                Ok(v) => admin_json(200, json!({"data": v})),
                Err(e) => admin_json(500, json!({"data": null, "message": e.to_string()})),
            }
        }
        _ => admin_json(
            404,
            json!({"data": null, "message": "no such admin endpoint"}),
        ),
    }
}
