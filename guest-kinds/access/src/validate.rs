//! `validate`: an Access manifest into its [`Desired`] state, with PVE's grammars checked up
//! front (pve-access-control `Auth/Plugin.pm` `verify_username` and the realm grammar,
//! `AccessControl.pm` `verify_groupname`, `verify_rolename`, `verify_privname`,
//! `normalize_path`/`check_path`, the token id grammar) so that an apply does not fail on what a
//! manifest already shows.

use std::collections::BTreeSet;

use proxops_kind_sdk::check::{Checker, Diag, index, join};
use proxops_kind_sdk::manifest::{envelope, manifest_schema};
use serde_json::{Map, Value, json};

use crate::desired::{
    Acl, BUILTIN_ROLES, Desired, Group, PRIVILEGES, ROLE_PREFIX, Role, Token, User,
};

/// The kind's `kind:`.
pub const KIND: &str = "Access";

const SPEC_KEYS: &[&str] = &["user", "group", "role"];
const USER_KEYS: &[&str] = &[
    "id",
    "comment",
    "email",
    "firstname",
    "lastname",
    "enabled",
    "expire",
    "groups",
    "acl",
    "tokens",
];
const TOKEN_KEYS: &[&str] = &["id", "comment", "privsep", "expire", "acl"];
const GROUP_KEYS: &[&str] = &["comment", "acl"];
const ROLE_KEYS: &[&str] = &["privs"];
const ACL_KEYS: &[&str] = &["path", "roles", "propagate"];

/// Longest comment accepted (PVE's `user-comment` allows 2048).
const COMMENT_MAX: usize = 1024;

type Obj = Map<String, Value>;

/// Check `doc` and normalise it.
pub fn validate(doc: &Value) -> Result<Desired, Vec<Diag>> {
    let mut c = Checker::new();
    let (name, spec) = envelope(&mut c, doc, KIND);
    let Some(spec) = spec else {
        return Err(c.diags);
    };
    c.unknown_keys(spec, "spec", SPEC_KEYS);
    let given: Vec<&str> = SPEC_KEYS
        .iter()
        .copied()
        .filter(|k| spec.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    if given.len() != 1 {
        c.error(
            "spec",
            format!(
                "needs exactly one of `user`, `group` or `role` (one PVE object per manifest), got {}",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(", ")
                }
            ),
        );
        return Err(c.diags);
    }
    let name = name.unwrap_or_default();
    let desired = match given[0] {
        "user" => c
            .object_field(spec, "spec", "user", true, USER_KEYS)
            .and_then(|u| user(&mut c, u))
            .map(Desired::User),
        "group" => c
            .object_field(spec, "spec", "group", true, GROUP_KEYS)
            .and_then(|g| group(&mut c, &name, g))
            .map(Desired::Group),
        _ => c
            .object_field(spec, "spec", "role", true, ROLE_KEYS)
            .and_then(|r| role(&mut c, &name, r))
            .map(Desired::Role),
    };
    match (desired, c.has_errors()) {
        (Some(d), false) => Ok(d),
        _ => Err(c.diags),
    }
}

/// `verify_username`: `name@realm`, 3 to 64 characters, the name without whitespace, `:`
/// or `/`, the realm a letter then letters, digits, `.`, `-`, `_`.
pub fn userid_problem(id: &str) -> Option<String> {
    let len = id.chars().count();
    if !(3..=64).contains(&len) {
        return Some(format!(
            "must be 3 to 64 characters (PVE's limit), got {len}"
        ));
    }
    let Some((user, realm)) = id.rsplit_once('@') else {
        return Some("must be `name@realm` (e.g. `deploy@pve`)".into());
    };
    if user.is_empty()
        || user
            .chars()
            .any(|ch| ch.is_whitespace() || ch == ':' || ch == '/' || ch.is_control())
    {
        return Some("the name before `@` must be non-empty, without spaces, `:` or `/`".into());
    }
    if !token_grammar(realm) {
        return Some(format!(
            "realm `{realm}` must start with a letter and continue with letters, digits, `.`, `-` or `_`"
        ));
    }
    None
}

/// PVE's realm and token id grammar: a letter, then at least one letter, digit, `.`, `-`, `_`.
pub fn token_grammar(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|ch| ch.is_ascii_alphabetic())
        && s.len() >= 2
        && chars.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_'))
}

/// `check_path`'s character set after `normalize_path`: `/`, then letters, digits, `.`, `-`,
/// `_`, `/`, no empty segment or trailing `/`.
pub fn acl_path_problem(path: &str) -> Option<String> {
    if path == "/" {
        return None;
    }
    if !path.starts_with('/') || path.ends_with('/') || path.contains("//") {
        return Some(
            "must be an ACL path such as `/`, `/vms/100`, `/storage/local` or `/pool/web` (leading `/`, no trailing `/`)".into(),
        );
    }
    if !path
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_' | '/'))
    {
        return Some("may contain letters, digits, `.`, `-`, `_` and `/` only".into());
    }
    let top = path.split('/').nth(1).unwrap_or("");
    if !matches!(
        top,
        "access" | "nodes" | "pool" | "sdn" | "storage" | "vms" | "mapping"
    ) {
        return Some(format!(
            "`/{top}` is not an ACL path PVE knows (`/access`, `/nodes`, `/pool`, `/sdn`, `/storage`, `/vms`, `/mapping`)"
        ));
    }
    None
}

fn comment_of(c: &mut Checker, obj: &Obj, path: &str) -> Option<String> {
    let s = c.string(obj, path, "comment", false)?;
    if s.chars().any(char::is_control) {
        c.error(
            join(path, "comment"),
            "must be one line without control characters",
        );
        return None;
    }
    if s.chars().count() > COMMENT_MAX {
        c.error(
            join(path, "comment"),
            format!("is longer than {COMMENT_MAX} characters"),
        );
        return None;
    }
    if s.contains("proxops:") {
        c.error(
            join(path, "comment"),
            "must not contain `proxops:`: proxops appends its own mark `proxops:<id>`",
        );
        return None;
    }
    Some(s).filter(|s| !s.is_empty())
}

fn acl_list(c: &mut Checker, obj: &Obj, path: &str) -> Vec<Acl> {
    let Some(items) = c.array(obj, path, "acl", false) else {
        return Vec::new();
    };
    let p = join(path, "acl");
    let mut out: Vec<Acl> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ip = index(&p, i);
        let Some(e) = c.object(item, &ip, ACL_KEYS) else {
            continue;
        };
        let Some(acl_path) = c.string(e, &ip, "path", true) else {
            continue;
        };
        if let Some(why) = acl_path_problem(&acl_path) {
            c.error(join(&ip, "path"), why);
            continue;
        }
        let roles = c.string_list(e, &ip, "roles").unwrap_or_default();
        if roles.is_empty() {
            c.error(join(&ip, "roles"), "is required: at least one role");
            continue;
        }
        for (j, r) in roles.iter().enumerate() {
            let rp = index(&join(&ip, "roles"), j);
            if !r
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_'))
                || r.is_empty()
            {
                c.error(
                    rp,
                    format!("`{r}` is not a role id (letters, digits, `.`, `-`, `_`)"),
                );
            }
        }
        let propagate = c.boolean(e, &ip, "propagate", false).unwrap_or(true);
        if out.iter().any(|a| a.path == acl_path) {
            c.error(
                join(&ip, "path"),
                format!("`{acl_path}` is given twice; list every role of a path in one entry"),
            );
            continue;
        }
        out.push(Acl {
            path: acl_path,
            roles: roles.into_iter().collect(),
            propagate,
        });
    }
    out.sort();
    out
}

fn expire_of(c: &mut Checker, obj: &Obj, path: &str) -> u64 {
    c.int(obj, path, "expire", false, 0, i64::from(u32::MAX))
        .map_or(0, |n| n as u64)
}

fn user(c: &mut Checker, u: &Obj) -> Option<User> {
    let path = "spec.user";
    let id = c.string(u, path, "id", true)?;
    if let Some(why) = userid_problem(&id) {
        c.error(join(path, "id"), why);
        return None;
    }
    let comment = comment_of(c, u, path);
    let email = c.string(u, path, "email", false);
    if let Some(e) = &email
        && (!e.contains('@') || e.chars().any(|ch| ch.is_whitespace() || ch.is_control()))
    {
        c.error(
            join(path, "email"),
            format!("`{e}` is not an email address"),
        );
    }
    let firstname = c.string(u, path, "firstname", false);
    let lastname = c.string(u, path, "lastname", false);
    let enabled = c.boolean(u, path, "enabled", false).unwrap_or(true);
    let expire = expire_of(c, u, path);
    let mut groups = BTreeSet::new();
    for (i, g) in c
        .string_list(u, path, "groups")
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let gp = index(&join(path, "groups"), i);
        if let Some(why) = group_id_problem(&g) {
            c.error(&gp, why);
        } else if !groups.insert(g.clone()) {
            c.error(gp, format!("group `{g}` is listed twice"));
        }
    }
    let acl = acl_list(c, u, path);
    let mut tokens: Vec<Token> = Vec::new();
    if let Some(items) = c.array(u, path, "tokens", false) {
        let tp = join(path, "tokens");
        for (i, item) in items.iter().enumerate() {
            let ip = index(&tp, i);
            let Some(t) = c.object(item, &ip, TOKEN_KEYS) else {
                continue;
            };
            let Some(tid) = c.string(t, &ip, "id", true) else {
                continue;
            };
            if !token_grammar(&tid) {
                c.error(
                    join(&ip, "id"),
                    format!(
                        "`{tid}` is not a token id: a letter, then letters, digits, `.`, `-` or `_`"
                    ),
                );
                continue;
            }
            if tokens.iter().any(|x| x.id == tid) {
                c.error(join(&ip, "id"), format!("token `{tid}` is listed twice"));
                continue;
            }
            let comment = comment_of(c, t, &ip);
            let privsep = c.boolean(t, &ip, "privsep", false).unwrap_or(true);
            let expire = expire_of(c, t, &ip);
            let acl = acl_list(c, t, &ip);
            if !privsep && !acl.is_empty() {
                c.error(
                    join(&ip, "acl"),
                    "a token without privilege separation (`privsep: false`) has its user's privileges; its own ACL entries would not count",
                );
            }
            tokens.push(Token {
                id: tid,
                comment,
                privsep,
                expire,
                acl,
            });
        }
    }
    Some(User {
        id,
        comment,
        email,
        firstname,
        lastname,
        enabled,
        expire,
        groups,
        acl,
        tokens,
    })
}

/// `verify_groupname` and the role prefix kept for roles.
pub fn group_id_problem(id: &str) -> Option<String> {
    if id.is_empty()
        || !id
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_'))
    {
        return Some(format!(
            "`{id}` is not a PVE group id (letters, digits, `.`, `-`, `_`)"
        ));
    }
    if id.starts_with(ROLE_PREFIX) {
        return Some(format!(
            "`{id}` starts with `{ROLE_PREFIX}`, which marks proxops's roles; choose another group id"
        ));
    }
    None
}

fn group(c: &mut Checker, name: &str, g: &Obj) -> Option<Group> {
    if let Some(why) = group_id_problem(name) {
        c.error("metadata.name", format!("is the group id: {why}"));
        return None;
    }
    let comment = comment_of(c, g, "spec.group");
    let acl = acl_list(c, g, "spec.group");
    Some(Group {
        id: name.to_string(),
        comment,
        acl,
    })
}

fn role(c: &mut Checker, name: &str, r: &Obj) -> Option<Role> {
    let path = "spec.role";
    let privs = c.string_list(r, path, "privs").unwrap_or_default();
    let mut out = BTreeSet::new();
    for (i, p) in privs.iter().enumerate() {
        if !PRIVILEGES.contains(&p.as_str()) {
            let close = proxops_kind_sdk::check::did_you_mean(p, PRIVILEGES)
                .map(|s| format!("; did you mean `{s}`?"))
                .unwrap_or_default();
            c.error(
                index(&join(path, "privs"), i),
                format!("`{p}` is not a PVE privilege{close}"),
            );
        } else if !out.insert(p.clone()) {
            c.error(
                index(&join(path, "privs"), i),
                format!("`{p}` is listed twice"),
            );
        }
    }
    if name.is_empty() {
        return None;
    }
    Some(Role {
        id: format!("{ROLE_PREFIX}{name}"),
        privs: out,
    })
}

/// Whether `role` is one of PVE's built-in roles.
pub fn is_builtin(role: &str) -> bool {
    BUILTIN_ROLES.contains(&role)
}

/// The manifest's JSON Schema.
pub fn schema() -> Value {
    let acl = json!({
        "type": "array",
        "items": {
            "type": "object",
            "additionalProperties": false,
            "required": ["path", "roles"],
            "properties": {
                "path": {"type": "string", "description": "ACL path: /, /vms/<id>, /storage/<id>, /pool/<id>, /nodes/<node>, /access/..."},
                "roles": {"type": "array", "items": {"type": "string"}, "description": "built-in roles (PVEAuditor, ...) or proxops-<name> for a role manifest"},
                "propagate": {"type": "boolean", "default": true}
            }
        }
    });
    let spec = json!({
        "type": "object",
        "additionalProperties": false,
        "description": "exactly one of user, group, role",
        "properties": {
            "user": {
                "type": "object",
                "additionalProperties": false,
                "required": ["id"],
                "properties": {
                    "id": {"type": "string", "description": "name@realm"},
                    "comment": {"type": "string"},
                    "email": {"type": "string"},
                    "firstname": {"type": "string"},
                    "lastname": {"type": "string"},
                    "enabled": {"type": "boolean", "default": true},
                    "expire": {"type": "integer", "minimum": 0},
                    "groups": {"type": "array", "items": {"type": "string"}},
                    "acl": acl,
                    "tokens": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": false,
                            "required": ["id"],
                            "properties": {
                                "id": {"type": "string"},
                                "comment": {"type": "string"},
                                "privsep": {"type": "boolean", "default": true},
                                "expire": {"type": "integer", "minimum": 0},
                                "acl": acl
                            }
                        }
                    }
                }
            },
            "group": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"comment": {"type": "string"}, "acl": acl}
            },
            "role": {
                "type": "object",
                "additionalProperties": false,
                "properties": {"privs": {"type": "array", "items": {"type": "string"}}}
            }
        }
    });
    manifest_schema(
        KIND,
        "PVE access control: a user (with tokens and ACL entries), a group or a role",
        spec,
    )
}
