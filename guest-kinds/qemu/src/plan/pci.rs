//! The diff pass over PCI passthrough (`hostpciN`): mapped devices only; raw host devices are anomalies.

use std::collections::BTreeSet;

use proxops_kind_sdk::model::{Anomaly, Drift};
use proxops_kind_sdk::propstring::{PropString, parse_bool};

use super::{Diff, Outcome};
use crate::desired::*;
use crate::wire;

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

pub(super) fn diff_pci(d: &Desired, x: &mut Diff<'_>) {
    for (i, pci) in d.hardware.pci_devices.iter().enumerate() {
        let path = format!("spec.hardware.pci-devices[{i}]");
        let key = format!("hostpci{}", pci.slot);
        if pci.device.is_some() {
            // Reported, never written.
            if let Outcome::Write(_, drift) = pci_outcome(pci, &path, x.cfg.get(&key)) {
                x.out.drift.extend(drift);
                x.out.anomalies.push(raw_pci_anomaly(&path, &key));
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
