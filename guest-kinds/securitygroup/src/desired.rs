//! `validate`: a SecurityGroup manifest into its [`Desired`] state: the group's name checked
//! against PVE's `pve-security-group-name`, its rules in the form PVE keeps them, checked as
//! PVE's `verify_rule` checks a group's (`rule_env` `group`).

use proxops_firewall_rules::rules::{Env, MAX_GROUP_NAME, Rule, is_group_name, validate_rules};
use proxops_kind_sdk::check::{Checker, Diag};
use proxops_kind_sdk::manifest::envelope;
use proxops_kind_sdk::named::Named;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kind's `kind:`.
pub const KIND: &str = "SecurityGroup";
/// The folder of its manifests.
pub const FOLDER: &str = "securitygroup";
/// PVE's security groups: the listing (`group`, `comment`, `digest`), the create and the
/// comment update (`rename` equal to `group`).
pub const GROUPS: &str = "/cluster/firewall/groups";

/// The security group as a named object: its listing, identity and the words of its messages.
pub const NAMED: Named = Named {
    kind: KIND,
    space: "securitygroup",
    listing: GROUPS,
    id_field: "group",
    noun: "security group",
    short: "group",
};

/// Keys of `spec`.
pub const SPEC_KEYS: &[&str] = &["comment", "rules"];

/// One security group, as the manifest declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Desired {
    /// The group's name: `metadata.name`.
    pub group: String,
    /// `spec.comment` as written (without the mark, unless the manifest wrote it).
    pub comment: Option<String>,
    /// In order: PVE matches the first.
    pub rules: Vec<Rule>,
}

impl Desired {
    /// The `comment` PVE gets: the manifest's with proxops's mark.
    pub fn pve_comment(&self) -> String {
        proxops_names::marked_comment(&self.group, self.comment.as_deref())
    }

    /// `/cluster/firewall/groups/<group>`: the group's rule list.
    pub fn rules_path(&self) -> String {
        rules_path(&self.group)
    }
}

/// `/cluster/firewall/groups/<group>`.
pub fn rules_path(group: &str) -> String {
    format!("{GROUPS}/{group}")
}

/// Why a manifest name (already a DNS label) is not a PVE security group name, if it is not.
pub fn group_name_problem(name: &str) -> Option<String> {
    (!is_group_name(name)).then(|| {
        format!(
            "`{name}` is not a PVE security group name: a letter first, then letters, digits, `-` or `_`, 2 to {MAX_GROUP_NAME} characters (pve-security-group-name)"
        )
    })
}

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    if let Some(p) = name.as_deref().and_then(group_name_problem) {
        c.error("metadata.name", p);
    }
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let comment = c
        .string(spec, "spec", "comment", false)
        .filter(|c| !c.is_empty());
    if let Some(text) = &comment {
        proxops_firewall_rules::rules::one_line(&mut c, "spec.comment", text);
    }
    let rules = validate_rules(&mut c, spec, &Env::Group);
    c.finish()?;
    match name {
        Some(group) => Ok(Desired {
            group,
            comment,
            rules,
        }),
        None => Err(vec![Diag::error("metadata.name", "is required")]),
    }
}
