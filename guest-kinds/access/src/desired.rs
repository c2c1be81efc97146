//! The desired state of one Access manifest: a user (with its group memberships, ACL entries
//! and API tokens), a group (with its ACL entries) or a role, and PVE's names for each.

use std::collections::BTreeSet;

use proxops_kind_sdk::named::Named;
use serde::{Deserialize, Serialize};

/// The listings the kind reads, each with its id field.
pub const USERS: &str = "/access/users";
pub const GROUPS: &str = "/access/groups";
pub const ROLES: &str = "/access/roles";

/// The three named objects: listing, identity (`access-<what>`) and the words of messages.
pub const USER: Named = Named {
    kind: crate::validate::KIND,
    space: "access-user",
    listing: USERS,
    id_field: "userid",
    noun: "user",
    short: "user",
};
/// See [`USER`].
pub const GROUP: Named = Named {
    kind: crate::validate::KIND,
    space: "access-group",
    listing: GROUPS,
    id_field: "groupid",
    noun: "group",
    short: "group",
};
/// See [`USER`]. A role has no comment: `proxops-` in its id is the mark ([`ROLE_PREFIX`]).
pub const ROLE: Named = Named {
    kind: crate::validate::KIND,
    space: "access-role",
    listing: ROLES,
    id_field: "roleid",
    noun: "role",
    short: "role",
};
/// PVE's ACL, read whole (one read per cycle, shared by every object that asks).
pub const ACL: &str = "/access/acl";
/// The realms.
pub const DOMAINS: &str = "/access/domains";

/// The prefix of every role proxops owns: PVE keeps no comment on a role, so the id is the
/// mark (the host refuses a role write without it).
pub const ROLE_PREFIX: &str = "proxops-";

/// One Access object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Desired {
    User(User),
    Group(Group),
    Role(Role),
}

impl Desired {
    /// The PVE id: `user@realm`, the group id or the role id.
    pub fn id(&self) -> &str {
        match self {
            Desired::User(u) => &u.id,
            Desired::Group(g) => &g.id,
            Desired::Role(r) => &r.id,
        }
    }

    /// `user`, `group` or `role`.
    pub fn what(&self) -> &'static str {
        self.named().noun
    }

    /// The named object it is: [`USER`], [`GROUP`] or [`ROLE`].
    pub fn named(&self) -> Named {
        match self {
            Desired::User(_) => USER,
            Desired::Group(_) => GROUP,
            Desired::Role(_) => ROLE,
        }
    }
}

/// A user (`spec.user`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// `name@realm`.
    pub id: String,
    pub comment: Option<String>,
    pub email: Option<String>,
    pub firstname: Option<String>,
    pub lastname: Option<String>,
    pub enabled: bool,
    /// Seconds since the epoch; 0: never.
    pub expire: u64,
    /// Exactly these groups (each an Access group of this repository).
    pub groups: BTreeSet<String>,
    pub acl: Vec<Acl>,
    pub tokens: Vec<Token>,
}

impl User {
    pub fn realm(&self) -> &str {
        self.id.rsplit_once('@').map_or("", |(_, r)| r)
    }
}

/// An API token of a user (`spec.user.tokens[]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    /// The token's own id (`ci`); its full id is `user@realm!ci`.
    pub id: String,
    pub comment: Option<String>,
    /// PVE's privilege separation: the token holds only its own ACL entries (intersected
    /// with its user's).
    pub privsep: bool,
    pub expire: u64,
    pub acl: Vec<Acl>,
}

/// A group (`spec.group`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    pub id: String,
    pub comment: Option<String>,
    pub acl: Vec<Acl>,
}

/// A role (`spec.role`): `proxops-<metadata.name>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Role {
    pub id: String,
    pub privs: BTreeSet<String>,
}

/// One ACL entry of a principal: `roles` on `path`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Acl {
    pub path: String,
    pub roles: BTreeSet<String>,
    pub propagate: bool,
}

/// The full id of token `token` of user `user`.
pub fn full_token_id(user: &str, token: &str) -> String {
    format!("{user}!{token}")
}

/// The `comment` PVE gets: the mark shared by every named kind (`<comment> (proxops:<id>)`, or
/// the mark alone); adopt reads it back with [`proxops_kind_sdk::named::adopt_comment`].
pub use proxops_names::marked_comment as pve_comment;

/// PVE's built-in roles (pve-access-control `AccessControl.pm`, `create_roles`): granted by
/// name, never created, changed or deleted.
pub const BUILTIN_ROLES: &[&str] = &[
    "Administrator",
    "NoAccess",
    "PVEAdmin",
    "PVEAuditor",
    "PVEDatastoreAdmin",
    "PVEDatastoreUser",
    "PVEMappingAdmin",
    "PVEMappingUser",
    "PVEPoolAdmin",
    "PVEPoolUser",
    "PVESDNAdmin",
    "PVESDNUser",
    "PVESysAdmin",
    "PVETemplateUser",
    "PVEUserAdmin",
    "PVEVMAdmin",
    "PVEVMUser",
];

/// PVE 9's privileges (`AccessControl.pm`'s `$privgroups` and `Permissions.Modify`).
pub const PRIVILEGES: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "Group.Allocate",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "SDN.Allocate",
    "SDN.Audit",
    "SDN.Use",
    "Sys.AccessNetwork",
    "Sys.Audit",
    "Sys.Console",
    "Sys.Incoming",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "User.Modify",
    "VM.Allocate",
    "VM.Audit",
    "VM.Backup",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Cloudinit",
    "VM.Config.Disk",
    "VM.Config.HWType",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Console",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
    "VM.Migrate",
    "VM.PowerMgmt",
    "VM.Replicate",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];
