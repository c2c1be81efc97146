//! The `DiskImage` kind: a cloud image PVE downloads (`download-url`, `content=import`) onto a
//! storage of the nodes that need it, so that VMs can seed a disk from it with
//! `import-from=<storage>:import/<filename>`. The logic is shared with `ISO` and lives in
//! `proxops_kind_sdk::download` (its module documentation holds the desired-state shape and the
//! rules); this crate is the WIT glue.

proxops_kind_sdk::download_component!(&proxops_kind_sdk::download::DISK_IMAGE);

#[cfg(test)]
mod tests;
