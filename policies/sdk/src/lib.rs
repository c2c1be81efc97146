//! Guest-side toolkit for proxops site policies: the WIT bindings of `proxops:policy/policy`
//! and small helpers for the parts every policy repeats: reading settings, reading manifests,
//! locating findings and building verdicts.
//!
//! A policy is a crate with `crate-type = ["cdylib", "rlib"]` that implements [`SitePolicy`]
//! (typed settings and rule functions; the SDK provides [`wit::Guest`] for it) and exports it
//! for the component build only:
//!
//! ```ignore
//! struct MyPolicy;
//! impl proxops_policy_sdk::SitePolicy for MyPolicy { /* NAME, SCHEMA, check_manifest, … */ }
//! #[cfg(target_arch = "wasm32")]
//! proxops_policy_sdk::export_policy!(MyPolicy);
//! ```
//!
//! Keep the rules in plain functions over these types so that native `cargo test` covers them.

pub mod bindings {
    //! Bindings of `proxops:policy/policy`, generated from `wit/`.
    wit_bindgen::generate!({
        path: ["../../wit/common", "../../wit/policy"],
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
