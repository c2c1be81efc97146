//! A test-only third-party kind that attacks the host's sandbox on request: a puppet whose
//! every proposal is data in its manifest, so one component serves a table of attacks (the
//! e2e suite `tests/e2e/hostile/`). It is built by host/guests but never embedded in the
//! proxops binary; tests load it through `proxops.yaml` with a pinned sha256 and a grant of
//! the ordinary-looking calls it declares ([`CALLS`]).
//!
//! Its manifests: `apiVersion: proxops/test`, `kind: Hostile`, in `hostile/<cluster>/`. What
//! the `spec` may hold (every field optional):
//!
//! - `key` (string): the `guest-id` key `identity` answers, verbatim (`"0101"`, `"+101"`,
//!   `" 101"`, `"101\n"`); else `vmid` (a number) in decimal; else the object is keyed by its
//!   name in the space `hostile`. The resource id is `lxc/<key>`, the node `node` or `pve01`.
//! - `reads`: a list of paths `observe` asks the host to GET, verbatim.
//! - `reads-count: N`: `observe` asks for N distinct GETs `/nodes/pve01/lxc/<i>/config`,
//!   i = 1..=N (a per-object read cap).
//! - `echo-reads: true`: `plan` prints (stderr, into its log) every read body it was given,
//!   to show what a kind sees of a live value.
//! - `actions`: what `plan` proposes, verbatim: a list of
//!   `{operation: create|update|delete|<step>, summary, calls, restore?: {after, calls},
//!   disturbs?: bool, destructive?: bool, when?: absent|present}`, each call
//!   `{method: GET|POST|PUT|DELETE, path, params?: [[name, value], ...]}`. `when` keeps the
//!   action only while the object's live entry is absent (or present), so a legitimate
//!   object converges. A parameter's value may be a secret instead of a text:
//!   `{ref: <path>}` the token of `secrets.reference`, `{embed-ref: <path>}` that token inside
//!   a longer value, `{value: <path>}` the value `secrets.resolve` gives (its error fails the
//!   plan), `{matches: [<path>, <guess>]}` `true`, `false` or the error `secrets.matches`
//!   answers.
//!
//! `claims` takes every listing entry whose JSON holds `hostile-claim`. `adopt` writes a
//! manifest named by the live entry's `name`, verbatim (control characters included), with one
//! gap whose reason echoes that name. `finally` proposes, when a changed object is named
//! `finally-volume`, a DELETE of VM 100's disk (`local-lvm:vm-100-disk-0`) and, when one is
//! named `finally-stopall`, `POST /nodes/pve01/stopall`; otherwise nothing.
// Natively only the unit tests call into the kind (it is otherwise only ever run as a component).
#![cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]

use proxops_kind_sdk::kind::{KindInfo, Listing};
use proxops_kind_sdk::model::{self, Call, Method, Operation, Param};
use proxops_kind_sdk::types::{Diagnostic, Severity};
use proxops_kind_sdk::wit::{
    Adopted, Gap, Guest, ObjectKey, Observation, Proposal, Reference, Resolved, Validated,
};
use serde_json::{Value, json};

/// The kind.
pub struct Hostile;

/// What it declares: calls an operator might grant because they look ordinary. The generic
/// placeholders (`{op}`, `{what}`, `{area}`) are deliberate: the host must judge the concrete
/// request, not the template.
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/cluster/resources"),
    (Method::Get, "/nodes/{node}/lxc/{vmid}/config"),
    (Method::Get, "/nodes/{node}/{what}"),
    (Method::Post, "/nodes/{node}/lxc"),
    (Method::Put, "/nodes/{node}/lxc/{vmid}/config"),
    (Method::Post, "/nodes/{node}/lxc/{vmid}/status/{op}"),
    (Method::Delete, "/nodes/{node}/lxc/{vmid}"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/config"),
    (Method::Post, "/nodes/{node}/qemu/{vmid}/status/{op}"),
    (Method::Delete, "/nodes/{node}/qemu/{vmid}"),
    (
        Method::Delete,
        "/nodes/{node}/storage/{storage}/content/{volume}",
    ),
    (Method::Post, "/nodes/{node}/{op}"),
    (Method::Post, "/nodes/{node}/{area}/{what}"),
    (Method::Post, "/{area}/{what}"),
];

/// The text in a listing entry (a tag) that makes `claims` take it.
pub const CLAIM_MARK: &str = "hostile-claim";

/// The grant that covers [`CALLS`], as `proxops.yaml` spells it (a YAML flow list).
pub fn grant_calls() -> String {
    let calls: Vec<String> = CALLS
        .iter()
        .map(|(m, p)| format!("\"{} {p}\"", m.as_str()))
        .collect();
    format!("[{}]", calls.join(", "))
}

/// The manifest's puppet strings, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Puppet {
    pub reads: Vec<Call>,
    pub actions: Vec<Scripted>,
    pub echo_reads: bool,
}

/// One scripted action and when to propose it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted {
    pub action: model::Action,
    /// `Some(true)`: only while the object is live; `Some(false)`: only while it is not.
    pub when_live: Option<bool>,
}

fn method(v: &Value, at: &str) -> Result<Method, String> {
    match v.as_str().map(str::to_ascii_uppercase).as_deref() {
        Some("GET") => Ok(Method::Get),
        Some("POST") => Ok(Method::Post),
        Some("PUT") => Ok(Method::Put),
        Some("DELETE") => Ok(Method::Delete),
        _ => Err(format!("{at}.method: GET, POST, PUT or DELETE, not {v}")),
    }
}

/// `{method, path, params?: [[name, value], ...]}`.
pub fn parse_call(v: &Value, at: &str, lookups: bool) -> Result<Call, String> {
    let method = method(v.get("method").unwrap_or(&Value::Null), at)?;
    let path = v
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at}.path: a string"))?;
    let mut call = Call::new(method, path);
    if let Some(params) = v.get("params") {
        let list = params
            .as_array()
            .ok_or_else(|| format!("{at}.params: a list of [name, value] pairs"))?;
        for (i, pair) in list.iter().enumerate() {
            let pair = pair.as_array().filter(|p| p.len() == 2);
            let text = |v: &Value| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
                _ => None,
            };
            let Some((name, value)) = pair.and_then(|p| Some((text(&p[0])?, &p[1]))) else {
                return Err(format!("{at}.params[{i}]: a [name, value] pair"));
            };
            let value = match text(value) {
                Some(v) => v,
                None => {
                    secret_param(value, lookups).map_err(|e| format!("{at}.params[{i}]: {e}"))?
                }
            };
            call.params.push(Param::new(name, value));
        }
    }
    Ok(call)
}

/// A parameter value taken from the host's secrets (`{ref|embed-ref|value|matches: …}`);
/// without `lookups` (validation) the host is not asked and the value is a placeholder.
fn secret_param(v: &Value, lookups: bool) -> Result<String, String> {
    use proxops_kind_sdk::secrets::{HostSecrets, Secrets};
    let known = ["ref", "embed-ref", "value", "matches"];
    if !lookups
        && v.as_object()
            .is_some_and(|o| o.keys().any(|k| known.contains(&k.as_str())))
    {
        return Ok("(secret)".into());
    }
    let path = |key: &str| v.get(key).and_then(Value::as_str);
    if let Some(p) = path("ref") {
        HostSecrets.reference(p).map_err(|e| e.message(p))
    } else if let Some(p) = path("embed-ref") {
        Ok(format!(
            "note {}",
            HostSecrets.reference(p).map_err(|e| e.message(p))?
        ))
    } else if let Some(p) = path("value") {
        HostSecrets
            .resolve(p)
            .map(|s| s.expose().to_string())
            .map_err(|e| e.message(p))
    } else if let Some([p, guess]) = v
        .get("matches")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        let (p, guess) = (
            p.as_str().unwrap_or_default(),
            guess.as_str().unwrap_or_default(),
        );
        Ok(match HostSecrets.matches(p, guess) {
            Ok(b) => b.to_string(),
            Err(e) => format!("{e:?}"),
        })
    } else {
        Err("a text, or one of {ref|embed-ref|value: <path>}, {matches: [<path>, <guess>]}".into())
    }
}

fn parse_calls(v: Option<&Value>, at: &str, lookups: bool) -> Result<Vec<Call>, String> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, c)| parse_call(c, &format!("{at}[{i}]"), lookups))
            .collect(),
        Some(_) => Err(format!("{at}: a list of calls")),
    }
}

fn operation(v: &Value, at: &str) -> Result<Operation, String> {
    match v.as_str() {
        Some("create") => Ok(Operation::Create),
        Some("update") => Ok(Operation::Update),
        Some("delete") => Ok(Operation::Delete),
        Some(step) if !step.is_empty() => Ok(Operation::step(step)),
        _ => Err(format!(
            "{at}.operation: create, update, delete or a step name"
        )),
    }
}

/// One entry of `spec.actions`.
pub fn parse_action(v: &Value, at: &str, lookups: bool) -> Result<Scripted, String> {
    let operation = operation(v.get("operation").unwrap_or(&Value::Null), at)?;
    let summary = match v.get("summary") {
        None => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(format!("{at}.summary: a string")),
    };
    let calls = parse_calls(v.get("calls"), &format!("{at}.calls"), lookups)?;
    let restore = match v.get("restore") {
        None | Some(Value::Null) => None,
        Some(r) => Some(model::Restore {
            after: r
                .get("after")
                .and_then(Value::as_u64)
                .and_then(|a| u32::try_from(a).ok())
                .unwrap_or(0),
            calls: parse_calls(r.get("calls"), &format!("{at}.restore.calls"), lookups)?,
        }),
    };
    let flag = |name: &str| -> Result<bool, String> {
        match v.get(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(format!("{at}.{name}: true or false")),
        }
    };
    let when_live = match v.get("when").and_then(Value::as_str) {
        None => None,
        Some("absent") => Some(false),
        Some("present") => Some(true),
        Some(other) => return Err(format!("{at}.when: absent or present, not {other}")),
    };
    Ok(Scripted {
        action: model::Action {
            operation,
            summary,
            calls,
            changes: Vec::new(),
            disturbs_availability: flag("disturbs")?,
            destructive: flag("destructive")?,
            restore,
        },
        when_live,
    })
}

/// The puppet strings of a spec (or of the desired state, which is the spec plus `name`).
pub fn parse(spec: &Value) -> Result<Puppet, String> {
    parse_with(spec, true)
}

/// [`parse`], asking the host for the secrets the parameters name only with `lookups`.
pub fn parse_with(spec: &Value, lookups: bool) -> Result<Puppet, String> {
    let mut reads = match spec.get("reads") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, p)| {
                p.as_str()
                    .map(|p| Call::new(Method::Get, p))
                    .ok_or_else(|| format!("spec.reads[{i}]: a path"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("spec.reads: a list of paths".into()),
    };
    if let Some(n) = spec.get("reads-count") {
        let n = n
            .as_u64()
            .ok_or_else(|| "spec.reads-count: a number".to_string())?;
        reads.extend(
            (1..=n).map(|i| Call::new(Method::Get, format!("/nodes/pve01/lxc/{i}/config"))),
        );
    }
    let actions = match spec.get("actions") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, a)| parse_action(a, &format!("spec.actions[{i}]"), lookups))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("spec.actions: a list of actions".into()),
    };
    let echo_reads = spec.get("echo-reads") == Some(&Value::Bool(true));
    Ok(Puppet {
        reads,
        actions,
        echo_reads,
    })
}

/// The object key the desired state asks for.
pub fn key_of(desired: &Value) -> ObjectKey {
    let node = desired
        .get("node")
        .and_then(Value::as_str)
        .unwrap_or("pve01")
        .to_string();
    let key = match (desired.get("key"), desired.get("vmid")) {
        (Some(Value::String(k)), _) => Some(k.clone()),
        (_, Some(Value::Number(n))) => Some(n.to_string()),
        _ => None,
    };
    match key {
        Some(key) => ObjectKey {
            node: Some(node),
            space: "guest-id".into(),
            resource_id: Some(format!("lxc/{key}")),
            key,
        },
        None => ObjectKey {
            node: None,
            space: "hostile".into(),
            key: desired
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            resource_id: None,
        },
    }
}

/// The actions of `puppet` that apply with the live entry present (`live`) or absent.
pub fn proposal(puppet: &Puppet, live: bool) -> model::Proposal {
    model::Proposal {
        actions: puppet
            .actions
            .iter()
            .filter(|s| s.when_live.is_none_or(|w| w == live))
            .map(|s| s.action.clone())
            .collect(),
        ..model::Proposal::default()
    }
}

/// What `finally` proposes after the objects named `changed` changed.
pub fn finally_actions(changed: &[String]) -> Vec<model::Action> {
    let named = |n: &str| changed.iter().any(|c| c == n);
    let step = |summary: &str, call: Call| model::Action {
        operation: Operation::step("sync"),
        summary: summary.into(),
        calls: vec![call],
        changes: Vec::new(),
        disturbs_availability: false,
        destructive: false,
        restore: None,
    };
    let mut out = Vec::new();
    if named("finally-volume") {
        out.push(step(
            "hostile: tidy the storage",
            Call::new(
                Method::Delete,
                "/nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-100-disk-0",
            ),
        ));
    }
    if named("finally-stopall") {
        out.push(step(
            "hostile: settle the node",
            Call::new(Method::Post, "/nodes/pve01/stopall"),
        ));
    }
    out
}

/// The manifest `adopt` writes for a live entry (JSON): named by the entry's `name`, verbatim.
pub fn adopted(entry: &Value) -> Result<(Value, Vec<Gap>), String> {
    let name = entry
        .get("name")
        .and_then(Value::as_str)
        .ok_or("the live entry has no name")?;
    let mut spec = serde_json::Map::new();
    if let Some(vmid) = entry.get("vmid").and_then(Value::as_u64) {
        spec.insert("vmid".into(), json!(vmid));
    }
    let manifest = json!({
        "apiVersion": "proxops/test",
        "kind": "Hostile",
        "metadata": {"name": name},
        "spec": spec,
    });
    let gaps = vec![Gap {
        path: "spec".into(),
        reason: format!("hostile: adopted {name}"),
    }];
    Ok((manifest, gaps))
}

fn desired_value(desired: Option<&str>) -> Option<Value> {
    serde_json::from_str(desired?).ok()
}

impl Guest for Hostile {
    fn describe() -> proxops_kind_sdk::wit::KindInfo {
        KindInfo {
            api_version: "proxops/test".into(),
            calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
            listings: vec![Listing::cluster_resources()],
            ..KindInfo::new("Hostile", "hostile", json!({}))
        }
        .into_wit()
    }

    fn validate(input: String) -> Result<Validated, Vec<Diagnostic>> {
        let error = |path: &str, message: String| {
            vec![Diagnostic {
                path: path.into(),
                message,
                severity: Severity::Error,
            }]
        };
        let manifest: Value = serde_json::from_str(&input)
            .map_err(|e| error("", format!("hostile: not JSON: {e}")))?;
        let mut desired = match manifest.get("spec") {
            Some(Value::Object(spec)) => spec.clone(),
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(_) => return Err(error("spec", "hostile: a mapping".into())),
        };
        // The puppet strings must parse; what they ask for is the host's to judge.
        parse_with(&Value::Object(desired.clone()), false).map_err(|e| error("spec", e))?;
        let name = manifest.pointer("/metadata/name").cloned();
        desired.insert("name".into(), name.unwrap_or(Value::Null));
        Ok(Validated {
            desired: Value::Object(desired).to_string(),
            warnings: Vec::new(),
        })
    }

    fn references(_desired: String) -> Vec<Reference> {
        Vec::new()
    }

    fn check_references(_desired: String, _resolved: Vec<Resolved>) -> Vec<Diagnostic> {
        Vec::new()
    }

    fn identity(desired: String) -> ObjectKey {
        key_of(&serde_json::from_str(&desired).unwrap_or(Value::Null))
    }

    fn observe(
        desired: Option<String>,
        _live: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
    ) -> Vec<Call> {
        desired_value(desired.as_deref())
            .and_then(|d| parse_with(&d, false).ok())
            .map(|p| p.reads)
            .unwrap_or_default()
    }

    fn plan(
        desired: Option<String>,
        _resolved: Vec<Resolved>,
        _referrers: Vec<Resolved>,
        observed: Observation,
    ) -> Result<Proposal, Vec<Diagnostic>> {
        let Some(desired) = desired_value(desired.as_deref()) else {
            // A claimed entry without a manifest: nothing to do.
            return Ok(Proposal::default());
        };
        let puppet = parse(&desired).map_err(|e| {
            vec![Diagnostic {
                path: "spec".into(),
                message: e,
                severity: Severity::Error,
            }]
        })?;
        if puppet.echo_reads {
            for r in &observed.reads {
                eprintln!("read {}: {}", r.call.path, r.body);
            }
        }
        Ok(proposal(&puppet, observed.live.is_some()))
    }

    fn claims(_listing: String, entry: String) -> bool {
        entry.contains(CLAIM_MARK)
    }

    fn adopt(observed: Observation) -> Result<Adopted, String> {
        let entry: Value = observed
            .live
            .as_deref()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or("hostile: no live entry")?;
        let (manifest, gaps) = adopted(&entry)?;
        Ok(Adopted {
            manifest: manifest.to_string(),
            gaps,
        })
    }

    fn finally(changed: Vec<String>) -> Vec<model::Action> {
        finally_actions(&changed)
    }
}

// A native build cannot link WIT export names (they contain ':'); the logic is only ever
// run as a component.
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Hostile);

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(call: &Call) -> String {
        let params: Vec<String> = call
            .params
            .iter()
            .map(|p| format!("{}={}", p.name, p.value))
            .collect();
        format!(
            "{} {} {}",
            call.method.as_str(),
            call.path,
            params.join("&")
        )
    }

    #[test]
    fn actions_are_taken_verbatim_from_the_spec() {
        let spec = json!({"actions": [
            {"operation": "update", "summary": "refresh description\nNo changes",
             "calls": [
                {"method": "post", "path": "/nodes/pve01/lxc/101/status/stop"},
                {"method": "DELETE", "path": "/nodes/pve01/lxc/0101",
                 "params": [["purge", 1], ["unprivileged", "1"], ["unprivileged", "0"]]}],
             "restore": {"after": 0, "calls": [{"method": "POST", "path": "/nodes/pve01/lxc/101/status/start"}]},
             "disturbs": true},
            {"operation": "power", "calls": [], "when": "absent", "destructive": true}
        ]});
        let puppet = parse(&spec).unwrap();
        let first = &puppet.actions[0].action;
        assert_eq!(first.operation, Operation::Update);
        assert_eq!(first.summary, "refresh description\nNo changes");
        assert_eq!(
            first.calls.iter().map(shown).collect::<Vec<_>>(),
            [
                "POST /nodes/pve01/lxc/101/status/stop ",
                "DELETE /nodes/pve01/lxc/0101 purge=1&unprivileged=1&unprivileged=0",
            ]
        );
        assert!(first.disturbs_availability && !first.destructive);
        assert_eq!(first.restore.as_ref().unwrap().calls.len(), 1);
        let second = &puppet.actions[1];
        assert!(second.action.operation.is_step("power"));
        assert_eq!(second.when_live, Some(false));
        assert!(second.action.destructive);
        // `when: absent` drops the action once the object is live.
        assert_eq!(proposal(&puppet, false).actions.len(), 2);
        assert_eq!(proposal(&puppet, true).actions.len(), 1);
    }

    #[test]
    fn malformed_puppet_strings_are_refused_with_their_path() {
        for (spec, says) in [
            (
                json!({"actions": [{"operation": "update", "calls": [{"method": "PATCH", "path": "/x"}]}]}),
                "spec.actions[0].calls[0].method",
            ),
            (
                json!({"actions": [{"operation": "", "calls": []}]}),
                "spec.actions[0].operation",
            ),
            (
                json!({"actions": [{"operation": "update", "calls": [{"method": "GET", "path": "/x", "params": [["a"]]}]}]}),
                "spec.actions[0].calls[0].params[0]",
            ),
            (
                json!({"actions": [{"operation": "update", "when": "later"}]}),
                "spec.actions[0].when",
            ),
            (json!({"reads": "/cluster/resources"}), "spec.reads"),
            (json!({"reads-count": "many"}), "spec.reads-count"),
        ] {
            let err = parse(&spec).unwrap_err();
            assert!(err.starts_with(says), "{spec}: {err}");
        }
    }

    #[test]
    fn reads_are_listed_paths_then_a_counted_range() {
        let puppet =
            parse(&json!({"reads": ["/nodes/pve01/..\\..\\access\\users"], "reads-count": 3}))
                .unwrap();
        assert_eq!(
            puppet
                .reads
                .iter()
                .map(|c| c.path.as_str())
                .collect::<Vec<_>>(),
            [
                "/nodes/pve01/..\\..\\access\\users",
                "/nodes/pve01/lxc/1/config",
                "/nodes/pve01/lxc/2/config",
                "/nodes/pve01/lxc/3/config",
            ]
        );
        assert!(puppet.reads.iter().all(|c| c.method == Method::Get));
    }

    #[test]
    fn identity_keeps_the_key_spelling_verbatim() {
        for (desired, key, resource) in [
            (json!({"key": "0101"}), "0101", "lxc/0101"),
            (json!({"key": "101\n"}), "101\n", "lxc/101\n"),
            (json!({"key": "+101", "vmid": 7}), "+101", "lxc/+101"),
            (json!({"vmid": 150}), "150", "lxc/150"),
        ] {
            let k = key_of(&desired);
            assert_eq!((k.space.as_str(), k.key.as_str()), ("guest-id", key));
            assert_eq!(k.resource_id.as_deref(), Some(resource));
            assert_eq!(k.node.as_deref(), Some("pve01"));
        }
        let named = key_of(&json!({"name": "x", "node": "pve02"}));
        assert_eq!((named.space.as_str(), named.key.as_str()), ("hostile", "x"));
        assert_eq!(
            key_of(&json!({"vmid": 1, "node": "pve02"})).node.as_deref(),
            Some("pve02")
        );
    }

    #[test]
    fn finally_attacks_by_changed_name() {
        let calls = |names: &[&str]| -> Vec<String> {
            finally_actions(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .iter()
                .flat_map(|a| a.calls.iter().map(shown))
                .collect()
        };
        assert!(calls(&["a"]).is_empty());
        assert_eq!(
            calls(&["finally-stopall", "finally-volume"]),
            [
                "DELETE /nodes/pve01/storage/local-lvm/content/local-lvm%3Avm-100-disk-0 ",
                "POST /nodes/pve01/stopall ",
            ]
        );
    }

    #[test]
    fn adopt_takes_the_live_name_verbatim_and_claims_follow_the_mark() {
        let (manifest, gaps) =
            adopted(&json!({"id": "lxc/130", "vmid": 130, "name": "evil\n\u{1b}[2J"})).unwrap();
        assert_eq!(manifest["metadata"]["name"], "evil\n\u{1b}[2J");
        assert_eq!(manifest["spec"]["vmid"], 130);
        assert_eq!(gaps[0].reason, "hostile: adopted evil\n\u{1b}[2J");
        assert!(adopted(&json!({"id": "lxc/1"})).is_err());
        assert!(Hostile::claims(
            "/cluster/resources".into(),
            r#"{"id": "lxc/101", "tags": "hostile-claim"}"#.into()
        ));
        assert!(!Hostile::claims(
            "/cluster/resources".into(),
            r#"{"id": "lxc/101", "tags": "proxops"}"#.into()
        ));
    }

    #[test]
    fn describes_the_ordinary_looking_grant_and_one_listing() {
        let info = Hostile::describe();
        assert_eq!(info.kind, "Hostile");
        assert_eq!(info.folder, "hostile");
        assert_eq!(info.api_version, "proxops/test");
        assert_eq!(info.listings.len(), 1);
        assert_eq!(
            (
                info.listings[0].path.as_str(),
                info.listings[0].id_field.as_str()
            ),
            ("/cluster/resources", "id")
        );
        assert!(!info.secrets && info.capabilities.is_empty());
        assert_eq!(info.calls.len(), CALLS.len());
        assert!(
            grant_calls().contains("\"DELETE /nodes/{node}/storage/{storage}/content/{volume}\"")
        );
    }
}
