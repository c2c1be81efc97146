//! Named objects (docs/kinds.md §7): cluster-level PVE objects with an id of their own (pools,
//! backup jobs, HA rules, security groups, users and groups), owned by the token
//! `proxops:<id>` in their `comment` ([`proxops_names::named_mark`]). What every such kind
//! does the same way lives here, as plain functions over a [`Named`] (the kind's listing and
//! the words its messages use): the identity, reading the live entry, `claims` by the mark,
//! the anomalies for an object without the mark, the take-over of one its manifest claims
//! ([`take_over_requested`], [`Named::take_over`]), the prune, the check of `spec.comment`,
//! and the skeleton of `adopt`.
//!
//! What differs between kinds stays in the kind: how a live entry is read beyond its id and
//! comment, the calls, the PVE command a message suggests. A kind keeps its own `LiveX` type
//! and hands its `from_entry` to [`Named::live`].
//!
//! ```
//! use proxops_kind_sdk::named::{Named, is_marked};
//!
//! const POOL: Named = Named {
//!     kind: "Pool",
//!     space: "pool",
//!     listing: "/pools",
//!     id_field: "poolid",
//!     noun: "pool",
//!     short: "pool",
//! };
//! let entry = serde_json::json!({"poolid": "web", "comment": "web tier (proxops:web)"});
//! assert!(POOL.claims("/pools", &entry));
//! assert!(!POOL.claims("/pools", &serde_json::json!({"poolid": "web-2", "comment": "proxops:web"})));
//! assert!(is_marked(Some("proxops:web"), "web"));
//! ```

use serde_json::{Map, Value, json};

use crate::check::Checker;
use crate::kind::{Adopted, Gap, Listing, ObjectKey};
use crate::manifest::{API_VERSION, dns_label_problem};
use crate::model::{Action, Anomaly, Call, Change, Drift, Observation, Operation, Proposal};

/// A kind of named object: where PVE lists it and how messages speak of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    /// The manifest kind (`Pool`), as an adopted manifest writes it.
    pub kind: &'static str,
    /// The identity's collision space (`pool`, `backup-job`).
    pub space: &'static str,
    /// The listing's path (`/pools`), as `describe` declares it.
    pub listing: &'static str,
    /// The id field of the listing's entries (`poolid`).
    pub id_field: &'static str,
    /// One object, as messages call it: `pool`, `backup job`, `HA rule`, `security group`.
    pub noun: &'static str,
    /// Its short word: `a {short}` it does not own, the `{short} id`, `{short}s` it created
    /// (`pool`, `job`, `rule`, `group`).
    pub short: &'static str,
}

/// The flag the host merges into the live entry of an unmarked object whose manifest claims
/// it (`metadata.adopt: {id, comment}`, which the kind never sees) while the claim still
/// matches: plan then proposes only [`Named::take_over`], the write that adds the mark.
pub const TAKE_OVER_FLAG: &str = "proxops-take-over";

/// Whether the host flagged the live entry of `observed` for a take-over ([`TAKE_OVER_FLAG`]).
pub fn take_over_requested(observed: &Observation) -> bool {
    observed
        .live
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .is_some_and(|v| v.get(TAKE_OVER_FLAG) == Some(&Value::Bool(true)))
}

/// Whether a live `comment` carries the mark of the object's own `id` (no comment: no).
pub fn is_marked(comment: Option<&str>, id: &str) -> bool {
    comment.is_some_and(|c| proxops_names::has_named_mark(c, id))
}

/// Checks `spec.comment` of object `id`: one line (PVE keeps an object's options one per line;
/// `why`, when not empty, says so for the kind's file), and with `max`, at most `max` bytes
/// once proxops's mark is appended ([`proxops_names::marked_comment`]).
pub fn check_comment(c: &mut Checker, id: &str, comment: &str, max: Option<usize>, why: &str) {
    if comment.chars().any(char::is_control) {
        let why = if why.is_empty() {
            String::new()
        } else {
            format!(" ({why})")
        };
        c.error(
            "spec.comment",
            format!("must be one line without control characters{why}"),
        );
    }
    let full = proxops_names::marked_comment(id, Some(comment));
    if let Some(max) = max
        && full.len() > max
    {
        c.error(
            "spec.comment",
            format!(
                "is too long: with proxops's mark it is {} bytes, PVE takes at most {max}",
                full.len()
            ),
        );
    }
}

/// `spec.comment` of an adopted manifest from the live comment: the mark proxops appends
/// taken off ([`proxops_names::unmarked_comment`]); nothing when that leaves no comment.
pub fn adopt_comment(spec: &mut Map<String, Value>, id: &str, live: Option<&str>) {
    if let Some(c) = live.and_then(|c| proxops_names::unmarked_comment(id, c)) {
        spec.insert("comment".into(), json!(c));
    }
}

impl Named {
    /// The listing `describe` declares.
    pub fn listing(&self) -> Listing {
        Listing::new(self.listing, self.id_field)
    }

    /// The identity of the object `id`: cluster-wide, keyed and listed by its id.
    pub fn key(&self, id: &str) -> ObjectKey {
        ObjectKey {
            node: None,
            space: self.space.into(),
            key: id.into(),
            resource_id: Some(id.into()),
        }
    }

    /// `claims`: an entry of this kind's listing whose `comment` carries the mark of the
    /// entry's own id.
    pub fn claims(&self, listing: &str, entry: &Value) -> bool {
        listing == self.listing
            && entry
                .get(self.id_field)
                .and_then(Value::as_str)
                .is_some_and(|id| is_marked(entry.get("comment").and_then(Value::as_str), id))
    }

    /// The live entry of `observed` as the kind reads it (`from_entry`), or none when the
    /// object is not live. An entry that is not JSON, or that `from_entry` refuses (no id),
    /// is an error.
    pub fn live<L>(
        &self,
        observed: &Observation,
        from_entry: impl FnOnce(&Value) -> Option<L>,
    ) -> Result<Option<L>, String> {
        let Some(text) = observed.live.as_deref() else {
            return Ok(None);
        };
        let v: Value = serde_json::from_str(text)
            .map_err(|e| format!("the live {} entry does not read as JSON: {e}", self.noun))?;
        from_entry(&v)
            .map(Some)
            .ok_or_else(|| format!("the live {} entry has no `{}`", self.noun, self.id_field))
    }

    /// The anomaly for a live object without the mark whose id a manifest names: nothing is
    /// written. `live` is the object's comment (the take-over claim must repeat it); `detail`
    /// follows the missing mark (`; its comment differs …`, or empty); `command` is the PVE
    /// command that sets the object's comment, to which `--comment '<comment>'` is added
    /// (`comment`: what the manifest would write).
    pub fn unowned(
        &self,
        id: &str,
        live: Option<&str>,
        detail: &str,
        command: &str,
        comment: &str,
    ) -> Anomaly {
        Anomaly::new(
            "metadata.name",
            format!(
                "{noun} {id} exists but was not created by proxops (its comment lacks `{mark}`){detail}, and proxops does not write to a {short} it does not own. To hand it to proxops, {claim}, or add `{mark}` to its comment in PVE (`{command} --comment '{comment}'`); or give this manifest another name",
                noun = self.noun,
                short = self.short,
                mark = proxops_names::named_mark(id),
                claim = take_over_claim(id, live),
            ),
        )
    }

    /// The take-over of the unmarked object `id` whose live comment is `live` (the host flagged
    /// it, [`take_over_requested`]): one `update` action whose one call, built by the kind in
    /// its own form by `call` from the new comment, sets the comment to
    /// [`proxops_names::marked_comment`] of the live one. Nothing else changes, whatever else
    /// differs from the manifest: the next plan, of an object that is then proxops's,
    /// converges the rest.
    pub fn take_over(
        &self,
        out: &mut Proposal,
        id: &str,
        live: Option<&str>,
        call: impl FnOnce(&str) -> Call,
    ) {
        let live = live.filter(|c| !c.is_empty());
        let comment = proxops_names::marked_comment(id, live);
        out.drift.push(Drift::new(
            "metadata.adopt",
            live.map(str::to_string),
            Some(comment.clone()),
        ));
        out.actions.push(Action {
            operation: Operation::Update,
            summary: format!(
                "take over {} {id}: add proxops's mark `{}` to its comment (nothing else changes)",
                self.noun,
                proxops_names::named_mark(id)
            ),
            calls: vec![call(&comment)],
            changes: vec![Change::new(
                "comment",
                live.map(str::to_string),
                Some(comment),
            )],
            disturbs_availability: false,
            destructive: false,
            restore: None,
        });
    }

    /// The anomaly for a live object handed over for pruning without the mark (the host
    /// prunes only claimed entries, so this is its backstop): nothing is deleted.
    pub fn prune_unowned(&self, id: &str) -> Anomaly {
        Anomaly::new(
            "",
            format!(
                "{} {id} was handed to this kind for pruning but its comment lacks `{}`; proxops deletes only {}s it created",
                self.noun,
                proxops_names::named_mark(id),
                self.short,
            ),
        )
    }

    /// The prune of a marked object no manifest names: its drift (`<noun> <id>` goes) and one
    /// destructive `delete` action with the kind's `calls` (the last one deletes it).
    pub fn prune(
        &self,
        out: &mut Proposal,
        id: &str,
        summary: String,
        calls: Vec<Call>,
        changes: Vec<Change>,
    ) {
        out.drift
            .push(Drift::new("", Some(format!("{} {id}", self.noun)), None));
        out.actions.push(Action {
            operation: Operation::Delete,
            summary,
            calls,
            changes,
            disturbs_availability: false,
            destructive: true,
            restore: None,
        });
    }

    /// `adopt`'s entry: the live one, read as [`Named::live`] reads it.
    pub fn adopt_entry<L>(
        &self,
        observed: &Observation,
        from_entry: impl FnOnce(&Value) -> Option<L>,
    ) -> Result<L, String> {
        self.live(observed, from_entry)?
            .ok_or_else(|| format!("no live {} to adopt", self.noun))
    }

    /// Whether `id` can be an adopted manifest's name: a DNS label that also passes the kind's
    /// own rule (`problem`); else why not.
    pub fn adopt_name(
        &self,
        id: &str,
        problem: impl FnOnce(&str) -> Option<String>,
    ) -> Result<(), String> {
        match dns_label_problem(id).or_else(|| problem(id)) {
            None => Ok(()),
            Some(p) => Err(format!(
                "{} id `{id}` cannot be a manifest name ({p}); a manifest's name is the {} id",
                self.noun, self.short
            )),
        }
    }

    /// The adopted manifest: `metadata.name` and `spec`, with its gaps.
    pub fn adopted(&self, name: &str, spec: impl Into<Value>, gaps: Vec<Gap>) -> Adopted {
        Adopted {
            manifest: json!({
                "apiVersion": API_VERSION,
                "kind": self.kind,
                "metadata": {"name": name},
                "spec": spec.into(),
            }),
            gaps,
        }
    }
}

/// How a manifest claims the unmarked object `id` whose live comment is `live`: the
/// `metadata.adopt` line to add (as `proxops adopt` writes it) and what the next apply does.
pub fn take_over_claim(id: &str, live: Option<&str>) -> String {
    let comment = match live {
        Some(c) if !c.is_empty() => serde_json::Value::from(c).to_string(),
        _ => "null".to_string(),
    };
    format!(
        "add `metadata.adopt: {{id: {id}, comment: {comment}}}` to this manifest (the next apply then only adds the mark to its comment)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const POOL: Named = Named {
        kind: "Pool",
        space: "pool",
        listing: "/pools",
        id_field: "poolid",
        noun: "pool",
        short: "pool",
    };

    fn observed(live: Option<&str>) -> Observation {
        Observation {
            live: live.map(str::to_string),
            ..Observation::default()
        }
    }

    #[test]
    fn claims_only_its_own_listing_and_mark() {
        fn check(listing: &str, entry: Value, expected: bool) {
            assert_eq!(POOL.claims(listing, &entry), expected, "{listing} {entry}");
        }
        check(
            "/pools",
            json!({"poolid": "web", "comment": "proxops:web"}),
            true,
        );
        check(
            "/pools",
            json!({"poolid": "web", "comment": "tier (proxops:web)"}),
            true,
        );
        check("/pools", json!({"poolid": "web", "comment": "tier"}), false);
        check("/pools", json!({"poolid": "web"}), false);
        check("/pools", json!({"poolid": "web", "comment": ""}), false);
        // The mark of another id, or inside a longer one, is not this object's.
        check(
            "/pools",
            json!({"poolid": "web-2", "comment": "proxops:web"}),
            false,
        );
        check(
            "/pools",
            json!({"poolid": "web", "comment": "proxops:web-2"}),
            false,
        );
        // Another listing, an entry without the id field, a comment that is no string.
        check(
            "/cluster/backup",
            json!({"poolid": "web", "comment": "proxops:web"}),
            false,
        );
        check(
            "/pools",
            json!({"id": "web", "comment": "proxops:web"}),
            false,
        );
        check("/pools", json!({"poolid": "web", "comment": 1}), false);
        check(
            "/pools",
            json!({"poolid": 7, "comment": "proxops:7"}),
            false,
        );
    }

    #[test]
    fn marks() {
        fn check(comment: Option<&str>, id: &str, expected: bool) {
            assert_eq!(is_marked(comment, id), expected, "{comment:?} {id}");
        }
        check(None, "web", false);
        check(Some(""), "web", false);
        check(Some("proxops:web"), "web", true);
        check(Some("a (proxops:web) b"), "web", true);
        check(Some("proxops:web"), "we", false);
    }

    #[test]
    fn live_entries() {
        fn check(live: Option<&str>, expected: Result<Option<&str>, &str>) {
            let got = POOL.live(&observed(live), |v| {
                v.get("poolid").and_then(Value::as_str).map(str::to_string)
            });
            assert_eq!(
                got,
                expected
                    .map(|o| o.map(str::to_string))
                    .map_err(str::to_string)
            );
        }
        check(None, Ok(None));
        check(Some(r#"{"poolid":"web"}"#), Ok(Some("web")));
        check(
            Some(r#"{"id":"web"}"#),
            Err("the live pool entry has no `poolid`"),
        );
        check(
            Some("{"),
            Err(
                "the live pool entry does not read as JSON: EOF while parsing an object at line 1 column 1",
            ),
        );
    }

    #[test]
    fn adopt_entries() {
        let read = |v: &Value| v.get("poolid").and_then(Value::as_str).map(str::to_string);
        assert_eq!(
            POOL.adopt_entry(&observed(None), read),
            Err("no live pool to adopt".to_string())
        );
        assert_eq!(
            POOL.adopt_entry(&observed(Some(r#"{"poolid":"web"}"#)), read),
            Ok("web".to_string())
        );
    }

    #[test]
    fn adopt_names() {
        fn check(id: &str, expected: Result<(), &str>) {
            let letter_first = |id: &str| {
                (!id.starts_with(|c: char| c.is_ascii_alphabetic()))
                    .then(|| "a letter first".to_string())
            };
            assert_eq!(
                POOL.adopt_name(id, letter_first),
                expected.map_err(str::to_string),
                "{id}"
            );
        }
        check("web", Ok(()));
        check(
            "9web",
            Err(
                "pool id `9web` cannot be a manifest name (a letter first); a manifest's name is the pool id",
            ),
        );
        // Not a DNS label: the SDK's reason, before the kind's own rule.
        let e = POOL.adopt_name("Web", |_| None).unwrap_err();
        assert!(
            e.starts_with("pool id `Web` cannot be a manifest name ("),
            "{e}"
        );
    }

    #[test]
    fn messages() {
        fn check(got: String, expected: &str) {
            assert_eq!(got, expected);
        }
        let a = POOL.unowned(
            "ops",
            None,
            "",
            "pvesh set /pools --poolid ops",
            "proxops:ops",
        );
        assert_eq!(a.path, "metadata.name");
        check(
            a.message,
            "pool ops exists but was not created by proxops (its comment lacks `proxops:ops`), and proxops does not write to a pool it does not own. To hand it to proxops, add `metadata.adopt: {id: ops, comment: null}` to this manifest (the next apply then only adds the mark to its comment), or add `proxops:ops` to its comment in PVE (`pvesh set /pools --poolid ops --comment 'proxops:ops'`); or give this manifest another name",
        );
        check(
            POOL.unowned("ops", Some("x"), "; it differs", "c", "x (proxops:ops)")
                .message,
            "pool ops exists but was not created by proxops (its comment lacks `proxops:ops`); it differs, and proxops does not write to a pool it does not own. To hand it to proxops, add `metadata.adopt: {id: ops, comment: \"x\"}` to this manifest (the next apply then only adds the mark to its comment), or add `proxops:ops` to its comment in PVE (`c --comment 'x (proxops:ops)'`); or give this manifest another name",
        );
        let p = POOL.prune_unowned("ops");
        assert_eq!(p.path, "");
        check(
            p.message,
            "pool ops was handed to this kind for pruning but its comment lacks `proxops:ops`; proxops deletes only pools it created",
        );
    }

    #[test]
    fn take_over_requests() {
        fn check(live: Option<&str>, expected: bool) {
            assert_eq!(take_over_requested(&observed(live)), expected, "{live:?}");
        }
        check(None, false);
        check(Some(r#"{"poolid":"web"}"#), false);
        check(Some(r#"{"poolid":"web","proxops-take-over":true}"#), true);
        // Only the boolean `true` counts: what a human could put into a comment does not.
        check(
            Some(r#"{"poolid":"web","proxops-take-over":"true"}"#),
            false,
        );
        check(Some(r#"{"poolid":"web","proxops-take-over":false}"#), false);
        check(
            Some(r#"{"poolid":"web","comment":"proxops-take-over"}"#),
            false,
        );
        check(Some("{"), false);
    }

    #[test]
    fn take_overs_write_the_mark_alone() {
        fn check(live: Option<&str>, expected: &str) {
            let mut out = Proposal::default();
            POOL.take_over(&mut out, "web", live, |c| {
                Call::new(crate::model::Method::Put, "/pools")
                    .param("poolid", "web")
                    .param("comment", c)
            });
            let [a] = &out.actions[..] else {
                panic!("one action: {:?}", out.actions)
            };
            let call = Call::new(crate::model::Method::Put, "/pools")
                .param("poolid", "web")
                .param("comment", expected);
            assert_eq!(
                (a.operation.clone(), &a.calls[..], a.destructive),
                (Operation::Update, &[call][..], false),
                "{live:?}"
            );
            let old = live.filter(|c| !c.is_empty()).map(str::to_string);
            assert_eq!(
                a.changes,
                [Change::new("comment", old.clone(), Some(expected.into()))]
            );
            assert_eq!(
                out.drift,
                [Drift::new("metadata.adopt", old, Some(expected.into()))]
            );
            assert_eq!(
                a.summary,
                "take over pool web: add proxops's mark `proxops:web` to its comment (nothing else changes)"
            );
            assert!(out.anomalies.is_empty());
        }
        check(None, "proxops:web");
        check(Some(""), "proxops:web");
        check(Some("web tier"), "web tier (proxops:web)");
        check(
            Some("by hand (proxops:db)"),
            "by hand (proxops:db) (proxops:web)",
        );
    }

    #[test]
    fn prunes() {
        let mut out = Proposal::default();
        let delete = Call::new(crate::model::Method::Delete, "/pools").param("poolid", "web");
        POOL.prune(
            &mut out,
            "web",
            "delete pool web".into(),
            vec![delete.clone()],
            vec![Change::new("poolid", Some("web".into()), None)],
        );
        assert_eq!(out.drift, [Drift::new("", Some("pool web".into()), None)]);
        let [a] = &out.actions[..] else {
            panic!("one action: {:?}", out.actions)
        };
        assert_eq!(
            (
                a.operation.clone(),
                a.summary.as_str(),
                &a.calls[..],
                a.destructive
            ),
            (Operation::Delete, "delete pool web", &[delete][..], true)
        );
        assert!(!a.disturbs_availability && a.restore.is_none());
        assert!(out.anomalies.is_empty());
    }

    #[test]
    fn comments() {
        fn check(comment: &str, max: Option<usize>, why: &str, expected: &[&str]) {
            let mut c = Checker::new();
            check_comment(&mut c, "web", comment, max, why);
            let got: Vec<String> = c
                .diags
                .iter()
                .map(|d| format!("{}: {}", d.path, d.message))
                .collect();
            assert_eq!(got, expected, "{comment:?}");
        }
        check("web tier", None, "", &[]);
        check(
            "web\ntier",
            None,
            "",
            &["spec.comment: must be one line without control characters"],
        );
        check(
            "a\tb",
            Some(100),
            "PVE keeps rules one option per line",
            &[
                "spec.comment: must be one line without control characters (PVE keeps rules one option per line)",
            ],
        );
        // `web tier (proxops:web)` is 22 bytes.
        check("web tier", Some(22), "", &[]);
        check(
            "web tier",
            Some(21),
            "",
            &[
                "spec.comment: is too long: with proxops's mark it is 22 bytes, PVE takes at most 21",
            ],
        );
        // A comment that carries the mark already gets nothing appended.
        check("proxops:web", Some(11), "", &[]);
    }

    #[test]
    fn adopted_manifests() {
        fn check(live: Option<&str>, expected: Value) {
            let mut spec = Map::new();
            adopt_comment(&mut spec, "web", live);
            let a = POOL.adopted("web", spec, Vec::new());
            assert_eq!(a.manifest, expected, "{live:?}");
            assert!(a.gaps.is_empty());
        }
        let manifest = |spec: Value| json!({"apiVersion": API_VERSION, "kind": "Pool", "metadata": {"name": "web"}, "spec": spec});
        check(None, manifest(json!({})));
        check(Some(""), manifest(json!({})));
        check(Some("proxops:web"), manifest(json!({})));
        check(
            Some("tier (proxops:web)"),
            manifest(json!({"comment": "tier"})),
        );
        check(Some("by hand"), manifest(json!({"comment": "by hand"})));
    }

    #[test]
    fn keys_and_listing() {
        let k = POOL.key("web");
        assert_eq!(
            (
                k.node,
                k.space.as_str(),
                k.key.as_str(),
                k.resource_id.as_deref()
            ),
            (None, "pool", "web", Some("web"))
        );
        let l = POOL.listing();
        assert_eq!((l.path.as_str(), l.id_field.as_str()), ("/pools", "poolid"));
    }
}
