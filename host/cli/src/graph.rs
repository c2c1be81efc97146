//! `proxops graph`: the dependency graph of the manifests as DOT or Mermaid.

use std::collections::BTreeMap;
use std::path::Path;

use proxops_core::Diagnostic;

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
    let mut out = String::new();
    match format {
        GraphFormat::Dot => out.push_str("digraph proxops {\n  rankdir=LR;\n"),
        GraphFormat::Mermaid => out.push_str("flowchart LR\n"),
    }
    let mut index = BTreeMap::new();
    let objects = p.objects();
    for (i, o) in objects.iter().enumerate() {
        let node = o.id.in_cluster();
        index.insert(node.clone(), i);
        match format {
            GraphFormat::Dot => out.push_str(&format!(
                "  \"{node}\" [label=\"{} {}\\n{}\"];\n",
                o.id.kind, o.id.name, o.id.cluster
            )),
            GraphFormat::Mermaid => out.push_str(&format!(
                "  n{i}[\"{} {} ({})\"]\n",
                o.id.kind, o.id.name, o.id.cluster
            )),
        }
    }
    for (i, o) in objects.iter().enumerate() {
        for r in &o.references {
            let target = o.id.sibling(r.kind.as_str(), r.name.as_str()).in_cluster();
            match format {
                GraphFormat::Dot => out.push_str(&format!(
                    "  \"{target}\" -> \"{}\" [label=\"{}\"];\n",
                    o.id.in_cluster(),
                    r.path
                )),
                GraphFormat::Mermaid => {
                    if let Some(t) = index.get(&target) {
                        out.push_str(&format!("  n{t} -->|{}| n{i}\n", r.path));
                    }
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
