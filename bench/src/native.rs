//! The VM kind's logic compiled into the host: `proxops-kind-qemu` used as a plain library
//! behind the engine's [`KindCalls`], so the same plan runs with and without the component.
//!
//! The calls go through the kind's own `wit::Guest` functions, the ones the component
//! exports (the SDK implements them once for every `ResourceKind`): the same parsing of the
//! desired state, the same error texts, no third copy of the glue. Secrets reach the kind's
//! `HostSecrets` through [`secrets::with_native`], from the source the engine set, as the
//! `secrets` import does in the component.
//!
//! Conversion route: the host's types (wasmtime bindgen) are converted field by field to and
//! from the guest's (wit-bindgen) types; both are generated from the same WIT, so this is the
//! canonical ABI's lift and lower done by hand: no serde round trip, and every string crosses
//! once, as the canonical ABI copies it once.

use std::marker::PhantomData;
use std::sync::Arc;

use proxops_kind_qemu::{Flavour, TemplateVm, Vm};
use proxops_kind_sdk::secrets::{self, Secret, SecretError, Secrets};
use proxops_kind_sdk::{kind_types as gk, types as gt, wit};
use proxops_runtime::calls::{KindCalls, NativeKind};
use proxops_runtime::kind::{
    Action, Anomaly, Call, Change, Diagnostic, Drift, Method, ObjectKey, Observation, Operation,
    Param, Proposal, Reference, Resolved, Restore, Severity, Validated,
};
use proxops_runtime::{GuestError, SecretSource};

/// The native VM or TemplateVM kind.
#[derive(Debug, Clone, Copy)]
pub struct NativeQemu(pub Flavour);

impl NativeKind for NativeQemu {
    fn instance(&self) -> Box<dyn KindCalls> {
        match self.0 {
            Flavour::Vm => Box::new(NativeInstance::<Vm>::default()),
            Flavour::Template => Box::new(NativeInstance::<TemplateVm>::default()),
        }
    }
}

/// One instance of kind `K` (any `wit::Guest`), with the secrets the engine granted it.
struct NativeInstance<K> {
    secrets: Option<Arc<dyn SecretSource>>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Default for NativeInstance<K> {
    fn default() -> Self {
        NativeInstance {
            secrets: None,
            kind: PhantomData,
        }
    }
}

impl<K> NativeInstance<K> {
    /// Run `f` (a call into the kind) with this instance's secrets behind `HostSecrets`.
    fn call<R>(&self, f: impl FnOnce() -> R) -> R {
        secrets::with_native(Box::new(Source(self.secrets.clone())), f)
    }
}

/// The host's secret source as the kind sees it (like the `secrets` import: none = denied).
struct Source(Option<Arc<dyn SecretSource>>);

impl Secrets for Source {
    fn resolve(&self, path: &str) -> Result<Secret, SecretError> {
        use proxops_runtime::SecretError as H;
        let Some(source) = &self.0 else {
            return Err(SecretError::Denied);
        };
        source.resolve(path).map(Secret::new).map_err(|e| match e {
            H::Missing => SecretError::Missing,
            H::Empty => SecretError::Empty,
            H::Invalid(why) => SecretError::Invalid(why),
        })
    }

    /// The host's source has no reverse lookup (only `adopt` uses it; the bench never adopts).
    fn find(&self, _prefix: &str, _value: &str) -> Result<Option<String>, SecretError> {
        match &self.0 {
            None => Err(SecretError::Denied),
            Some(_) => Err(SecretError::Other(
                "the native bench kind offers no secret lookup by value".into(),
            )),
        }
    }
}

fn diags(d: Vec<gt::Diagnostic>) -> Vec<Diagnostic> {
    d.into_iter()
        .map(|d| Diagnostic {
            path: d.path,
            message: d.message,
            severity: match d.severity {
                gt::Severity::Error => Severity::Error,
                gt::Severity::Warning => Severity::Warning,
            },
        })
        .collect()
}

fn method_out(m: gt::Method) -> Method {
    match m {
        gt::Method::Get => Method::Get,
        gt::Method::Post => Method::Post,
        gt::Method::Put => Method::Put,
        gt::Method::Delete => Method::Delete,
    }
}

fn method_in(m: Method) -> gt::Method {
    match m {
        Method::Get => gt::Method::Get,
        Method::Post => gt::Method::Post,
        Method::Put => gt::Method::Put,
        Method::Delete => gt::Method::Delete,
    }
}

fn call_out(c: gt::Call) -> Call {
    Call {
        method: method_out(c.method),
        path: c.path,
        params: c
            .params
            .into_iter()
            .map(|p| Param {
                name: p.name,
                value: p.value,
                sensitive: p.sensitive,
            })
            .collect(),
    }
}

fn calls_out(cs: Vec<gt::Call>) -> Vec<Call> {
    cs.into_iter().map(call_out).collect()
}

fn call_in(c: &Call) -> gt::Call {
    gt::Call {
        method: method_in(c.method),
        path: c.path.clone(),
        params: c
            .params
            .iter()
            .map(|p| gt::Param {
                name: p.name.clone(),
                value: p.value.clone(),
                sensitive: p.sensitive,
            })
            .collect(),
    }
}

fn reference_in(r: &Reference) -> wit::Reference {
    wit::Reference {
        kind: r.kind.clone(),
        name: r.name.clone(),
        path: r.path.clone(),
    }
}

fn resolved_in(rs: &[Resolved]) -> Vec<wit::Resolved> {
    rs.iter()
        .map(|r| wit::Resolved {
            reference: reference_in(&r.reference),
            desired: r.desired.clone(),
        })
        .collect()
}

fn observation_in(o: &Observation) -> wit::Observation {
    wit::Observation {
        live: o.live.clone(),
        reads: o
            .reads
            .iter()
            .map(|r| wit::Read {
                call: call_in(&r.call),
                status: r.status,
                body: r.body.clone(),
            })
            .collect(),
    }
}

fn drift_out(d: wit::Drift) -> Drift {
    Drift {
        path: d.path,
        live: d.live,
        desired: d.desired,
        sensitive: d.sensitive,
    }
}

fn action_out(a: gk::Action) -> Action {
    Action {
        operation: match a.operation {
            gk::Operation::Create => Operation::Create,
            gk::Operation::Update => Operation::Update,
            gk::Operation::Delete => Operation::Delete,
            gk::Operation::Step(name) => Operation::Step(name),
        },
        summary: a.summary,
        calls: calls_out(a.calls),
        changes: a
            .changes
            .into_iter()
            .map(|c| Change {
                key: c.key,
                old: c.old,
                new: c.new,
                sensitive: c.sensitive,
            })
            .collect(),
        disturbs_availability: a.disturbs_availability,
        destructive: a.destructive,
        restore: a.restore.map(|r| Restore {
            after: r.after,
            calls: calls_out(r.calls),
        }),
    }
}

fn proposal_out(p: wit::Proposal) -> Proposal {
    Proposal {
        actions: p.actions.into_iter().map(action_out).collect(),
        drift: p.drift.into_iter().map(drift_out).collect(),
        pending: p.pending.into_iter().map(drift_out).collect(),
        anomalies: p
            .anomalies
            .into_iter()
            .map(|a| Anomaly {
                path: a.path,
                message: a.message,
                locked: a.locked,
            })
            .collect(),
    }
}

impl<K: wit::Guest> KindCalls for NativeInstance<K> {
    fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        self.secrets = source;
    }

    fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError> {
        Ok(self
            .call(|| K::validate(manifest.to_string()))
            .map(|v| Validated {
                desired: v.desired,
                warnings: diags(v.warnings),
            })
            .map_err(diags))
    }

    fn references(&mut self, desired: &str) -> Result<Vec<Reference>, GuestError> {
        Ok(K::references(desired.to_string())
            .into_iter()
            .map(|r| Reference {
                kind: r.kind,
                name: r.name,
                path: r.path,
            })
            .collect())
    }

    fn check_references(
        &mut self,
        desired: &str,
        resolved: &[Resolved],
    ) -> Result<Vec<Diagnostic>, GuestError> {
        Ok(diags(K::check_references(
            desired.to_string(),
            resolved_in(resolved),
        )))
    }

    fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError> {
        let k = K::identity(desired.to_string());
        Ok(ObjectKey {
            node: k.node,
            space: k.space,
            key: k.key,
            resource_id: k.resource_id,
        })
    }

    fn observe(
        &mut self,
        desired: Option<&str>,
        live: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
    ) -> Result<Vec<Call>, GuestError> {
        Ok(calls_out(K::observe(
            desired.map(str::to_string),
            live.map(str::to_string),
            resolved_in(resolved),
            resolved_in(referrers),
        )))
    }

    fn plan(
        &mut self,
        desired: Option<&str>,
        resolved: &[Resolved],
        referrers: &[Resolved],
        observed: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError> {
        let (resolved, referrers, observed) = (
            resolved_in(resolved),
            resolved_in(referrers),
            observation_in(observed),
        );
        Ok(self
            .call(|| K::plan(desired.map(str::to_string), resolved, referrers, observed))
            .map(proposal_out)
            .map_err(diags))
    }

    fn claims(&mut self, listing: &str, entry: &str) -> Result<bool, GuestError> {
        Ok(K::claims(listing.to_string(), entry.to_string()))
    }

    fn finally(&mut self, changed: &[String]) -> Result<Vec<Action>, GuestError> {
        Ok(K::finally(changed.to_vec())
            .into_iter()
            .map(action_out)
            .collect())
    }

    fn adopt(
        &mut self,
        observed: &Observation,
    ) -> Result<Result<proxops_runtime::kind::Adopted, String>, GuestError> {
        let observed = observation_in(observed);
        Ok(self
            .call(|| K::adopt(observed))
            .map(|a| proxops_runtime::kind::Adopted {
                manifest: a.manifest,
                gaps: a
                    .gaps
                    .into_iter()
                    .map(|g| proxops_runtime::kind::Gap {
                        path: g.path,
                        reason: g.reason,
                    })
                    .collect(),
            }))
    }
}
