//! [`ResourceKind`]: a resource kind written as plain Rust functions over typed desired state.
//! The SDK implements the WIT `Guest` of `proxops:kind@0.2.1` for every `ResourceKind` (JSON
//! in and out, parse errors turned into diagnostics), so a kind crate holds only its logic and
//! one `export_kind!` line, and native `cargo test` calls the same functions the host does.
//!
//! ```
//! use proxops_kind_sdk::check::Diag;
//! use proxops_kind_sdk::kind::{KindInfo, Listing, ObjectKey, ResourceKind, Validated};
//! use proxops_kind_sdk::model::{Call, Method, Observation, Proposal};
//! use proxops_kind_sdk::secrets::Secrets;
//! use proxops_kind_sdk::wit::Guest;
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! pub struct Pool {
//!     id: String,
//! }
//!
//! pub struct PoolKind;
//! impl ResourceKind for PoolKind {
//!     type Desired = Pool;
//!     fn describe() -> KindInfo {
//!         KindInfo {
//!             calls: vec![(Method::Get, "/pools".into()), (Method::Post, "/pools".into())],
//!             listings: vec![Listing::new("/pools", "poolid")],
//!             ..KindInfo::new("Pool", "pool", serde_json::json!({"type": "object"}))
//!         }
//!     }
//!     fn validate(m: &serde_json::Value, _: &dyn Secrets) -> Result<Validated<Pool>, Vec<Diag>> {
//!         match m.pointer("/metadata/name").and_then(|v| v.as_str()) {
//!             Some(id) => Ok(Validated::new(Pool { id: id.into() })),
//!             None => Err(vec![Diag::error("metadata.name", "required")]),
//!         }
//!     }
//!     fn identity(d: &Pool) -> ObjectKey {
//!         ObjectKey { node: None, space: "pool".into(), key: d.id.clone(), resource_id: Some(d.id.clone()) }
//!     }
//!     fn plan(d: Option<&Pool>, _: &[proxops_kind_sdk::kind::Resolved], _: &[proxops_kind_sdk::kind::Resolved],
//!             o: &Observation, _: &dyn Secrets) -> Result<Proposal, Vec<Diag>> {
//!         Ok(Proposal::default())
//!     }
//! }
//! #[cfg(target_arch = "wasm32")]
//! proxops_kind_sdk::export_kind!(PoolKind);
//!
//! // What the host calls, natively:
//! let v = <PoolKind as Guest>::validate(r#"{"metadata": {"name": "db"}}"#.into()).unwrap();
//! assert_eq!(<PoolKind as Guest>::identity(v.desired).key, "db");
//! ```

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::check::Diag;
use crate::kind_types as kt;
use crate::model::{Action, Call, Method, Observation, Proposal, diags_into_wit};
use crate::secrets::{HostSecrets, Secrets};
use crate::types as t;
use crate::wit;

/// Static facts about a kind (plain form of WIT `kind-info`).
#[derive(Debug, Clone, PartialEq)]
pub struct KindInfo {
    /// `kind:` of its manifests.
    pub kind: String,
    /// `apiVersion:` of its manifests.
    pub api_version: String,
    /// Repository folder of its manifests.
    pub folder: String,
    /// JSON Schema of the manifest.
    pub schema: Value,
    /// Every call it may propose or ask to read: method and path template.
    pub calls: Vec<(Method, String)>,
    /// The live listings its objects appear in.
    pub listings: Vec<Listing>,
    /// Kinds it may reference.
    pub references_kinds: Vec<String>,
    /// Whether it reads secrets.
    pub secrets: bool,
    /// What it needs beyond plain calls.
    pub capabilities: Vec<Capability>,
}

impl KindInfo {
    /// A kind with apiVersion `proxops/v1alpha1`, no calls, no listings, no references, no
    /// secrets and no capabilities; fill in the rest with struct update syntax.
    pub fn new(kind: &str, folder: &str, schema: Value) -> Self {
        KindInfo {
            kind: kind.into(),
            api_version: crate::manifest::API_VERSION.into(),
            folder: folder.into(),
            schema,
            calls: Vec::new(),
            listings: Vec::new(),
            references_kinds: Vec::new(),
            secrets: false,
            capabilities: Vec::new(),
        }
    }
}

impl KindInfo {
    /// Whether the kind declares a call with `method` on `path`, by the rule of WIT
    /// `call-pattern`: a declared `{name}` segment matches one non-empty segment, every other
    /// segment itself. The host refuses an undeclared call; a kind's tests can check its plans
    /// with this.
    pub fn declares(&self, method: Method, path: &str) -> bool {
        self.calls
            .iter()
            .any(|(m, pattern)| *m == method && path_matches(pattern, path))
    }
}

/// Whether `path` matches the template `pattern` (`{name}` is one non-empty segment).
fn path_matches(pattern: &str, path: &str) -> bool {
    let mut p = pattern.split('/');
    let mut c = path.split('/');
    loop {
        match (p.next(), c.next()) {
            (None, None) => return true,
            (Some(p), Some(c)) if p.starts_with('{') && p.ends_with('}') && !c.is_empty() => {}
            (Some(p), Some(c)) if p == c => {}
            _ => return false,
        }
    }
}

/// A live listing (GET path) and the field of its entries that holds their id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// GET path, e.g. `/cluster/resources`.
    pub path: String,
    /// Id field of each entry, e.g. `id`.
    pub id_field: String,
}

impl Listing {
    /// A listing.
    pub fn new(path: &str, id_field: &str) -> Self {
        Listing {
            path: path.into(),
            id_field: id_field.into(),
        }
    }

    /// `/cluster/resources`, whose entries' ids are `qemu/100`, `lxc/101`, `storage/pve01/local`.
    pub fn cluster_resources() -> Self {
        Listing::new("/cluster/resources", "id")
    }
}

/// What a kind needs beyond plain calls (plain form of WIT `capability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Privileged containers.
    Privileged,
    /// Host paths mounted into guests.
    BindMounts,
    /// Host devices passed through.
    Devices,
    /// Hook scripts.
    Hookscript,
}

/// A validated manifest: its desired state and non-fatal findings.
#[derive(Debug, Clone, PartialEq)]
pub struct Validated<D> {
    /// Normalised desired state.
    pub desired: D,
    /// Warnings.
    pub warnings: Vec<Diag>,
}

impl<D> Validated<D> {
    /// Without warnings.
    pub fn new(desired: D) -> Self {
        Validated {
            desired,
            warnings: Vec::new(),
        }
    }
}

/// A named reference from one manifest to another object of the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Target kind.
    pub kind: String,
    /// Target `metadata.name`.
    pub name: String,
    /// Field that holds the reference, e.g. `spec.clone`.
    pub path: String,
}

/// A reference with the other side's desired state (JSON): the target's for `resolved`,
/// the referring object's for `referrers`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The reference.
    pub reference: Reference,
    /// Desired state (JSON) of the other side.
    pub desired: String,
}

/// Where an object lives in PVE (plain form of WIT `object-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey {
    /// Node, when per node.
    pub node: Option<String>,
    /// Collision space (`guest-id` is PVE's vmid pool).
    pub space: String,
    /// Key in the space.
    pub key: String,
    /// Id of its entry in the kind's listings.
    pub resource_id: Option<String>,
}

/// Something adopt could not carry into the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gap {
    /// Live key or manifest field.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// A manifest adopt wrote for a live object.
#[derive(Debug, Clone, PartialEq)]
pub struct Adopted {
    /// The manifest.
    pub manifest: Value,
    /// What it does not carry.
    pub gaps: Vec<Gap>,
}

/// A resource kind. Implement the required functions; the defaults reference nothing, read
/// nothing, claim nothing, adopt nothing and have no `finally` step.
pub trait ResourceKind {
    /// Normalised desired state, as JSON between calls.
    type Desired: Serialize + DeserializeOwned + 'static;

    /// Static facts, read once at load.
    fn describe() -> KindInfo;

    /// Check a manifest (as JSON) and normalise it.
    fn validate(
        manifest: &Value,
        secrets: &dyn Secrets,
    ) -> Result<Validated<Self::Desired>, Vec<Diag>>;

    /// The other objects this desired state names.
    fn references(_desired: &Self::Desired) -> Vec<Reference> {
        Vec::new()
    }

    /// Check the resolved targets of the references.
    fn check_references(_desired: &Self::Desired, _resolved: &[Resolved]) -> Vec<Diag> {
        Vec::new()
    }

    /// Where the object lives.
    fn identity(desired: &Self::Desired) -> ObjectKey;

    /// The GETs needed to plan the object (`live`: its listing entry).
    fn observe(
        _desired: Option<&Self::Desired>,
        _live: Option<&Value>,
        _resolved: &[Resolved],
        _referrers: &[Resolved],
    ) -> Vec<Call> {
        Vec::new()
    }

    /// [`ResourceKind::observe`] from the JSON texts the host sent: the desired state (as
    /// `validate` returned it) and the listing entry. The default reads both in full (a text
    /// that does not read is `None`) and calls `observe`. The host calls this once per object
    /// and cycle, on another instance than the `plan` that follows, so a kind whose `observe`
    /// needs little of either may read only that.
    fn observe_text(
        desired: Option<&str>,
        live: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Vec<Call> {
        let desired = desired.and_then(|d| parse::<Self>(d).ok());
        let live = live.and_then(|l| serde_json::from_str::<Value>(l).ok());
        Self::observe(desired.as_deref(), live.as_ref(), resolved, referrers)
    }

    /// Compare desired with observed; `desired` none is a prune candidate the kind claimed.
    fn plan(
        desired: Option<&Self::Desired>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
        secrets: &dyn Secrets,
    ) -> Result<Proposal, Vec<Diag>>;

    /// Whether an unnamed entry of listing `listing` is this kind's and proxops created it.
    fn claims(_listing: &str, _entry: &Value) -> bool {
        false
    }

    /// A manifest for a live object.
    fn adopt(_observed: &Observation, _secrets: &dyn Secrets) -> Result<Adopted, String> {
        Err(format!(
            "the {} kind does not adopt live objects",
            Self::describe().kind
        ))
    }

    /// Calls to run once per cluster after an apply changed objects named in `changed`.
    fn finally(_changed: &[String]) -> Vec<Action> {
        Vec::new()
    }
}

thread_local! {
    /// The desired state this instance read last, with the JSON text it was read from. The
    /// host hands one object's desired state to several calls in a row (`references` then
    /// `identity`; `observe` then `plan`), so the text is parsed once: reading is a function
    /// of the text alone, so the same text gives the same value. (A component holds one kind,
    /// so the entry is that kind's; the type is checked anyway.)
    static LAST_DESIRED: RefCell<Option<(String, Rc<dyn Any>)>> = const { RefCell::new(None) };
}

/// `desired` read into the kind's type, or the value read from the same text last time.
fn parse<K: ResourceKind + ?Sized>(desired: &str) -> Result<Rc<K::Desired>, Vec<Diag>> {
    let hit = LAST_DESIRED.with_borrow(|last| {
        last.as_ref()
            .filter(|(text, _)| text == desired)
            .and_then(|(_, value)| value.clone().downcast::<K::Desired>().ok())
    });
    if let Some(value) = hit {
        return Ok(value);
    }
    let value: Rc<K::Desired> = Rc::new(serde_json::from_str(desired).map_err(|e| {
        vec![Diag::error(
            "",
            format!(
                "internal: the host handed back a desired state this {} kind cannot read: {e}",
                K::describe().kind
            ),
        )]
    })?);
    LAST_DESIRED.set(Some((desired.to_string(), value.clone())));
    Ok(value)
}

fn reference_from_wit(r: wit::Reference) -> Reference {
    Reference {
        kind: r.kind,
        name: r.name,
        path: r.path,
    }
}

fn resolved_from_wit(rs: Vec<wit::Resolved>) -> Vec<Resolved> {
    rs.into_iter()
        .map(|r| Resolved {
            reference: reference_from_wit(r.reference),
            desired: r.desired,
        })
        .collect()
}

impl KindInfo {
    /// The WIT form.
    pub fn into_wit(self) -> wit::KindInfo {
        wit::KindInfo {
            kind: self.kind,
            api_version: self.api_version,
            folder: self.folder,
            schema: self.schema.to_string(),
            calls: self
                .calls
                .into_iter()
                .map(|(method, path)| kt::CallPattern { method, path })
                .collect(),
            listings: self
                .listings
                .into_iter()
                .map(|l| kt::Listing {
                    path: l.path,
                    id_field: l.id_field,
                })
                .collect(),
            references_kinds: self.references_kinds,
            secrets: self.secrets,
            capabilities: self
                .capabilities
                .into_iter()
                .map(|c| match c {
                    Capability::Privileged => kt::Capability::Privileged,
                    Capability::BindMounts => kt::Capability::BindMounts,
                    Capability::Devices => kt::Capability::Devices,
                    Capability::Hookscript => kt::Capability::Hookscript,
                })
                .collect(),
        }
    }
}

impl ObjectKey {
    /// The WIT form.
    pub fn into_wit(self) -> wit::ObjectKey {
        wit::ObjectKey {
            node: self.node,
            space: self.space,
            key: self.key,
            resource_id: self.resource_id,
        }
    }
}

impl<K: ResourceKind> wit::Guest for K {
    fn describe() -> wit::KindInfo {
        K::describe().into_wit()
    }

    fn validate(manifest: String) -> Result<wit::Validated, Vec<t::Diagnostic>> {
        let doc: Value = serde_json::from_str(&manifest).map_err(|e| {
            diags_into_wit(vec![Diag::error(
                "",
                format!("manifest is not valid JSON: {e}"),
            )])
        })?;
        let v = K::validate(&doc, &HostSecrets).map_err(diags_into_wit)?;
        let desired = serde_json::to_string(&v.desired).map_err(|e| {
            diags_into_wit(vec![Diag::error(
                "",
                format!("internal: desired state not serialisable: {e}"),
            )])
        })?;
        Ok(wit::Validated {
            desired,
            warnings: diags_into_wit(v.warnings),
        })
    }

    fn references(desired: String) -> Vec<wit::Reference> {
        let Ok(d) = parse::<K>(&desired) else {
            return Vec::new();
        };
        K::references(&d)
            .into_iter()
            .map(|r| wit::Reference {
                kind: r.kind,
                name: r.name,
                path: r.path,
            })
            .collect()
    }

    fn check_references(desired: String, resolved: Vec<wit::Resolved>) -> Vec<t::Diagnostic> {
        match parse::<K>(&desired) {
            Ok(d) => diags_into_wit(K::check_references(&d, &resolved_from_wit(resolved))),
            Err(e) => diags_into_wit(e),
        }
    }

    /// A desired state that cannot be read gets an identity in the space `invalid`, which
    /// collides with nothing and names the problem.
    fn identity(desired: String) -> wit::ObjectKey {
        match parse::<K>(&desired) {
            Ok(d) => K::identity(&d).into_wit(),
            Err(e) => wit::ObjectKey {
                node: None,
                space: "invalid".into(),
                key: e.first().map(|d| d.message.clone()).unwrap_or_default(),
                resource_id: None,
            },
        }
    }

    fn observe(
        desired: Option<String>,
        live: Option<String>,
        resolved: Vec<wit::Resolved>,
        referrers: Vec<wit::Resolved>,
    ) -> Vec<Call> {
        K::observe_text(
            desired.as_deref(),
            live.as_deref(),
            &resolved_from_wit(resolved),
            &resolved_from_wit(referrers),
        )
    }

    fn plan(
        desired: Option<String>,
        resolved: Vec<wit::Resolved>,
        referrers: Vec<wit::Resolved>,
        observed: Observation,
    ) -> Result<Proposal, Vec<t::Diagnostic>> {
        let desired = match desired {
            Some(d) => Some(parse::<K>(&d).map_err(diags_into_wit)?),
            None => None,
        };
        K::plan(
            desired.as_deref(),
            &resolved_from_wit(resolved),
            &resolved_from_wit(referrers),
            &observed,
            &HostSecrets,
        )
        .map_err(diags_into_wit)
    }

    fn claims(listing: String, entry: String) -> bool {
        serde_json::from_str::<Value>(&entry).is_ok_and(|e| K::claims(&listing, &e))
    }

    fn adopt(observed: Observation) -> Result<wit::Adopted, String> {
        let a = K::adopt(&observed, &HostSecrets)?;
        Ok(wit::Adopted {
            manifest: a.manifest.to_string(),
            gaps: a
                .gaps
                .into_iter()
                .map(|g| wit::Gap {
                    path: g.path,
                    reason: g.reason,
                })
                .collect(),
        })
    }

    fn finally(changed: Vec<String>) -> Vec<Action> {
        K::finally(&changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_calls_match_by_method_and_template() {
        let info = KindInfo {
            calls: vec![
                (Method::Post, "/nodes/{node}/qemu/{vmid}/config".into()),
                (Method::Delete, "/nodes/{node}/qemu/{vmid}".into()),
            ],
            ..KindInfo::new("VM", "vm", Value::Null)
        };
        assert!(info.declares(Method::Post, "/nodes/pve01/qemu/100/config"));
        assert!(info.declares(Method::Delete, "/nodes/pve01/qemu/100"));
        for (m, path) in [
            (Method::Get, "/nodes/pve01/qemu/100/config"),
            (Method::Post, "/nodes/pve01/qemu/100"),
            (Method::Post, "/nodes//qemu/100/config"),
            (Method::Post, "/nodes/pve01/qemu/100/config/x"),
            (Method::Delete, "/nodes/pve01/lxc/100"),
        ] {
            assert!(!info.declares(m, path), "{m:?} {path}");
        }
    }
}
