//! Sizes: human sizes written in manifests (`8GiB`, `512MiB`, `1.5TiB`) and the sizes PVE prints
//! (`32G`, `2252M`, `4M`, `512K`, plain bytes), all as exact byte counts. The code lives in
//! `proxops-units`, shared with the policy SDK; this module keeps the SDK's paths.

pub use proxops_units::*;
