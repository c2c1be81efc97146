//! Guest-side toolkit for proxops site policies: the WIT bindings of `proxops:policy/policy`
//! and small helpers for the parts every policy repeats: reading settings, reading manifests,
//! locating findings and building verdicts.
//!
//! A policy is a crate with `crate-type = ["cdylib", "rlib"]` that implements [`SitePolicy`]
//! (typed settings and rule functions; the SDK provides [`wit::Guest`] for it) and exports it
//! for the component build only:
//!
//! ```
//! use proxops_policy_sdk::wit::{Guest, ManifestView, Verdict};
//! use proxops_policy_sdk::{Doc, Findings, SitePolicy};
//!
//! struct MyPolicy;
//! impl SitePolicy for MyPolicy {
//!     type Settings = serde_json::Value;
//!     const NAME: &'static str = "require-description";
//!     const VERSION: &'static str = "0.1.0";
//!     const DESCRIPTION: &'static str = "every VM says what it is for";
//!     const SCHEMA: &'static str = r#"{"type": "object"}"#;
//!     fn check_manifest(_: &serde_json::Value, m: &ManifestView) -> Verdict {
//!         let mut f = Findings::new();
//!         if Doc::parse(&m.document).str_at("spec.description").is_none() {
//!             f.warn("spec.description", "say what this VM is for");
//!         }
//!         f.verdict()
//!     }
//! }
//! #[cfg(target_arch = "wasm32")]
//! proxops_policy_sdk::export_policy!(MyPolicy);
//!
//! // The SDK's `Guest` implementation is what the host calls; native tests call it too.
//! let vm = ManifestView {
//!     cluster: "lab".into(),
//!     kind: "VM".into(),
//!     name: "web".into(),
//!     document: r#"{"kind": "VM", "spec": {}}"#.into(),
//! };
//! assert!(matches!(<MyPolicy as Guest>::check_manifest(vm, "{}".into()), Verdict::Warn(_)));
//! ```
//!
//! Keep the rules in plain functions over these types so that native `cargo test` covers them.

pub mod bindings {
    //! Bindings of `proxops:policy/policy`, generated from `wit/`.
    wit_bindgen::generate!({
        path: ["../../wit/common/0.1.0", "../../wit/policy/0.1.0"],
        world: "proxops:policy/policy",
        pub_export_macro: true,
        export_macro_name: "export_policy",
        default_bindings_module: "proxops_policy_sdk::bindings",
        generate_all,
    });
}

pub use bindings::export_policy;
pub use bindings::exports::proxops::policy::checker as wit;
pub use bindings::proxops::common::log;
pub use bindings::proxops::common::types;

pub mod doc;
pub mod findings;
pub mod policy;
pub mod settings;
pub mod size;

pub use doc::Doc;
pub use findings::{Findings, object_path};
pub use policy::SitePolicy;
pub use settings::{parse_settings, settings_error};

/// The operation of a planned action, as a lower-case word (`create`, `delete`, …).
pub fn operation_name(op: types::Operation) -> &'static str {
    match op {
        types::Operation::Create => "create",
        types::Operation::Update => "update",
        types::Operation::Delete => "delete",
        types::Operation::Power => "power",
        types::Operation::MarkTemplate => "mark-template",
    }
}
