//! The component functions of a download kind in WIT types, and the macro that exports them.

use super::*;
use crate::model::diags_into_wit;
use crate::types::Diagnostic;
use crate::wit;

/// `describe`.
pub fn describe(k: &DownloadKind) -> wit::KindInfo {
    wit::KindInfo {
        kind: k.kind.into(),
        api_version: manifest::API_VERSION.into(),
        folder: k.folder.into(),
        schema: schema(k).to_string(),
        api_paths: API_PATHS.iter().map(|s| s.to_string()).collect(),
        references_kinds: Vec::new(),
    }
}

/// `validate`.
pub fn validate(k: &DownloadKind, manifest: &str) -> Result<wit::Validated, Vec<Diagnostic>> {
    let doc: Value = serde_json::from_str(manifest).map_err(|e| {
        diags_into_wit(vec![Diag::error(
            "",
            format!("manifest is not valid JSON: {e}"),
        )])
    })?;
    let (d, warnings) = super::validate(k, &doc).map_err(diags_into_wit)?;
    Ok(wit::Validated {
        desired: serde_json::to_string(&d).unwrap_or_default(),
        warnings: diags_into_wit(warnings),
    })
}

/// `identity`.
pub fn identity(desired: &str) -> wit::ObjectKey {
    match serde_json::from_str::<DownloadDesired>(desired) {
        Ok(d) => {
            let (space, key) = identity_key(&d);
            wit::ObjectKey {
                node: None,
                space,
                key,
                resource_id: None,
            }
        }
        Err(e) => wit::ObjectKey {
            node: None,
            space: "invalid".into(),
            key: e.to_string(),
            resource_id: None,
        },
    }
}

/// The plain form of the WIT referrers.
pub fn referrers(rs: Vec<wit::Resolved>) -> Vec<Referrer> {
    rs.into_iter()
        .map(|r| Referrer {
            kind: r.reference.kind,
            name: r.reference.name,
            path: r.reference.path,
            desired: r.desired,
        })
        .collect()
}

/// `observe`: nothing for an unreadable or absent desired state.
pub fn observe(desired: Option<String>, referrers: Vec<wit::Resolved>) -> Vec<crate::types::Call> {
    let Some(d) = desired.and_then(|s| serde_json::from_str::<DownloadDesired>(&s).ok()) else {
        return Vec::new();
    };
    super::observe(&d, &self::referrers(referrers))
        .into_iter()
        .map(Call::into_wit)
        .collect()
}

/// `plan`: no manifest means nothing to do (the kind claims no live object).
pub fn plan(
    desired: Option<String>,
    referrers: Vec<wit::Resolved>,
    observed: wit::Observation,
) -> Result<wit::Proposal, Vec<Diagnostic>> {
    let Some(desired) = desired else {
        return Ok(Proposal::default().into_wit());
    };
    let d: DownloadDesired = serde_json::from_str(&desired).map_err(|e| {
        diags_into_wit(vec![Diag::error(
            "",
            format!("desired state could not be read: {e}"),
        )])
    })?;
    super::plan(
        &d,
        &self::referrers(referrers),
        &Observation::from_wit(observed),
    )
    .map(Proposal::into_wit)
    .map_err(diags_into_wit)
}

/// `adopt`: impossible, since PVE records neither the URL nor the checksum of a file.
pub fn adopt(k: &DownloadKind) -> Result<String, String> {
    Err(format!(
        "{} objects cannot be adopted: PVE records no source URL or checksum for a file, so no manifest can be written from live state",
        k.kind
    ))
}

/// Defines `Kind`, the exported component type of a download kind (`&DISK_IMAGE` or `&ISO`),
/// delegating to [`glue`], and exports it in the component build (export names contain `:`,
/// which a native cdylib's linker rejects; native builds exist for unit tests only).
#[macro_export]
macro_rules! download_component {
    ($spec:expr) => {
        /// The exported component type.
        pub struct Kind;

        impl $crate::wit::Guest for Kind {
            fn describe() -> $crate::wit::KindInfo {
                $crate::download::glue::describe($spec)
            }

            fn validate(
                manifest: String,
            ) -> Result<$crate::wit::Validated, Vec<$crate::types::Diagnostic>> {
                $crate::download::glue::validate($spec, &manifest)
            }

            fn references(_desired: String) -> Vec<$crate::wit::Reference> {
                Vec::new()
            }

            fn check_references(
                _desired: String,
                _resolved: Vec<$crate::wit::Resolved>,
            ) -> Vec<$crate::types::Diagnostic> {
                Vec::new()
            }

            fn identity(desired: String) -> $crate::wit::ObjectKey {
                $crate::download::glue::identity(&desired)
            }

            fn observe(
                desired: Option<String>,
                _live: Option<String>,
                referrers: Vec<$crate::wit::Resolved>,
            ) -> Vec<$crate::types::Call> {
                $crate::download::glue::observe(desired, referrers)
            }

            fn plan(
                desired: Option<String>,
                _resolved: Vec<$crate::wit::Resolved>,
                referrers: Vec<$crate::wit::Resolved>,
                observed: $crate::wit::Observation,
            ) -> Result<$crate::wit::Proposal, Vec<$crate::types::Diagnostic>> {
                $crate::download::glue::plan(desired, referrers, observed)
            }

            /// Volumes never appear in `/cluster/resources`, and nothing proves proxops
            /// created a file, so no live entry is ever claimed for pruning.
            fn claims(_live: String) -> bool {
                false
            }

            fn adopt(_observed: $crate::wit::Observation) -> Result<String, String> {
                $crate::download::glue::adopt($spec)
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::export_kind!(Kind);
    };
}
