//! A kind's call as it goes on the wire: PVE's method, the call's parameters, and, for a
//! write, the values of its secret references (the one place a third-party kind's secret has
//! a value).

use proxops_core::secret_ref;
use proxops_pve::Param;
use proxops_runtime::kind::{Call, Method};
use proxops_runtime::{SecretError, SecretSource};

use crate::error::CallError;
use crate::plan::method_name;

/// PVE's form of a kind's method.
pub(crate) fn to_pve_method(m: Method) -> proxops_pve::Method {
    match m {
        Method::Get => proxops_pve::Method::Get,
        Method::Post => proxops_pve::Method::Post,
        Method::Put => proxops_pve::Method::Put,
        Method::Delete => proxops_pve::Method::Delete,
    }
}

/// A kind's parameters as PVE's, values as the kind gave them (references unresolved).
pub(crate) fn to_pve_params(call: &Call) -> Vec<Param> {
    call.params
        .iter()
        .map(|p| Param {
            name: p.name.clone(),
            value: p.value.clone(),
            sensitive: p.sensitive,
        })
        .collect()
}

/// The parameters `call` is sent with: each secret reference replaced by its value, which is
/// registered with the redactor first so that no error or log line can quote it. This is the
/// one place a third-party kind's secret gets its value, after every check and every plan.
pub(crate) fn wire_params(
    call: &Call,
    secrets: Option<&dyn SecretSource>,
) -> Result<Vec<Param>, CallError> {
    let unsent = |what: String| CallError::Unsent(what);
    let mut params = to_pve_params(call);
    for p in &mut params {
        if !secret_ref::mentions(&p.value) {
            continue;
        }
        let what = format!(
            "{} {}: parameter `{}`",
            method_name(call.method),
            call.path,
            p.name
        );
        let Some(path) = secret_ref::parse(&p.value) else {
            return Err(unsent(format!(
                "{what} holds a secret reference that this run did not mint (from an earlier run's plan?); nothing was sent, plan again"
            )));
        };
        let Some(source) = secrets else {
            return Err(unsent(format!(
                "{what}: the secret `{path}` cannot be resolved, the cluster has no SOPS document; nothing was sent"
            )));
        };
        let value = source.resolve(path).map_err(|e| {
            let why = match e {
                SecretError::Missing => "it is not in the cluster's SOPS document".to_string(),
                SecretError::Empty => "it is empty in the cluster's SOPS document".to_string(),
                SecretError::Invalid(why) => why,
            };
            unsent(format!(
                "{what}: the secret `{path}` cannot be resolved: {why}; nothing was sent"
            ))
        })?;
        if proxops_core::text::register(&value).is_err() {
            return Err(unsent(format!(
                "{what}: the secret `{path}` is shorter than 8 bytes, too short to keep out of every output; nothing was sent"
            )));
        }
        p.value = value;
        p.sensitive = true;
    }
    Ok(params)
}
