//! Guest-scoped objects (a VM's firewall): owned through their guest, never by a mark of their own.

use crate::request::{self, Refusal, Rule};

use super::*;

/// The rules of a write by a guest-scoped object (a VM's firewall): it reaches only its own
/// guest, only below that guest's `<sub>/` path, and only while the guest lives with the
/// `proxops` tag and its own mark `proxops-<vmid>`, or does not live yet and a manifest the
/// object depends on creates it in this apply (owned through its guest; the manifest that
/// names the guest is expected, not a conflict).
pub(super) fn check_guest_scoped(
    shown: &str,
    (vmid, rest, kind): (u64, &[String], request::target::GuestType),
    (owner, sub, created_in_run): (u64, &str, bool),
    scope: &Scope<'_>,
) -> Result<(), Refusal> {
    if vmid != owner {
        return Err(Refusal::new(
            Rule::Target,
            format!("{shown} reaches guest {vmid}; this object belongs to guest {owner}"),
        ));
    }
    if rest.first().map(String::as_str) != Some(sub) {
        return Err(Refusal::new(
            Rule::Target,
            format!(
                "{shown} reaches guest {vmid} outside its `{sub}/` path, the only part of the guest this object may write"
            ),
        ));
    }
    let Some(g) = (scope.guests)(vmid) else {
        if created_in_run {
            return Ok(());
        }
        return Err(Refusal::new(
            Rule::Ownership,
            format!(
                "{shown}: guest {vmid} does not exist, so its {sub} cannot be proven proxops's"
            ),
        ));
    };
    let path_kind = match kind {
        request::target::GuestType::Qemu => "qemu",
        request::target::GuestType::Lxc => "lxc",
    };
    if g.kind != path_kind {
        return Err(Refusal::new(
            Rule::Target,
            format!(
                "{shown} names a {path_kind} guest, but {} is not one",
                g.describe()
            ),
        ));
    }
    if !g.tagged() || g.mark() != Mark::Own {
        return Err(Refusal::new(
            Rule::Ownership,
            format!(
                "{shown} writes to the {sub} of {}, which proxops does not own: a guest's {sub} is owned through the guest (the `{OWNERSHIP_TAG}` tag and the mark `{}`)",
                g.describe(),
                mark_for(vmid)
            ),
        ));
    }
    Ok(())
}
