//! `kind: Container`: PVE LXC containers as a third-party proxops resource kind, built with the
//! kind SDK's [`ResourceKind`] trait and shipped as an example of writing one (see
//! `docs/kinds.md`). It is not bundled: a repository loads it from a `.wasm` its
//! `proxops.yaml` pins and grants.
//!
//! Manifests live in `container/<cluster>/<name>.yaml`. The kind validates them
//! ([`validate`]), names their place in PVE's vmid pool ([`identity`]), asks for the config and
//! status of a live container ([`observe`]), plans create, update, power and prune
//! ([`mod@plan`]) and the container's HA resource (`spec.ha`, [`mod@ha`]), and claims the
//! `/cluster/resources` entries of type `lxc` that carry the `proxops` tag ([`claims`]). It declares exactly the calls it proposes ([`CALLS`]), no
//! secrets and no capabilities: a privileged container or a bind mount is proposed as written
//! and the host checks it against the operator's grant.
//!
//! Natively, the functions the host calls are plain Rust (this is how the tests drive them):
//!
//! ```
//! use proxops_kind_container::ContainerKind;
//! use proxops_kind_sdk::kind::ResourceKind;
//! use proxops_kind_sdk::model::{Method, Observation, Operation};
//! use proxops_kind_sdk::secrets::NoSecrets;
//!
//! let manifest = serde_json::json!({
//!     "apiVersion": "proxops/v1alpha1", "kind": "Container", "metadata": {"name": "web"},
//!     "spec": {"vmid": 201, "node": "pve01", "memory": "512MiB",
//!              "ostemplate": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
//!              "rootfs": {"storage": "local-lvm", "size": "8GiB"}}
//! });
//! let desired = ContainerKind::validate(&manifest, &NoSecrets).unwrap().desired;
//! assert_eq!(ContainerKind::identity(&desired).resource_id.as_deref(), Some("lxc/201"));
//!
//! // No live entry: one create, unprivileged and tagged, started by PVE when it is done.
//! let p = ContainerKind::plan(Some(&desired), &[], &[], &Observation::default(), &NoSecrets).unwrap();
//! let create = &p.actions[0];
//! assert_eq!(create.operation, Operation::Create);
//! assert_eq!((create.calls[0].method, create.calls[0].path.as_str()), (Method::Post, "/nodes/pve01/lxc"));
//! assert_eq!(create.calls[0].get("unprivileged"), Some("1"));
//! assert_eq!(create.calls[0].get("tags"), Some("proxops;proxops-201"));
//! assert_eq!(create.calls[0].get("start"), Some("1"));
//! ```

pub mod desired;
pub mod ha;
pub mod live;
pub mod plan;
pub mod schema;
pub mod syntax;
pub mod validate;
pub mod wire;

#[cfg(test)]
mod tests;

use proxops_kind_sdk::check::Diag;
use proxops_kind_sdk::kind::{KindInfo, Listing, ObjectKey, Resolved, ResourceKind, Validated};
use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
use proxops_kind_sdk::secrets::Secrets;
use serde_json::Value;

pub use desired::Container;

/// `kind:` of the manifests.
pub const KIND: &str = "Container";
/// Repository folder of the manifests.
pub const FOLDER: &str = "container";
/// The tag that marks a guest as created by proxops.
pub const OWNERSHIP_TAG: &str = "proxops";
/// Highest `N` of `mpN`.
pub const MAX_MOUNT_POINT: u32 = 255;
/// Most NICs a container has (`net0` to `net31`).
pub const MAX_NICS: u32 = 32;

/// The vmid-bound ownership mark (`proxops-<vmid>`): PVE copies tags on clone and restore, so
/// the host's prune gate requires the mark to name the guest's own vmid.
pub fn ownership_mark(vmid: u32) -> String {
    format!("{OWNERSHIP_TAG}-{vmid}")
}

/// Every call this kind proposes or asks the host to read (method, path template).
pub const CALLS: &[(Method, &str)] = &[
    (Method::Get, "/cluster/resources"),
    (Method::Get, "/nodes/{node}/lxc/{vmid}/config"),
    (Method::Get, "/nodes/{node}/lxc/{vmid}/status/current"),
    (Method::Post, "/nodes/{node}/lxc"),
    (Method::Put, "/nodes/{node}/lxc/{vmid}/config"),
    (Method::Put, "/nodes/{node}/lxc/{vmid}/resize"),
    (Method::Post, "/nodes/{node}/lxc/{vmid}/status/start"),
    (Method::Post, "/nodes/{node}/lxc/{vmid}/status/shutdown"),
    (Method::Post, "/nodes/{node}/lxc/{vmid}/status/stop"),
    (Method::Delete, "/nodes/{node}/lxc/{vmid}"),
    (Method::Post, "/cluster/ha/resources"),
    (Method::Put, "/cluster/ha/resources/{sid}"),
    (Method::Delete, "/cluster/ha/resources/{sid}"),
];

/// Static facts about the kind.
pub fn describe() -> KindInfo {
    KindInfo {
        calls: CALLS.iter().map(|(m, p)| (*m, (*p).to_string())).collect(),
        listings: vec![Listing::cluster_resources()],
        ..KindInfo::new(KIND, FOLDER, schema::schema())
    }
}

/// Where a container lives: PVE's shared vmid pool (`guest-id`), its entry `lxc/<vmid>`.
pub fn identity(d: &Container) -> ObjectKey {
    ObjectKey {
        node: Some(d.node.clone()),
        space: "guest-id".into(),
        key: d.vmid.to_string(),
        resource_id: Some(format!("lxc/{}", d.vmid)),
    }
}

/// The reads `plan` needs: the config (with its digest) and the status of a live container,
/// on the node it lives on; nothing when it does not exist.
pub fn observe(live: Option<&Value>) -> Vec<Call> {
    let Some(e) = live.and_then(live::Entry::from_value) else {
        return Vec::new();
    };
    if e.kind != "lxc" {
        return Vec::new();
    }
    let base = plan::base_path(&e.node, e.vmid);
    vec![
        Call::new(Method::Get, format!("{base}/config")),
        Call::new(Method::Get, format!("{base}/status/current")),
    ]
}

/// Whether an unnamed `/cluster/resources` entry is a proxops-created container: type `lxc`,
/// not a template, tagged `proxops`. The host's ownership gate then checks the vmid-bound mark.
pub fn claims(listing: &str, entry: &Value) -> bool {
    listing == "/cluster/resources"
        && live::Entry::from_value(entry)
            .is_some_and(|e| e.kind == "lxc" && !e.template && e.tagged())
}

/// The kind, as the SDK's [`ResourceKind`].
#[derive(Debug)]
pub struct ContainerKind;

impl ResourceKind for ContainerKind {
    type Desired = Container;

    fn describe() -> KindInfo {
        describe()
    }

    fn validate(manifest: &Value, _: &dyn Secrets) -> Result<Validated<Container>, Vec<Diag>> {
        let (desired, warnings) = validate::validate(manifest)?;
        Ok(Validated { desired, warnings })
    }

    fn identity(d: &Container) -> ObjectKey {
        identity(d)
    }

    fn observe(
        _: Option<&Container>,
        live: Option<&Value>,
        _: &[Resolved],
        _: &[Resolved],
    ) -> Vec<Call> {
        observe(live)
    }

    fn plan(
        desired: Option<&Container>,
        _: &[Resolved],
        _: &[Resolved],
        observed: &Observation,
        _: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>> {
        plan::plan(desired, observed)
    }

    fn claims(listing: &str, entry: &Value) -> bool {
        claims(listing, entry)
    }
}

#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(ContainerKind);
