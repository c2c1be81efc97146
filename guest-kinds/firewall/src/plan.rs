//! `observe` and `plan`: the guest's firewall as PVE holds it, against the manifest.
//!
//! The manifest is the guest's whole firewall: options it leaves out are PVE's defaults (an
//! option set live is deleted), and rules, aliases and ipsets it does not declare are removed.
//! The calls, in the order they run (each group an action of its own):
//!
//! 1. aliases: `POST …/aliases` for a new one, `PUT …/aliases/{name}` for a changed one;
//! 2. ipsets: `POST …/ipset` (a new set), `POST …/ipset` with `rename` = `name` (its comment),
//!    `POST …/ipset/{name}` (an entry), `PUT …/ipset/{name}/{cidr}`, `DELETE …` (an entry);
//! 3. rules: live rules equal to a desired one are kept and only moved; other live rules are
//!    updated in place into the remaining desired ones, in order (one `PUT` instead of a delete
//!    and a create); what is left is deleted (highest position first) or created (PVE puts a
//!    new rule at position 0, so they are created last one first); then the fewest `moveto`s
//!    put the list in order ([`proxops_firewall_rules::order`]). A rule is never deleted and re-added to move it;
//! 4. options: one `PUT …/options` with the changed options and `delete` for those to unset;
//! 5. what the manifest no longer declares: `DELETE …/aliases/{name}`, `DELETE …/ipset/{name}`
//!    with `force=1` (its entries go with it), after the rules that named them are gone.
//!
//! Each list's digest is sent with its first write only: that write changes the digest, and
//! the later writes of the action are planned against the list as the earlier ones leave it.
//! When the guest does not exist yet but the VM manifest it names creates it in this apply, the
//! firewall is planned from nothing on the VM's node, with no digest; the next pass compares it
//! with what PVE then holds (a clone copies its template's firewall).

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::Resolved;
use proxops_kind_sdk::model::{
    Action, Anomaly, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use serde_json::Value;

use crate::desired::{Alias, BOOL_OPTIONS, Desired, Entry, IpSet, Rule};
use proxops_firewall_rules::rules::text;
pub use proxops_firewall_rules::rules::{
    RuleUpdate, live_rule, rule_calls, rule_text, rule_update,
};

/// The guest's node and type, from its `/cluster/resources` entry.
pub fn live_guest(live: Option<&Value>) -> Option<(String, String)> {
    let e = live?;
    let node = e.get("node")?.as_str()?.to_string();
    let ty = e.get("type")?.as_str()?.to_string();
    Some((node, ty))
}

/// The node the VM manifest in `resolved` puts the guest on.
fn resolved_node(resolved: &[Resolved]) -> Option<String> {
    resolved
        .iter()
        .find(|r| r.reference.path == "spec.vm")
        .and_then(|r| serde_json::from_str::<Value>(&r.desired).ok())
        .and_then(|v| v.get("node").and_then(Value::as_str).map(str::to_string))
}

/// Percent-encodes what cannot stand in a path segment (a cidr's `/`).
fn segment(s: &str) -> String {
    s.replace('%', "%25").replace('/', "%2F")
}

/// The reads plan needs: options, rules, aliases, the ipset list and each declared ipset.
pub fn observe(d: Option<&Desired>, live: Option<&Value>) -> Vec<Call> {
    let (Some(d), Some((node, _))) = (d, live_guest(live)) else {
        return Vec::new();
    };
    let base = d.base(&node);
    let mut calls: Vec<Call> = ["options", "rules", "aliases", "ipset"]
        .iter()
        .map(|p| Call::new(Method::Get, format!("{base}/{p}")))
        .collect();
    for name in d.ipsets.keys() {
        calls.push(Call::new(Method::Get, format!("{base}/ipset/{name}")));
    }
    calls
}

/// What PVE holds of a guest's firewall, in the desired state's form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    pub options: BTreeMap<String, String>,
    pub options_digest: Option<String>,
    pub rules: Vec<Rule>,
    pub rules_digest: Option<String>,
    pub aliases: BTreeMap<String, Alias>,
    pub aliases_digest: Option<String>,
    /// Every live ipset by name; the entries of the declared ones only (others are not read).
    pub ipsets: BTreeMap<String, IpSet>,
    pub ipset_digests: BTreeMap<String, String>,
}

fn read<'o>(observed: &'o Observation, path: &str) -> Result<Option<&'o str>, String> {
    match observed.reads.iter().find(|r| r.call.path == path) {
        Some(r) if r.status == 200 => Ok(Some(&r.body)),
        Some(r) => Err(format!("GET {path} failed ({}): {}", r.status, r.body)),
        None => Ok(None),
    }
}

fn list(body: &str, path: &str) -> Result<Vec<serde_json::Map<String, Value>>, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("{path}: {e}"))?;
    let Value::Array(items) = v else {
        return Err(format!("{path}: expected a list"));
    };
    Ok(items
        .into_iter()
        .filter_map(|i| match i {
            Value::Object(o) => Some(o),
            _ => None,
        })
        .collect())
}

fn digest_of(items: &[serde_json::Map<String, Value>]) -> Option<String> {
    items
        .first()
        .and_then(|i| i.get("digest"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Reads the answers of [`observe`]'s calls under `base`.
pub fn read_live(d: &Desired, base: &str, observed: &Observation) -> Result<Live, String> {
    let mut live = Live::default();
    if let Some(body) = read(observed, &format!("{base}/options"))? {
        let v: Value = serde_json::from_str(body).map_err(|e| format!("options: {e}"))?;
        if let Value::Object(o) = v {
            for (k, v) in o {
                if k == "digest" {
                    live.options_digest = v.as_str().map(str::to_string);
                } else if let Some(t) = text(&v) {
                    live.options.insert(k, t);
                }
            }
        }
    }
    let path = format!("{base}/rules");
    if let Some(body) = read(observed, &path)? {
        let items = list(body, &path)?;
        live.rules_digest = digest_of(&items);
        live.rules = items.iter().map(live_rule).collect();
    }
    let path = format!("{base}/aliases");
    if let Some(body) = read(observed, &path)? {
        let items = list(body, &path)?;
        live.aliases_digest = digest_of(&items);
        for a in items {
            let (Some(name), Some(cidr)) =
                (a.get("name").and_then(text), a.get("cidr").and_then(text))
            else {
                continue;
            };
            live.aliases.insert(
                name.to_lowercase(),
                Alias {
                    name,
                    cidr,
                    comment: a.get("comment").and_then(text).filter(|c| !c.is_empty()),
                },
            );
        }
    }
    let path = format!("{base}/ipset");
    if let Some(body) = read(observed, &path)? {
        for s in list(body, &path)? {
            let Some(name) = s.get("name").and_then(text) else {
                continue;
            };
            live.ipsets.insert(
                name,
                IpSet {
                    comment: s.get("comment").and_then(text).filter(|c| !c.is_empty()),
                    entries: BTreeMap::new(),
                },
            );
        }
    }
    for name in d.ipsets.keys() {
        let Some(set) = live.ipsets.get_mut(name) else {
            continue;
        };
        let path = format!("{base}/ipset/{name}");
        let Some(body) = read(observed, &path)? else {
            continue;
        };
        let items = list(body, &path)?;
        if let Some(dg) = digest_of(&items) {
            live.ipset_digests.insert(name.clone(), dg);
        }
        for e in items {
            let Some(cidr) = e.get("cidr").and_then(text) else {
                continue;
            };
            set.entries.insert(
                cidr,
                Entry {
                    nomatch: e.get("nomatch").and_then(text).is_some_and(|n| n == "1"),
                    comment: e.get("comment").and_then(text).filter(|c| !c.is_empty()),
                },
            );
        }
    }
    Ok(live)
}

fn action(operation: Operation, summary: String, calls: Vec<Call>, changes: Vec<Change>) -> Action {
    let destructive = operation == Operation::Delete;
    Action {
        operation,
        summary,
        calls,
        changes,
        disturbs_availability: false,
        destructive,
        restore: None,
    }
}

fn opt(s: &Option<String>) -> Option<String> {
    s.clone()
}

/// The plan of `d` against what `observed` holds.
pub fn plan(
    d: Option<&Desired>,
    resolved: &[Resolved],
    observed: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    let mut proposal = Proposal {
        actions: Vec::new(),
        drift: Vec::new(),
        pending: Vec::new(),
        anomalies: Vec::new(),
    };
    // A prune candidate: this kind claims none (the firewall goes with its guest).
    let Some(d) = d else {
        return Ok(proposal);
    };
    let entry: Option<Value> = observed
        .live
        .as_deref()
        .and_then(|l| serde_json::from_str(l).ok());
    let (node, live) = match live_guest(entry.as_ref()) {
        Some((node, ty)) => {
            if ty != d.guest_type {
                proposal.anomalies.push(Anomaly::new(
                    "spec.type",
                    format!(
                        "guest {} is a {ty} guest, not {}; nothing is planned for its firewall",
                        d.vmid, d.guest_type
                    ),
                ));
                return Ok(proposal);
            }
            let base = d.base(&node);
            let live = read_live(d, &base, observed).map_err(|e| vec![Diag::error("", e)])?;
            (node, live)
        }
        None => match resolved_node(resolved) {
            // Created by the VM manifest it names, in this apply: planned from nothing.
            Some(node) => (node, Live::default()),
            None => {
                proposal.anomalies.push(Anomaly::new(
                    "spec.vmid",
                    format!(
                        "guest {} does not exist; its firewall is planned once it does (name its VM manifest in spec.vm to create both in one apply)",
                        d.vmid
                    ),
                ));
                return Ok(proposal);
            }
        },
    };
    let base = d.base(&node);
    plan_calls(d, &live, &base, &mut proposal);
    Ok(proposal)
}

/// The actions and drift that turn `live` into `d` at `base`.
pub fn plan_calls(d: &Desired, live: &Live, base: &str, p: &mut Proposal) {
    // 1. Aliases to create or change.
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    for (key, a) in &d.aliases {
        match live.aliases.get(key) {
            Some(l) if l.cidr == a.cidr && l.comment == a.comment && l.name == a.name => {}
            Some(l) => {
                let mut call = Call::new(Method::Put, format!("{base}/aliases/{}", l.name))
                    .param("cidr", a.cidr.clone());
                if let Some(c) = &a.comment {
                    call = call.param("comment", c.clone());
                }
                if l.name != a.name {
                    call = call.param("rename", a.name.clone());
                }
                calls.push(call);
                let path = format!("spec.aliases.{}", a.name);
                p.drift
                    .push(Drift::new(&path, Some(alias_text(l)), Some(alias_text(a))));
                changes.push(Change::new(path, Some(alias_text(l)), Some(alias_text(a))));
            }
            None => {
                let mut call = Call::new(Method::Post, format!("{base}/aliases"))
                    .param("name", a.name.clone())
                    .param("cidr", a.cidr.clone());
                if let Some(c) = &a.comment {
                    call = call.param("comment", c.clone());
                }
                calls.push(call);
                let path = format!("spec.aliases.{}", a.name);
                p.drift.push(Drift::new(&path, None, Some(alias_text(a))));
                changes.push(Change::new(path, None, Some(alias_text(a))));
            }
        }
    }
    if let (Some(first), Some(dg)) = (calls.first_mut(), &live.aliases_digest)
        && first.method == Method::Put
    {
        first
            .params
            .push(proxops_kind_sdk::model::Param::new("digest", dg.clone()));
    }
    if !calls.is_empty() {
        p.actions.push(action(
            Operation::Update,
            format!(
                "firewall of guest {}: {} alias(es) to create or change",
                d.vmid,
                calls.len()
            ),
            calls,
            changes,
        ));
    }
    // 2. Ipsets and their entries.
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    for (name, set) in &d.ipsets {
        let path = format!("spec.ipsets.{name}");
        let empty = IpSet {
            comment: None,
            entries: BTreeMap::new(),
        };
        let have = match live.ipsets.get(name) {
            Some(l) => {
                if l.comment != set.comment {
                    let mut call = Call::new(Method::Post, format!("{base}/ipset"))
                        .param("name", name.clone())
                        .param("rename", name.clone());
                    if let Some(c) = &set.comment {
                        call = call.param("comment", c.clone());
                    }
                    calls.push(call);
                    p.drift.push(Drift::new(
                        format!("{path}.comment"),
                        opt(&l.comment),
                        opt(&set.comment),
                    ));
                    changes.push(Change::new(
                        format!("{path}.comment"),
                        opt(&l.comment),
                        opt(&set.comment),
                    ));
                }
                l
            }
            None => {
                let mut call =
                    Call::new(Method::Post, format!("{base}/ipset")).param("name", name.clone());
                if let Some(c) = &set.comment {
                    call = call.param("comment", c.clone());
                }
                calls.push(call);
                p.drift.push(Drift::new(
                    &path,
                    None,
                    Some(format!("{} entries", set.entries.len())),
                ));
                changes.push(Change::new(&path, None, Some(name.clone())));
                &empty
            }
        };
        let set_path = format!("{base}/ipset/{name}");
        let mut first = true;
        let mut with_digest = |mut call: Call| {
            if first
                && call.method != Method::Post
                && let Some(dg) = live.ipset_digests.get(name)
            {
                call.params
                    .push(proxops_kind_sdk::model::Param::new("digest", dg.clone()));
            }
            first = false;
            call
        };
        for (cidr, e) in &set.entries {
            let epath = format!("{path}.entries.{cidr}");
            match have.entries.get(cidr) {
                Some(l) if l == e => {}
                Some(l) => {
                    let mut call = Call::new(Method::Put, format!("{set_path}/{}", segment(cidr)))
                        .param("nomatch", if e.nomatch { "1" } else { "0" });
                    if let Some(c) = &e.comment {
                        call = call.param("comment", c.clone());
                    }
                    calls.push(with_digest(call));
                    p.drift.push(Drift::new(
                        &epath,
                        Some(entry_text(cidr, l)),
                        Some(entry_text(cidr, e)),
                    ));
                    changes.push(Change::new(
                        &epath,
                        Some(entry_text(cidr, l)),
                        Some(entry_text(cidr, e)),
                    ));
                }
                None => {
                    let mut call =
                        Call::new(Method::Post, set_path.clone()).param("cidr", cidr.clone());
                    if e.nomatch {
                        call = call.param("nomatch", "1");
                    }
                    if let Some(c) = &e.comment {
                        call = call.param("comment", c.clone());
                    }
                    calls.push(with_digest(call));
                    p.drift
                        .push(Drift::new(&epath, None, Some(entry_text(cidr, e))));
                    changes.push(Change::new(&epath, None, Some(entry_text(cidr, e))));
                }
            }
        }
        for (cidr, l) in &have.entries {
            if !set.entries.contains_key(cidr) {
                let epath = format!("{path}.entries.{cidr}");
                calls.push(with_digest(Call::new(
                    Method::Delete,
                    format!("{set_path}/{}", segment(cidr)),
                )));
                p.drift
                    .push(Drift::new(&epath, Some(entry_text(cidr, l)), None));
                changes.push(Change::new(&epath, Some(entry_text(cidr, l)), None));
            }
        }
    }
    if !calls.is_empty() {
        p.actions.push(action(
            Operation::Update,
            format!("firewall of guest {}: ipsets", d.vmid),
            calls,
            changes,
        ));
    }
    // 3. Rules.
    if live.rules != d.rules {
        let RuleUpdate {
            calls,
            drift,
            moves,
        } = rule_update(
            &live.rules,
            &d.rules,
            &format!("{base}/rules"),
            live.rules_digest.as_deref(),
        );
        p.drift.extend(drift);
        let old: Vec<String> = live.rules.iter().map(rule_text).collect();
        let new: Vec<String> = d.rules.iter().map(rule_text).collect();
        p.actions.push(action(
            Operation::Update,
            format!(
                "firewall of guest {}: rules ({} call(s), {moves} move(s))",
                d.vmid,
                calls.len()
            ),
            calls,
            vec![Change::new(
                "spec.rules",
                Some(old.join("\n")),
                Some(new.join("\n")),
            )],
        ));
    }
    // 4. Options.
    let mut call = Call::new(Method::Put, format!("{base}/options"));
    let mut changes = Vec::new();
    let mut cleared = Vec::new();
    let keys: BTreeSet<&String> = d.options.keys().chain(live.options.keys()).collect();
    for k in keys {
        let (l, w) = (live.options.get(k), d.options.get(k));
        if l == w {
            continue;
        }
        match w {
            Some(v) => call = call.param(k.clone(), v.clone()),
            None if BOOL_OPTIONS.contains(&k.as_str())
                || crate::desired::POLICY_OPTIONS.contains(&k.as_str())
                || crate::desired::LOG_OPTIONS.contains(&k.as_str()) =>
            {
                cleared.push(k.clone())
            }
            // An option this kind does not know stays as it is.
            None => continue,
        }
        let path = format!("spec.options.{k}");
        p.drift.push(Drift::new(&path, l.cloned(), w.cloned()));
        changes.push(Change::new(path, l.cloned(), w.cloned()));
    }
    if !changes.is_empty() {
        if !cleared.is_empty() {
            call = call.param("delete", cleared.join(","));
        }
        if let Some(dg) = &live.options_digest {
            call = call.param("digest", dg.clone());
        }
        p.actions.push(action(
            Operation::Update,
            format!("firewall of guest {}: options", d.vmid),
            vec![call],
            changes,
        ));
    }
    // 5. Aliases and ipsets no longer declared.
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    for (key, l) in &live.aliases {
        if !d.aliases.contains_key(key) {
            calls.push(Call::new(
                Method::Delete,
                format!("{base}/aliases/{}", l.name),
            ));
            let path = format!("spec.aliases.{}", l.name);
            p.drift.push(Drift::new(&path, Some(alias_text(l)), None));
            changes.push(Change::new(path, Some(alias_text(l)), None));
        }
    }
    for name in live.ipsets.keys() {
        if !d.ipsets.contains_key(name) {
            calls.push(
                Call::new(Method::Delete, format!("{base}/ipset/{name}")).param("force", "1"),
            );
            let path = format!("spec.ipsets.{name}");
            p.drift.push(Drift::new(&path, Some(name.clone()), None));
            changes.push(Change::new(path, Some(name.clone()), None));
        }
    }
    if !calls.is_empty() {
        p.actions.push(action(
            Operation::Update,
            format!(
                "firewall of guest {}: remove {} alias(es) and ipset(s) the manifest no longer declares",
                d.vmid,
                calls.len()
            ),
            calls,
            changes,
        ));
    }
}

fn alias_text(a: &Alias) -> String {
    match &a.comment {
        Some(c) => format!("{} {} # {c}", a.name, a.cidr),
        None => format!("{} {}", a.name, a.cidr),
    }
}

fn entry_text(cidr: &str, e: &Entry) -> String {
    let mut s = if e.nomatch {
        format!("!{cidr}")
    } else {
        cidr.to_string()
    };
    if let Some(c) = &e.comment {
        s.push_str(&format!(" # {c}"));
    }
    s
}
