//! Conformance against PVE's own schema (shared/reference/pve-api-schema.json, read at test time):
//! the embedded trimmed copy matches it, every parameter PVE accepts is accepted, and representative bad values
//! are rejected with PVE's messages.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::T;
use crate::schema::{DROPPED_KEYS, SCHEMA_JSON, SERVED, default_key};

/// Finds the shared directory: `$CARGO_MANIFEST_DIR/../../../shared`, else `$PROXOPS_SHARED_DIR`.
fn shared_schema() -> Option<Value> {
    let mut candidates = vec![
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/reference/pve-api-schema.json"),
    ];
    if let Ok(dir) = std::env::var("PROXOPS_SHARED_DIR") {
        candidates.push(PathBuf::from(dir).join("reference/pve-api-schema.json"));
    }
    for c in candidates {
        if let Ok(text) = std::fs::read_to_string(&c) {
            return Some(serde_json::from_str(&text).expect("shared schema is JSON"));
        }
    }
    if std::env::var("PROXOPS_SIM_SKIP_CONFORMANCE").is_ok() {
        return None;
    }
    panic!(
        "pve-api-schema.json not found beside the repository; set PROXOPS_SHARED_DIR (or PROXOPS_SIM_SKIP_CONFORMANCE=1)"
    );
}

fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, v)| !(v.is_string() && DROPPED_KEYS.contains(&k.as_str())))
                .map(|(k, v)| (k.clone(), strip(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

/// The trimmed schema as generated from the shared file (this is also the generator: set PROXOPS_SIM_REGEN=1).
fn trimmed(shared: &Value) -> Value {
    let mut out = Map::new();
    for line in SERVED.lines().filter(|l| !l.trim().is_empty()) {
        let (method, path) = line.split_once(' ').expect("METHOD PATH");
        let e = &shared["paths"][path][method];
        assert!(
            e.is_object(),
            "{method} {path} missing from the shared schema"
        );
        let entry = out
            .entry(path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry.as_object_mut().expect("object").insert(
            method.to_string(),
            serde_json::json!({
                "parameters": strip(&e["parameters"]),
                "returns": strip(e.get("returns").unwrap_or(&Value::Object(Map::new()))),
            }),
        );
    }
    Value::Object(out)
}

#[test]
fn embedded_schema_matches_shared_file() {
    let Some(shared) = shared_schema() else {
        return;
    };
    let expected = trimmed(&shared);
    if std::env::var("PROXOPS_SIM_REGEN").is_ok() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schema/pve-api-sim.json");
        let text = serde_json::to_string_pretty(&expected).expect("json") + "\n";
        std::fs::write(path, text).expect("write schema");
        return;
    }
    let embedded: Value = serde_json::from_str(SCHEMA_JSON).expect("embedded json");
    assert!(
        embedded == expected,
        "host/sim/schema/pve-api-sim.json is stale; regenerate with PROXOPS_SIM_REGEN=1 cargo test -p proxops-sim embedded_schema"
    );
}

fn pattern_sample(p: &str) -> Option<&'static str> {
    Some(match p {
        "(/dev/.+|socket)" => "socket",
        "(?:[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}|[01])" => "1",
        "(?^:\\d+(?:-\\d+)?(?:;\\d+(?:-\\d+)?)*)" => "10;20-30",
        "(?^:^((?>[+-]?[\\w\\-\\._=]+,?)+)$)" => "+aes",
        "(?^:^(0x)[0-9a-fA-F]{16})" => "0x0123456789abcdef",
        "(ide|sata|scsi|virtio)\\d+" => "scsi0",
        "(now|\\d{4}-\\d{1,2}-\\d{1,2}(T\\d{1,2}:\\d{1,2}:\\d{1,2})?)" => "now",
        "/dev/parport\\d+|/dev/usb/lp\\d+" => "/dev/parport0",
        "[0-9a-fA-F]{8,64}" => "deadbeef",
        "[A-Za-z0-9\\-_\\s]{,16}" => "prod",
        "[A-Za-z0-9\\-_\\s]{,8}" => "vend",
        "[a-zA-Z0-9\\-]+" => "abc",
        "\\+?\\d+(\\.\\d+)?[KMGT]?" => "+1G",
        "\\d+(\\.\\d+)+" => "1.2",
        "https?://.*" => "http://127.0.0.1:1/x.iso",
        "net\\d+=\\d+(,net\\d+=\\d+)*" => "net0=1500",
        p if p.starts_with("(?^:(?:(?:(?^:(0x)?") => "1234:5678",
        p if p.starts_with("(pc|pc(-i440fx)?") => "q35",
        _ => return None,
    })
}

fn format_sample(f: &str) -> &'static str {
    match f {
        "pve-node" => "pve01",
        "pve-vmid" => "100",
        "pve-storage-id" => "local",
        "pve-configid" => "abc",
        "pve-configid-list" => "name",
        "urlencoded" => "abc%20def",
        "mac-addr" => "BC:24:11:00:00:01",
        "pve-tag-list" => "a;b",
        "dns-name" | "dns-name-list" => "host1",
        "disk-size" => "1G",
        "pve-volume-id" => "local:snippets/u.yaml",
        "pve-volume-id-or-qm-path" => "local-lvm:1",
        "pve-volume-id-or-absolute-path" => "local:import/x.qcow2",
        "pve-bridge-id" => "vmbr0",
        "pve-hotplug-features" => "network,disk",
        "address-list" => "10.0.0.1",
        "pve-storage-content" => "iso",
        "pve-storage-content-list" => "iso",
        "pve-qm-bootdisk" => "scsi0",
        "pve-poolid" => "pool1",
        "pve-qm-hostpci" => "mapping=gpu",
        "pve-qm-ipconfig" => "ip=dhcp",
        "pve-qm-boot" => "legacy=cdn",
        "pve-qm-smbios1" => "uuid=0c0b7b1e-2b8a-4b39-9c1c-1b1d2a3e4f50",
        "pve-qm-cicustom" => "user=local:snippets/u.yaml",
        "pve-startup-order" => "order=1",
        "pve-vm-cpu-conf" => "host",
        "pve-cpuset" => "0-1",
        "pve-qm-watchdog" => "model=i6300esb",
        "pve-qm-rng" => "source=/dev/urandom",
        "pve-qemu-sev-fmt" => "type=std",
        "pve-qemu-tdx-fmt" => "type=tdx",
        "pve-qm-ide" => "local-lvm:1",
        _ => "x",
    }
}

fn number_sample(s: &Value) -> String {
    let min = s.get("minimum").and_then(Value::as_f64);
    let max = s.get("maximum").and_then(Value::as_f64);
    let v = match (min, max) {
        (Some(a), _) => a.max(1.0_f64.min(max.unwrap_or(1.0))),
        (None, Some(b)) => b.min(1.0),
        _ => 1.0,
    };
    format!("{}", v as i64)
}

/// A value PVE accepts for a property schema.
fn sample(key: &str, s: &Value) -> String {
    if key == "volume" || key == "hookscript" {
        return "local:snippets/u.yaml".to_string();
    }
    if let Some(Value::Array(e)) = s.get("enum")
        && let Some(first) = e.first()
    {
        return first
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| first.to_string());
    }
    match s.get("type").and_then(Value::as_str).unwrap_or("string") {
        "boolean" => return "1".to_string(),
        "integer" | "number" => return number_sample(s),
        _ => {}
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        return pattern_sample(p).unwrap_or("x").to_string();
    }
    match s.get("format") {
        Some(Value::Object(dict)) => dict_sample(dict),
        Some(Value::String(f)) => format_sample(f).to_string(),
        _ => "x".to_string(),
    }
}

fn dict_sample(dict: &Map<String, Value>) -> String {
    let mut parts = Vec::new();
    if let Some(dk) = default_key(dict) {
        parts.push(sample(&dk, &dict[&dk]));
    }
    for (k, s) in dict {
        let optional = s.get("optional").and_then(Value::as_i64) == Some(1);
        if s.get("alias").is_some() || optional || s.get("default_key").is_some() {
            continue;
        }
        parts.push(format!("{k}={}", sample(k, s)));
    }
    parts.join(",")
}

fn concrete(key: &str) -> String {
    key.replace("[n]", "0")
}

fn path_for(template: &str, upid: &str) -> String {
    template
        .replace("{node}", "pve01")
        .replace("{vmid}", "100")
        .replace("{storage}", "local")
        .replace("{upid}", &super::enc(upid))
        .replace("{volume}", "iso/x.iso")
}

#[tokio::test]
async fn simulator_accepts_every_pve_parameter_and_rejects_bad_values() {
    let Some(shared) = shared_schema() else {
        return;
    };
    let t = T::new().await;
    t.create(100, &[]).await;
    let (_, b) = t
        .req("POST", "/nodes/pve01/qemu/100/status/stop", &[])
        .await;
    let upid = b["data"].as_str().expect("upid").to_string();
    t.wait(&upid).await;
    let mut checked = 0;
    for line in SERVED.lines().filter(|l| !l.trim().is_empty()) {
        let (method, template) = line.split_once(' ').expect("METHOD PATH");
        let props = shared["paths"][template][method]["parameters"]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let path = path_for(template, &upid);
        // 1. every parameter PVE defines is accepted with a valid value (a probe key keeps the request from executing)
        let mut good: Vec<(String, String)> = Vec::new();
        for (k, s) in &props {
            if template.contains(&format!("{{{k}}}")) {
                continue;
            }
            good.push((concrete(k), sample(k, s)));
        }
        good.push(("zz-conformance-probe".to_string(), "1".to_string()));
        let pairs: Vec<(&str, &str)> = good.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let (status, body) = t.req(method, &path, &pairs).await;
        assert_eq!(status, 400, "{method} {template}: {body}");
        let errors = body["errors"].as_object().expect("errors object");
        assert_eq!(
            errors.keys().collect::<Vec<_>>(),
            vec!["zz-conformance-probe"],
            "{method} {template} rejected a parameter PVE accepts: {body}"
        );
        assert_eq!(
            errors["zz-conformance-probe"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        checked += 1;
        // 2. representative bad values get PVE's messages
        let mut bad: Vec<(String, String, String)> = Vec::new();
        for (k, s) in &props {
            if template.contains(&format!("{{{k}}}")) {
                continue;
            }
            let key = concrete(k);
            let ty = s.get("type").and_then(Value::as_str).unwrap_or("string");
            if let Some(Value::Array(_)) = s.get("enum") {
                bad.push((
                    key,
                    "zz-bogus".into(),
                    "value 'zz-bogus' does not have a value in the enumeration".into(),
                ));
                continue;
            }
            match ty {
                "boolean" => bad.push((
                    key,
                    "true".into(),
                    "type check ('boolean') failed - got 'true'".into(),
                )),
                "integer" => {
                    if let Some(min) = s.get("minimum").and_then(Value::as_i64) {
                        bad.push((
                            key,
                            (min - 1).to_string(),
                            format!("value must have a minimum value of {min}"),
                        ));
                    } else {
                        bad.push((
                            key,
                            "x1".into(),
                            "type check ('integer') failed - got 'x1'".into(),
                        ));
                    }
                }
                "number" => bad.push((
                    key,
                    "x1".into(),
                    "type check ('number') failed - got 'x1'".into(),
                )),
                _ => match s.get("format") {
                    Some(Value::Object(_)) => {
                        bad.push((key, "a=1,a=2".into(), "invalid format - ".into()));
                    }
                    Some(Value::String(f)) if f == "urlencoded" => {
                        bad.push((
                            key,
                            "a b".into(),
                            "invalid format - invalid urlencoded string: a b".into(),
                        ));
                    }
                    _ => {
                        if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                            && max < 2000
                        {
                            bad.push((
                                key,
                                "a".repeat(max as usize + 1),
                                format!("value may only be {max} characters long"),
                            ));
                        }
                    }
                },
            }
        }
        if bad.is_empty() {
            continue;
        }
        let pairs: Vec<(&str, &str)> = bad
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        let (status, body) = t.req(method, &path, &pairs).await;
        assert_eq!(status, 400, "{method} {template}: {body}");
        for (k, v, fragment) in &bad {
            let got = body["errors"][k].as_str().unwrap_or("");
            assert!(
                got.contains(fragment.as_str()),
                "{method} {template} {k}={v}: expected {fragment:?}, got {got:?}"
            );
        }
    }
    assert_eq!(
        checked,
        SERVED.lines().filter(|l| !l.trim().is_empty()).count()
    );
}

/// Checks a JSON value against a PVE `returns` schema: JSON types, required keys, array items.
fn check_shape(path: &str, schema: &Value, v: &Value, errs: &mut Vec<String>) {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let ok = match ty {
        "array" => {
            if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
                for (i, item) in arr.iter().enumerate() {
                    check_shape(&format!("{path}[{i}]"), items, item, errs);
                }
            }
            v.is_array()
        }
        "object" => {
            if let (Some(props), Some(obj)) = (
                schema.get("properties").and_then(Value::as_object),
                v.as_object(),
            ) {
                for (k, s) in props {
                    if k.ends_with("[n]") {
                        continue;
                    }
                    let optional = s.get("optional").and_then(Value::as_i64) == Some(1);
                    match obj.get(k) {
                        Some(val) => check_shape(&format!("{path}.{k}"), s, val, errs),
                        None if !optional => errs.push(format!("{path}.{k}: missing")),
                        None => {}
                    }
                }
                for (k, val) in obj {
                    if !props.contains_key(k)
                        && let Some(s) = crate::schema::find_property(props, k)
                    {
                        check_shape(&format!("{path}.{k}"), s, val, errs);
                    }
                }
            }
            v.is_object()
        }
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean() || v.as_u64().is_some_and(|n| n <= 1),
        "string" => v.is_string(),
        "null" => v.is_null(),
        _ => true,
    };
    if !ok {
        errs.push(format!("{path}: expected {ty}, got {v}"));
    }
}

#[tokio::test]
async fn return_shapes_match_pve_schema() {
    let Some(shared) = shared_schema() else {
        return;
    };
    let config =
        crate::SimConfig::from_yaml_str("lxc:\n  - {vmid: 200, node: pve01}\n").expect("yaml");
    let t = T::with(config).await;
    t.create(
        100,
        &[
            ("name", "shape"),
            ("scsi0", "local-lvm:1"),
            ("ide2", "local-lvm:cloudinit"),
            ("net0", "virtio,bridge=vmbr0"),
            ("agent", "1"),
            ("tags", "a"),
            ("onboot", "1"),
            ("cipassword", "x"),
        ],
    )
    .await;
    let (_, b) = t
        .req("POST", "/nodes/pve01/qemu/100/status/start", &[])
        .await;
    let upid = b["data"].as_str().expect("upid").to_string();
    t.wait(&upid).await;
    t.check(
        "PUT",
        "/nodes/pve01/qemu/100/config",
        &[("cores", "2")],
        200,
        "null",
    )
    .await;
    let mut errs = Vec::new();
    for line in SERVED.lines().filter(|l| l.starts_with("GET ")) {
        let template = &line[4..];
        if template == "/cluster/nextid" {
            // PVE emits the id as a JSON string although the schema says integer (pve-api.md 3.3).
            continue;
        }
        let path = path_for(template, &upid);
        let (status, body) = t.req("GET", &path, &[]).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        let returns = &shared["paths"][template]["GET"]["returns"];
        check_shape(template, returns, &body["data"], &mut errs);
    }
    assert!(
        errs.is_empty(),
        "return shapes differ from PVE's schema:\n{}",
        errs.join("\n")
    );
}
