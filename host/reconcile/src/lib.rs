//! The reconcile engine: route manifests to kinds, validate them, resolve references and
//! identities, observe PVE, plan, and execute.

pub mod adopt;
pub mod apply;
pub mod audit;
pub mod error;
pub mod execute;
pub mod grant;
pub mod import;
pub mod inflight;
pub mod live;
pub mod lock;
pub mod memo;
pub mod memory;
pub mod observe;
pub mod ownership;
pub mod plan;
pub mod policy;
pub mod registry;
pub mod request;
pub mod rollout;
pub mod run;
pub mod settle;
pub mod tokens;
pub mod validate;
pub mod wire;
pub mod workers;

pub use apply::{ApplyOptions, ApplyReport, RolloutProgress, apply};
pub use error::{ActionError, Blocker, PlanError};
pub use execute::{Event, Reporter, Silent, Status};
pub use memo::Memo;
pub use observe::{Cycle, ObserveError, plan_cluster};
pub use plan::{ClusterPlan, ObjectPlan, ObjectRef};
pub use proxops_core::ObjectId;
pub use registry::KindRegistry;
pub use validate::{
    Catalog, ClusterInputs, Object, Secrets, validate_cluster, validate_in_order,
    validate_manifests, validate_repo,
};
