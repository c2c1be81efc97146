//! What a proposed request is and what it touches, derived from the request itself and never
//! from what the kind says about it (its identity, labels, listings or summaries are claims).
//!
//! Three steps, each a pure function, each in a module of its own:
//! 1. [`form`]: the path is matched against the kind's declared templates segment by segment,
//!    each segment decoded once, each placeholder's value held to its grammar (a vmid is a
//!    canonical decimal; a node, a storage and a volume follow PVE's formats); the host then
//!    builds the URL itself from the template and the values, percent-encoding each value
//!    once, and that URL is the one sent. Parameter names are plain and never repeated.
//!    [`form::pve_view`] gives the segments PVE routes (it decodes the whole path before
//!    routing, so a `%2F` inside a value is a separator to PVE).
//! 2. [`target`]: what a write touches in PVE's view: a guest by vmid, a new guest, a storage
//!    volume (its owner read from PVE's volume naming), a new file, or an endpoint beyond one
//!    guest with the capability that endpoint needs; and what it does to it (`effect`).
//! 3. [`capability`]: a guest write's parameters read as PVE parses them (property strings,
//!    `delete` lists, repeated keys), and the capabilities they need, or a refusal of what
//!    cannot be classified.
//!
//! Beside them, [`secret`] decides where a secret reference may stand (a whole parameter
//! value the grant names, never one the host judges a request by).
//!
//! This module holds what the three share: the [`Rule`] every refusal names, the
//! [`Refusal`], and how a value is shown in one.

use proxops_runtime::kind::Call;

use crate::plan::method_name;

pub mod capability;
pub mod form;
pub mod secret;
pub mod target;

/// The sandbox rule a refusal falls under, named in every refusal (``sandbox rule `path` ``).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// Not among the calls the kind declared.
    Declared,
    /// A path that is not in canonical form, or that PVE or the URL parser could read another way.
    Path,
    /// A parameter name that is repeated or not a plain name.
    Params,
    /// A guest-id key that is not a canonical decimal.
    Identity,
    /// A write about another object than the one planned.
    Target,
    /// A write to a guest proxops does not own, or a delete without the vmid-bound mark.
    Ownership,
    /// A volume of another guest, or a file the object did not declare.
    Volume,
    /// An endpoint beyond one guest, without the capability for it.
    Endpoint,
    /// A parameter that needs a capability the grant does not name, or that the host cannot
    /// classify.
    Capability,
    /// More reads than the grant allows.
    Reads,
    /// A listing that is not a plain collection path or that aliases another's.
    Listing,
    /// A secret reference where the grant does not let it stand, or not a whole value.
    Secret,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Declared => "declared",
            Rule::Path => "path",
            Rule::Params => "params",
            Rule::Identity => "identity",
            Rule::Target => "target",
            Rule::Ownership => "ownership",
            Rule::Volume => "volume",
            Rule::Endpoint => "endpoint",
            Rule::Capability => "capability",
            Rule::Reads => "reads",
            Rule::Listing => "listing",
            Rule::Secret => "secret",
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request the sandbox refused, and why; nothing of it is sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} (sandbox rule `{rule}`)")]
pub struct Refusal {
    pub rule: Rule,
    pub what: String,
}

impl Refusal {
    pub fn new(rule: Rule, what: impl Into<String>) -> Refusal {
        Refusal {
            rule,
            what: what.into(),
        }
    }
}

/// A value for a message: as it is when it is plain (printable ASCII, no space, quote or
/// backslash), else quoted with every control character and quote escaped; at most 80
/// characters either way.
pub fn shown(value: &str) -> String {
    let cut = value.chars().count() > 80;
    let head: String = value.chars().take(80).collect();
    let plain = head
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\\' | b'`'));
    let mut out = if plain && !head.is_empty() {
        head
    } else {
        format!(
            "\"{}\"",
            head.chars()
                .flat_map(char::escape_debug)
                .collect::<String>()
        )
    };
    if cut {
        out.push('…');
    }
    out
}

/// `METHOD path` for messages.
pub fn describe_call(call: &Call) -> String {
    format!("{} {}", method_name(call.method), shown(&call.path))
}
#[cfg(test)]
mod tests;
