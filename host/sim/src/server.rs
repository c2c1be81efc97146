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

use crate::api::{ApiError, ApiResult, Reply, Req};
use crate::faults::{Drawn, FaultRule};
use crate::mapping::Kind;
use crate::sim::Sim;
use crate::{
    RequestRecord, cluster, ha, lxc, mapping, migrate, pools, qemu, storage, storage_cfg, tasks,
};

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

/// Checks the `Authorization: PVEAPIToken=USER@REALM!ID=SECRET` header; returns the token id or the 401 reason.
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
    if id == sim.token_id && secret == sim.token_secret {
        Ok(id.to_string())
    } else {
        Err("Authentication failed!")
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

/// Matches an API path to its template; path parameters are returned in order.
pub(crate) fn route(segments: &[&str]) -> Option<(&'static str, Vec<(String, String)>)> {
    let p = |k: &str, v: &str| (k.to_string(), v.to_string());
    let r = match segments {
        [] => ("/", vec![]),
        ["version"] => ("/version", vec![]),
        ["cluster"] => ("/cluster", vec![]),
        ["cluster", "resources"] => ("/cluster/resources", vec![]),
        ["cluster", "nextid"] => ("/cluster/nextid", vec![]),
        ["cluster", "tasks"] => ("/cluster/tasks", vec![]),
        ["cluster", "status"] => ("/cluster/status", vec![]),
        ["cluster", "mapping"] => ("/cluster/mapping", vec![]),
        ["cluster", "mapping", "pci"] => ("/cluster/mapping/pci", vec![]),
        ["cluster", "mapping", "pci", id] => ("/cluster/mapping/pci/{id}", vec![p("id", id)]),
        ["cluster", "mapping", "usb"] => ("/cluster/mapping/usb", vec![]),
        ["cluster", "mapping", "usb", id] => ("/cluster/mapping/usb/{id}", vec![p("id", id)]),
        ["pools"] => ("/pools", vec![]),
        ["pools", id] => ("/pools/{poolid}", vec![p("poolid", id)]),
        ["cluster", "ha"] => ("/cluster/ha", vec![]),
        ["cluster", "ha", "resources"] => ("/cluster/ha/resources", vec![]),
        ["cluster", "ha", "resources", s] => ("/cluster/ha/resources/{sid}", vec![p("sid", s)]),
        ["cluster", "ha", "resources", s, "migrate"] => {
            ("/cluster/ha/resources/{sid}/migrate", vec![p("sid", s)])
        }
        ["cluster", "ha", "resources", s, "relocate"] => {
            ("/cluster/ha/resources/{sid}/relocate", vec![p("sid", s)])
        }
        ["cluster", "ha", "rules"] => ("/cluster/ha/rules", vec![]),
        ["cluster", "ha", "rules", r] => ("/cluster/ha/rules/{rule}", vec![p("rule", r)]),
        ["cluster", "ha", "status"] => ("/cluster/ha/status", vec![]),
        ["cluster", "ha", "status", "current"] => ("/cluster/ha/status/current", vec![]),
        ["cluster", "ha", "status", "manager_status"] => {
            ("/cluster/ha/status/manager_status", vec![])
        }
        ["nodes"] => ("/nodes", vec![]),
        ["storage"] => ("/storage", vec![]),
        ["storage", s] => ("/storage/{storage}", vec![p("storage", s)]),
        ["nodes", n] => ("/nodes/{node}", vec![p("node", n)]),
        ["nodes", n, "tasks"] => ("/nodes/{node}/tasks", vec![p("node", n)]),
        ["nodes", n, "qemu"] => ("/nodes/{node}/qemu", vec![p("node", n)]),
        ["nodes", n, "lxc"] => ("/nodes/{node}/lxc", vec![p("node", n)]),
        ["nodes", n, "qemu", v] => (
            "/nodes/{node}/qemu/{vmid}",
            vec![p("node", n), p("vmid", v)],
        ),
        ["nodes", n, "lxc", v] => ("/nodes/{node}/lxc/{vmid}", vec![p("node", n), p("vmid", v)]),
        ["nodes", n, "lxc", v, sub] => {
            let t = match *sub {
                "config" => "/nodes/{node}/lxc/{vmid}/config",
                "pending" => "/nodes/{node}/lxc/{vmid}/pending",
                "status" => "/nodes/{node}/lxc/{vmid}/status",
                "migrate" => "/nodes/{node}/lxc/{vmid}/migrate",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "lxc", v, "status", action] => {
            let t = match *action {
                "current" => "/nodes/{node}/lxc/{vmid}/status/current",
                "start" => "/nodes/{node}/lxc/{vmid}/status/start",
                "stop" => "/nodes/{node}/lxc/{vmid}/status/stop",
                "shutdown" => "/nodes/{node}/lxc/{vmid}/status/shutdown",
                "reboot" => "/nodes/{node}/lxc/{vmid}/status/reboot",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "qemu", v, sub] => {
            let t = match *sub {
                "config" => "/nodes/{node}/qemu/{vmid}/config",
                "pending" => "/nodes/{node}/qemu/{vmid}/pending",
                "clone" => "/nodes/{node}/qemu/{vmid}/clone",
                "template" => "/nodes/{node}/qemu/{vmid}/template",
                "status" => "/nodes/{node}/qemu/{vmid}/status",
                "resize" => "/nodes/{node}/qemu/{vmid}/resize",
                "unlink" => "/nodes/{node}/qemu/{vmid}/unlink",
                "snapshot" => "/nodes/{node}/qemu/{vmid}/snapshot",
                "migrate" => "/nodes/{node}/qemu/{vmid}/migrate",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "qemu", v, "agent", "ping"] => (
            "/nodes/{node}/qemu/{vmid}/agent/ping",
            vec![p("node", n), p("vmid", v)],
        ),
        ["nodes", n, "qemu", v, "status", action] => {
            let t = match *action {
                "current" => "/nodes/{node}/qemu/{vmid}/status/current",
                "start" => "/nodes/{node}/qemu/{vmid}/status/start",
                "stop" => "/nodes/{node}/qemu/{vmid}/status/stop",
                "shutdown" => "/nodes/{node}/qemu/{vmid}/status/shutdown",
                "reboot" => "/nodes/{node}/qemu/{vmid}/status/reboot",
                "reset" => "/nodes/{node}/qemu/{vmid}/status/reset",
                "suspend" => "/nodes/{node}/qemu/{vmid}/status/suspend",
                "resume" => "/nodes/{node}/qemu/{vmid}/status/resume",
                _ => return None,
            };
            (t, vec![p("node", n), p("vmid", v)])
        }
        ["nodes", n, "tasks", u] => (
            "/nodes/{node}/tasks/{upid}",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "tasks", u, "status"] => (
            "/nodes/{node}/tasks/{upid}/status",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "tasks", u, "log"] => (
            "/nodes/{node}/tasks/{upid}/log",
            vec![p("node", n), p("upid", u)],
        ),
        ["nodes", n, "storage"] => ("/nodes/{node}/storage", vec![p("node", n)]),
        ["nodes", n, "storage", s] => (
            "/nodes/{node}/storage/{storage}",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "status"] => (
            "/nodes/{node}/storage/{storage}/status",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "content"] => (
            "/nodes/{node}/storage/{storage}/content",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "download-url"] => (
            "/nodes/{node}/storage/{storage}/download-url",
            vec![p("node", n), p("storage", s)],
        ),
        ["nodes", n, "storage", s, "content", rest @ ..] if !rest.is_empty() => (
            "/nodes/{node}/storage/{storage}/content/{volume}",
            vec![p("node", n), p("storage", s), p("volume", &rest.join("/"))],
        ),
        _ => return None,
    };
    Some(r)
}

/// A directory index as PVE's index methods answer it: one `{key: child}` per child path the simulator serves
/// itself (any method), in served.txt's order. Children PVE lists and the simulator does not serve are left
/// out, so that every link an index gives leads somewhere.
pub(crate) fn index(template: &str, key: &str) -> Reply {
    let prefix = if template == "/" {
        "/".to_string()
    } else {
        format!("{template}/")
    };
    let mut children: Vec<&str> = Vec::new();
    for line in crate::schema::SERVED.lines() {
        let Some((_, path)) = line.split_once(' ') else {
            continue;
        };
        let Some(child) = path.strip_prefix(&prefix) else {
            continue;
        };
        if !child.is_empty()
            && !child.contains('/')
            && !child.starts_with('{')
            && !children.contains(&child)
        {
            children.push(child);
        }
    }
    Reply::data(Value::Array(
        children.into_iter().map(|c| json!({ key: c })).collect(),
    ))
}

/// True when the simulator serves `method` on `template`.
pub(crate) fn served(method: &str, template: &str) -> bool {
    crate::schema::SERVED.lines().any(|l| {
        let mut parts = l.split_whitespace();
        parts.next() == Some(method) && parts.next() == Some(template)
    })
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

async fn call(
    sim: &Arc<Sim>,
    method: &str,
    template: &'static str,
    user: &str,
    params: &[(String, String)],
    path_params: &[(String, String)],
    drawn: Drawn,
) -> ApiResult {
    for (k, v) in path_params {
        if let Some((_, other)) = params.iter().find(|(pk, _)| pk == k)
            && other != v
        {
            return Err(ApiError::param(
                k,
                "duplicate parameter (already defined in URI) with conflicting values!",
            ));
        }
    }
    let mut all: Vec<(String, String)> = params
        .iter()
        .filter(|(k, _)| !path_params.iter().any(|(pk, _)| pk == k))
        .cloned()
        .collect();
    all.extend(path_params.iter().cloned());
    let merged = crate::schema::validate(method, template, &all).map_err(ApiError::Param)?;
    // pveproxy proxies a `/nodes/{node}/...` request to its node, resolving the name first.
    if template.starts_with("/nodes/{node}")
        && let Some(node) = merged.get("node")
    {
        if !sim.has_node(node) {
            return Err(ApiError::die(format!(
                "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
            )));
        }
        if sim.is_offline(node) {
            return Err(ApiError::Unreachable);
        }
    }
    let req = Req {
        user: user.to_string(),
        params: merged,
        faults: drawn,
    };
    let wait = req
        .get("background_delay")
        .or_else(|| req.get("delay"))
        .and_then(|v| v.parse::<u64>().ok());
    let reply = match (method, template) {
        ("GET", "/") => Ok(index(template, "subdir")),
        ("GET", "/version") => cluster::version(),
        ("GET", "/cluster") => Ok(index(template, "name")),
        ("GET", "/cluster/resources") => cluster::resources(sim, &req),
        ("GET", "/cluster/nextid") => cluster::nextid(sim, &req),
        ("GET", "/cluster/tasks") => tasks::cluster_list(sim),
        ("GET", "/cluster/status") => cluster::status(sim),
        ("GET", "/cluster/mapping") => Ok(index(template, "name")),
        ("GET", "/cluster/mapping/pci") => mapping::list(sim, &req, Kind::Pci),
        ("POST", "/cluster/mapping/pci") => mapping::create(sim, &req, Kind::Pci),
        ("GET", "/cluster/mapping/pci/{id}") => mapping::read(sim, &req, Kind::Pci),
        ("PUT", "/cluster/mapping/pci/{id}") => mapping::update(sim, &req, Kind::Pci),
        ("DELETE", "/cluster/mapping/pci/{id}") => mapping::delete(sim, &req, Kind::Pci),
        ("GET", "/cluster/mapping/usb") => mapping::list(sim, &req, Kind::Usb),
        ("POST", "/cluster/mapping/usb") => mapping::create(sim, &req, Kind::Usb),
        ("GET", "/cluster/mapping/usb/{id}") => mapping::read(sim, &req, Kind::Usb),
        ("PUT", "/cluster/mapping/usb/{id}") => mapping::update(sim, &req, Kind::Usb),
        ("DELETE", "/cluster/mapping/usb/{id}") => mapping::delete(sim, &req, Kind::Usb),
        ("GET", "/pools") => pools::list(sim, &req),
        ("POST", "/pools") => pools::create(sim, &req),
        ("PUT", "/pools") | ("PUT", "/pools/{poolid}") => pools::update(sim, &req),
        ("DELETE", "/pools") | ("DELETE", "/pools/{poolid}") => pools::delete(sim, &req),
        ("GET", "/pools/{poolid}") => pools::read(sim, &req),
        ("GET", "/cluster/ha") => Ok(index(template, "id")),
        ("GET", "/cluster/ha/resources") => ha::resources::list(sim, &req),
        ("POST", "/cluster/ha/resources") => ha::resources::create(sim, &req),
        ("GET", "/cluster/ha/resources/{sid}") => ha::resources::read(sim, &req),
        ("PUT", "/cluster/ha/resources/{sid}") => ha::resources::update(sim, &req),
        ("DELETE", "/cluster/ha/resources/{sid}") => ha::resources::delete(sim, &req),
        ("POST", "/cluster/ha/resources/{sid}/migrate") => {
            ha::resources::motion(sim, &req, "migrate")
        }
        ("POST", "/cluster/ha/resources/{sid}/relocate") => {
            ha::resources::motion(sim, &req, "relocate")
        }
        ("GET", "/cluster/ha/rules") => ha::rules::list(sim, &req),
        ("POST", "/cluster/ha/rules") => ha::rules::create(sim, &req),
        ("GET", "/cluster/ha/rules/{rule}") => ha::rules::read(sim, &req),
        ("PUT", "/cluster/ha/rules/{rule}") => ha::rules::update(sim, &req),
        ("DELETE", "/cluster/ha/rules/{rule}") => ha::rules::delete(sim, &req),
        ("GET", "/cluster/ha/status") => Ok(index(template, "name")),
        ("GET", "/cluster/ha/status/current") => ha::status::current(sim),
        ("GET", "/cluster/ha/status/manager_status") => ha::status::manager_status(sim),
        ("GET", "/nodes/{node}/qemu/{vmid}/migrate") => migrate::qemu_precondition(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/migrate") => migrate::qemu_migrate(sim, &req),
        ("POST", "/nodes/{node}/lxc/{vmid}/migrate") => migrate::lxc_migrate(sim, &req),
        ("GET", "/nodes") => cluster::nodes(sim),
        ("GET", "/storage") => storage_cfg::index(sim, &req),
        ("GET", "/storage/{storage}") => storage_cfg::read(sim, &req),
        ("GET", "/nodes/{node}") => Ok(index(template, "name")),
        ("GET", "/nodes/{node}/tasks") => tasks::node_list(sim, &req),
        ("GET", "/nodes/{node}/lxc") => lxc::list(sim, &req),
        ("POST", "/nodes/{node}/lxc") => lxc::create(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}") => lxc::index(sim, &req),
        ("DELETE", "/nodes/{node}/lxc/{vmid}") => lxc::destroy(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/config") => lxc::get_config(sim, &req),
        ("PUT", "/nodes/{node}/lxc/{vmid}/config") => lxc::update_config(sim, &req).await,
        ("GET", "/nodes/{node}/lxc/{vmid}/pending") => lxc::pending(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/status") => lxc::status_index(sim, &req),
        ("GET", "/nodes/{node}/lxc/{vmid}/status/current") => lxc::status_current(sim, &req),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/start") => lxc::power(sim, &req, "vzstart"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/stop") => lxc::power(sim, &req, "vzstop"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/shutdown") => lxc::power(sim, &req, "vzshutdown"),
        ("POST", "/nodes/{node}/lxc/{vmid}/status/reboot") => lxc::power(sim, &req, "vzreboot"),
        ("GET", "/nodes/{node}/qemu") => qemu::list(sim, &req),
        ("POST", "/nodes/{node}/qemu") => qemu::create(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}") => qemu::index(sim, &req),
        ("PUT", "/nodes/{node}/qemu/{vmid}/unlink") => qemu::unlink(sim, &req).await,
        ("DELETE", "/nodes/{node}/qemu/{vmid}") => qemu::destroy(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/config") => qemu::get_config(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/config") => qemu::update_config_async(sim, &req),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config") => qemu::update_config_sync(sim, &req).await,
        ("GET", "/nodes/{node}/qemu/{vmid}/pending") => qemu::pending(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/snapshot") => qemu::snapshot_list(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/clone") => qemu::clone_vm(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/template") => qemu::template(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/status") => qemu::status_index(sim, &req),
        ("GET", "/nodes/{node}/qemu/{vmid}/status/current") => qemu::status_current(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping") => qemu::agent_ping(sim, &req),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/start") => qemu::power(sim, &req, "qmstart"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/stop") => qemu::power(sim, &req, "qmstop"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown") => {
            qemu::power(sim, &req, "qmshutdown")
        }
        ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot") => qemu::power(sim, &req, "qmreboot"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/reset") => qemu::power(sim, &req, "qmreset"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/suspend") => qemu::power(sim, &req, "qmpause"),
        ("POST", "/nodes/{node}/qemu/{vmid}/status/resume") => qemu::power(sim, &req, "qmresume"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize") => qemu::resize(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}") => tasks::index(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}/status") => tasks::status(sim, &req),
        ("GET", "/nodes/{node}/tasks/{upid}/log") => tasks::log(sim, &req),
        ("GET", "/nodes/{node}/storage") => storage::list(sim, &req),
        ("GET", "/nodes/{node}/storage/{storage}") => Ok(index(template, "subdir")),
        ("GET", "/nodes/{node}/storage/{storage}/status") => storage::status(sim, &req),
        ("GET", "/nodes/{node}/storage/{storage}/content") => storage::content(sim, &req),
        ("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}") => {
            storage::delete_volume(sim, &req)
        }
        ("POST", "/nodes/{node}/storage/{storage}/download-url") => {
            storage::download_url(sim, &req)
        }
        _ => Err(ApiError::not_implemented(method, template)),
    }?;
    // `background_delay` (qemu-server `update_vm_api`) and `delay` (pve-storage's volume delete) wait for the
    // task: `null` when it ended OK or with warnings (`upid_status_is_error`), a 500 when it failed, the UPID
    // when it still runs.
    if let (Some(secs), Value::String(upid)) = (wait, &reply.data) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let status = sim
                .read()
                .tasks
                .get(upid)
                .and_then(|t| t.exitstatus.clone());
            match status {
                Some(s) if s == "OK" || is_warnings(&s) => return Ok(Reply::data(Value::Null)),
                Some(s) if template == "/nodes/{node}/qemu/{vmid}/config" => {
                    let vmid = req.vmid();
                    return Err(ApiError::die(format!("failed to update VM {vmid}: {s}")));
                }
                Some(s) => return Err(ApiError::die(s)),
                None => {}
            }
            if tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(reply)
}

/// A task exit status `WARNINGS: <n>` (pve-common `PVE::UPID::status_is_error` counts it as success).
fn is_warnings(status: &str) -> bool {
    status
        .strip_prefix("WARNINGS: ")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
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
