//! What a third-party kind granted secret references reads: each granted secret's value
//! replaced by its ref's token, so it compares equal without the kind ever holding it.

use std::sync::Arc;

use proxops_runtime::SecretSource;
use proxops_runtime::kind::{Observation, Read};

use crate::grant::Trust;
use crate::registry::KindRegistry;

/// Per kind, the values of the secrets its grant names, to scrub from what it reads: empty for
/// the bundled kinds (they hold values) and for a kind granted no secret. A ref that does not
/// resolve scrubs nothing (`secrets.reference` refuses it when the kind asks).
pub(crate) fn granted_secret_values(
    registry: &KindRegistry,
    secrets: &Option<Arc<dyn SecretSource>>,
) -> Vec<Vec<(String, String)>> {
    (0..registry.len())
        .map(|kind| match (registry.trust(kind), secrets) {
            (Trust::Granted(grant), Some(source)) => grant
                .secrets
                .keys()
                .filter_map(|r| Some((r.clone(), source.resolve(r).ok()?)))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// `text` (JSON from PVE) as a kind granted the secrets `values` may see it.
pub(crate) fn scrubbed_text<'t>(
    text: &'t str,
    values: &[(String, String)],
) -> std::borrow::Cow<'t, str> {
    if values.is_empty() {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(proxops_core::secret_ref::scrub_json(text, values))
    }
}

/// `observation` as a kind granted the secrets `values` may see it: every value replaced by
/// its ref's token ([`proxops_core::secret_ref::scrub_json`]).
pub(crate) fn scrubbed(observation: &Observation, values: &[(String, String)]) -> Observation {
    let scrub = |text: &str| proxops_core::secret_ref::scrub_json(text, values);
    Observation {
        live: observation.live.as_deref().map(scrub),
        reads: observation
            .reads
            .iter()
            .map(|r| Read {
                call: r.call.clone(),
                status: r.status,
                body: scrub(&r.body),
            })
            .collect(),
    }
}
