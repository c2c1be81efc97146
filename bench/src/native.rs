//! The VM kind's logic compiled into the host: `proxops-kind-qemu` used as a plain library
//! behind the engine's [`KindCalls`], so the same plan runs with and without the component.
//!
//! Conversion route: the host's types (wasmtime bindgen) are converted field by field to and
//! from the kind's plain `model` types, the ones its `glue` module converts to and from the
//! guest's wit-bindgen types inside the component. That is the cheapest honest route: no serde
//! round trip, and every string crosses once, as the canonical ABI copies it once. The glue
//! functions themselves are not used: they resolve secrets through the WIT import, which only
//! exists inside a component.

use std::sync::Arc;

use proxops_kind_qemu::{Desired, Flavour, Secret, SecretError, Secrets};
use proxops_kind_sdk::check::{Diag, Severity as DiagSeverity};
use proxops_kind_sdk::model;
use proxops_reconcile::workers::{KindCalls, NativeKind};
use proxops_runtime::kind::{
    Action, Anomaly, Call, Change, Diagnostic, Drift, Method, ObjectKey, Observation, Operation,
    Param, Proposal, Reference, Resolved, Severity, Validated,
};
use proxops_runtime::{GuestError, SecretSource};

/// The native VM or TemplateVM kind.
#[derive(Debug, Clone, Copy)]
pub struct NativeQemu(pub Flavour);

impl NativeKind for NativeQemu {
    fn instance(&self) -> Box<dyn KindCalls> {
        Box::new(NativeInstance {
            flavour: self.0,
            secrets: None,
        })
    }
}

struct NativeInstance {
    flavour: Flavour,
    secrets: Option<Arc<dyn SecretSource>>,
}

/// The host's secret source as the kind sees it (like the `secrets` import: none = denied).
struct Source<'a>(Option<&'a dyn SecretSource>);

impl Secrets for Source<'_> {
    fn resolve(&self, path: &str) -> Result<Secret, SecretError> {
        use proxops_runtime::SecretError as H;
        let Some(source) = self.0 else {
            return Err(SecretError::Denied);
        };
        source.resolve(path).map(Secret::new).map_err(|e| match e {
            H::Missing => SecretError::Missing,
            H::Empty => SecretError::Empty,
            H::Invalid(why) => SecretError::Invalid(why),
        })
    }
}

fn diag(d: Diag) -> Diagnostic {
    Diagnostic {
        path: d.path,
        message: d.message,
        severity: match d.severity {
            DiagSeverity::Error => Severity::Error,
            DiagSeverity::Warning => Severity::Warning,
        },
    }
}

fn diags(d: Vec<Diag>) -> Vec<Diagnostic> {
    d.into_iter().map(diag).collect()
}

fn parse_desired(desired: &str) -> Result<Desired, Vec<Diag>> {
    serde_json::from_str(desired).map_err(|e| {
        vec![Diag::error(
            "",
            format!("desired state is not a VM/TemplateVM desired state: {e}"),
        )]
    })
}

fn method_out(m: model::Method) -> Method {
    match m {
        model::Method::Get => Method::Get,
        model::Method::Post => Method::Post,
        model::Method::Put => Method::Put,
        model::Method::Delete => Method::Delete,
    }
}

fn method_in(m: Method) -> model::Method {
    match m {
        Method::Get => model::Method::Get,
        Method::Post => model::Method::Post,
        Method::Put => model::Method::Put,
        Method::Delete => model::Method::Delete,
    }
}

fn call_out(c: model::Call) -> Call {
    Call {
        method: method_out(c.method),
        path: c.path,
        params: c
            .params
            .into_iter()
            .map(|(name, value, sensitive)| Param {
                name,
                value,
                sensitive,
            })
            .collect(),
    }
}

fn call_in(c: &Call) -> model::Call {
    model::Call {
        method: method_in(c.method),
        path: c.path.clone(),
        params: c
            .params
            .iter()
            .map(|p| (p.name.clone(), p.value.clone(), p.sensitive))
            .collect(),
    }
}

fn drift_out(d: model::Drift) -> Drift {
    Drift {
        path: d.path,
        live: d.live,
        desired: d.desired,
        sensitive: d.sensitive,
    }
}

fn proposal_out(p: model::Proposal) -> Proposal {
    Proposal {
        actions: p
            .actions
            .into_iter()
            .map(|a| Action {
                operation: match a.operation {
                    model::Operation::Create => Operation::Create,
                    model::Operation::Update => Operation::Update,
                    model::Operation::Delete => Operation::Delete,
                    model::Operation::Power => Operation::Power,
                    model::Operation::MarkTemplate => Operation::MarkTemplate,
                },
                summary: a.summary,
                calls: a.calls.into_iter().map(call_out).collect(),
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
                requires_stop: a.requires_stop,
                destructive: a.destructive,
            })
            .collect(),
        drift: p.drift.into_iter().map(drift_out).collect(),
        pending: p.pending.into_iter().map(drift_out).collect(),
        anomalies: p
            .anomalies
            .into_iter()
            .map(|a| Anomaly {
                path: a.path,
                message: a.message,
            })
            .collect(),
    }
}

fn observation_in(o: &Observation) -> model::Observation {
    model::Observation {
        live: o.live.clone(),
        reads: o
            .reads
            .iter()
            .map(|r| model::Read {
                call: call_in(&r.call),
                status: r.status,
                body: r.body.clone(),
            })
            .collect(),
    }
}

fn resolved_in(resolved: &[Resolved]) -> Vec<(proxops_kind_qemu::Reference, String)> {
    resolved
        .iter()
        .map(|r| {
            (
                proxops_kind_qemu::Reference {
                    kind: r.reference.kind.clone(),
                    name: r.reference.name.clone(),
                    path: r.reference.path.clone(),
                },
                r.desired.clone(),
            )
        })
        .collect()
}

impl KindCalls for NativeInstance {
    fn set_secrets(&mut self, source: Option<Arc<dyn SecretSource>>) {
        self.secrets = source;
    }

    fn validate(
        &mut self,
        manifest: &str,
    ) -> Result<Result<Validated, Vec<Diagnostic>>, GuestError> {
        let secrets = Source(self.secrets.as_deref());
        Ok(
            match proxops_kind_qemu::validate_json(self.flavour, manifest, &secrets) {
                Ok(v) => match serde_json::to_string(&v.desired) {
                    Ok(desired) => Ok(Validated {
                        desired,
                        warnings: diags(v.warnings),
                    }),
                    Err(e) => Err(vec![diag(Diag::error(
                        "",
                        format!("internal: desired state not serialisable: {e}"),
                    ))]),
                },
                Err(d) => Err(diags(d)),
            },
        )
    }

    fn references(&mut self, desired: &str) -> Result<Vec<Reference>, GuestError> {
        let Ok(d) = parse_desired(desired) else {
            return Ok(Vec::new());
        };
        Ok(proxops_kind_qemu::references(&d)
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
        Ok(match parse_desired(desired) {
            Ok(d) => diags(proxops_kind_qemu::check_references(
                &d,
                &resolved_in(resolved),
            )),
            Err(e) => diags(e),
        })
    }

    fn identity(&mut self, desired: &str) -> Result<ObjectKey, GuestError> {
        Ok(match parse_desired(desired) {
            Ok(d) => {
                let k = proxops_kind_qemu::identity(&d);
                ObjectKey {
                    node: k.node,
                    space: k.space,
                    key: k.key,
                    resource_id: k.resource_id,
                }
            }
            Err(e) => ObjectKey {
                node: None,
                space: "invalid".into(),
                key: e.first().map(|d| d.message.clone()).unwrap_or_default(),
                resource_id: None,
            },
        })
    }

    fn observe(
        &mut self,
        desired: Option<&str>,
        live: Option<&str>,
        _referrers: &[Resolved],
    ) -> Result<Vec<Call>, GuestError> {
        let desired = desired.and_then(|d| parse_desired(d).ok());
        Ok(proxops_kind_qemu::observe(desired.as_ref(), live)
            .into_iter()
            .map(call_out)
            .collect())
    }

    fn plan(
        &mut self,
        desired: Option<&str>,
        resolved: &[Resolved],
        _referrers: &[Resolved],
        observed: &Observation,
    ) -> Result<Result<Proposal, Vec<Diagnostic>>, GuestError> {
        let desired = match desired.map(parse_desired).transpose() {
            Ok(d) => d,
            Err(e) => return Ok(Err(diags(e))),
        };
        let secrets = Source(self.secrets.as_deref());
        Ok(proxops_kind_qemu::plan(
            self.flavour,
            desired.as_ref(),
            &resolved_in(resolved),
            &secrets,
            &observation_in(observed),
        )
        .map(proposal_out)
        .map_err(diags))
    }

    fn claims(&mut self, live: &str) -> Result<bool, GuestError> {
        Ok(proxops_kind_qemu::claims(self.flavour, live))
    }
}
