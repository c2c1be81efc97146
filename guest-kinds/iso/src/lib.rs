//! The `ISO` kind: an ISO image PVE downloads (`download-url`, `content=iso`, optionally
//! decompressed) onto a storage of the nodes that need it, so that VMs can attach it as
//! `<storage>:iso/<filename>`. The logic is shared with `DiskImage` and lives in
//! `proxops_kind_sdk::download` (its module documentation holds the desired-state shape and the
//! rules); this crate is the WIT glue.

proxops_kind_sdk::download_component!(&proxops_kind_sdk::download::ISO);

#[cfg(test)]
mod tests;
