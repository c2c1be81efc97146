//! The `ISO` kind: an ISO image PVE downloads (`download-url`, `content=iso`, optionally
//! decompressed) onto a storage of the nodes that need it, so that VMs can attach it as
//! `<storage>:iso/<filename>`. The logic is shared with `DiskImage` and lives in
//! `proxops-kind-download` (its crate documentation holds the desired-state shape and the
//! rules); this crate exports it as a component.

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
use proxops_kind_download::Iso;
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(Iso);

#[cfg(test)]
mod tests;
