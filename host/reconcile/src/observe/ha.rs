//! PVE's HA manager as a cycle sees it. Which guests HA manages comes from the `hastate` of
//! their `/cluster/resources` entries, which every cycle reads anyway. Their HA resources
//! (requested state, restart and relocate limits, failback, and the ownership mark in
//! `comment`) come from one `GET /cluster/ha/resources`, made only when some guest has a
//! `hastate`: a cluster without HA pays no request. Each HA resource is merged into its
//! guest's entry as `ha`, the form kinds read it in (WIT `observation.live`).

use std::collections::HashMap;

use proxops_pve::Client;

use super::{ObserveError, listing};
use crate::live::Entry;
use crate::request::target::ha_sid_vmid as sid_vmid;

/// Where PVE lists its HA resources.
pub const HA_RESOURCES: &str = "/cluster/ha/resources";

/// The key an HA-managed guest's entry gets its HA resource under.
pub const HA_KEY: &str = "ha";

/// The HA resources of the cluster, by the vmid of their guest.
#[derive(Debug, Default)]
pub(crate) struct HaResources {
    by_vmid: HashMap<u64, Entry>,
}

impl HaResources {
    /// Whether guest `vmid` has an HA resource, and if so whether its `comment` carries the
    /// guest's own ownership mark (`proxops-<vmid>`).
    pub(crate) fn marked(&self, vmid: u64) -> Option<bool> {
        let resource = self.by_vmid.get(&vmid)?;
        let comment = resource.str("comment").unwrap_or("");
        Some(has_mark(comment, vmid))
    }
}

/// Whether `comment` names `proxops-<vmid>` as a word of its own (not `proxops-1000` for 100).
pub fn has_mark(comment: &str, vmid: u64) -> bool {
    let mark = format!("proxops-{vmid}");
    comment
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .any(|word| word.eq_ignore_ascii_case(&mark))
}

/// Read the HA resources when some guest of `entries` (the `/cluster/resources` listing) is
/// HA-managed, and merge each into its guest's entry as [`HA_KEY`]. A failed read fails the
/// cluster: without it, proxops cannot tell whose HA resource it would write.
pub(crate) async fn merge(
    client: &Client,
    entries: &mut [Entry],
) -> Result<HaResources, ObserveError> {
    if !entries.iter().any(is_ha_guest) {
        return Ok(HaResources::default());
    }
    let resources = listing(client, HA_RESOURCES).await.map_err(|e| {
        ObserveError::Listing(format!(
            "some guests are managed by PVE's HA manager, but {HA_RESOURCES} could not be read ({e}); proxops needs it (Sys.Audit on /) to know whose HA resources it may change"
        ))
    })?;
    let by_vmid: HashMap<u64, Entry> = resources
        .into_iter()
        .filter_map(|r| Some((sid_vmid(r.str("sid")?)?, r)))
        .collect();
    for entry in entries.iter_mut().filter(|e| is_ha_guest(e)) {
        let Some(vmid) = entry.get("vmid").and_then(crate::live::Field::as_u64) else {
            continue;
        };
        if let Some(merged) = by_vmid
            .get(&vmid)
            .and_then(|resource| entry.with_nested(HA_KEY, resource.text()))
        {
            *entry = merged;
        }
    }
    Ok(HaResources { by_vmid })
}

/// `merge` for callers outside the cycle (`adopt`): the HA-managed guests of `entries` get
/// their HA resource as [`HA_KEY`], as a plan's kinds see them.
pub async fn merge_into(client: &Client, entries: &mut [Entry]) -> Result<(), ObserveError> {
    merge(client, entries).await.map(drop)
}

/// A guest entry PVE marks as HA-managed.
fn is_ha_guest(entry: &Entry) -> bool {
    matches!(entry.str("type"), Some("qemu" | "lxc"))
        && entry.str("hastate").is_some_and(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_merged_into_its_guests_entry() {
        let guest = Entry::parse(r#"{"id":"qemu/100","vmid":100,"hastate":"started"}"#).unwrap();
        let merged = guest
            .with_nested(HA_KEY, r#"{"sid":"vm:100","comment":"x"}"#)
            .unwrap();
        let value: serde_json::Value = serde_json::from_str(merged.text()).unwrap();
        assert_eq!(value["ha"]["comment"], "x");
        assert_eq!(value["vmid"], 100);
        assert_eq!(merged.str("hastate"), Some("started"));
        assert!(merged.with_nested(HA_KEY, "{}").is_none(), "once only");
        let empty = Entry::parse("{ }").unwrap().with_nested("ha", "1").unwrap();
        assert_eq!(empty.text(), r#"{"ha":1}"#);
    }

    #[test]
    fn marks_and_sids() {
        for (comment, vmid, marked) in [
            ("managed by proxops (proxops-100)", 100, true),
            ("proxops-100", 100, true),
            ("PROXOPS-100 db", 100, true),
            ("proxops-1000", 100, false),
            ("proxops-10", 100, false),
            ("", 100, false),
        ] {
            assert_eq!(has_mark(comment, vmid), marked, "{comment:?} for {vmid}");
        }
        for (sid, vmid) in [
            ("vm:100", Some(100)),
            ("ct:7", Some(7)),
            ("100", Some(100)),
            ("vm:0100", None),
            ("xx:100", None),
            ("vm:", None),
        ] {
            assert_eq!(sid_vmid(sid), vmid, "{sid}");
        }
    }
}
