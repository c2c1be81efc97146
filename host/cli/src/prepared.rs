//! What `plan`, `apply`, `watch` and `graph` start from ([`Prepared`]): `proxops.yaml`, the
//! site policies, the cluster files and SOPS documents, and each cluster's validated manifests,
//! either all up front ([`prepare`]) or one cluster after the other while the first are
//! planned ([`prepare_config`] and [`Prepared::validating`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use proxops_core::{ClusterFile, Diagnostic};
use proxops_reconcile::policy::PolicySet;
use proxops_reconcile::{ClusterInputs, Object};

use crate::context::Context;
use crate::output::{self, errln};
use crate::secrets::LazySops;
use crate::validate;

/// What `plan`, `apply` and `watch` share: `proxops.yaml`, the policies, the cluster files and
/// SOPS documents, and the repository's own problems; each cluster's manifests come apart
/// ([`ClusterInputs`]): all of them validated up front ([`prepare`]), or one cluster after
/// the other while the first ones are planned ([`prepare_config`], [`Prepared::validating`]).
pub(crate) struct Prepared {
    /// Problems of the repository itself (`proxops.yaml`, cluster files, token variables,
    /// folders); each cluster's own are in its inputs. Sorted.
    pub(crate) diags: Vec<Diagnostic>,
    layout: Option<Arc<proxops_core::Layout>>,
    secrets: proxops_reconcile::Secrets,
    pub(crate) sops: BTreeMap<String, Arc<LazySops>>,
    pub(crate) policies: Arc<PolicySet>,
    /// `guest-budget.kind`: the time each kind may take per cluster and run.
    pub(crate) kind_budget: Option<Duration>,
    /// `clusters-at-once` of proxops.yaml.
    pub(crate) clusters_at_once: Option<usize>,
    /// `budgets:` of proxops.yaml, resolved per cluster by [`Prepared::rollout`].
    budgets: Vec<proxops_core::budget::Budget>,
    /// Every cluster's inputs after [`prepare`]; empty after [`prepare_config`].
    validated: BTreeMap<String, Arc<ClusterInputs>>,
}

/// Load `proxops.yaml`, the policies, the cluster files and SOPS documents, but no manifest.
/// An invalid `proxops.yaml` or policy stops the whole run before any cluster is touched:
/// the diagnostics are returned.
pub(crate) fn prepare_config(ctx: &Context, repo: &Path) -> Result<Prepared, Vec<Diagnostic>> {
    let settings = proxops_core::settings::load(ctx.config_root(repo))?;
    let policies = PolicySet::load(&ctx.runtime, ctx.config_root(repo), &settings)?;
    let config = validate::config(ctx, repo);
    Ok(Prepared {
        secrets: config.secrets(),
        diags: config.diags,
        layout: config.layout,
        sops: config.sops,
        policies: Arc::new(policies),
        kind_budget: settings.guest_budget.kind,
        clusters_at_once: settings.clusters_at_once,
        budgets: settings.budgets,
        validated: BTreeMap::new(),
    })
}

/// [`prepare_config`], then every cluster's manifests validated.
pub(crate) fn prepare(ctx: &Context, repo: &Path) -> Result<Prepared, Vec<Diagnostic>> {
    let mut p = prepare_config(ctx, repo)?;
    if let Some(layout) = &p.layout {
        let memo = ctx.memo(repo);
        for cluster in layout.manifest_clusters() {
            let inputs = proxops_reconcile::validate_cluster(
                &ctx.kinds,
                layout,
                cluster,
                &p.secrets,
                Some(&memo),
            );
            p.validated.insert(cluster.to_string(), Arc::new(inputs));
        }
        memo.save();
    }
    Ok(p)
}

/// Print why [`prepare`] or [`prepare_config`] failed.
pub(crate) fn report_unprepared(diags: Vec<Diagnostic>) {
    errln!("not run: the site policies cannot be loaded (no cluster was contacted):");
    for d in diags {
        errln!("  {}", output::inline(&d.to_string()));
    }
}

/// `prepare`, printing why it failed.
pub(crate) fn prepare_or_report(ctx: &Context, repo: &Path) -> Option<Prepared> {
    prepare(ctx, repo).map_err(report_unprepared).ok()
}

impl Prepared {
    /// The cluster files that parsed, by name.
    pub(crate) fn clusters(&self) -> &BTreeMap<String, ClusterFile> {
        static NONE: BTreeMap<String, ClusterFile> = BTreeMap::new();
        self.layout.as_ref().map_or(&NONE, |l| &l.clusters)
    }

    /// Cluster `name`'s inputs after [`prepare`] (none when it has no manifests).
    pub(crate) fn inputs(&self, name: &str) -> Arc<ClusterInputs> {
        self.validated
            .get(name)
            .cloned()
            .unwrap_or_else(|| Arc::new(ClusterInputs::default()))
    }

    /// Every validated object, in file order (after [`prepare`]).
    pub(crate) fn objects(&self) -> Vec<&Object> {
        let mut objects: Vec<&Object> = self.validated.values().flat_map(|i| &i.objects).collect();
        objects.sort_by(|a, b| a.file.cmp(&b.file));
        objects
    }

    /// The repository's problems and every validated cluster's, sorted.
    pub(crate) fn all_diags(&self) -> Vec<&Diagnostic> {
        let mut all: Vec<&Diagnostic> = self
            .diags
            .iter()
            .chain(self.validated.values().flat_map(|i| &i.diags))
            .collect();
        all.sort();
        all
    }

    /// The cluster a problem in `file` belongs to, `None` for the whole repository
    /// ([`proxops_core::Layout::cluster_of`]).
    pub(crate) fn cluster_of<'f>(&self, file: &'f str) -> Option<&'f str> {
        self.layout.as_ref().and_then(|l| l.cluster_of(file))
    }

    /// Cluster `name`'s disruption budgets, their members found among its validated
    /// objects; a guest in two budgets or a listed member no manifest declares is an error.
    pub(crate) fn rollout(
        &self,
        name: &str,
        inputs: &ClusterInputs,
    ) -> Result<proxops_reconcile::rollout::Rollout, Vec<Diagnostic>> {
        let (rollout, diags) = proxops_reconcile::rollout::Rollout::resolve(
            &self.budgets,
            name,
            &inputs.objects,
            proxops_core::settings::FILE,
        );
        if diags.is_empty() {
            Ok(rollout)
        } else {
            Err(diags)
        }
    }

    /// Whether the repository has manifest folders at all.
    pub(crate) fn has_manifests(&self) -> bool {
        self.layout
            .as_ref()
            .is_some_and(|l| l.manifest_clusters().next().is_some())
    }

    /// Validate `names` one after the other on a thread of their own (after
    /// [`prepare_config`]): one future per cluster, in order, ready as soon as that cluster is,
    /// so that planning the first overlaps reading and validating the next.
    pub(crate) fn validating(
        &self,
        ctx: &Context,
        repo: &Path,
        names: &[String],
    ) -> Vec<impl std::future::Future<Output = Arc<ClusterInputs>> + use<>> {
        let receivers = match &self.layout {
            Some(layout) => proxops_reconcile::validate_in_order(
                ctx.kinds.clone(),
                self.secrets.clone(),
                names.iter().map(|n| (layout.clone(), n.clone())).collect(),
                Some(ctx.memo(repo)),
            ),
            None => Vec::new(),
        };
        let mut receivers = receivers.into_iter();
        names
            .iter()
            .map(|name| {
                let receiver = receivers.next();
                let name = name.clone();
                async move {
                    let Some(receiver) = receiver else {
                        return Arc::new(ClusterInputs::default());
                    };
                    Arc::new(receiver.await.unwrap_or_else(|_| ClusterInputs {
                        diags: vec![Diagnostic::error(
                            format!("clusters/{name}.yaml"),
                            "",
                            "internal error: validating this cluster's manifests failed (the reason is printed above); nothing was planned for it",
                        )],
                        ..ClusterInputs::default()
                    }))
                }
            })
            .collect()
    }
}
