//! Site policies: components of the `proxops:policy/policy` world. They import nothing but
//! the bounded log (WASI is linked deny-all because the Rust toolchain imports it).

use std::sync::Arc;

use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker};

use crate::guest::{GuestRun, Instance, Loaded, World};
use crate::host::HostState;
use crate::size::{OutputSize, Prose, no_prose, output_size, prose};
use crate::{GuestError, GuestLog, Limits, Runtime, RuntimeError};

pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        path: ["../../wit/common/0.1.0", "../../wit/policy/0.1.0"],
        world: "proxops:policy/policy",
        with: {
            "proxops:common/types": crate::kind::bindings::proxops::common::types,
            "proxops:common/log": crate::kind::bindings::proxops::common::log,
        },
        additional_derives: [serde::Serialize, serde::Deserialize, PartialEq, Eq],
    });
}

/// The operation of a planned action as policies (`proxops:policy@0.1.0`) see it.
pub use crate::kind::bindings::proxops::common::types::Operation as PolicyOperation;
pub use bindings::exports::proxops::policy::checker::{
    ActionView, ManifestView, PolicyInfo, Verdict, Violation,
};

pub(crate) fn linker(engine: &wasmtime::Engine) -> Result<Linker<HostState>, RuntimeError> {
    let mut linker = Linker::new(engine);
    crate::host::add_wasi(&mut linker)?;
    bindings::Policy::add_to_linker::<HostState, HasSelf<HostState>>(&mut linker, |s| s)
        .map_err(|e| RuntimeError::Link(format!("{e:#}")))?;
    Ok(linker)
}

impl World for bindings::Policy {
    type Pre = bindings::PolicyPre<HostState>;
    fn instantiate(pre: &Self::Pre, store: &mut Store<HostState>) -> wasmtime::Result<Self> {
        pre.instantiate(store)
    }
}

output_size!(PolicyInfo {
    name,
    version,
    settings_schema,
    description
});
output_size!(Violation { path, message });

no_prose!(PolicyInfo);
prose!(Violation {
    path: [path],
    text: [message],
    nested: []
});

impl Prose for Verdict {
    fn bound_prose(&mut self) {
        if let Verdict::Warn(v) | Verdict::Deny(v) = self {
            v.bound_prose();
        }
    }
}

impl OutputSize for Verdict {
    fn output_size(&self) -> usize {
        match self {
            Verdict::Allow => 1,
            Verdict::Warn(v) | Verdict::Deny(v) => v.output_size(),
        }
    }
}

/// A loaded policy with its `metadata()` answer.
#[derive(Clone)]
pub struct PolicyComponent {
    loaded: Arc<Loaded<bindings::PolicyPre<HostState>>>,
    info: Arc<PolicyInfo>,
}

impl std::fmt::Debug for PolicyComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyComponent")
            .field("name", &self.loaded.name)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Load a policy component. Policies never get secrets.
    pub fn load_policy(
        &self,
        name: &str,
        wasm: &[u8],
        limits: Limits,
    ) -> Result<PolicyComponent, RuntimeError> {
        limits.check().map_err(|message| RuntimeError::Limits {
            guest: name.to_string(),
            message,
        })?;
        let (component, cache) = self.compile(name, wasm, None)?;
        let world_error = |e: wasmtime::Error| RuntimeError::World {
            guest: name.to_string(),
            world: "proxops:policy/policy@0.1.0",
            message: format!("{e:#}"),
        };
        let pre = self
            .policy_linker
            .instantiate_pre(&component)
            .map_err(world_error)?;
        let pre = bindings::PolicyPre::new(pre).map_err(world_error)?;
        let loaded = Arc::new(Loaded::new(
            name,
            wasm,
            &component,
            cache,
            limits,
            crate::host::SecretAccess::None,
            pre,
        ));
        let mut instance = PolicyInstance {
            inner: Instance::new(loaded.clone(), GuestRun::new(None))?,
        };
        let info = instance.metadata()?;
        Ok(PolicyComponent {
            loaded,
            info: Arc::new(info),
        })
    }
}

impl PolicyComponent {
    pub fn name(&self) -> &str {
        &self.loaded.name
    }

    pub fn sha256(&self) -> &str {
        &self.loaded.sha256
    }

    pub fn info(&self) -> &PolicyInfo {
        &self.info
    }

    /// A fresh instance in a run of its own (no budget). Policies are third-party code:
    /// use one per evaluation.
    pub fn instance(&self) -> Result<PolicyInstance, GuestError> {
        self.instance_in(&GuestRun::new(None))
    }

    /// A fresh instance in `run`: refused at once when the policy already failed in that
    /// run, and its calls count against the run's budget.
    pub fn instance_in(&self, run: &Arc<GuestRun>) -> Result<PolicyInstance, GuestError> {
        Ok(PolicyInstance {
            inner: Instance::new(self.loaded.clone(), run.clone())?,
        })
    }
}

/// A live instance of a policy.
pub struct PolicyInstance {
    inner: Instance<bindings::Policy>,
}

impl std::fmt::Debug for PolicyInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyInstance")
            .field("guest", &self.inner.loaded.name)
            .finish_non_exhaustive()
    }
}

impl PolicyInstance {
    pub fn last_log(&self) -> &GuestLog {
        self.inner.last_log()
    }

    pub fn metadata(&mut self) -> Result<PolicyInfo, GuestError> {
        self.inner.call("metadata", |p, s| {
            p.proxops_policy_checker().call_metadata(s)
        })
    }

    pub fn validate_settings(
        &mut self,
        settings: &str,
    ) -> Result<Result<(), Vec<crate::kind::Diagnostic>>, GuestError> {
        self.inner.call("validate-settings", |p, s| {
            p.proxops_policy_checker()
                .call_validate_settings(s, settings)
        })
    }

    pub fn check_manifest(
        &mut self,
        manifest: &ManifestView,
        settings: &str,
    ) -> Result<Verdict, GuestError> {
        self.inner.call("check-manifest", |p, s| {
            p.proxops_policy_checker()
                .call_check_manifest(s, manifest, settings)
        })
    }

    pub fn check_plan(
        &mut self,
        actions: &[ActionView],
        settings: &str,
    ) -> Result<Verdict, GuestError> {
        self.inner.call("check-plan", |p, s| {
            p.proxops_policy_checker()
                .call_check_plan(s, actions, settings)
        })
    }
}

/// The operation a policy built for `proxops:policy@0.1.0` sees for a kind's action: the
/// 0.1.0 operations were VM-shaped, so the kind steps `power` and `mark-template` keep their
/// names and every other kind-specific step is shown as an `update`.
pub fn policy_operation(op: &crate::kind::Operation) -> PolicyOperation {
    use crate::kind::Operation as K;
    match op {
        K::Create => PolicyOperation::Create,
        K::Update => PolicyOperation::Update,
        K::Delete => PolicyOperation::Delete,
        op if op.is_power() => PolicyOperation::Power,
        op if op.is_step(crate::kind::MARK_TEMPLATE) => PolicyOperation::MarkTemplate,
        K::Step(_) => PolicyOperation::Update,
    }
}
