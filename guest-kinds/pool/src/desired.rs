//! The normalised desired state of a pool, and the `comment` PVE gets for it.

use std::collections::BTreeSet;

use proxops_kind_sdk::named::Named;
use serde::{Deserialize, Serialize};

/// PVE's pool collection: the listing (`poolid`, `comment`), the create, and the
/// collection-level update and delete (`poolid` as a parameter; PVE 8.1+).
pub const POOLS: &str = "/pools";

/// The pool as a named object: its listing, identity and the words of its messages.
pub const NAMED: Named = Named {
    kind: crate::validate::KIND,
    space: "pool",
    listing: POOLS,
    id_field: "poolid",
    noun: "pool",
    short: "pool",
};

/// Highest vmid PVE takes.
pub const VMID_MAX: u64 = 999_999_999;

/// One entry of `spec.guests`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guest {
    /// A proxops VM by manifest name (`web-01`, `VM/web-01`): a reference, resolved to its
    /// vmid at plan time.
    Vm(String),
    /// A proxops TemplateVM by manifest name (`TemplateVM/base`).
    Template(String),
    /// A raw vmid, for a guest proxops does not manage (a container, a VM made by hand).
    Vmid(u64),
}

impl Guest {
    /// How a manifest writes it.
    pub fn display(&self) -> String {
        match self {
            Guest::Vm(name) => name.clone(),
            Guest::Template(name) => format!("TemplateVM/{name}"),
            Guest::Vmid(n) => n.to_string(),
        }
    }

    /// The kind a named guest references.
    pub fn kind(&self) -> Option<(&'static str, &str)> {
        match self {
            Guest::Vm(name) => Some(("VM", name)),
            Guest::Template(name) => Some(("TemplateVM", name)),
            Guest::Vmid(_) => None,
        }
    }
}

/// The desired state of one pool (`validate`'s output; what plan compares).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Desired {
    /// The pool id: `metadata.name`.
    pub pool: String,
    /// `spec.comment` as written (without the mark, unless the manifest wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `spec.guests` in manifest order (the index is the reference path's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guests: Vec<Guest>,
    /// `spec.storages`, sorted.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub storages: BTreeSet<String>,
}

impl Desired {
    /// The `comment` PVE gets: see [`pve_comment`].
    pub fn pve_comment(&self) -> String {
        pve_comment(&self.pool, self.comment.as_deref())
    }
}

/// The `comment` PVE gets: the mark shared by every named kind (`<comment> (proxops:<id>)`, or
/// the mark alone); adopt reads it back with [`proxops_kind_sdk::named::adopt_comment`].
pub use proxops_names::marked_comment as pve_comment;

/// PVE's `verify_poolname` for a top-level pool, on a manifest name (already a DNS label):
/// why `id` is not a pool id. PVE wants a letter first.
pub fn poolid_problem(id: &str) -> Option<String> {
    if !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return Some(format!(
            "`{id}` must start with a letter to be a PVE pool id (PVE: pool name must start with a letter)"
        ));
    }
    None
}
