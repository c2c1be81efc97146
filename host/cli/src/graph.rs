//! `proxops graph`: the dependency graph of the manifests as DOT or Mermaid.

use std::collections::BTreeMap;
use std::path::Path;

use proxops_core::{Diagnostic, ObjectId};

use crate::context::Context;
use crate::exit;
use crate::output::{self, errln, out};
use crate::prepared::prepare_or_report;

/// Output format of `proxops graph`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum GraphFormat {
    Dot,
    Mermaid,
}

pub fn graph(ctx: &Context, repo: &Path, format: GraphFormat) -> anyhow::Result<u8> {
    let Some(p) = prepare_or_report(ctx, repo) else {
        return Ok(exit::ERROR);
    };
    let errors: Vec<&Diagnostic> = p.all_diags().into_iter().filter(|d| d.is_error()).collect();
    if !errors.is_empty() {
        for d in errors {
            errln!("{}", output::inline(&d.to_string()));
        }
        return Ok(exit::ERROR);
    }
    let graph = Graph::of(&p.objects());
    let mut out = String::new();
    match format {
        GraphFormat::Dot => out.push_str("digraph proxops {\n  rankdir=LR;\n"),
        GraphFormat::Mermaid => out.push_str("flowchart LR\n"),
    }
    let mut index = BTreeMap::new();
    for (i, id) in graph.nodes.iter().enumerate() {
        let node = id.in_cluster();
        index.insert(node.clone(), i);
        match format {
            GraphFormat::Dot => out.push_str(&format!(
                "  \"{node}\" [label=\"{} {}\\n{}\"];\n",
                id.kind, id.name, id.cluster
            )),
            GraphFormat::Mermaid => out.push_str(&format!(
                "  n{i}[\"{} {} ({})\"]\n",
                id.kind, id.name, id.cluster
            )),
        }
    }
    for e in &graph.edges {
        let target = e.from.in_cluster();
        let i = e.to;
        match format {
            GraphFormat::Dot => out.push_str(&format!(
                "  \"{target}\" -> \"{}\" [label=\"{}\"];\n",
                graph.nodes[i].in_cluster(),
                e.label
            )),
            GraphFormat::Mermaid => {
                if let Some(t) = index.get(&target) {
                    out.push_str(&format!("  n{t} -->|{}| n{i}\n", e.label));
                }
            }
        }
    }
    if let GraphFormat::Dot = format {
        out.push_str("}\n");
    }
    out!("{out}");
    Ok(exit::OK)
}

/// The dependency graph of validated manifests: what `proxops graph` prints and the status
/// page draws (`ui::svg`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    /// Every object, in the order of their files.
    pub(crate) nodes: Vec<ObjectId>,
    /// One per reference, in the nodes' order.
    pub(crate) edges: Vec<Edge>,
}

/// `to` (an index into [`Graph::nodes`]) references `from` through its field `label`.
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    /// The referenced object (possibly not among the nodes).
    pub(crate) from: ObjectId,
    pub(crate) to: usize,
    pub(crate) label: String,
}

impl Graph {
    pub(crate) fn of(objects: &[&proxops_reconcile::Object]) -> Graph {
        let nodes = objects.iter().map(|o| o.id.clone()).collect();
        let mut edges = Vec::new();
        for (i, o) in objects.iter().enumerate() {
            for r in &o.references {
                edges.push(Edge {
                    from: o.id.sibling(r.kind.as_str(), r.name.as_str()),
                    to: i,
                    label: r.path.to_string(),
                });
            }
        }
        Graph { nodes, edges }
    }
}
