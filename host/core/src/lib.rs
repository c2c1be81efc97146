//! The repository a user writes, as the host sees it: loading manifests and cluster files
//! from a directory rooted with cap-std, and the diagnostics that point back into them.
//! No network, no WebAssembly.

pub mod budget;
pub mod cluster;
pub mod diag;
pub mod grant;
pub mod id;
pub mod parallel;
pub mod pin;
pub mod repo;
pub mod rooted;
pub mod secret_ref;
pub mod settings;
mod stray;
pub mod text;
pub mod yaml;

pub use cluster::{ClusterFile, Endpoint, SecretSource, Tls};
pub use diag::{Diagnostic, Severity};
pub use id::ObjectId;
pub use repo::{Layout, Manifest, ReadMemo, Repo, StoredManifest, load, load_layout, load_split};
pub use rooted::RepoDir;

/// The `apiVersion` of every proxops document.
pub const API_VERSION: &str = "proxops/v1alpha1";

#[cfg(test)]
mod tests;
