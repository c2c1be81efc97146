//! Checks across a cluster's manifests: references resolved by (cluster, kind, name) and
//! checked by the referring kind, reference cycles, and identity collisions.

use std::collections::HashMap;

use proxops_core::{Diagnostic, ObjectId};
use proxops_runtime::kind::{Reference, Resolved};

use super::{Object, Secrets, guest_diag};
use crate::registry::KindRegistry;
use crate::workers::par_map;

/// Resolve every reference by (cluster, kind, name) and let the referring kind check the
/// targets (e.g. a clone template on the same node).
pub(super) fn check_references(
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
pub(super) fn check_cycles(objects: &[Object], diags: &mut Vec<Diagnostic>) {
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
pub(super) fn check_identities(objects: &[Object], diags: &mut Vec<Diagnostic>) {
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
