//! Named objects (an entry of a kind's listing: a pool, a backup job, a user, a security group): a write
//! reaches only the object's own id, a create needs it absent and marked `proxops:<id>`, any other write
//! needs the mark; roles are owned by their `proxops-` prefix and ACL entries through what they grant to.

use std::collections::HashSet;

use crate::request::{self, Refusal, Rule};
use proxops_runtime::kind::{Call, Method};

use super::*;

/// A named object (an entry of a kind's listing) as this cycle read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamedLive {
    /// The listing was not read (or failed): nothing is known, nothing is written.
    Unread,
    /// The listing has no entry with that id.
    Absent,
    /// The entry, with its `comment` (empty when it has none).
    Present { comment: String },
}

/// A manifest's explicit take-over of a named object proxops did not create
/// (`metadata.adopt: {id, comment}`): the object's id and the live comment `proxops adopt` saw
/// (`None`: it had none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedClaim {
    pub id: String,
    pub comment: Option<String>,
}

impl NamedClaim {
    /// Whether the claim still describes the live object `id` whose comment is `live`
    /// (empty when it has none).
    pub fn matches(&self, id: &str, live: &str) -> bool {
        self.id == id && self.comment.as_deref().unwrap_or_default() == live
    }
}

/// Whether `call` is the one write of a take-over of the unmarked object `id` of `listing`,
/// whose live comment is `live`: the manifest claims the object and the claim still matches,
/// and the call sets `comment` to exactly [`proxops_names::marked_comment`] of the live comment
/// and nothing else, in the object's own update form: `PUT <listing>/<id>`, `PUT <listing>`
/// with the id in the listing's id field (PVE's pools), or `POST <listing>` with the id field
/// and `rename` equal to the id (PVE's security groups). Besides `comment` and the id, only
/// `digest`, and `type` equal to the live type (PVE's HA rules), may appear. Judged by the
/// request, never by what the kind says.
fn takes_over(call: &Call, listing: &str, id: &str, live: &str, scope: &Scope<'_>) -> bool {
    if !scope.take_over.is_some_and(|c| c.matches(id, live)) {
        return false;
    }
    let id_field = scope
        .listings
        .iter()
        .find(|(p, _)| p == listing)
        .map(|(_, f)| f.as_str());
    let segments = request::form::pve_view(&call.path);
    let base: Vec<&str> = listing.split('/').filter(|s| !s.is_empty()).collect();
    let at_item = segments.len() == base.len() + 1
        && segments[..base.len()] == base[..]
        && segments[base.len()] == id;
    let at_listing =
        segments[..] == base[..] && id_field.is_some_and(|f| param(call, f) == Some(id));
    let form = match call.method {
        Method::Put => at_item || at_listing,
        Method::Post => at_listing && param(call, "rename") == Some(id),
        _ => false,
    };
    let wanted = proxops_names::marked_comment(id, Some(live));
    let live_type = (scope.named_type)(listing, id);
    form && param(call, "comment") == Some(wanted.as_str())
        && call.params.iter().all(|p| match p.name.as_str() {
            "comment" | "digest" => true,
            "rename" => p.value == id,
            "type" => live_type.as_deref() == Some(p.value.as_str()),
            name => Some(name) == id_field && p.value == id,
        })
}

/// The rules of a write to a named object (`Target::Named`), judged by the request: it reaches
/// only the object's own id; a create needs the id absent and carries proxops's mark
/// (`proxops:<id>` in `comment`); any other write needs the mark on the live object and keeps
/// it. The one exception is a claimed take-over of an unmarked object ([`NamedClaim`]): the
/// write that adds the mark to its comment, and nothing else.
pub(super) fn check_named(
    call: &Call,
    shown: &str,
    (listing, id, create): (&str, &str, bool),
    scope: &Scope<'_>,
    created: &HashSet<(String, String)>,
) -> Result<(), Refusal> {
    let what = format!("{} object {}", request::shown(listing), request::shown(id));
    if scope.resource != Some(id) {
        return Err(Refusal::new(
            Rule::Target,
            format!("{shown} reaches the {what}, which is not this object"),
        ));
    }
    // PVE's roles have no comment: a role is proxops's by its id (`proxops-<name>`).
    if let Some(prefix) = id_marked(listing) {
        let live = (scope.named)(listing, id);
        let refusal = if !id.starts_with(prefix) {
            Some(format!(
                "{shown}: the {what} is not proxops's (PVE keeps no comment on it, so proxops writes only ids starting with `{prefix}`)"
            ))
        } else {
            match (live, create) {
                (NamedLive::Unread, _) => Some(format!(
                    "{shown}: the listing {} was not read in this cycle, so proxops cannot tell whose the {what} is",
                    request::shown(listing)
                )),
                (NamedLive::Present { .. }, true) => {
                    Some(format!("{shown}: the {what} already exists"))
                }
                (NamedLive::Absent, false)
                    if !created.contains(&(listing.to_string(), id.to_string())) =>
                {
                    Some(format!("{shown}: the {what} does not exist"))
                }
                _ => None,
            }
        };
        return match refusal {
            Some(why) => Err(Refusal::new(Rule::Ownership, why)),
            None => Ok(()),
        };
    }
    let mark = proxops_names::named_mark(id);
    // A write inside the object (below its item path, or a POST to the item, which PVE uses to
    // add an entry: a rule to a security group, an address to an ipset; a user's API token,
    // `/access/users/<id>/token/<t>`) is owned through the object and sets that entry's
    // comment, not the object's: the object must carry the mark, the entry need not.
    let depth = listing.split('/').filter(|s| !s.is_empty()).count() + 1;
    let segments = request::form::pve_view(&call.path).len();
    let inside = segments > depth || (segments == depth && call.method == Method::Post);
    let comment = param(call, "comment").filter(|_| !inside);
    let keeps_mark = inside
        || (comment.is_none_or(|c| proxops_names::has_named_mark(c, id))
            && !param(call, "delete")
                .is_some_and(|d| d.split([',', ';', ' ']).any(|k| k == "comment")));
    let mut live = (scope.named)(listing, id);
    if live == NamedLive::Absent
        && !create
        && created.contains(&(listing.to_string(), id.to_string()))
    {
        // Created by an earlier call of this proposal, with the mark.
        live = NamedLive::Present {
            comment: mark.clone(),
        };
    }
    let refusal = match (live, create) {
        (NamedLive::Unread, _) => Some(format!(
            "{shown}: the listing {} was not read in this cycle, so proxops cannot tell whose the {what} is",
            request::shown(listing)
        )),
        (NamedLive::Present { .. }, true) => Some(format!("{shown}: the {what} already exists")),
        (NamedLive::Absent, true)
            if !comment.is_some_and(|c| proxops_names::has_named_mark(c, id)) =>
        {
            Some(format!(
                "{shown} creates the {what} without proxops's mark (`{mark}` in its comment)"
            ))
        }
        (NamedLive::Absent, false) => Some(format!("{shown}: the {what} does not exist")),
        (NamedLive::Present { comment }, false)
            if !proxops_names::has_named_mark(&comment, id)
                && takes_over(call, listing, id, &comment, scope) =>
        {
            None
        }
        (NamedLive::Present { comment }, false) if !proxops_names::has_named_mark(&comment, id) => {
            Some(format!(
                "{shown}: the {what} does not carry proxops's mark (`{mark}` in its comment); proxops changes or deletes only objects it created"
            ))
        }
        (NamedLive::Present { .. }, false) if !keeps_mark => Some(format!(
            "{shown} would remove proxops's mark (`{mark}`) from the {what}'s comment"
        )),
        _ => None,
    };
    match refusal {
        Some(why) => Err(Refusal::new(Rule::Ownership, why)),
        None => Ok(()),
    }
}

/// The listings whose objects PVE keeps no comment on, and the id prefix that marks proxops's
/// own instead: `/access/roles` (`proxops-`).
pub fn id_marked(listing: &str) -> Option<&'static str> {
    (listing == ROLES).then_some(ROLE_PREFIX)
}

/// PVE's roles, and the prefix of the roles proxops creates and may change or delete.
pub(super) const ROLES: &str = "/access/roles";
pub const ROLE_PREFIX: &str = "proxops-";

/// `PUT /access/acl` changes the ACL entries of the users, groups and tokens it names (ACL
/// entries have no id or comment of their own): each is owned through its principal, which
/// must be this object's own user or group (a token's user), marked, or created by an earlier
/// call of this proposal. `None` when the call is not an ACL write.
pub(super) fn check_acl(
    call: &Call,
    shown: &str,
    scope: &Scope<'_>,
    created: &HashSet<(String, String)>,
) -> Option<Result<(), Refusal>> {
    let segments = request::form::pve_view(&call.path);
    if segments != ["access", "acl"] {
        return None;
    }
    let list = |name: &str| -> Vec<String> {
        param(call, name)
            .unwrap_or_default()
            .split([',', ';', ' '])
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut principals: Vec<(&str, String, String)> = Vec::new();
    for u in list("users") {
        principals.push(("/access/users", u.clone(), format!("user {u}")));
    }
    for g in list("groups") {
        principals.push(("/access/groups", g.clone(), format!("group {g}")));
    }
    for t in list("tokens") {
        let user = t
            .rsplit_once('!')
            .map_or(String::new(), |(u, _)| u.to_string());
        principals.push(("/access/users", user, format!("token {t}")));
    }
    let refuse = |why: String| Some(Err(Refusal::new(Rule::Ownership, why)));
    if principals.is_empty() {
        return refuse(format!("{shown} names no user, group or token"));
    }
    for (listing, id, who) in principals {
        let who = request::shown(&who);
        if scope.resource != Some(id.as_str()) {
            return Some(Err(Refusal::new(
                Rule::Target,
                format!("{shown} changes the ACL entries of {who}, which is not this object"),
            )));
        }
        if created.contains(&(listing.to_string(), id.clone())) {
            continue;
        }
        match (scope.named)(listing, &id) {
            NamedLive::Present { comment } if proxops_names::has_named_mark(&comment, &id) => {}
            NamedLive::Unread => {
                return refuse(format!(
                    "{shown}: the listing {} was not read in this cycle, so proxops cannot tell whose {who} is",
                    request::shown(listing)
                ));
            }
            _ => {
                return refuse(format!(
                    "{shown} changes the ACL entries of {who}, which does not exist or does not carry proxops's mark (`{}` in its comment)",
                    proxops_names::named_mark(&id)
                ));
            }
        }
    }
    Some(Ok(()))
}
