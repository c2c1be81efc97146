//! The diff pass over the NICs: the manifest owns the `netN` set.

use std::collections::BTreeSet;

use proxops_kind_sdk::model::Drift;

use super::{Diff, Outcome};
use crate::desired::*;
use crate::wire;

pub(super) fn diff_nics(d: &Desired, x: &mut Diff<'_>) {
    for (i, n) in d.networks.iter().enumerate() {
        let path = format!("spec.networks[{i}]");
        let key = format!("net{}", n.slot);
        let n = n.clone();
        x.key(&key, false, move |live| {
            let Some(l) = live.and_then(wire::live_nic) else {
                let v = wire::new_nic(&n);
                return Outcome::Write(
                    v.clone(),
                    vec![Drift::new(&path, live.map(str::to_string), Some(v))],
                );
            };
            let mut drift = Vec::new();
            if l.model != n.model {
                drift.push(Drift::new(
                    format!("{path}.model"),
                    Some(l.model.clone()),
                    Some(n.model.clone()),
                ));
            }
            if let Some(mac) = &n.mac
                && !l
                    .mac
                    .as_deref()
                    .is_some_and(|m| m.eq_ignore_ascii_case(mac))
            {
                drift.push(Drift::new(
                    format!("{path}.mac"),
                    l.mac.clone(),
                    Some(mac.clone()),
                ));
            }
            let mut rest = l.rest.clone();
            for (tok, v) in wire::nic_tokens(&n) {
                if !wire::nic_token_eq(tok, l.rest.get(tok), &v) {
                    let field = match tok {
                        "tag" => "vlan",
                        "rate" => "rate-limit",
                        other => other,
                    };
                    drift.push(Drift::new(
                        format!("{path}.{field}"),
                        l.rest.get(tok).map(str::to_string),
                        Some(v.clone()),
                    ));
                    rest.set(tok, v);
                }
            }
            if drift.is_empty() {
                return Outcome::Same;
            }
            // A PVE-assigned MAC survives the rewrite verbatim.
            let mac = n.mac.clone().or(l.mac.clone());
            Outcome::Write(wire::print_nic(&n.model, mac.as_deref(), &rest), drift)
        });
    }
    // The manifest owns the NIC set: an undeclared netN is removed.
    let owned: BTreeSet<String> = d
        .networks
        .iter()
        .map(|n| format!("net{}", n.slot))
        .collect();
    let extra: Vec<String> = x
        .cfg
        .keys
        .keys()
        .filter(|k| matches!(crate::syntax::split_slot(k), Some(("net", _))) && !owned.contains(*k))
        .cloned()
        .collect();
    for k in extra {
        x.delete(&k, &format!("spec.networks ({k})"));
    }
}
