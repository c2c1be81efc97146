//! The canonical form, targets, capabilities and secret references of proposed requests,
//! case by case, one file per step; the helpers they share are here.

use super::capability::*;
use super::form::*;
use super::target::*;
use super::*;
use proxops_core::grant::Capability;
use proxops_runtime::kind::{Call, CallPattern, Method, Param};

mod canonical;
mod capabilities;
mod sandbox;
mod secret_refs;
mod targets;

fn pattern(method: Method, path: &str) -> CallPattern {
    CallPattern {
        method,
        path: path.into(),
    }
}

fn params(pairs: &[(&str, &str)]) -> Vec<Param> {
    pairs
        .iter()
        .map(|(n, v)| Param {
            name: n.to_string(),
            value: v.to_string(),
            sensitive: false,
        })
        .collect()
}

/// Templates a hostile kind might be granted because they look ordinary.
fn declared() -> Vec<CallPattern> {
    use Method::*;
    vec![
        pattern(Get, "/cluster/resources"),
        pattern(Get, "/nodes/{node}/lxc/{vmid}/config"),
        pattern(Put, "/nodes/{node}/lxc/{vmid}/config"),
        pattern(Post, "/nodes/{node}/lxc"),
        pattern(Post, "/nodes/{node}/{op}"),
        pattern(Delete, "/nodes/{node}/storage/{storage}/content/{volume}"),
        pattern(Post, "/{area}/{what}"),
    ]
}

/// The target of a write in PVE's view, or the rule that refuses it.
fn target(path: &str, pairs: &[(&str, &str)]) -> Result<Target, Rule> {
    Target::of(&pve_view(path), &params(pairs)).map_err(|r| r.rule)
}

#[test]
fn values_for_messages_are_escaped_and_short() {
    assert_eq!(shown("/nodes/pve01"), "/nodes/pve01");
    assert_eq!(shown("a\nb"), "\"a\\nb\"");
    assert_eq!(shown("\u{1b}[2J"), "\"\\u{1b}[2J\"");
    assert_eq!(shown(""), "\"\"");
    assert!(shown(&"x".repeat(200)).ends_with("x…"));
    assert_eq!(shown(&"x".repeat(200)).chars().count(), 81);
}
