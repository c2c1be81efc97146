//! The normalised desired state of a backup job, and the options PVE keeps for it.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::named::Named;
use serde::{Deserialize, Serialize};

/// PVE's listing of backup jobs, and the collection a create posts to.
pub const JOBS: &str = "/cluster/backup";

/// The backup job as a named object: its listing, identity and the words of its messages.
pub const NAMED: Named = Named {
    kind: crate::validate::KIND,
    space: "backup-job",
    listing: JOBS,
    id_field: "id",
    noun: "backup job",
    short: "job",
};

/// Longest `comment` PVE takes.
pub const COMMENT_MAX: usize = 512;
/// Longest `notes-template` PVE takes.
pub const NOTES_MAX: usize = 1024;
/// Longest job id PVE takes (`pve-backup-jobid`).
pub const ID_MAX: usize = 50;
/// Longest `schedule` PVE takes.
pub const SCHEDULE_MAX: usize = 128;

/// The retention keys of PVE's `prune-backups`, in PVE's order.
pub const KEEP_KEYS: &[&str] = &[
    "keep-last",
    "keep-hourly",
    "keep-daily",
    "keep-weekly",
    "keep-monthly",
    "keep-yearly",
];

/// A guest of `spec.guests` or `spec.exclude`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Guest {
    /// A proxops VM by manifest name: a reference resolved to its vmid.
    Vm(String),
    /// A proxops TemplateVM by manifest name.
    Template(String),
    /// A raw vmid.
    Vmid(u64),
}

impl Guest {
    /// How a manifest writes it.
    pub fn display(&self) -> String {
        match self {
            Guest::Vm(n) => n.clone(),
            Guest::Template(n) => format!("TemplateVM/{n}"),
            Guest::Vmid(n) => n.to_string(),
        }
    }

    /// The kind and name a named guest references.
    pub fn kind(&self) -> Option<(&'static str, &str)> {
        match self {
            Guest::Vm(n) => Some(("VM", n)),
            Guest::Template(n) => Some(("TemplateVM", n)),
            Guest::Vmid(_) => None,
        }
    }
}

/// Which guests a job backs up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selection {
    /// Every guest, less `exclude`.
    All { exclude: Vec<Guest> },
    /// These guests.
    Guests(Vec<Guest>),
    /// The members of a proxops Pool (a reference by name, which is the PVE pool id).
    Pool(String),
}

/// The desired state of one backup job (`validate`'s output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Desired {
    /// The job id: `metadata.name`.
    pub id: String,
    pub schedule: String,
    pub storage: String,
    pub selection: Selection,
    /// `snapshot`, `suspend` or `stop`.
    pub mode: String,
    /// PVE's `compress`: `0` (none), `gzip`, `lzo`, `zstd`.
    pub compress: String,
    /// `prune-backups`; empty: the storage's retention.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub retention: BTreeMap<String, u64>,
    /// `keep-all=1`.
    #[serde(default)]
    pub keep_all: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes_template: Option<String>,
    pub enabled: bool,
    /// `spec.comment` as written (without the mark, unless the manifest wrote it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl Desired {
    /// The `comment` PVE gets: see [`pve_comment`].
    pub fn pve_comment(&self) -> String {
        pve_comment(&self.id, self.comment.as_deref())
    }

    /// `prune-backups` as PVE's property string, keys in PVE's order; `None` for the storage's.
    pub fn prune_backups(&self) -> Option<String> {
        if self.keep_all {
            return Some("keep-all=1".into());
        }
        prune_string(&self.retention)
    }
}

/// `keep-…=N` pairs in PVE's order, `None` when there are none.
pub fn prune_string(keep: &BTreeMap<String, u64>) -> Option<String> {
    let parts: Vec<String> = KEEP_KEYS
        .iter()
        .filter_map(|k| keep.get(*k).filter(|n| **n > 0).map(|n| format!("{k}={n}")))
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// The `comment` PVE gets: the mark shared by every named kind (`<comment> (proxops:<id>)`, or
/// the mark alone); adopt reads it back with [`proxops_kind_sdk::named::adopt_comment`].
pub use proxops_names::marked_comment as pve_comment;

/// PVE's `pve-configid` (`[a-z][a-z0-9_-]+`) and the job id's length: why `id` is not one.
pub fn jobid_problem(id: &str) -> Option<String> {
    if id.len() < 2 || !id.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some(format!(
            "`{id}` is not a PVE backup job id: a letter first, at least 2 characters (pve-configid)"
        ));
    }
    if id.len() > ID_MAX {
        return Some(format!(
            "`{id}` is longer than the {ID_MAX} characters of a PVE backup job id"
        ));
    }
    None
}

/// The vmids of a sorted set as PVE's lists write them.
pub fn vmid_list(s: &BTreeSet<u64>) -> String {
    s.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}
