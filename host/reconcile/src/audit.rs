//! `proxops audit`, the engine side: the site policies asked about what runs, not about what
//! is in git. Each live guest is read as `adopt` reads it (the kinds' own `adopt()`, GETs
//! only), turned into a manifest in memory, and given to the policies' `check-manifest`.
//! Nothing is written anywhere: not to PVE, not to the repository, not to the SOPS file.

use std::collections::BTreeSet;
use std::sync::Arc;

use proxops_pve::Client;
use proxops_runtime::SecretSource;
use serde::Serialize;

use crate::adopt::{Adoption, adopt_entries, finish_manifest};
use crate::live::{Entry, Field};
use crate::observe::ObserveError;
use crate::policy::{Finding, PolicyReport};
use crate::policy::{ManifestInput, PolicySet};
use crate::registry::KindRegistry;

/// The live guest a finding is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveGuest {
    /// Its id in `/cluster/resources` (`qemu/100`).
    pub resource: String,
    pub vmid: Option<u64>,
    pub node: Option<String>,
    /// Its name in PVE.
    pub name: Option<String>,
    /// The kind that read it, and the manifest name it was given.
    pub kind: String,
    pub manifest: String,
}

/// One policy finding about one live guest.
#[derive(Debug, Clone, Serialize)]
pub struct Violation {
    pub guest: LiveGuest,
    #[serde(flatten)]
    pub finding: Finding,
}

/// A guest no kind could read into a manifest, so no policy saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Unread {
    pub resource: String,
    pub reasons: Vec<String>,
}

/// What the policies say about the live guests of one cluster.
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    pub cluster: String,
    /// Guests the policies were asked about.
    pub audited: usize,
    pub violations: Vec<Violation>,
    /// Findings about no guest: a policy that failed (counted as a deny, fail closed).
    pub failures: Vec<Finding>,
    pub unread: Vec<Unread>,
}

impl Audit {
    /// Some violation would stop an apply if it were in git: a deny in enforce mode.
    pub fn denies(&self) -> bool {
        self.violations.iter().any(|v| v.finding.blocks())
    }

    /// A policy did not answer: what it would have said is unknown.
    pub fn failed(&self) -> bool {
        !self.failures.is_empty() || self.violations.iter().any(|v| v.finding.failed)
    }

    /// Shown violations (monitor mode only records), blocking ones first, then by guest.
    pub fn shown(&self) -> Vec<&Violation> {
        let mut shown: Vec<&Violation> = self
            .violations
            .iter()
            .filter(|v| v.finding.mode != proxops_core::settings::Mode::Monitor)
            .collect();
        shown.sort_by(|a, b| {
            (!a.finding.blocks(), a.finding.severity, a.guest.vmid).cmp(&(
                !b.finding.blocks(),
                b.finding.severity,
                b.guest.vmid,
            ))
        });
        shown
    }
}

/// Audit the live guests of `cluster` against `policies`: one `GET /cluster/resources` (and
/// `/cluster/ha/resources` when some guest is HA-managed), then per guest the reads its kind
/// asks for to adopt it. `secrets` is what kinds granted secrets may match live values against
/// (as for `adopt`); nothing is imported.
pub async fn audit_cluster(
    registry: &KindRegistry,
    client: &Client,
    policies: &PolicySet,
    cluster: &str,
    secrets: Option<Arc<dyn SecretSource>>,
) -> Result<Audit, ObserveError> {
    let listing = crate::observe::CLUSTER_RESOURCES;
    let mut live = crate::observe::listing(client, listing).await?;
    crate::observe::ha::merge_into(client, &mut live).await?;
    let guests: Vec<Entry> = live
        .into_iter()
        .filter(|e| matches!(e.str("type"), Some("qemu" | "lxc")))
        .collect();
    let adopted = adopt_entries(registry, client, listing, &guests, secrets).await;
    let mut taken = BTreeSet::new();
    let mut inputs = Vec::new();
    let mut read = Vec::new();
    let mut unread = Vec::new();
    for (entry, adoption) in guests.iter().zip(adopted) {
        match adoption {
            Adoption::Adopted {
                kind, mut manifest, ..
            } => {
                let kind = registry.get(kind).info().kind.clone();
                let name = finish_manifest(&mut manifest, entry, &kind, &mut taken);
                let guest = LiveGuest {
                    resource: entry.str("id").unwrap_or_default().to_string(),
                    vmid: entry.get("vmid").and_then(Field::as_u64),
                    node: entry.str("node").map(str::to_string),
                    name: entry.str("name").map(str::to_string),
                    kind: kind.clone(),
                    manifest: name.clone(),
                };
                inputs.push(ManifestInput {
                    cluster: cluster.to_string(),
                    kind,
                    name,
                    file: guest.resource.clone(),
                    document: manifest.to_string(),
                });
                read.push(guest);
            }
            Adoption::NotAdopted { resource, reasons } => unread.push(Unread { resource, reasons }),
        }
    }
    let report = policies.check_manifest_inputs(&inputs);
    Ok(located(cluster, read, report, unread))
}

/// The findings of `report` given back to the guests they are about (matched by kind and
/// manifest name, which are unique in a cluster's audit).
fn located(
    cluster: &str,
    guests: Vec<LiveGuest>,
    report: PolicyReport,
    unread: Vec<Unread>,
) -> Audit {
    let mut violations = Vec::new();
    let mut failures = Vec::new();
    for mut finding in report.findings {
        let guest = finding.object.as_ref().and_then(|o| {
            guests
                .iter()
                .find(|g| g.kind == o.kind && g.manifest == o.name)
        });
        match guest {
            Some(g) => {
                // The "file" was the guest's resource id: the guest says it now.
                if let Some(o) = finding.object.as_mut() {
                    o.file = None;
                }
                violations.push(Violation {
                    guest: g.clone(),
                    finding,
                });
            }
            None => failures.push(finding),
        }
    }
    Audit {
        cluster: cluster.to_string(),
        audited: guests.len(),
        violations,
        failures,
        unread,
    }
}
