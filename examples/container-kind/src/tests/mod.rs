//! Native tests over the functions the host calls: a base manifest and a converged live
//! container (config, status and `/cluster/resources` entry as PVE reports them), small edits
//! to either side, and one `check` helper per function that compares a compact rendering with
//! the expected lines.

mod calls;
mod ha_cases;
mod plan_cases;
mod validate_cases;

use proxops_kind_sdk::kind::ResourceKind;
use proxops_kind_sdk::model::{Call, Method, Observation, Param, Proposal, Read};
use proxops_kind_sdk::secrets::NoSecrets;
use serde_json::{Value, json};

use crate::{CALLS, Container, ContainerKind};

/// A complete, valid manifest.
fn manifest() -> Value {
    json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": "Container",
        "metadata": {"name": "web"},
        "spec": {
            "vmid": 101,
            "node": "pve01",
            "ostemplate": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
            "cores": 2,
            "memory": "1GiB",
            "swap": "512MiB",
            "rootfs": {"storage": "local-lvm", "size": "8GiB"},
            "nics": [{"bridge": "vmbr0", "ip": "dhcp"}],
            "features": {"nesting": true},
            "onboot": true,
            "tags": ["web"]
        }
    })
}

/// `doc` with the value at JSON pointer `ptr` (parent must exist) set, or removed for null.
fn with(mut doc: Value, edits: &[(&str, Value)]) -> Value {
    for (ptr, v) in edits {
        let (parent, key) = ptr.rsplit_once('/').expect("pointer has a parent");
        let target = doc
            .pointer_mut(parent)
            .unwrap_or_else(|| panic!("no {parent} in test document"));
        match target {
            Value::Object(m) => {
                if v.is_null() {
                    m.remove(key);
                } else {
                    m.insert(key.to_string(), v.clone());
                }
            }
            Value::Array(a) => {
                let i: usize = key.parse().expect("array index");
                if i == a.len() {
                    a.push(v.clone());
                } else {
                    a[i] = v.clone();
                }
            }
            other => panic!("{parent} is {other}, not a container"),
        }
    }
    doc
}

/// The config PVE reports for the container the base manifest creates (PVE 8/9 shapes).
fn config() -> Value {
    json!({
        "arch": "amd64",
        "cores": 2,
        "digest": "0f3c9a1e",
        "features": "nesting=1",
        "hostname": "web",
        "memory": 1024,
        "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
        "onboot": 1,
        "ostype": "debian",
        "rootfs": "local-lvm:vm-101-disk-0,size=8G",
        "swap": 512,
        "tags": "proxops;proxops-101;web",
        "unprivileged": 1
    })
}

/// The `/cluster/resources` entry of that container.
fn entry(status: &str) -> Value {
    json!({
        "id": "lxc/101", "type": "lxc", "node": "pve01", "vmid": 101, "name": "web",
        "status": status, "tags": "proxops;proxops-101;web",
        "maxmem": 1073741824u64, "maxdisk": 8589934592u64, "uptime": 3600
    })
}

/// An observation as the host builds it: the entry, and the reads `observe` asked for
/// answered with `config` and a `status/current` of `status`.
fn observation(entry: Option<Value>, config: &Value, status: &str) -> Observation {
    let calls = ContainerKind::observe(None, entry.as_ref(), &[], &[]);
    Observation {
        live: entry.map(|e| e.to_string()),
        reads: calls
            .into_iter()
            .map(|call| {
                let body = if call.path.ends_with("/config") {
                    config.to_string()
                } else {
                    json!({"status": status, "vmid": 101, "name": "web", "type": "lxc"}).to_string()
                };
                Read {
                    call,
                    status: 200,
                    body,
                }
            })
            .collect(),
    }
}

/// The desired state of a manifest (panics when it does not validate).
fn desired(doc: &Value) -> Container {
    match ContainerKind::validate(doc, &NoSecrets) {
        Ok(v) => v.desired,
        Err(d) => panic!("test manifest does not validate: {d:?}"),
    }
}

/// Whether `path` matches the template `pattern` (`{x}` is one non-empty segment).
fn matches_pattern(pattern: &str, path: &str) -> bool {
    let p: Vec<&str> = pattern.split('/').collect();
    let s: Vec<&str> = path.split('/').collect();
    p.len() == s.len()
        && p.iter().zip(&s).all(|(p, s)| {
            if p.starts_with('{') && p.ends_with('}') {
                !s.is_empty()
            } else {
                p == s
            }
        })
}

/// Whether a call is covered by a declared pattern.
fn declared(c: &Call) -> bool {
    CALLS
        .iter()
        .any(|(m, p)| *m == c.method && matches_pattern(p, &c.path))
}

fn method(m: Method) -> &'static str {
    match m {
        Method::Get => "GET",
        Method::Post => "POST",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
    }
}

/// One line per call: `PUT /path k=v k=v`.
fn render_call(c: &Call) -> String {
    let mut s = format!("{} {}", method(c.method), c.path);
    for Param {
        name: k, value: v, ..
    } in &c.params
    {
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

/// A proposal as lines: each action (`op: summary`, its calls indented, `restore` calls),
/// then drift (`drift path: live -> desired`), then anomalies (`anomaly path: message`, or
/// `locked` for a lock).
fn render(p: &Proposal) -> Vec<String> {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let mut out = Vec::new();
    for a in &p.actions {
        let op = match &a.operation {
            proxops_kind_sdk::model::Operation::Create => "create".to_string(),
            proxops_kind_sdk::model::Operation::Update => "update".to_string(),
            proxops_kind_sdk::model::Operation::Delete => "delete".to_string(),
            proxops_kind_sdk::model::Operation::Step(s) => format!("step {s}"),
        };
        let mut flags = String::new();
        if a.disturbs_availability {
            flags.push_str(" [disturbs]");
        }
        if a.destructive {
            flags.push_str(" [destructive]");
        }
        out.push(format!("{op}: {}{flags}", a.summary));
        out.extend(a.calls.iter().map(|c| format!("  {}", render_call(c))));
        if let Some(r) = &a.restore {
            for c in &r.calls {
                out.push(format!("  restore after {}: {}", r.after, render_call(c)));
            }
        }
    }
    for d in &p.drift {
        out.push(format!(
            "drift {}: {} -> {}",
            d.path,
            opt(&d.live),
            opt(&d.desired)
        ));
    }
    for a in &p.anomalies {
        let tag = if a.locked { "locked" } else { "anomaly" };
        out.push(format!("{tag} {}: {}", a.path, a.message));
    }
    out
}

/// Invariants of every proposal: each call (and restore call) is declared, every parameter a
/// create or config write sends is listed as a change with that new value, and so is every
/// option an HA resource write sends (as `ha.<option>`).
fn check_invariants(p: &Proposal) {
    for a in &p.actions {
        for c in a
            .calls
            .iter()
            .chain(a.restore.iter().flat_map(|r| &r.calls))
        {
            assert!(declared(c), "undeclared call {}", render_call(c));
        }
        for c in &a.calls {
            if c.path.starts_with(crate::ha::RESOURCES) && c.method != Method::Delete {
                for Param {
                    name: k, value: v, ..
                } in &c.params
                {
                    if matches!(k.as_str(), "digest" | "sid") {
                        continue;
                    }
                    assert!(
                        a.changes
                            .iter()
                            .any(|ch| ch.key == format!("ha.{k}") && ch.new.as_deref() == Some(v)),
                        "HA option {k}={v} has no change in {:?}",
                        a.changes
                    );
                }
                continue;
            }
            let writes = (c.method == Method::Post && c.path.ends_with("/lxc"))
                || (c.method == Method::Put && c.path.ends_with("/config"));
            if !writes {
                continue;
            }
            for Param {
                name: k, value: v, ..
            } in &c.params
            {
                if matches!(k.as_str(), "digest" | "start" | "delete") {
                    continue;
                }
                assert!(
                    a.changes
                        .iter()
                        .any(|ch| &ch.key == k && ch.new.as_deref() == Some(v)),
                    "parameter {k}={v} of {} has no change in {:?}",
                    c.path,
                    a.changes
                );
            }
            if let Some(del) = c.get("delete") {
                for k in del.split(',') {
                    assert!(
                        a.changes.iter().any(|ch| ch.key == k && ch.new.is_none()),
                        "deleted {k} has no change"
                    );
                }
            }
        }
    }
}

/// Plan `desired` (a manifest, or none for a prune) against `obs` and compare the rendering.
fn check_plan(desired_doc: Option<&Value>, obs: &Observation, expected: &[&str]) {
    let d = desired_doc.map(desired);
    let p = ContainerKind::plan(d.as_ref(), &[], &[], obs, &NoSecrets)
        .unwrap_or_else(|e| panic!("plan failed: {e:?}"));
    check_invariants(&p);
    let got = render(&p);
    assert_eq!(
        got,
        expected,
        "\n--- got:\n{}\n",
        got.iter()
            .map(|l| format!("{l:?},"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
