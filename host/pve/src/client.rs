//! HTTP requests to PVE: token auth, form encoding, the `{"data": …}` envelope, PVE's error
//! messages (body `message`, else the status line's reason), retries of requests that are
//! safe to repeat, and task polling.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::tls::{self, TlsMode};
use crate::{PveError, TaskOutcome, Upid};

pub use crate::method::Method;

/// One form or query parameter.
#[derive(Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    pub value: String,
    /// Never logged; scrubbed from error messages.
    pub sensitive: bool,
}

impl std::fmt::Debug for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.sensitive {
            "(sensitive)"
        } else {
            &self.value
        };
        write!(f, "{}={}", self.name, value)
    }
}

impl Param {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Param {
            name: name.into(),
            value: value.into(),
            sensitive: false,
        }
    }
}

/// Where and how to reach a PVE cluster.
#[derive(Clone)]
pub struct ClientConfig {
    /// `https://host:8006` (no path).
    pub base_url: String,
    /// `USER@REALM!TOKENID`.
    pub token_id: String,
    pub token_secret: String,
    pub tls: TlsMode,
    /// Per-request timeout.
    pub timeout: Duration,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("token_id", &self.token_id)
            .field("token_secret", &"(sensitive)")
            .field("tls", &self.tls)
            .finish()
    }
}

/// A PVE API client. Cheap to clone (one connection pool).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    api: String,
    auth: String,
    /// Requests sent through this client and its clones, per method (see [`Client::sent`]).
    sent: std::sync::Arc<[std::sync::atomic::AtomicU64; 4]>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("api", &self.api)
            .finish_non_exhaustive()
    }
}

/// A successful answer whose body is not PVE's JSON envelope.
fn not_json(method: Method, path: &str, len: usize) -> PveError {
    PveError::Decode {
        method: method.as_str().into(),
        path: path.into(),
        message: format!("not JSON ({len} bytes)"),
    }
}

/// Attempts for requests that are safe to repeat.
const ATTEMPTS: u32 = 4;

impl Client {
    /// A client for `config`. The token secret is registered with the process-wide redactor
    /// ([`proxops_core::text::register`]), so it is scrubbed from every text proxops prints;
    /// refusing a secret shorter than 8 bytes is the caller's job, when it resolves it.
    pub fn new(config: ClientConfig) -> Result<Client, PveError> {
        Client::build(config).map_err(PveError::cleaned)
    }

    fn build(config: ClientConfig) -> Result<Client, PveError> {
        // A short secret is not registered (it would scrub ordinary text); callers refuse it.
        let _ = proxops_core::text::register(&config.token_secret);
        if !(config.base_url.starts_with("https://") || config.base_url.starts_with("http://")) {
            return Err(PveError::Config(format!(
                "`{}` is not an http(s) URL",
                config.base_url
            )));
        }
        let builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_max_idle_per_host(64)
            .user_agent(concat!("proxops/", env!("CARGO_PKG_VERSION")));
        let http = tls::configure(builder, &config.tls)?
            .build()
            .map_err(|e| PveError::Config(e.to_string()))?;
        Ok(Client {
            http,
            api: format!("{}/api2/json", config.base_url.trim_end_matches('/')),
            auth: format!("PVEAPIToken={}={}", config.token_id, config.token_secret),
            sent: std::sync::Arc::new([const { std::sync::atomic::AtomicU64::new(0) }; 4]),
        })
    }

    /// How many requests this client and its clones have sent, per method (every attempt,
    /// answered or not): one cluster's requests, also while other clusters are worked on at
    /// the same time.
    pub fn sent(&self) -> [(Method, u64); 4] {
        METHODS.map(|m| {
            (
                m,
                self.sent[method_index(m)].load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }

    /// The warnings in the log of task `upid` (PVE's `WARN: ` lines, without the prefix): why a
    /// task ended `WARNINGS: n`, e.g. the failed start of a create with `start=1`.
    pub async fn task_warnings(&self, upid: &str) -> Result<Vec<String>, PveError> {
        let parsed = Upid::parse(upid).ok_or_else(|| PveError::Decode {
            method: "GET".into(),
            path: "tasks".into(),
            message: format!("`{upid}` is not a UPID"),
        })?;
        let path = format!("/nodes/{}/tasks/{}/log", parsed.node, encode_segment(upid));
        let lines = self
            .get(&path, &[Param::new("limit", "1000")])
            .await
            .map_err(PveError::cleaned)?;
        Ok(lines
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.get("t").and_then(Value::as_str))
            .filter_map(|t| t.strip_prefix("WARN: "))
            .map(str::to_string)
            .collect())
    }

    /// GET, repeated on transient failures; returns PVE's `data`.
    pub async fn get(&self, path: &str, params: &[Param]) -> Result<Value, PveError> {
        self.request(Method::Get, path, params, true).await
    }

    /// GET, repeated on transient failures; returns PVE's `data` as the JSON text PVE sent,
    /// for callers that hand it on (to a kind) rather than read it: no tree is built.
    pub async fn get_text(&self, path: &str, params: &[Param]) -> Result<String, PveError> {
        let body = self.request_body(Method::Get, path, params, true).await?;
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow)]
            data: Option<&'a serde_json::value::RawValue>,
        }
        let not_json = || not_json(Method::Get, path, body.len());
        // As `get`: any JSON answer is accepted, `data` is null unless an object carries it.
        if !body.trim_ascii_start().starts_with(b"{") {
            return serde_json::from_slice::<serde::de::IgnoredAny>(&body)
                .map(|_| "null".to_string())
                .map_err(|_| not_json());
        }
        match serde_json::from_slice::<Envelope<'_>>(&body) {
            Ok(e) => Ok(e
                .data
                .map_or_else(|| "null".to_string(), |d| d.get().to_string())),
            Err(_) => Err(not_json()),
        }
    }

    /// One request. With `repeatable`, transient failures (no answer, gateway errors, lock
    /// timeouts) are retried with backoff; only pass it for requests that are safe to repeat.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        params: &[Param],
        repeatable: bool,
    ) -> Result<Value, PveError> {
        let body = self.request_body(method, path, params, repeatable).await?;
        match serde_json::from_slice::<Value>(&body) {
            Ok(mut j) => Ok(j.get_mut("data").map(Value::take).unwrap_or(Value::Null)),
            Err(_) => Err(not_json(method, path, body.len())),
        }
    }

    /// [`Client::request`] up to the body of a successful answer.
    async fn request_body(
        &self,
        method: Method,
        path: &str,
        params: &[Param],
        repeatable: bool,
    ) -> Result<bytes::Bytes, PveError> {
        let mut delay = Duration::from_millis(100);
        let mut attempt = 1;
        loop {
            let secrets = || -> Vec<&str> {
                params
                    .iter()
                    .filter(|p| p.sensitive)
                    .map(|p| p.value.as_str())
                    .collect()
            };
            match self.send(method, path, params).await {
                // A read is idempotent: a plain 500 is asked once more (a definite 500 then
                // fails the same way); other transient failures back off as for any request.
                Err(e)
                    if method == Method::Get
                        && attempt == 1
                        && matches!(e, PveError::Api { status: 500, .. }) =>
                {
                    let e = e.redact(&secrets()).cleaned();
                    tracing::debug!("{e}; a read answered 500 is retried once");
                    attempt += 1;
                }
                Err(e) if repeatable && attempt < ATTEMPTS && e.is_transient() => {
                    // Redacted before it is logged, like the error that is returned.
                    let e = e.redact(&secrets()).cleaned();
                    tracing::debug!("{e}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
                Err(e) => return Err(e.redact(&secrets()).cleaned()),
                ok => return ok,
            }
        }
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        params: &[Param],
    ) -> Result<bytes::Bytes, PveError> {
        self.sent[method_index(method)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Values derived from secrets (a kind marks them sensitive, e.g. the percent-encoded
        // `sshkeys`) are scrubbed from all output too, in case PVE quotes them back later.
        for p in params.iter().filter(|p| p.sensitive) {
            let _ = proxops_core::text::register(&p.value);
        }
        let url = format!("{}{}", self.api, path);
        let pairs: Vec<(&str, &str)> = params
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str()))
            .collect();
        let request = match method {
            Method::Get => self.http.get(&url).query(&pairs),
            Method::Delete => self.http.delete(&url).query(&pairs),
            Method::Post => self.http.post(&url).form(&pairs),
            Method::Put => self.http.put(&url).form(&pairs),
        };
        let transport = |message: String| PveError::Transport {
            method: method.as_str().into(),
            path: path.into(),
            message,
        };
        let response = request
            .header("Authorization", &self.auth)
            .send()
            .await
            .map_err(|e| {
                // The method and path are named by the error already; reqwest's text would
                // repeat them as the full URL.
                let tls = is_tls_error(&e);
                let e = e.without_url();
                if tls {
                    PveError::Tls(error_chain(&e))
                } else {
                    transport(error_chain(&e))
                }
            })?;
        let status = response.status();
        let reason = response
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .or_else(|| status.canonical_reason().map(str::to_string))
            .unwrap_or_default();
        let body = response
            .bytes()
            .await
            .map_err(|e| transport(error_chain(&e.without_url())))?;
        if !status.is_success() {
            let json: Option<Value> = serde_json::from_slice(&body).ok();
            let message = json
                .as_ref()
                .and_then(|j| j.get("message"))
                .and_then(Value::as_str)
                .map(|m| m.trim_end().to_string())
                .filter(|m| !m.is_empty())
                .unwrap_or(reason);
            let errors: BTreeMap<String, String> = json
                .as_ref()
                .and_then(|j| j.get("errors"))
                .and_then(Value::as_object)
                .map(|o| {
                    o.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                v.as_str().unwrap_or_default().trim_end().to_string(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            return Err(PveError::Api {
                method: method.as_str().into(),
                path: path.into(),
                status: status.as_u16(),
                message,
                errors,
            });
        }
        Ok(body)
    }

    /// Poll a task until it stops; an error exit status becomes [`PveError::TaskFailed`], its
    /// text cleaned ([`PveError::cleaned`]) like every error of this client, so no caller can
    /// print a secret PVE quotes in a task's exit status.
    pub async fn wait_task(&self, upid: &str, timeout: Duration) -> Result<TaskOutcome, PveError> {
        self.poll_task(upid, timeout)
            .await
            .map_err(PveError::cleaned)
    }

    async fn poll_task(&self, upid: &str, timeout: Duration) -> Result<TaskOutcome, PveError> {
        let parsed = Upid::parse(upid).ok_or_else(|| PveError::Decode {
            method: "GET".into(),
            path: "tasks".into(),
            message: format!("`{upid}` is not a UPID"),
        })?;
        let path = format!(
            "/nodes/{}/tasks/{}/status",
            parsed.node,
            encode_segment(upid)
        );
        let started = tokio::time::Instant::now();
        // Short tasks are the common case: poll often at first, then back off.
        let mut interval = Duration::from_millis(25);
        loop {
            let status = self.get(&path, &[]).await?;
            if status.get("status").and_then(Value::as_str) == Some("stopped") {
                let exitstatus = status
                    .get("exitstatus")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string();
                if exitstatus == "OK" || exitstatus.starts_with("WARNINGS") {
                    return Ok(TaskOutcome {
                        upid: upid.to_string(),
                        exitstatus,
                    });
                }
                return Err(PveError::TaskFailed {
                    upid: upid.to_string(),
                    exitstatus,
                });
            }
            if started.elapsed() >= timeout {
                return Err(PveError::TaskTimeout {
                    upid: upid.to_string(),
                    seconds: timeout.as_secs(),
                });
            }
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(Duration::from_millis(250));
        }
    }
}

/// Percent-encode one path segment (UPIDs hold `:` and `!`).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

fn is_tls_error(e: &reqwest::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if inner.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        source = inner.source();
    }
    false
}

/// Requests sent to PVE by this process, per method (every attempt, answered or not).
const METHODS: [Method; 4] = [Method::Get, Method::Post, Method::Put, Method::Delete];

fn method_index(method: Method) -> usize {
    METHODS.iter().position(|m| *m == method).unwrap_or(0)
}
