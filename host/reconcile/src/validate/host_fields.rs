//! The host's own fields of a manifest, which its kind never sees: `metadata.adopt` (a guest's
//! `{vmid, name}` or a named object's `{id, comment}`) and `metadata.budget`.

use proxops_core::Manifest;

use crate::ownership::AdoptClaim;

/// Split the host's fields off a manifest: `metadata.adopt: {vmid, name}` (the claim) and
/// `metadata.budget: NAME`, and the manifest's JSON without them (`None` when there was
/// nothing to remove). A malformed field is `(its path, why)`.
pub(super) type HostFields = (Option<HostClaim>, Option<String>, Option<String>);

/// `metadata.adopt`, in the form of a guest (`{vmid, name}`) or of a named object
/// (`{id, comment}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostClaim {
    Guest(AdoptClaim),
    Named(crate::ownership::NamedClaim),
}
pub(super) fn take_host_fields(m: &Manifest) -> Result<HostFields, (String, String)> {
    // The JSON text holds the key only when some mapping has it: most manifests are not
    // parsed again.
    let has_budget = m.json().contains("\"budget\"");
    if m.adopt().is_none() && !has_budget {
        return Ok((None, None, None));
    }
    let adopt = match m.adopt() {
        Some(adopt) => Some(adopt_claim(adopt).map_err(|e| ("metadata.adopt".to_string(), e))?),
        None => None,
    };
    let mut stripped = m.document();
    let Some(meta) = stripped
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return Ok((adopt, None, None));
    };
    meta.remove("adopt");
    let budget = match meta.remove("budget") {
        None => None,
        Some(serde_json::Value::String(name)) if !name.trim().is_empty() => Some(name),
        Some(_) => {
            return Err((
                "metadata.budget".to_string(),
                "expected the name of a budget of proxops.yaml's `budgets:`".to_string(),
            ));
        }
    };
    if adopt.is_none() && budget.is_none() {
        return Ok((None, None, None));
    }
    Ok((adopt, budget, Some(stripped.to_string())))
}

/// `metadata.adopt` read: `{vmid, name}` (a guest) or `{id, comment}` (a named object, whose
/// `comment` is the live comment adopt saw, `null` when it had none); or why it cannot be.
fn adopt_claim(adopt: &serde_json::Value) -> Result<HostClaim, String> {
    let shape = "write it as `adopt: {vmid: <the live vmid>, name: <the live PVE name>}` for a guest, or `adopt: {id: <the object's id>, comment: <its live comment, or null>}` for a named object";
    let fields = adopt
        .as_object()
        .ok_or_else(|| format!("metadata.adopt is not a mapping; {shape}"))?;
    let named = fields.contains_key("id") || fields.contains_key("comment");
    let allowed: &[&str] = if named {
        &["id", "comment"]
    } else {
        &["vmid", "name"]
    };
    if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "unknown field `{unknown}` in metadata.adopt; {shape}"
        ));
    }
    if named {
        let id = fields
            .get("id")
            .and_then(serde_json::Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("metadata.adopt.id is missing or empty; {shape}"))?;
        let comment = match fields.get("comment") {
            Some(serde_json::Value::String(c)) => Some(c.clone()),
            Some(serde_json::Value::Null) => None,
            _ => {
                return Err(format!(
                    "metadata.adopt.comment is missing or not a string (write `null` when the object had no comment); {shape}"
                ));
            }
        };
        return Ok(HostClaim::Named(crate::ownership::NamedClaim {
            id: id.to_string(),
            comment,
        }));
    }
    let vmid = fields
        .get("vmid")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("metadata.adopt.vmid is missing or not a number; {shape}"))?;
    let name = fields
        .get("name")
        .and_then(serde_json::Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("metadata.adopt.name is missing or empty; {shape}"))?;
    Ok(HostClaim::Guest(AdoptClaim {
        vmid,
        name: name.to_string(),
    }))
}
