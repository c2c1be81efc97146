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
use proxops_runtime::kind::{self, ObjectKey, Reference, Resolved, Severity};

use crate::memo::{ClusterMemo, Memo, Remember, Replay};
use crate::ownership::AdoptClaim;
use crate::registry::KindRegistry;
use crate::workers::par_map;

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

/// Split the host's fields off a manifest: `metadata.adopt: {vmid, name}` (the claim) and
/// `metadata.budget: NAME`, and the manifest's JSON without them (`None` when there was
/// nothing to remove). A malformed field is `(its path, why)`.
type HostFields = (Option<HostClaim>, Option<String>, Option<String>);

/// `metadata.adopt`, in the form of a guest (`{vmid, name}`) or of a named object
/// (`{id, comment}`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostClaim {
    Guest(AdoptClaim),
    Named(crate::ownership::NamedClaim),
}
fn take_host_fields(m: &Manifest) -> Result<HostFields, (String, String)> {
    // The JSON text holds the key only when some mapping has it: most manifests are not
    // parsed again.
    let has_budget = m.json().contains("\"budget\"");
    if m.adopt().is_none() && !has_budget {
        return Ok((None, None, None));
    }
    let adopt = match m.adopt() {
        Some(adopt) => Some(adopt_claim(adopt).map_err(|e| ("metadata.adopt".to_string(), e))?),
        None => None,
    };
    let mut stripped = m.document();
    let Some(meta) = stripped
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    else {
        return Ok((adopt, None, None));
    };
    meta.remove("adopt");
    let budget = match meta.remove("budget") {
        None => None,
        Some(serde_json::Value::String(name)) if !name.trim().is_empty() => Some(name),
        Some(_) => {
            return Err((
                "metadata.budget".to_string(),
                "expected the name of a budget of proxops.yaml's `budgets:`".to_string(),
            ));
        }
    };
    if adopt.is_none() && budget.is_none() {
        return Ok((None, None, None));
    }
    Ok((adopt, budget, Some(stripped.to_string())))
}

/// `metadata.adopt` read: `{vmid, name}` (a guest) or `{id, comment}` (a named object, whose
/// `comment` is the live comment adopt saw, `null` when it had none); or why it cannot be.
fn adopt_claim(adopt: &serde_json::Value) -> Result<HostClaim, String> {
    let shape = "write it as `adopt: {vmid: <the live vmid>, name: <the live PVE name>}` for a guest, or `adopt: {id: <the object's id>, comment: <its live comment, or null>}` for a named object";
    let fields = adopt
        .as_object()
        .ok_or_else(|| format!("metadata.adopt is not a mapping; {shape}"))?;
    let named = fields.contains_key("id") || fields.contains_key("comment");
    let allowed: &[&str] = if named {
        &["id", "comment"]
    } else {
        &["vmid", "name"]
    };
    if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(format!(
            "unknown field `{unknown}` in metadata.adopt; {shape}"
        ));
    }
    if named {
        let id = fields
            .get("id")
            .and_then(serde_json::Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("metadata.adopt.id is missing or empty; {shape}"))?;
        let comment = match fields.get("comment") {
            Some(serde_json::Value::String(c)) => Some(c.clone()),
            Some(serde_json::Value::Null) => None,
            _ => {
                return Err(format!(
                    "metadata.adopt.comment is missing or not a string (write `null` when the object had no comment); {shape}"
                ));
            }
        };
        return Ok(HostClaim::Named(crate::ownership::NamedClaim {
            id: id.to_string(),
            comment,
        }));
    }
    let vmid = fields
        .get("vmid")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| format!("metadata.adopt.vmid is missing or not a number; {shape}"))?;
    let name = fields
        .get("name")
        .and_then(serde_json::Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("metadata.adopt.name is missing or empty; {shape}"))?;
    Ok(HostClaim::Guest(AdoptClaim {
        vmid,
        name: name.to_string(),
    }))
}

/// Resolve every reference by (cluster, kind, name) and let the referring kind check the
/// targets (e.g. a clone template on the same node).
fn check_references(
    registry: &KindRegistry,
    objects: &[Object],
    invalid: &HashMap<(&str, &str, &str), &str>,
    secrets: &Secrets,
    diags: &mut Vec<Diagnostic>,
) {
    let mut by_name: HashMap<(&str, &str), Vec<&Object>> = HashMap::new();
    for o in objects {
        by_name
            .entry((o.id.cluster.as_str(), o.id.name.as_str()))
            .or_default()
            .push(o);
    }
    let with_refs: Vec<(&Object, Vec<Resolved>)> = objects
        .iter()
        .filter(|o| !o.references.is_empty())
        .filter_map(|o| {
            let mut resolved = Vec::new();
            let mut ok = true;
            for r in &o.references {
                let candidates = by_name
                    .get(&(o.id.cluster.as_str(), r.name.as_str()))
                    .cloned()
                    .unwrap_or_default();
                match candidates.iter().find(|t| t.id.kind == r.kind) {
                    Some(target) => resolved.push(Resolved {
                        reference: r.clone(),
                        desired: target.desired.clone(),
                    }),
                    None => {
                        ok = false;
                        let message = match candidates.first() {
                            Some(other) => format!(
                                "`{}` is a {} ({}), not a {}",
                                r.name, other.id.kind, other.file, r.kind
                            ),
                            None => match invalid.get(&(
                                o.id.cluster.as_str(),
                                r.kind.as_str(),
                                r.name.as_str(),
                            )) {
                                Some(file) => format!(
                                    "{} `{}` ({file}) is not valid; fix its errors first",
                                    r.kind, r.name
                                ),
                                None => format!(
                                    "no {} named `{}` in cluster {}",
                                    r.kind, r.name, o.id.cluster
                                ),
                            },
                        };
                        diags.push(Diagnostic::error(&o.file, r.path.clone(), message));
                    }
                }
            }
            ok.then_some((o, resolved))
        })
        .collect();
    let results = par_map(registry, &with_refs, |instances, (o, resolved)| {
        let instance = match instances.get(o.kind) {
            Ok(i) => i,
            Err(e) => {
                return vec![Diagnostic::error(
                    &o.file,
                    "",
                    format!("internal error: {e}"),
                )];
            }
        };
        instance.set_secrets(secrets.for_cluster(&o.id.cluster));
        match instance.check_references(&o.desired, resolved) {
            Ok(found) => found.iter().map(|d| guest_diag(&o.file, d)).collect(),
            Err(e) => vec![Diagnostic::error(
                &o.file,
                "",
                format!("internal error: {e}"),
            )],
        }
    });
    diags.extend(results.into_iter().flatten());
}

/// References that form a cycle (a TemplateVM cloned from a template cloned from it) can
/// never be ordered: each object would wait for the other. Each cycle is an error on every
/// object in it, naming the whole loop.
fn check_cycles(objects: &[Object], diags: &mut Vec<Diagnostic>) {
    let index: HashMap<&ObjectId, usize> = objects
        .iter()
        .enumerate()
        .map(|(i, o)| (&o.id, i))
        .collect();
    let edges: Vec<Vec<(usize, &str)>> = objects
        .iter()
        .map(|o| {
            o.references
                .iter()
                .filter_map(|r| {
                    index
                        .get(&o.id.sibling(r.kind.as_str(), r.name.as_str()))
                        .map(|&t| (t, r.path.as_str()))
                })
                .collect()
        })
        .collect();
    for cycle in find_cycles(&edges) {
        let names: Vec<String> = cycle
            .iter()
            .chain(cycle.first())
            .map(|&(i, _)| objects[i].id.to_string())
            .collect();
        for &(i, path) in &cycle {
            diags.push(Diagnostic::error(
                &objects[i].file,
                path,
                format!(
                    "reference cycle {}: no object in it can be created before the others; break the loop",
                    names.join(" -> ")
                ),
            ));
        }
    }
}

/// The cycles of a graph given as `edges[node] = [(target, label)]`: each cycle once, as
/// its nodes in order with the label of the edge leaving each. Iterative, so a long chain
/// of references cannot overflow the stack.
fn find_cycles<'a>(edges: &[Vec<(usize, &'a str)>]) -> Vec<Vec<(usize, &'a str)>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; edges.len()];
    let mut cycles = Vec::new();
    for start in 0..edges.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // The current path: (node, next edge to try, label of the edge taken from it).
        let mut path: Vec<(usize, usize, &str)> = vec![(start, 0, "")];
        mark[start] = Mark::OnPath;
        while let Some(&mut (node, ref mut next, ref mut label)) = path.last_mut() {
            let Some(&(target, edge_label)) = edges[node].get(*next) else {
                mark[node] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            *label = edge_label;
            match mark[target] {
                Mark::New => {
                    mark[target] = Mark::OnPath;
                    path.push((target, 0, ""));
                }
                Mark::OnPath => {
                    let from = path
                        .iter()
                        .position(|&(n, _, _)| n == target)
                        .expect("a node on the path");
                    cycles.push(path[from..].iter().map(|&(n, _, l)| (n, l)).collect());
                }
                Mark::Done => {}
            }
        }
    }
    cycles
}

/// References between the objects of one cluster, indexed once per cycle so that resolving
/// them stays linear in the number of objects.
#[derive(Debug)]
pub struct RefIndex<'a> {
    objects: &'a [Object],
    by_key: HashMap<(&'a str, &'a str), usize>,
    /// For each referenced (kind, name): the referring objects and their references.
    referrers: HashMap<(&'a str, &'a str), Vec<(usize, &'a Reference)>>,
}

impl<'a> RefIndex<'a> {
    /// `objects` must all belong to one cluster.
    pub fn new(objects: &'a [Object]) -> Self {
        let mut by_key = HashMap::new();
        let mut referrers: HashMap<(&str, &str), Vec<(usize, &Reference)>> = HashMap::new();
        for (i, o) in objects.iter().enumerate() {
            by_key.insert((o.id.kind.as_str(), o.id.name.as_str()), i);
            for r in &o.references {
                referrers
                    .entry((r.kind.as_str(), r.name.as_str()))
                    .or_default()
                    .push((i, r));
            }
        }
        RefIndex {
            objects,
            by_key,
            referrers,
        }
    }

    /// The targets of `o`'s references, as `check-references` and `plan` receive them.
    /// Unresolvable references were reported by validation and are left out.
    pub fn resolve(&self, o: &Object) -> Vec<Resolved> {
        o.references
            .iter()
            .filter_map(|r| {
                let t = self.by_key.get(&(r.kind.as_str(), r.name.as_str()))?;
                Some(Resolved {
                    reference: r.clone(),
                    desired: self.objects[*t].desired.clone(),
                })
            })
            .collect()
    }

    /// The objects whose references name `o`, each with the referring reference and the
    /// referrer's desired state.
    pub fn referrers(&self, o: &Object) -> Vec<Resolved> {
        self.referrers
            .get(&(o.id.kind.as_str(), o.id.name.as_str()))
            .map(|list| {
                list.iter()
                    .map(|(i, r)| Resolved {
                        reference: (*r).clone(),
                        desired: self.objects[*i].desired.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Two objects of one cluster with the same `(space, key)` collide (VMs, templates and
/// containers share PVE's guest id pool across the whole cluster).
fn check_identities(objects: &[Object], diags: &mut Vec<Diagnostic>) {
    let mut seen: HashMap<(&str, &str, &str), &Object> = HashMap::with_capacity(objects.len());
    for o in objects {
        let k = (
            o.id.cluster.as_str(),
            o.key.space.as_str(),
            o.key.key.as_str(),
        );
        match seen.get(&k) {
            Some(first) => {
                let (path, message) = if o.key.space == "guest-id" {
                    (
                        "spec.vmid",
                        format!(
                            "vmid {} is also claimed by {} ({} `{}`); VMs, templates and containers share one vmid pool per cluster, so give one of them another vmid",
                            o.key.key, first.file, first.id.kind, first.id.name
                        ),
                    )
                } else {
                    (
                        "",
                        format!(
                            "collides with {} ({} `{}`): both claim {} `{}` in cluster {}; rename or remove one of them",
                            first.file,
                            first.id.kind,
                            first.id.name,
                            o.key.space,
                            o.key.key,
                            o.id.cluster
                        ),
                    )
                };
                diags.push(Diagnostic::error(&o.file, path, message));
            }
            None => {
                seen.insert(k, o);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::find_cycles;

    /// (edges as `node -> [targets]`, the cycles expected as node lists)
    #[test]
    fn cycles_are_found_once_each() {
        let check = |graph: &[&[usize]], expected: &[&[usize]]| {
            let edges: Vec<Vec<(usize, &str)>> = graph
                .iter()
                .map(|ts| ts.iter().map(|&t| (t, "ref")).collect())
                .collect();
            let got: Vec<Vec<usize>> = find_cycles(&edges)
                .into_iter()
                .map(|c| c.into_iter().map(|(n, _)| n).collect())
                .collect();
            let expected: Vec<Vec<usize>> = expected.iter().map(|c| c.to_vec()).collect();
            assert_eq!(got, expected, "graph {graph:?}");
        };
        check(&[], &[]);
        check(&[&[1], &[], &[1]], &[]);
        check(&[&[0]], &[&[0]]);
        check(&[&[1], &[0]], &[&[0, 1]]);
        check(&[&[1], &[2], &[0], &[1]], &[&[0, 1, 2]]);
        check(&[&[1, 2], &[3], &[3], &[]], &[]);
        check(&[&[1], &[0], &[3], &[2]], &[&[0, 1], &[2, 3]]);
        // A long chain is fine (no recursion).
        let chain: Vec<Vec<usize>> = (0..100_000)
            .map(|i| if i + 1 < 100_000 { vec![i + 1] } else { vec![] })
            .collect();
        let chain: Vec<&[usize]> = chain.iter().map(Vec::as_slice).collect();
        check(&chain, &[]);
    }
}
