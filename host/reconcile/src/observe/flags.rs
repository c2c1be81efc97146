//! What the host adds to the live state a kind observes, decided by the host alone: each API
//! token's `secret-stored` (its secret is in the SOPS file) and [`TAKE_OVER_FLAG`] on a named
//! object a manifest's `metadata.adopt: {id, comment}` still describes.

use std::collections::HashMap;

use proxops_runtime::SecretSource;

use super::Item;
use super::reads::Answer;
use crate::live::Entry;

/// Each token in an answer to `GET /access/users/{userid}` gets `secret-stored`: whether its
/// secret is in the cluster's SOPS document ([`crate::tokens`]). Decided by the read's path.
pub(super) fn flag_stored_tokens(
    reads: &mut HashMap<String, Answer>,
    secrets: Option<&dyn SecretSource>,
) {
    for (key, answer) in reads.iter_mut() {
        let path = key.split_once('?').map_or(key.as_str(), |(p, _)| p);
        let Some(userid) = crate::tokens::user_read(path) else {
            continue;
        };
        if answer.answer.0 != 200 {
            continue;
        }
        if let Some(text) = crate::tokens::with_stored_flags(&answer.answer.1, &userid, secrets) {
            answer.answer.1 = text;
        }
    }
}

/// The flag the host merges into a named object's live entry when the manifest's
/// `metadata.adopt: {id, comment}` still matches it: the kind plans the one write that adds
/// proxops's mark, and the gate judges that write by what it does, never by this flag.
pub const TAKE_OVER_FLAG: &str = "proxops-take-over";

/// The live entry `item`'s kind observes: the listing's entry as read, with
/// [`TAKE_OVER_FLAG`] when the manifest's take-over claim matches it (the object is unmarked,
/// its id and comment those adopt saw).
pub(super) fn observed_entry(item: &Item<'_>, entry: &Entry) -> String {
    match item.take_over {
        Some(claim) if claim_matches_entry(claim, item, entry) => {
            match serde_json::from_str::<serde_json::Value>(entry.text()) {
                Ok(serde_json::Value::Object(mut fields)) => {
                    fields.insert(TAKE_OVER_FLAG.into(), serde_json::Value::Bool(true));
                    serde_json::Value::Object(fields).to_string()
                }
                _ => entry.text().to_string(),
            }
        }
        _ => entry.text().to_string(),
    }
}

/// Whether a named take-over claim describes `entry`, the live object of `item`: the object
/// is `item`'s own, lacks proxops's mark, and its comment is the one adopt saw.
pub(super) fn claim_matches_entry(
    claim: &crate::ownership::NamedClaim,
    item: &Item<'_>,
    entry: &Entry,
) -> bool {
    let comment = entry.str("comment").unwrap_or_default();
    item.object.resource.as_deref() == Some(claim.id.as_str())
        && claimable(item, entry)
        && !proxops_names::has_named_mark(comment, &claim.id)
        && claim.matches(&claim.id, comment)
}

/// Whether `item`'s live `entry` is in a listing whose objects keep proxops's mark in their
/// comment (not PVE's roles, which have none and are proxops's by their id).
pub(super) fn claimable(item: &Item<'_>, entry: &Entry) -> bool {
    let id = item.object.resource.as_deref();
    item.object
        .listings
        .iter()
        .find(|(_, field)| entry.get(field).and_then(crate::live::Field::id).as_deref() == id)
        .is_some_and(|(path, _)| crate::ownership::id_marked(path).is_none())
}
