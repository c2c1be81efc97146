//! `plan`: desired state + observation -> actions, drift, pending and anomalies.

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::model::{Anomaly, Observation, Proposal};

use crate::desired::{Desired, Flavour};

/// Plan one object.
pub fn plan(
    _flavour: Flavour,
    _desired: Option<&Desired>,
    _obs: &Observation,
) -> Result<Proposal, Vec<Diag>> {
    Ok(Proposal {
        anomalies: vec![Anomaly::new("", "planning is not implemented yet")],
        ..Proposal::default()
    })
}
