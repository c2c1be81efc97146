//! The two download kinds as [`ResourceKind`]s: one implementation over the
//! [`DownloadKind`] that tells them apart.

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{KindInfo, ObjectKey, Resolved, ResourceKind, Validated};
use proxops_kind_sdk::model::{Call, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

use super::{CALLS, DISK_IMAGE, DownloadDesired, DownloadKind, ISO, Referrer};

/// A download kind: `Download<false>` is DiskImage, `Download<true>` is ISO.
#[derive(Debug, Clone, Copy, Default)]
pub struct Download<const ISO_CONTENT: bool>;

/// The DiskImage kind (`content=import`).
pub type DiskImage = Download<false>;
/// The ISO kind (`content=iso`).
pub type Iso = Download<true>;

impl<const ISO_CONTENT: bool> Download<ISO_CONTENT> {
    /// Its static description.
    pub const fn spec() -> &'static DownloadKind {
        if ISO_CONTENT { &ISO } else { &DISK_IMAGE }
    }
}

fn referrers(rs: &[Resolved]) -> Vec<Referrer> {
    rs.iter().map(Referrer::from).collect()
}

impl<const ISO_CONTENT: bool> ResourceKind for Download<ISO_CONTENT> {
    type Desired = DownloadDesired;

    /// No listing: volumes are not in `/cluster/resources`, and the objects are found
    /// through the storage content reads of `observe`. No secrets, no capabilities.
    fn describe() -> KindInfo {
        let k = Self::spec();
        KindInfo {
            calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
            ..KindInfo::new(k.kind, k.folder, super::schema(k))
        }
    }

    fn validate(
        manifest: &Value,
        _secrets: &dyn Secrets,
    ) -> Result<Validated<DownloadDesired>, Vec<Diag>> {
        let (desired, warnings) = super::validate(Self::spec(), manifest)?;
        Ok(Validated { desired, warnings })
    }

    /// No node (one object may cover several nodes) and no listing id.
    fn identity(d: &DownloadDesired) -> ObjectKey {
        let (space, key) = super::identity_key(d);
        ObjectKey {
            node: None,
            space,
            key,
            resource_id: None,
        }
    }

    /// Nothing for an absent desired state.
    fn observe(
        desired: Option<&DownloadDesired>,
        _live: Option<&Value>,
        _resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Vec<Call> {
        desired.map_or_else(Vec::new, |d| super::observe(d, &self::referrers(referrers)))
    }

    /// No manifest means nothing to do: the kind claims no live object.
    fn plan(
        desired: Option<&DownloadDesired>,
        _resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
        _secrets: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        match desired {
            Some(d) => super::plan(d, &self::referrers(referrers), observed),
            None => Ok(Proposal::default()),
        }
    }

    // `claims` keeps the default (false): nothing proves proxops created a file.

    /// Impossible: PVE records neither the URL nor the checksum of a file.
    fn adopt(
        _observed: &Observation,
        _secrets: &dyn Secrets,
    ) -> Result<proxops_kind_sdk::kind::Adopted, String> {
        Err(format!(
            "{} objects cannot be adopted: PVE records no source URL or checksum for a file, so no manifest can be written from live state",
            Self::spec().kind
        ))
    }
}
