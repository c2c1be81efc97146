//! The diff pass over PCI passthrough (`hostpciN`): mapped devices only; raw host devices are anomalies.

use std::collections::{BTreeMap, BTreeSet};

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{Anomaly, Drift, Observation};
use proxops_kind_sdk::propstring::{PropString, parse_bool};

use super::{Ctx, Diff, Outcome, read_json};
use crate::desired::*;
use crate::wire;

/// Where PVE lists the PCI resource mappings (`GET`, every mapping the token may see).
pub const PCI_MAPPINGS: &str = "/cluster/mapping/pci";

/// The cluster's PCI resource mappings: each id with the nodes its `map` entries name.
#[derive(Debug, Clone, Default)]
pub struct Mappings(BTreeMap<String, BTreeSet<String>>);

/// One entry of the mapping listing, as far as the check needs it.
#[derive(serde::Deserialize)]
struct MappingEntry {
    id: String,
    #[serde(default)]
    map: Vec<String>,
}

/// The mappings read for this VM (`None` when they were not read: no mapping is named).
pub(super) fn mappings(obs: &Observation) -> Result<Option<Mappings>, Vec<Diag>> {
    let Some(entries) = read_json::<Vec<MappingEntry>>(obs, PCI_MAPPINGS)? else {
        return Ok(None);
    };
    let mut out = BTreeMap::new();
    for e in entries {
        let nodes = e
            .map
            .iter()
            .filter_map(|m| PropString::parse(m).ok()?.get("node").map(str::to_string))
            .collect();
        out.insert(e.id, nodes);
    }
    Ok(Some(Mappings(out)))
}

/// Why `mapping` cannot be attached on `node` (it does not exist, or has no device there):
/// writing it would succeed and the next start fail, so nothing is written or stopped for it.
pub(super) fn missing_mapping(
    mappings: Option<&Mappings>,
    path: &str,
    mapping: &str,
    node: &str,
) -> Option<Anomaly> {
    missing_mapping_as(
        mappings,
        path,
        mapping,
        node,
        "PVE would accept the write and then refuse to start the guest (\"PCI device mapping not found\"), so proxops neither writes it nor stops the guest for it",
    )
}

/// [`missing_mapping`] saying `consequence` (what proxops does not do, and why).
fn missing_mapping_as(
    mappings: Option<&Mappings>,
    path: &str,
    mapping: &str,
    node: &str,
    consequence: &str,
) -> Option<Anomaly> {
    let nodes = match mappings?.0.get(mapping) {
        None => format!(
            "PCI resource mapping `{mapping}` does not exist (or the API token may not see it: it needs Mapping.Use on /mapping/pci/{mapping})"
        ),
        Some(nodes) if !nodes.contains(node) => format!(
            "PCI resource mapping `{mapping}` has no device on node {node} (it maps {})",
            if nodes.is_empty() {
                "none".to_string()
            } else {
                nodes.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        ),
        Some(_) => return None,
    };
    Some(Anomaly::new(
        path,
        format!(
            "{nodes}; {consequence}. Create the mapping in Datacenter -> Resource Mappings with a device on {node}, or fix the name"
        ),
    ))
}

/// How a live `hostpciN` compares with a declared device: the value to write, and why.
fn pci_outcome(pci: &PciDevice, path: &str, live: Option<&str>) -> Outcome {
    let Some(l) = live else {
        let v = wire::new_pci(pci);
        return Outcome::Write(v.clone(), vec![Drift::new(path, None, Some(v))]);
    };
    let mut p =
        PropString::parse_with_default(l, "host").unwrap_or_else(|_| PropString::with_bare(l));
    let mut drift = Vec::new();
    match (&pci.device, &pci.mapping) {
        (Some(device), _) => {
            if p.get("mapping").is_some()
                || !p.bare.as_deref().is_some_and(|h| wire::pci_eq(h, device))
            {
                drift.push(Drift::new(
                    format!("{path}.device"),
                    p.bare
                        .clone()
                        .or_else(|| p.get("mapping").map(|m| format!("mapping={m}"))),
                    Some(device.clone()),
                ));
                p.remove("mapping");
                p.bare = Some(device.clone());
            }
        }
        (None, Some(mapping)) => {
            if p.bare.is_some() || p.get("mapping") != Some(mapping.as_str()) {
                drift.push(Drift::new(
                    format!("{path}.mapping"),
                    p.get("mapping")
                        .map(str::to_string)
                        .or_else(|| p.bare.clone()),
                    Some(mapping.clone()),
                ));
                p.bare = None;
                p.set("mapping", mapping.clone());
            }
        }
        (None, None) => {}
    }
    if let Some(e) = pci.pcie
        && p.get("pcie").and_then(parse_bool).unwrap_or(false) != e
    {
        drift.push(Drift::new(
            format!("{path}.pcie"),
            p.get("pcie").map(str::to_string),
            Some(wire::b(e)),
        ));
        p.set("pcie", wire::b(e));
    }
    if drift.is_empty() {
        Outcome::Same
    } else {
        Outcome::Write(p.canonical(), drift)
    }
}

/// The anomaly for a raw PCI device proxops would have to write: PVE lets only `root@pam`
/// set a non-mapped `hostpciN`, and proxops always authenticates with an API token, so the
/// write is known to fail; nothing is stopped for it.
pub(super) fn raw_pci_anomaly(path: &str, key: &str) -> Anomaly {
    Anomaly::new(
        path,
        format!(
            "{key} names a raw host PCI device, which PVE lets only root@pam write (\"only root can set '{key}' config for non-mapped devices\"); proxops uses an API token, so it does not stop the guest for a write known to fail. Create a PCI resource mapping (Datacenter -> Resource Mappings), grant the token Mapping.Use on it, and write `mapping: <name>` instead of `device`"
        ),
    )
}

pub(super) fn diff_pci(ctx: &Ctx<'_>, x: &mut Diff<'_>) {
    let d = ctx.d;
    for (i, pci) in d.hardware.pci_devices.iter().enumerate() {
        let path = format!("spec.hardware.pci-devices[{i}]");
        let key = format!("hostpci{}", pci.slot);
        let refused = match (&pci.device, &pci.mapping) {
            (Some(_), _) => Some(raw_pci_anomaly(&path, &key)),
            (None, Some(m)) => missing_mapping(ctx.mappings.as_ref(), &path, m, &ctx.node),
            (None, None) => None,
        };
        if let Some(anomaly) = refused {
            match pci_outcome(pci, &path, x.cfg.get(&key)) {
                // Reported, never written.
                Outcome::Write(_, drift) => {
                    x.out.drift.extend(drift);
                    x.out.anomalies.push(anomaly);
                }
                // Already written, and the mapping is missing: the guest cannot start.
                Outcome::Same => {
                    if let Some(m) = &pci.mapping
                        && let Some(anomaly) = missing_mapping_as(
                            ctx.mappings.as_ref(),
                            &path,
                            m,
                            &ctx.node,
                            "PVE refuses to start a guest with it (\"PCI device mapping not found\"), so proxops neither starts nor restarts this guest",
                        )
                    {
                        x.start_refused = true;
                        x.out.anomalies.push(anomaly);
                    }
                }
            }
            continue;
        }
        let pci = pci.clone();
        x.key(&key, true, move |live| pci_outcome(&pci, &path, live));
    }
    let owned: BTreeSet<String> = d
        .hardware
        .pci_devices
        .iter()
        .map(|p| format!("hostpci{}", p.slot))
        .collect();
    for (k, v) in &x.cfg.keys {
        if matches!(crate::syntax::split_slot(k), Some(("hostpci", _))) && !owned.contains(k) {
            x.out.anomalies.push(Anomaly::new(
                "spec.hardware.pci-devices",
                format!("live {k} (`{v}`) is not declared in the manifest; proxops does not remove PCI passthrough it was not asked to"),
            ));
        }
    }
}
