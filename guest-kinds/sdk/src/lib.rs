//! Guest-side toolkit shared by the bundled resource kinds: the WIT bindings of the kind
//! world, human sizes, PVE property strings, set comparison and manifest checking.

pub mod bindings {
    //! Bindings of `proxops:kind/kind`, generated from `wit/`.
    wit_bindgen::generate!({
        path: ["../../wit/common/0.1.0", "../../wit/kind/0.2.0"],
        world: "proxops:kind/kind",
        pub_export_macro: true,
        export_macro_name: "export_kind",
        default_bindings_module: "proxops_kind_sdk::bindings",
        generate_all,
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
pub mod propstring;
pub mod secrets;
pub mod sets;
pub mod size;
