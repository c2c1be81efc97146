//! `observe` and `plan`; `claims` is the SDK's, by the mark ([`NAMED`]).
//!
//! The listing (`GET /cluster/firewall/groups`) gives each group's name, comment and the
//! listing's digest; a group's rules need one more read, `GET /cluster/firewall/groups/<group>`,
//! asked for only when the group exists.
//!
//! * No live group: one `create` action, `POST /cluster/firewall/groups` with the comment
//!   carrying the mark, then the rules (`POST …/groups/<group>`, last one first: PVE puts a new
//!   rule at position 0). The host lets the rule writes through because the create before them
//!   in the same proposal carries the mark.
//! * A live group whose comment carries `proxops:<group>`: the comment is changed with PVE's
//!   own form (`POST /cluster/firewall/groups` with `rename` equal to `group`, and the listing's
//!   digest), and the rules with the fewest calls ([`proxops_firewall_rules::rules::rule_calls`]:
//!   kept rules only moved, the list's digest on the first write).
//! * A live group without the mark is not proxops's: an anomaly, never a write; unless the
//!   host flagged it for a take-over (its manifest's `metadata.adopt` matches it): then the one
//!   write of the live comment with the mark appended, in the comment update's form above.
//! * No manifest, a claimed (marked) live group: PVE deletes only an empty group, so one
//!   `delete` action deletes its rules (highest position first) and then the group. PVE does not
//!   look for guest rules that still name it; a manifest that does fails validation before this
//!   plan runs (its reference names no SecurityGroup).

use proxops_firewall_rules::rules::{
    Rule, RuleUpdate, live_rule, rule_calls, rule_text, rule_update,
};
use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{
    Action, Call, Change, Drift, Method, Observation, Operation, Proposal,
};
use proxops_kind_sdk::named;
use serde_json::{Map, Value};

use crate::desired::{Desired, GROUPS, NAMED, rules_path};

/// A group as PVE lists it, with its rules when they were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveGroup {
    pub group: String,
    pub comment: Option<String>,
    /// The listing's digest (PVE checks it on a comment update).
    pub digest: Option<String>,
    pub rules: Vec<Rule>,
    /// The rule list's digest.
    pub rules_digest: Option<String>,
}

impl LiveGroup {
    /// The listing entry (`group`, `comment`, `digest`); no rules.
    pub fn from_entry(e: &Value) -> Option<Self> {
        let text = |k: &str| {
            e.get(k)
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
        };
        Some(LiveGroup {
            group: e.get("group")?.as_str()?.to_string(),
            comment: text("comment"),
            digest: text("digest"),
            rules: Vec::new(),
            rules_digest: None,
        })
    }

    /// Whether the group's comment carries proxops's mark for its own name.
    pub fn is_marked(&self) -> bool {
        named::is_marked(self.comment.as_deref(), &self.group)
    }

    /// Read the rules from `GET /cluster/firewall/groups/<group>`'s answer.
    pub fn read_rules(&mut self, body: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(body).map_err(|e| {
            format!(
                "the rules of security group {} do not read: {e}",
                self.group
            )
        })?;
        let Value::Array(items) = v else {
            return Err(format!(
                "the rules of security group {} are not a list",
                self.group
            ));
        };
        let items: Vec<&Map<String, Value>> = items.iter().filter_map(Value::as_object).collect();
        self.rules_digest = items
            .first()
            .and_then(|i| i.get("digest"))
            .and_then(Value::as_str)
            .map(str::to_string);
        self.rules = items.into_iter().map(live_rule).collect();
        Ok(())
    }
}

/// The rules read of group `group`.
pub fn rules_read(group: &str) -> Call {
    Call::new(Method::Get, rules_path(group))
}

/// `observe`: the rules read, only for a group that exists.
pub fn observe(live: Option<&Value>) -> Vec<Call> {
    live.and_then(LiveGroup::from_entry)
        .map(|l| vec![rules_read(&l.group)])
        .unwrap_or_default()
}

/// The live group of `observed`, its rules read in when `rules` says so.
pub fn live_group(observed: &Observation, rules: bool) -> Result<Option<LiveGroup>, String> {
    let Some(mut l) = NAMED.live(observed, LiveGroup::from_entry)? else {
        return Ok(None);
    };
    if rules {
        let path = rules_path(&l.group);
        let read = observed
            .reads
            .iter()
            .find(|r| r.call.path == path)
            .ok_or_else(|| format!("the rules of security group {} were not read", l.group))?;
        if read.status != 200 {
            return Err(format!(
                "reading the rules of security group {} failed (HTTP {}): {}",
                l.group, read.status, read.body
            ));
        }
        l.read_rules(&read.body)?;
    }
    Ok(Some(l))
}

/// The proposal for one security group.
pub fn plan(d: Option<&Desired>, observed: &Observation) -> Result<Proposal, Vec<Diag>> {
    let bad = |m: String| vec![Diag::error("", m)];
    // The rules are read (and so needed) only for a group proxops owns.
    let marked = NAMED
        .live(observed, LiveGroup::from_entry)
        .is_ok_and(|l| l.is_some_and(|l| l.is_marked()));
    let live = live_group(observed, marked).map_err(bad)?;
    let mut out = Proposal::default();
    let Some(d) = d else {
        if let Some(l) = live {
            prune(&l, &mut out);
        }
        return Ok(out);
    };
    let Some(l) = live else {
        create(d, &mut out);
        return Ok(out);
    };
    if !l.is_marked() {
        if named::take_over_requested(observed) {
            NAMED.take_over(&mut out, &d.group, l.comment.as_deref(), |comment| {
                let call = Call::new(Method::Post, GROUPS)
                    .param("group", &d.group)
                    .param("rename", &d.group)
                    .param("comment", comment);
                match &l.digest {
                    Some(dg) => call.param("digest", dg),
                    None => call,
                }
            });
            return Ok(out);
        }
        let command = format!(
            "pvesh create {GROUPS} --group {g} --rename {g}",
            g = d.group
        );
        out.anomalies.push(NAMED.unowned(
            &d.group,
            l.comment.as_deref(),
            "",
            &command,
            &d.pve_comment(),
        ));
        return Ok(out);
    }
    update(d, &l, &mut out);
    Ok(out)
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

fn rules_shown(rules: &[Rule]) -> Option<String> {
    (!rules.is_empty()).then(|| rules.iter().map(rule_text).collect::<Vec<_>>().join("\n"))
}

fn create(d: &Desired, out: &mut Proposal) {
    let comment = d.pve_comment();
    out.drift.push(Drift::new(
        "spec",
        None,
        Some(format!("security group {}", d.group)),
    ));
    for (i, r) in d.rules.iter().enumerate() {
        out.drift.push(Drift::new(
            format!("spec.rules[{i}]"),
            None,
            Some(rule_text(r)),
        ));
    }
    let mut calls = vec![
        Call::new(Method::Post, GROUPS)
            .param("group", &d.group)
            .param("comment", &comment),
    ];
    calls.extend(rule_calls(&[], &d.rules, &d.rules_path(), None));
    out.actions.push(action(
        Operation::Create,
        format!(
            "create security group {} with {} rule(s)",
            d.group,
            d.rules.len()
        ),
        calls,
        vec![
            Change::new("group", None, Some(d.group.clone())),
            Change::new("comment", None, Some(comment)),
            Change::new("rules", None, rules_shown(&d.rules)),
        ],
    ));
}

fn update(d: &Desired, l: &LiveGroup, out: &mut Proposal) {
    let comment = d.pve_comment();
    if l.comment.as_deref() != Some(comment.as_str()) {
        out.drift.push(Drift::new(
            "spec.comment",
            l.comment.clone(),
            Some(comment.clone()),
        ));
        let mut call = Call::new(Method::Post, GROUPS)
            .param("group", &d.group)
            .param("rename", &d.group)
            .param("comment", &comment);
        if let Some(dg) = &l.digest {
            call = call.param("digest", dg);
        }
        out.actions.push(action(
            Operation::Update,
            format!("security group {}: comment", d.group),
            vec![call],
            vec![Change::new("comment", l.comment.clone(), Some(comment))],
        ));
    }
    if l.rules != d.rules {
        let RuleUpdate {
            calls,
            drift,
            moves,
        } = rule_update(
            &l.rules,
            &d.rules,
            &d.rules_path(),
            l.rules_digest.as_deref(),
        );
        out.drift.extend(drift);
        out.actions.push(action(
            Operation::Update,
            format!(
                "security group {}: rules ({} call(s), {moves} move(s))",
                d.group,
                calls.len()
            ),
            calls,
            vec![Change::new(
                "rules",
                rules_shown(&l.rules),
                rules_shown(&d.rules),
            )],
        ));
    }
}

fn prune(l: &LiveGroup, out: &mut Proposal) {
    if !l.is_marked() {
        out.anomalies.push(NAMED.prune_unowned(&l.group));
        return;
    }
    // PVE deletes only an empty group: its rules go first, highest position first.
    let mut calls = rule_calls(
        &l.rules,
        &[],
        &rules_path(&l.group),
        l.rules_digest.as_deref(),
    );
    calls.push(Call::new(Method::Delete, rules_path(&l.group)));
    let summary = format!(
        "delete security group {} and its {} rule(s) (no manifest names it)",
        l.group,
        l.rules.len()
    );
    let changes = vec![
        Change::new("group", Some(l.group.clone()), None),
        Change::new("rules", rules_shown(&l.rules), None),
    ];
    NAMED.prune(out, &l.group, summary, calls, changes);
}
