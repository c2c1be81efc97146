//! Everything that can be checked without PVE: routing manifests to kinds, each kind's
//! `validate`, references between manifests and identity collisions. Any error here stops
//! the cluster's cycle before the first PVE call.
//!
//! Every check is within one cluster (references, cycles and identities never cross
//! clusters), so a run over many clusters validates them one at a time
//! ([`validate_in_order`]) and starts on each as soon as it is ready.

use std::collections::HashMap;
use std::sync::Arc;

use proxops_core::{API_VERSION, Diagnostic, Layout, Manifest, ObjectId, Repo};
use proxops_runtime::SecretSource;
use proxops_runtime::kind::{self, ObjectKey, Reference, Severity};

use crate::memo::{ClusterMemo, Memo, Remember, Replay};
use crate::registry::KindRegistry;
use crate::workers::par_map;

mod host_fields;
mod references;

use host_fields::{HostClaim, take_host_fields};
pub use references::RefIndex;
use references::{check_cycles, check_identities, check_references};

/// A manifest that passed its kind's validation.
#[derive(Debug, Clone)]
pub struct Object {
    pub id: ObjectId,
    /// Index of the kind in the registry.
    pub kind: usize,
    pub file: String,
    /// Normalised desired state (JSON) from the kind.
    pub desired: String,
    pub key: ObjectKey,
    pub references: Vec<Reference>,
    /// `metadata.adopt`: an explicit take-over of a live guest proxops did not create.
    pub adopt: Option<crate::ownership::AdoptClaim>,
    /// `metadata.adopt: {id, comment}`: an explicit take-over of a live named object proxops
    /// did not create.
    pub take_over: Option<crate::ownership::NamedClaim>,
    /// `metadata.budget`: the disruption budget of `proxops.yaml` this guest names itself
    /// into ([`crate::rollout::Rollout::resolve`] checks it).
    pub budget: Option<String>,
}

/// The validated objects of a repository.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub objects: Vec<Object>,
}

fn guest_diag(file: &str, d: &kind::Diagnostic) -> Diagnostic {
    match d.severity {
        Severity::Error => Diagnostic::error(file, d.path.clone(), d.message.clone()),
        Severity::Warning => Diagnostic::warning(file, d.path.clone(), d.message.clone()),
    }
}

/// Route a manifest to its kind, or say why it cannot be routed.
fn route(registry: &KindRegistry, m: &Manifest) -> Result<usize, Diagnostic> {
    let Some(api_version) = m.api_version() else {
        return Err(Diagnostic::error(
            &m.file,
            "apiVersion",
            format!("required field is missing; expected `{API_VERSION}`"),
        ));
    };
    let Some(kind) = m.kind() else {
        return Err(Diagnostic::error(
            &m.file,
            "kind",
            format!(
                "required field is missing; expected one of: {}",
                registry.kind_names()
            ),
        ));
    };
    let Some(index) = registry.route(api_version, kind) else {
        if registry.by_kind(kind).is_some() {
            return Err(Diagnostic::error(
                &m.file,
                "apiVersion",
                format!("`{api_version}` is not served for kind {kind}; expected `{API_VERSION}`"),
            ));
        }
        return Err(Diagnostic::error(
            &m.file,
            "kind",
            format!(
                "unknown kind `{kind}`; expected one of: {}",
                registry.kind_names()
            ),
        ));
    };
    let folder = &registry.get(index).info().folder;
    if *folder != m.folder {
        return Err(Diagnostic::error(
            &m.file,
            "kind",
            format!(
                "a {kind} manifest belongs in {folder}/{}/, not in {}/{}/",
                m.cluster, m.folder, m.cluster
            ),
        ));
    }
    Ok(index)
}

/// Secret sources by cluster (the clusters' SOPS documents), for kinds granted secrets.
#[derive(Clone, Default)]
pub struct Secrets(pub HashMap<String, Arc<dyn SecretSource>>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Secrets {
    pub fn for_cluster(&self, cluster: &str) -> Option<Arc<dyn SecretSource>> {
        self.0.get(cluster).cloned()
    }
}

/// Validate every manifest of `repo`: returns the objects that passed and every diagnostic.
pub fn validate_repo(
    registry: &KindRegistry,
    repo: &Repo,
    secrets: &Secrets,
) -> (Catalog, Vec<Diagnostic>) {
    let (objects, diags) = validate_manifests(registry, &repo.manifests, secrets);
    (Catalog { objects }, diags)
}

/// One cluster's manifests, loaded and validated.
#[derive(Debug, Clone, Default)]
pub struct ClusterInputs {
    /// Sorted by file.
    pub manifests: Vec<Manifest>,
    /// The manifests that passed their kind's validation, in file order.
    pub objects: Vec<Object>,
    /// Problems of its manifests (reading, validation, references, identities), sorted.
    pub diags: Vec<Diagnostic>,
}

/// Load and validate the manifests of `cluster` in `layout`; with a `memo`, files whose
/// bytes it has seen are not parsed again and their kinds not asked again, and the memo
/// learns this run's files ([`crate::memo`]).
pub fn validate_cluster(
    registry: &KindRegistry,
    layout: &Layout,
    cluster: &str,
    secrets: &Secrets,
    memo: Option<&Memo>,
) -> ClusterInputs {
    let started = std::time::Instant::now();
    let known = memo.map(|m| m.take_cluster(cluster));
    let (manifests, mut diags) = layout.manifests_with(
        cluster,
        known.as_ref().map(|k| k as &dyn proxops_core::ReadMemo),
    );
    tracing::debug!(
        "{cluster}: loaded {} manifests in {:?}",
        manifests.len(),
        started.elapsed()
    );
    let (objects, mut more, remember) =
        validate_with(registry, &manifests, secrets, known.as_ref());
    if let (Some(memo), Some(known)) = (memo, known) {
        let now = manifests
            .iter()
            .zip(remember)
            .filter_map(|(m, r)| Some((m.store()?, r)))
            .collect();
        memo.put_cluster(known, now);
    }
    diags.append(&mut more);
    diags.sort();
    ClusterInputs {
        manifests,
        objects,
        diags,
    }
}

/// [`validate_cluster`] for each `(layout, cluster)`, one after the other on a thread of its
/// own; one receiver per cluster, in the order given, answered as soon as that cluster is
/// done. A run over many clusters starts on the first while the others are read: each
/// cluster spreads its own manifests over the cores, so the first is ready after its own
/// work, not after everyone's. The thread stops early when every receiver is gone; a
/// receiver whose cluster could not be validated (a panic, reported as it happens) gets an
/// error, and the clusters after it are still validated.
///
/// With a `memo`, it is saved once every cluster is validated.
pub fn validate_in_order(
    registry: KindRegistry,
    secrets: Secrets,
    clusters: Vec<(Arc<Layout>, String)>,
    memo: Option<Arc<Memo>>,
) -> Vec<tokio::sync::oneshot::Receiver<ClusterInputs>> {
    let (senders, receivers): (Vec<_>, Vec<_>) = clusters
        .iter()
        .map(|_| tokio::sync::oneshot::channel())
        .unzip();
    std::thread::Builder::new()
        .name("proxops-validate".into())
        .spawn(move || {
            for ((layout, cluster), sender) in clusters.iter().zip(senders) {
                if sender.is_closed() {
                    continue;
                }
                // A panic fails this cluster only (its sender is dropped); the others go on.
                let validated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    validate_cluster(&registry, layout, cluster, &secrets, memo.as_deref())
                }));
                if let Ok(inputs) = validated {
                    let _ = sender.send(inputs);
                }
            }
            if let Some(memo) = memo {
                memo.save();
            }
        })
        .expect("spawn the validation thread");
    receivers
}

/// Validate `manifests` (of any clusters): the objects that passed and every diagnostic.
pub fn validate_manifests(
    registry: &KindRegistry,
    manifests: &[Manifest],
    secrets: &Secrets,
) -> (Vec<Object>, Vec<Diagnostic>) {
    let (objects, diags, _) = validate_with(registry, manifests, secrets, None);
    (objects, diags)
}

/// What one manifest's kind answered: from the kind, or replayed from a [`Memo`].
struct Answers {
    desired: String,
    warnings: Vec<kind::Diagnostic>,
    references: Vec<Reference>,
    key: ObjectKey,
}

/// A guest call about `file` that failed (a trap, a deadline, a stopped kind).
fn internal_error(file: &str, e: proxops_runtime::GuestError) -> Vec<Diagnostic> {
    vec![Diagnostic::error(file, "", format!("internal error: {e}"))]
}

/// Ask `m`'s kind to validate it (the `metadata.adopt`-less text `input`), then for the
/// references and identity of the desired state. Also returns what to remember of the
/// answers: nothing unless every call may be replayed and the kind has a `fingerprint`.
fn ask_kind(
    registry: &KindRegistry,
    instance: &mut dyn proxops_runtime::calls::KindCalls,
    m: &Manifest,
    index: usize,
    input: &str,
    fingerprint: Option<&String>,
) -> Result<(Answers, Option<Replay>), Vec<Diagnostic>> {
    let internal = |e| internal_error(&m.file, e);
    let validated = instance
        .validate(input)
        .map_err(internal)?
        .map_err(|diags| {
            diags
                .iter()
                .map(|d| guest_diag(&m.file, d))
                .collect::<Vec<_>>()
        })?;
    let mut replayable = instance.last_call_replayable();
    // The desired state crosses back into the kind on every later call: a kind that
    // hands back something that is not JSON fails here, with its file named.
    if serde_json::from_str::<serde::de::IgnoredAny>(&validated.desired).is_err() {
        return Err(vec![Diagnostic::error(
            &m.file,
            "",
            format!(
                "the {} kind returned a desired state that is not JSON; the kind is broken (nothing is planned for this manifest)",
                registry.get(index).info().kind
            ),
        )]);
    }
    let references = instance.references(&validated.desired).map_err(internal)?;
    replayable &= instance.last_call_replayable();
    let key = instance.identity(&validated.desired).map_err(internal)?;
    replayable &= instance.last_call_replayable();
    let answers = Answers {
        desired: validated.desired,
        warnings: validated.warnings,
        references,
        key,
    };
    let replay = fingerprint.filter(|_| replayable).map(|f| Replay {
        fingerprint: f.clone(),
        desired: answers.desired.clone(),
        warnings: answers.warnings.clone(),
        references: answers.references.clone(),
        key: answers.key.clone(),
    });
    Ok((answers, replay))
}

/// [`validate_manifests`], replaying what `known` kept where it may; also returns, per
/// manifest, the answers to remember.
fn validate_with(
    registry: &KindRegistry,
    manifests: &[Manifest],
    secrets: &Secrets,
    known: Option<&ClusterMemo>,
) -> (Vec<Object>, Vec<Diagnostic>, Vec<Remember>) {
    let started = std::time::Instant::now();
    let fingerprints: Vec<Option<String>> = (0..registry.len())
        .map(|i| registry.fingerprint(i))
        .collect();
    type Validated = (Object, Vec<Diagnostic>, Remember);
    let from_memo = std::sync::atomic::AtomicUsize::new(0);
    let results = par_map(
        registry,
        manifests,
        |instances, m| -> Result<Validated, Vec<Diagnostic>> {
            let index = route(registry, m).map_err(|d| vec![d])?;
            // `metadata.adopt` and `metadata.budget` belong to the host, not to the kind's
            // schema.
            let (adopt, budget, stripped) = take_host_fields(m)
                .map_err(|(path, msg)| vec![Diagnostic::error(&m.file, path, msg)])?;
            let fingerprint = fingerprints[index].as_ref();
            let replayed = fingerprint.and_then(|f| known?.replay(m, f));
            let (answers, remember) = match replayed {
                Some(r) => {
                    from_memo.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let answers = Answers {
                        desired: r.desired.clone(),
                        warnings: r.warnings.clone(),
                        references: r.references.clone(),
                        key: r.key.clone(),
                    };
                    (answers, Remember::Known)
                }
                None => {
                    let instance = instances
                        .get(index)
                        .map_err(|e| internal_error(&m.file, e))?;
                    instance.set_secrets(secrets.for_cluster(&m.cluster));
                    let input = stripped.as_deref().unwrap_or(m.json());
                    let (answers, replay) =
                        ask_kind(registry, instance, m, index, input, fingerprint)?;
                    (answers, Remember::Fresh(replay))
                }
            };
            let Answers {
                desired,
                warnings,
                references,
                key,
            } = answers;
            if key.space == "guest-id" && crate::request::form::canonical_vmid(&key.key).is_none() {
                // PVE's vmid pool is compared by number: `0101` or `+101` would name guest 101
                // while matching no live entry and colliding with no manifest.
                return Err(vec![Diagnostic::error(
                    &m.file,
                    "",
                    format!(
                        "the {} kind gave this object the guest id {}, which is not a canonical decimal vmid (no sign, space or leading zero); nothing is planned for it (sandbox rule `{}`)",
                        registry.get(index).info().kind,
                        crate::request::shown(&key.key),
                        crate::request::Rule::Identity
                    ),
                )]);
            }
            let kind_name = &registry.get(index).info().kind;
            let (adopt, take_over) = match adopt {
                None => (None, None),
                Some(HostClaim::Guest(claim)) => {
                    if key.space != "guest-id" {
                        return Err(vec![Diagnostic::error(
                            &m.file,
                            "metadata.adopt",
                            format!(
                                "a {kind_name} is not a guest: `metadata.adopt: {{vmid, name}}` takes over guests only; for a named object write `adopt: {{id: <its id>, comment: <its live comment, or null>}}`"
                            ),
                        )]);
                    }
                    if key.key != claim.vmid.to_string() {
                        return Err(vec![Diagnostic::error(
                            &m.file,
                            "metadata.adopt.vmid",
                            format!(
                                "metadata.adopt names vmid {}, but the manifest is for vmid {}; they must agree",
                                claim.vmid, key.key
                            ),
                        )]);
                    }
                    (Some(claim), None)
                }
                Some(HostClaim::Named(claim)) => {
                    let named = key.space != "guest-id"
                        && crate::ownership::guest_scope(&key.space, &key.key).is_none()
                        && key.resource_id.is_some();
                    if !named {
                        return Err(vec![Diagnostic::error(
                            &m.file,
                            "metadata.adopt",
                            format!(
                                "a {kind_name} {} cannot be taken over: `metadata.adopt: {{id, comment}}` is for named objects that carry proxops's mark in their comment{}",
                                m.name,
                                if key.space == "guest-id" {
                                    "; a guest is taken over with `adopt: {vmid, name}`"
                                } else {
                                    ""
                                }
                            ),
                        )]);
                    }
                    if key.resource_id.as_deref() != Some(claim.id.as_str()) {
                        return Err(vec![Diagnostic::error(
                            &m.file,
                            "metadata.adopt.id",
                            format!(
                                "metadata.adopt names id {}, but the manifest is for {} {}; they must agree",
                                crate::request::shown(&claim.id),
                                kind_name,
                                crate::request::shown(
                                    key.resource_id.as_deref().unwrap_or_default()
                                )
                            ),
                        )]);
                    }
                    (None, Some(claim))
                }
            };
            let warnings = warnings.iter().map(|d| guest_diag(&m.file, d)).collect();
            let object = Object {
                id: ObjectId::new(
                    m.cluster.clone(),
                    registry.get(index).info().kind.clone(),
                    m.name.clone(),
                ),
                kind: index,
                file: m.file.clone(),
                desired,
                key,
                references,
                adopt,
                take_over,
                budget,
            };
            if object.budget.is_some() && object.key.space != "guest-id" {
                return Err(vec![Diagnostic::error(
                    &m.file,
                    "metadata.budget",
                    format!(
                        "only guests can be in a disruption budget; a {} has no vmid",
                        registry.get(index).info().kind
                    ),
                )]);
            }
            Ok((object, warnings, remember))
        },
    );

    let mut diags = Vec::new();
    let mut objects = Vec::new();
    let mut remember = Vec::with_capacity(manifests.len());
    // Manifests that failed: a reference to one is not "no such object".
    let mut invalid: HashMap<(&str, &str, &str), &str> = HashMap::new();
    for (r, m) in results.into_iter().zip(manifests) {
        match r {
            Ok((object, mut warnings, known)) => {
                diags.append(&mut warnings);
                objects.push(object);
                remember.push(known);
            }
            Err(mut errors) => {
                if let Some(kind) = m.kind() {
                    invalid.insert((&m.cluster, kind, &m.name), &m.file);
                }
                diags.append(&mut errors);
                remember.push(Remember::Fresh(None));
            }
        }
    }

    check_references(registry, &objects, &invalid, secrets, &mut diags);
    check_cycles(&objects, &mut diags);
    check_identities(&objects, &mut diags);
    diags.sort();
    let from_memo = from_memo.into_inner();
    if from_memo > 0 {
        tracing::debug!(
            "validated {} manifests in {:?} ({from_memo} answered from the memo of earlier runs)",
            manifests.len(),
            started.elapsed()
        );
    } else {
        tracing::debug!(
            "validated {} manifests in {:?}",
            manifests.len(),
            started.elapsed()
        );
    }
    (objects, diags, remember)
}
