//! The WIT boundary: every `reconciler` function in WIT types, delegating to the plain functions
//! of this crate. The `vm` and `templatevm` crates call these with their [`Flavour`].

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{self, Observation, diags_into_wit};
use proxops_kind_sdk::types::{Call, Diagnostic};
use proxops_kind_sdk::wit;

use crate::desired::{Desired, Flavour};
use crate::secrets::HostSecrets;

fn resolved_pairs(resolved: Vec<wit::Resolved>) -> Vec<(crate::Reference, String)> {
    resolved
        .into_iter()
        .map(|r| {
            let reference = crate::Reference {
                kind: r.reference.kind,
                name: r.reference.name,
                path: r.reference.path,
            };
            (reference, r.desired)
        })
        .collect()
}

fn parse_desired(desired: &str) -> Result<Desired, Vec<Diag>> {
    serde_json::from_str(desired).map_err(|e| {
        vec![Diag::error(
            "",
            format!(
                "desired state is not a {} desired state: {e}",
                "VM/TemplateVM"
            ),
        )]
    })
}

/// `describe`.
pub fn describe(flavour: Flavour) -> wit::KindInfo {
    let k = crate::describe(flavour);
    wit::KindInfo {
        kind: k.kind,
        api_version: k.api_version,
        folder: k.folder,
        schema: k.schema.to_string(),
        api_paths: k.api_paths,
        references_kinds: k.references_kinds,
    }
}

/// `validate`.
pub fn validate(flavour: Flavour, manifest: String) -> Result<wit::Validated, Vec<Diagnostic>> {
    match crate::validate_json(flavour, &manifest, &HostSecrets) {
        Ok(v) => match serde_json::to_string(&v.desired) {
            Ok(desired) => Ok(wit::Validated {
                desired,
                warnings: diags_into_wit(v.warnings),
            }),
            Err(e) => Err(diags_into_wit(vec![Diag::error(
                "",
                format!("internal: desired state not serialisable: {e}"),
            )])),
        },
        Err(d) => Err(diags_into_wit(d)),
    }
}

/// `references`.
pub fn references(desired: String) -> Vec<wit::Reference> {
    let Ok(d) = parse_desired(&desired) else {
        return Vec::new();
    };
    crate::references(&d)
        .into_iter()
        .map(|r| wit::Reference {
            kind: r.kind,
            name: r.name,
            path: r.path,
        })
        .collect()
}

/// `check-references`.
pub fn check_references(desired: String, resolved: Vec<wit::Resolved>) -> Vec<Diagnostic> {
    let d = match parse_desired(&desired) {
        Ok(d) => d,
        Err(e) => return diags_into_wit(e),
    };
    diags_into_wit(crate::check_references(&d, &resolved_pairs(resolved)))
}

/// `identity`. A desired state that cannot be read gets an identity in the space `invalid`, which
/// collides with nothing and names the problem.
pub fn identity(desired: String) -> wit::ObjectKey {
    match parse_desired(&desired) {
        Ok(d) => {
            let k = crate::identity(&d);
            wit::ObjectKey {
                node: k.node,
                space: k.space,
                key: k.key,
                resource_id: k.resource_id,
            }
        }
        Err(e) => wit::ObjectKey {
            node: None,
            space: "invalid".into(),
            key: e.first().map(|d| d.message.clone()).unwrap_or_default(),
            resource_id: None,
        },
    }
}

/// `observe`.
pub fn observe(desired: Option<String>, live: Option<String>) -> Vec<Call> {
    let desired = desired.and_then(|d| parse_desired(&d).ok());
    crate::observe(desired.as_ref(), live.as_deref())
        .into_iter()
        .map(model::Call::into_wit)
        .collect()
}

/// `plan`.
pub fn plan(
    flavour: Flavour,
    desired: Option<String>,
    resolved: Vec<wit::Resolved>,
    observed: wit::Observation,
) -> Result<wit::Proposal, Vec<Diagnostic>> {
    let desired = match desired {
        Some(d) => Some(parse_desired(&d).map_err(diags_into_wit)?),
        None => None,
    };
    crate::plan(
        flavour,
        desired.as_ref(),
        &resolved_pairs(resolved),
        &HostSecrets,
        &Observation::from_wit(observed),
    )
    .map(model::Proposal::into_wit)
    .map_err(diags_into_wit)
}

/// `claims`.
pub fn claims(flavour: Flavour, live: String) -> bool {
    crate::claims(flavour, &live)
}

/// `adopt`: not implemented yet; the error is the kind's answer to the host.
pub fn adopt(flavour: Flavour, _observed: wit::Observation) -> Result<String, String> {
    Err(format!(
        "adopting a {} is not implemented yet",
        flavour.kind()
    ))
}

/// Defines `Kind`, the exported component type of a VM-like kind of the given [`Flavour`],
/// delegating every export to this module, and exports it in the component build (the
/// export names contain `:`, which a native cdylib's linker rejects; native builds exist for
/// unit tests only). The calling crate depends on `proxops-kind-sdk`.
#[macro_export]
macro_rules! kind_component {
    ($flavour:expr) => {
        /// The exported component type.
        pub struct Kind;

        impl proxops_kind_sdk::wit::Guest for Kind {
            fn describe() -> proxops_kind_sdk::wit::KindInfo {
                $crate::glue::describe($flavour)
            }

            fn validate(
                manifest: String,
            ) -> Result<proxops_kind_sdk::wit::Validated, Vec<proxops_kind_sdk::types::Diagnostic>>
            {
                $crate::glue::validate($flavour, manifest)
            }

            fn references(desired: String) -> Vec<proxops_kind_sdk::wit::Reference> {
                $crate::glue::references(desired)
            }

            fn check_references(
                desired: String,
                resolved: Vec<proxops_kind_sdk::wit::Resolved>,
            ) -> Vec<proxops_kind_sdk::types::Diagnostic> {
                $crate::glue::check_references(desired, resolved)
            }

            fn identity(desired: String) -> proxops_kind_sdk::wit::ObjectKey {
                $crate::glue::identity(desired)
            }

            fn observe(
                desired: Option<String>,
                live: Option<String>,
                _referrers: Vec<proxops_kind_sdk::wit::Resolved>,
            ) -> Vec<proxops_kind_sdk::types::Call> {
                $crate::glue::observe(desired, live)
            }

            fn plan(
                desired: Option<String>,
                resolved: Vec<proxops_kind_sdk::wit::Resolved>,
                _referrers: Vec<proxops_kind_sdk::wit::Resolved>,
                observed: proxops_kind_sdk::wit::Observation,
            ) -> Result<proxops_kind_sdk::wit::Proposal, Vec<proxops_kind_sdk::types::Diagnostic>>
            {
                $crate::glue::plan($flavour, desired, resolved, observed)
            }

            fn claims(live: String) -> bool {
                $crate::glue::claims($flavour, live)
            }

            fn adopt(observed: proxops_kind_sdk::wit::Observation) -> Result<String, String> {
                $crate::glue::adopt($flavour, observed)
            }
        }

        #[cfg(target_arch = "wasm32")]
        proxops_kind_sdk::export_kind!(Kind);
    };
}
