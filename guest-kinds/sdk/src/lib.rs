//! Guest-side toolkit for proxops resource kinds (`proxops:kind@0.2.1`): the WIT bindings of
//! the kind world, the [`ResourceKind`](kind::ResourceKind) trait that turns plain Rust
//! functions into a component, and helpers: manifest checking ([`check`], [`manifest`]), SOPS
//! secrets ([`secrets`]), human sizes, PVE property strings, set comparison, and the common
//! pieces of kinds of named objects ([`named`]: ownership by `proxops:<id>` in a comment).
//!
//! # Writing a kind
//!
//! 1. A crate with `crate-type = ["cdylib", "rlib"]` (the cdylib is the component; host/guests
//!    builds every such guest crate for `wasm32-wasip2`, the rlib serves native tests),
//!    depending on `proxops-kind-sdk`, `serde` and `serde_json`. Logic shared by several kinds
//!    goes in a plain rlib crate (as `proxops-kind-qemu` for VM/TemplateVM and
//!    `proxops-kind-download` for DiskImage/ISO), which the thin component crates export.
//! 2. A desired-state type (`Serialize + Deserialize`): the normalised form of a manifest,
//!    which crosses the boundary as JSON and is what other kinds see in `resolved`.
//! 3. `impl ResourceKind` for a unit type (a const-generic type serves several flavours with
//!    one impl). Required: `describe`, `validate` (with [`check::Checker`] and
//!    [`manifest::envelope`]), `identity` and `plan`. Defaults reference nothing, read nothing,
//!    claim nothing, adopt nothing and have no `finally` step; override what the kind needs.
//! 4. Declare in `describe` ([`kind::KindInfo`]) every call the kind may propose or ask the
//!    host to read, by method and path template (`/nodes/{node}/lxc/{vmid}/config`), its
//!    listings ([`kind::Listing`], each also a declared GET), whether it reads secrets and what
//!    capabilities it needs. The host refuses any undeclared call; for a third-party kind
//!    everything declared must be within the operator's grant.
//! 5. Export it in the component build only (WIT export names contain `:`, which a native
//!    cdylib's linker rejects); the macro takes an identifier, so `use` a path first:
//!    `#[cfg(target_arch = "wasm32")] proxops_kind_sdk::export_kind!(MyKind);`
//!
//! The SDK implements the WIT `Guest` for every `ResourceKind` (JSON parsing, diagnostics for
//! unreadable documents, the plain forms of kind info and references), so a kind holds no
//! glue of its own. The records a plan returns are the generated WIT types themselves
//! ([`model`] re-exports them with constructors), so they cross the boundary unconverted.
//!
//! # What a plan says
//!
//! [`model::Proposal`]: actions, drift, pending changes, anomalies. An [`model::Action`] is
//! `Create`, `Update`, `Delete` or a named [`model::Operation::step`] (`power`,
//! `mark-template`, …); `disturbs_availability` when it stops the object, `destructive` when
//! it destroys data, and a [`model::Restore`] when it stops the object before a write and
//! starts it again after: the restore calls (the start) run when the call at index `after`
//! (the stop) or a later one fails. An object locked by a task in flight is an
//! [`model::Anomaly::locked`]. Parameters, changes and drift derived from a secret are marked
//! sensitive.
//!
//! # Testing natively
//!
//! The trait functions are plain Rust: call them with a [`secrets::MapSecrets`], or call the
//! WIT functions (`<MyKind as wit::Guest>::plan(...)`) with JSON exactly as the host does,
//! with [`secrets::with_native`] standing in for the host's secrets.
//! [`kind::KindInfo::declares`] checks that every call a plan proposes is declared:
//!
//! ```
//! use proxops_kind_sdk::check::Diag;
//! use proxops_kind_sdk::kind::{KindInfo, ObjectKey, ResourceKind, Resolved, Validated};
//! use proxops_kind_sdk::model::{Action, Call, Method, Observation, Operation, Proposal, Restore};
//! use proxops_kind_sdk::secrets::{MapSecrets, Secrets};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! pub struct Ct { node: String, id: u32 }
//!
//! /// Restarts its guest on every plan, to show a restore.
//! pub struct Restarter;
//! impl ResourceKind for Restarter {
//!     type Desired = Ct;
//!     fn describe() -> KindInfo {
//!         KindInfo {
//!             calls: vec![
//!                 (Method::Post, "/nodes/{node}/lxc/{vmid}/status/{verb}".into()),
//!                 (Method::Put, "/nodes/{node}/lxc/{vmid}/config".into()),
//!             ],
//!             ..KindInfo::new("Restarter", "restarter", serde_json::json!({}))
//!         }
//!     }
//!     fn validate(m: &serde_json::Value, _: &dyn Secrets) -> Result<Validated<Ct>, Vec<Diag>> {
//!         serde_json::from_value(m["spec"].clone())
//!             .map(Validated::new)
//!             .map_err(|e| vec![Diag::error("spec", e.to_string())])
//!     }
//!     fn identity(d: &Ct) -> ObjectKey {
//!         ObjectKey { node: Some(d.node.clone()), space: "guest-id".into(), key: d.id.to_string(),
//!                     resource_id: Some(format!("lxc/{}", d.id)) }
//!     }
//!     fn plan(d: Option<&Ct>, _: &[Resolved], _: &[Resolved], _: &Observation, _: &dyn Secrets)
//!         -> Result<Proposal, Vec<Diag>> {
//!         let Some(d) = d else { return Ok(Proposal::default()) };
//!         let base = format!("/nodes/{}/lxc/{}", d.node, d.id);
//!         let start = Call::new(Method::Post, format!("{base}/status/start"));
//!         Ok(Proposal {
//!             actions: vec![Action {
//!                 operation: Operation::Update,
//!                 summary: format!("restart {} to write its config", d.id),
//!                 calls: vec![
//!                     Call::new(Method::Post, format!("{base}/status/shutdown")),
//!                     Call::new(Method::Put, format!("{base}/config")).param("cores", "2"),
//!                     start.clone(),
//!                 ],
//!                 changes: vec![],
//!                 disturbs_availability: true,
//!                 destructive: false,
//!                 restore: Some(Restore { after: 0, calls: vec![start] }),
//!             }],
//!             ..Proposal::default()
//!         })
//!     }
//! }
//!
//! let doc = serde_json::json!({"spec": {"node": "pve01", "id": 101}});
//! let d = Restarter::validate(&doc, &MapSecrets::default()).unwrap().desired;
//! let p = Restarter::plan(Some(&d), &[], &[], &Observation::default(), &MapSecrets::default())
//!     .unwrap();
//! let info = Restarter::describe();
//! assert!(p.actions.iter().flat_map(|a| &a.calls).all(|c| info.declares(c.method, &c.path)));
//! ```
//!
//! A complete minimal kind, exported and called through the WIT functions, is in [`kind`].

pub mod bindings {
    //! Bindings of `proxops:kind/kind`, generated from `wit/`.
    wit_bindgen::generate!({
        path: ["../../wit/common/0.1.0", "../../wit/kind/0.2.1"],
        world: "proxops:kind/kind",
        pub_export_macro: true,
        export_macro_name: "export_kind",
        default_bindings_module: "proxops_kind_sdk::bindings",
        generate_all,
        // Plain Rust values for kind logic and native tests: comparable, hashable, cloneable
        // and serialisable, methods and operations spelt as in the WIT.
        additional_derives: [PartialEq, Eq, Hash, Clone, serde::Serialize],
        additional_type_attributes: {
            "proxops:common/types@0.1.0/method": [#[serde(rename_all = "lowercase")]],
            "proxops:kind/types@0.2.1/operation": [#[serde(rename_all = "kebab-case")]],
        },
    });
}

pub use bindings::export_kind;
pub use bindings::exports::proxops::kind::reconciler as wit;
pub use bindings::proxops::common::types;
/// The kind contract's own records (`proxops:kind/types`): operations, actions, grants.
pub use bindings::proxops::kind::types as kind_types;

pub mod check;
pub mod kind;
pub mod manifest;
pub mod model;
pub mod named;
pub mod propstring;
pub mod secrets;
pub mod sets;
pub mod size;
