//! The client against the simulator over HTTPS: `get_text` hands on exactly the `data` that
//! `get` parses, and fails the same way.

use std::time::Duration;

use proxops_pve::{Client, ClientConfig, Param, TlsMode};
use proxops_sim::{SimConfig, Simulator};
use serde_json::Value;

async fn sim() -> Simulator {
    proxops_sim::ensure_crypto_provider();
    let sim = proxops_sim::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .expect("start the simulator");
    sim.populate(3);
    sim
}

fn client(sim: &Simulator, secret: Option<&str>) -> Client {
    let (id, real) = sim.token().split_once('=').expect("token has a secret");
    Client::new(ClientConfig {
        base_url: sim.base_url(),
        token_id: id.to_string(),
        token_secret: secret.unwrap_or(real).to_string(),
        tls: TlsMode::Fingerprint(sim.fingerprint().expect("TLS is on")),
        timeout: Duration::from_secs(30),
    })
    .expect("client")
}

/// `get` and `get_text` of one path: the same data, or the same error.
async fn check(client: &Client, path: &str, params: &[Param]) -> Result<Value, String> {
    let tree = client.get(path, params).await.map_err(|e| e.to_string());
    let text = client
        .get_text(path, params)
        .await
        .map(|t| serde_json::from_str::<Value>(&t).expect("get_text returns JSON"))
        .map_err(|e| e.to_string());
    assert_eq!(tree, text, "get and get_text disagree on {path}");
    tree
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_text_is_the_data_get_parses() {
    let sim = sim().await;
    let c = client(&sim, None);
    let resources = check(&c, "/cluster/resources", &[Param::new("type", "vm")])
        .await
        .expect("resources");
    assert_eq!(resources.as_array().map(Vec::len), Some(3), "{resources}");
    let entry = &resources[0];
    let base = format!(
        "/nodes/{}/qemu/{}",
        entry["node"].as_str().expect("node"),
        entry["vmid"]
    );
    let config = check(&c, &format!("{base}/config"), &[Param::new("current", "1")])
        .await
        .expect("config");
    assert!(config["digest"].is_string(), "{config}");
    let pending = check(&c, &format!("{base}/pending"), &[])
        .await
        .expect("pending");
    assert!(
        pending
            .as_array()
            .is_some_and(|rows| rows.iter().any(|r| r["key"] == "digest")),
        "{pending}"
    );

    let missing = check(&c, "/nodes/pve01/qemu/99999/config", &[])
        .await
        .expect_err("no such VM");
    assert!(missing.contains("99999"), "{missing}");
    let denied = check(&client(&sim, Some("wrong")), "/cluster/resources", &[])
        .await
        .expect_err("wrong secret");
    assert!(denied.contains("401"), "{denied}");
    assert!(!denied.contains("wrong"), "the secret leaked: {denied}");
}

/// A server that answers every request with `body` (HTTP 200), for answers PVE never sends.
async fn fixed_answer(body: &'static str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = conn.read(&mut buf).await;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_text_agrees_with_get_on_answers_pve_never_sends() {
    // (body, what both return: Ok(data) or Err)
    let cases: &[(&str, Result<Value, ()>)] = &[
        (r#"{"data": {"a": 1}}"#, Ok(serde_json::json!({"a": 1}))),
        (r#"{"data": null}"#, Ok(Value::Null)),
        ("{}", Ok(Value::Null)),
        ("[1, 2]", Ok(Value::Null)),
        (r#""text""#, Ok(Value::Null)),
        ("42", Ok(Value::Null)),
        ("not json", Err(())),
        (r#"{"data": "#, Err(())),
    ];
    for (body, want) in cases {
        let client = Client::new(ClientConfig {
            base_url: fixed_answer(body).await,
            token_id: "root@pam!t".into(),
            token_secret: "s".into(),
            tls: TlsMode::Insecure,
            timeout: Duration::from_secs(10),
        })
        .expect("client");
        let got = check(&client, "/version", &[]).await.map_err(|_| ());
        assert_eq!(&got, want, "body {body}");
    }
}

/// What the client returns when PVE quotes `message` in a failed call (`Status`) or in a
/// failed task (`FailTask`) of a create that carried the sensitive `cipassword`.
async fn failure_text(kind: proxops_sim::FaultKind) -> String {
    let sim = sim().await;
    sim.set_faults(vec![proxops_sim::FaultRule {
        method: "POST".into(),
        path: "/nodes/{node}/qemu".into(),
        kind,
        probability: None,
        times: None,
    }]);
    let c = client(&sim, None);
    let params = [
        Param::new("vmid", "4242"),
        Param {
            sensitive: true,
            ..Param::new("cipassword", PASSWORD)
        },
    ];
    let result = match c
        .request(
            proxops_pve::Method::Post,
            "/nodes/pve01/qemu",
            &params,
            false,
        )
        .await
    {
        Ok(upid) => {
            let upid = upid.as_str().expect("a UPID").to_string();
            c.wait_task(&upid, Duration::from_secs(30))
                .await
                .map(|o| o.exitstatus)
        }
        Err(e) => Err(e),
    };
    // The password did reach PVE, where it belongs.
    assert!(
        sim.requests()
            .iter()
            .any(|r| r.params.contains(&("cipassword".into(), PASSWORD.into()))),
        "the request did not carry the password"
    );
    result.expect_err("the fault fails the call").to_string()
}

const PASSWORD: &str = "s3cret pass+word/ü";

/// PVE's text quoting the password in every encoding, with terminal control sequences.
const QUOTING: &str = "bad: [s3cret pass+word/ü] [s3cret%20pass%2Bword%2F%C3%BC] [s3cret+pass%2Bword%2F%C3%BC] [s3cret%20pass%2bword%2f%c3%bc] \u{1b}[2J\u{7}\r\nnext";

const CLEANED: &str =
    "bad: [(sensitive)] [(sensitive)] [(sensitive)] [(sensitive)] \\u{1b}[2J\\u{7}\\u{d}\\u{a}next";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pve_text_in_errors_and_task_statuses_is_redacted_and_escaped() {
    use proxops_sim::FaultKind;
    for (kind, expected) in [
        (
            FaultKind::Status {
                code: 500,
                message: QUOTING.into(),
            },
            format!("POST /nodes/pve01/qemu: HTTP 500: {CLEANED}"),
        ),
        (
            FaultKind::FailTask {
                message: QUOTING.into(),
            },
            // The simulator, as PVE, flattens a task's status to one line.
            format!("failed: {}", CLEANED.replace("\\u{d}\\u{a}", "\\u{d} ")),
        ),
    ] {
        let got = failure_text(kind).await;
        assert!(
            got.ends_with(&expected),
            "got {got:?}, expected …{expected:?}"
        );
        assert!(
            !got.contains(PASSWORD) && !got.contains('\u{1b}'),
            "{got:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answered_500_is_retried_once() {
    let sim = sim().await;
    let c = client(&sim, None);
    let rule = |times| proxops_sim::FaultRule {
        method: "GET".into(),
        path: "/cluster/resources".into(),
        kind: proxops_sim::FaultKind::Status {
            code: 500,
            message: "injected".into(),
        },
        probability: None,
        times: Some(times),
    };
    sim.set_faults(vec![rule(1)]);
    c.get("/cluster/resources", &[])
        .await
        .expect("one 500 is retried");
    sim.set_faults(vec![rule(2)]);
    let err = c
        .get("/cluster/resources", &[])
        .await
        .expect_err("a second 500 is not");
    assert_eq!(err.status(), Some(500), "{err}");
    let reads = sim
        .requests()
        .iter()
        .filter(|r| r.path == "/cluster/resources")
        .count();
    assert_eq!(reads, 4, "two reads of two attempts each");
}

/// A request that gets no answer names its method and path once: not reqwest's full URL too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_names_the_path_once() {
    // A port nothing listens on: bind one, then close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = Client::new(ClientConfig {
        base_url: format!("https://127.0.0.1:{port}"),
        token_id: "root@pam!test".into(),
        token_secret: "0123456789abcdef".into(),
        tls: TlsMode::Insecure,
        timeout: Duration::from_secs(5),
    })
    .expect("client");
    let e = c
        .get("/cluster/resources", &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("GET /cluster/resources: "), "{e}");
    assert_eq!(e.matches("/cluster/resources").count(), 1, "{e}");
    assert!(!e.contains("api2"), "{e}");
}
