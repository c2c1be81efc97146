//! The `DiskImage` kind: a cloud image PVE downloads (`download-url`, `content=import`) onto a
//! storage of the nodes that need it, so that VMs can seed a disk from it with
//! `import-from=<storage>:import/<filename>`. The logic is shared with `ISO` and lives in
//! `proxops-kind-download` (its crate documentation holds the desired-state shape and the
//! rules); this crate exports it as a component.

// Export names contain `:`, which a native cdylib's linker rejects: native builds exist for
// the unit tests only.
#[cfg(target_arch = "wasm32")]
use proxops_kind_download::DiskImage;
#[cfg(target_arch = "wasm32")]
proxops_kind_sdk::export_kind!(DiskImage);

#[cfg(test)]
mod tests;
