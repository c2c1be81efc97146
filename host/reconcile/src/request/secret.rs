//! Where a secret reference may stand in a proposed request: as the whole value of a write's
//! parameter that the grant names for that ref, and never in a parameter the host judges the
//! request by (its target, ownership or capabilities), which it would then judge without
//! seeing the value PVE gets.

use std::collections::BTreeMap;

use proxops_core::secret_ref;
use proxops_runtime::kind::{Call, Method};

use super::capability::carries_host_access;
use super::{Refusal, Rule, describe_call, shown};

/// Parameters the host reads to judge a request (its target, the ownership mark, the digest)
/// or that name what a write acts on; never filled from a secret.
const JUDGED: &[&str] = &[
    "vmid",
    "newid",
    "node",
    "target",
    "storage",
    "volume",
    "digest",
    "delete",
    "revert",
    "tags",
    "pool",
    "content",
    "filename",
    "url",
    "format",
    "template",
    "ostemplate",
    "archive",
    "cicustom",
];

/// Why a secret reference may never fill the parameter `name`, if so.
pub fn never_filled(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if JUDGED.contains(&lower.as_str()) {
        Some("the host judges the request by it")
    } else if carries_host_access(&lower)
        || ["rng", "virtiofs"].iter().any(|p| {
            lower
                .strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    {
        Some("PVE reads it as host access (a mount, a device, a disk, a raw key)")
    } else {
        None
    }
}

/// Check the secret references of `call`, and mark each parameter holding one sensitive.
/// `granted` is the grant's `secrets` (ref to parameter names) for a third-party kind, `None`
/// for a bundled kind, which holds values and never sends a reference: one in its call came
/// from elsewhere (a manifest's text passed through) and is refused. Refused too: anything
/// that looks like a reference in the path, in a read, inside a longer value or from another
/// run; a ref in a parameter it may never fill; a ref in a parameter the grant does not name
/// for it.
pub fn check_refs(
    call: &mut Call,
    granted: Option<&BTreeMap<String, Vec<String>>>,
    kind: &str,
) -> Result<(), Refusal> {
    let refuse = |what: String| Refusal::new(Rule::Secret, what);
    if secret_ref::mentions(&call.path) {
        return Err(refuse(format!(
            "a {} puts a secret reference in its path; a reference stands only as a parameter's whole value",
            crate::plan::method_name(call.method)
        )));
    }
    let shown_call = describe_call(call);
    for p in &mut call.params {
        if !secret_ref::mentions(&p.value) {
            continue;
        }
        let name = shown(&p.name);
        let Some(path) = secret_ref::parse(&p.value) else {
            return Err(refuse(format!(
                "{shown_call}: the parameter `{name}` holds something that looks like a secret reference but is not one whole reference minted by `secrets.reference` in this run"
            )));
        };
        if call.method == Method::Get {
            return Err(refuse(format!(
                "{shown_call}: a read carries the secret reference `{path}` in `{name}`; secrets are sent only in the body of a write"
            )));
        }
        if let Some(why) = never_filled(&p.name) {
            return Err(refuse(format!(
                "{shown_call}: the secret reference `{path}` may not fill the parameter `{name}`: {why}"
            )));
        }
        let Some(granted) = granted else {
            return Err(refuse(format!(
                "{shown_call}: the parameter `{name}` holds the secret reference `{path}`, but the {kind} kind holds values and sends no reference: it came from elsewhere (a manifest's text?)"
            )));
        };
        let allowed = granted
            .get(path)
            .is_some_and(|params| params.contains(&p.name.to_ascii_lowercase()));
        if !allowed {
            return Err(refuse(format!(
                "{shown_call}: proxops.yaml does not let the {kind} kind put the secret `{path}` into the parameter `{name}`; grant it under `grant.secrets` (`{path}: [{}]`) only if that parameter is where the secret belongs",
                p.name.to_ascii_lowercase()
            )));
        }
        p.sensitive = true;
    }
    Ok(())
}

/// The grant's `secrets` entries that name a parameter no ref may fill, one line each (empty:
/// none), for the check at load.
pub fn grant_problems(granted: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    for (r, params) in granted {
        for p in params {
            if let Some(why) = never_filled(p) {
                problems.push(format!(
                    "grant.secrets.{r} names the parameter `{p}`, which no secret may fill: {why} (sandbox rule `{}`)",
                    Rule::Secret
                ));
            }
        }
    }
    problems
}
