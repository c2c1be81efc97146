//! The reconcile engine: route manifests to kinds, validate them, resolve references and
//! identities, observe PVE, plan, and execute.

pub mod registry;
pub mod validate;
pub mod workers;

pub use registry::KindRegistry;
pub use validate::{Catalog, Object, validate_repo};
