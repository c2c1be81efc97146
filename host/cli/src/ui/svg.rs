//! The dependency graph of a cluster as SVG, from the graph `proxops graph` builds: objects in
//! columns by depth (an object stands right of everything it references), an arrow from each
//! object to those that reference it, each box coloured by the object's last plan and linking
//! to its page. Presentation attributes only (no `style`), so the strict CSP holds.

use std::collections::BTreeMap;

use maud::{Markup, html};
use proxops_reconcile::plan::PlanView;

use super::ClusterGraph;
use super::pages::{object_href, v};

const BOX_W: usize = 210;
const BOX_H: usize = 40;
const COL: usize = 270;
const ROW: usize = 60;
const PAD: usize = 20;
/// Characters of a box's label before it is cut.
const LABEL: usize = 28;

/// Each object's column: 0 for one that references nothing in the cluster, else one more
/// than the deepest it references (validation refuses cycles; the loop is bounded anyway).
fn depths(graph: &ClusterGraph) -> Vec<usize> {
    let mut depth = vec![0usize; graph.nodes.len()];
    for _ in 0..graph.nodes.len() {
        let mut changed = false;
        for (from, to, _) in &graph.edges {
            if depth[*to] < depth[*from] + 1 {
                depth[*to] = depth[*from] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// Fill colour of a box: the object's state in the last plan.
fn fill(plan: Option<&PlanView>, id: &proxops_core::ObjectId) -> &'static str {
    let Some(o) = plan.and_then(|p| p.objects.iter().find(|o| o.object.id == *id)) else {
        return "#eef1f5";
    };
    if o.error.is_some() {
        "#fee2e2"
    } else if !o.anomalies.is_empty() {
        "#ffedd5"
    } else if !o.actions.is_empty() || !o.drift.is_empty() || !o.pending.is_empty() {
        "#fef3c7"
    } else {
        "#d1fae5"
    }
}

fn cut(text: &str) -> String {
    let shown = v(text);
    if shown.chars().count() <= LABEL {
        return shown;
    }
    let mut s: String = shown.chars().take(LABEL - 1).collect();
    s.push('…');
    s
}

/// The graph as an `<svg>` element (valid XML, so also served alone as `graph.svg`).
pub(crate) fn render(graph: &ClusterGraph, plan: Option<&PlanView>) -> Markup {
    let depth = depths(graph);
    let mut rows: BTreeMap<usize, usize> = BTreeMap::new();
    let mut at = Vec::with_capacity(graph.nodes.len());
    for d in &depth {
        let row = rows.entry(*d).or_default();
        at.push((PAD + d * COL, PAD + *row * ROW));
        *row += 1;
    }
    let width = PAD * 2 + (rows.len().max(1) - 1) * COL + BOX_W;
    let height = PAD * 2 + rows.values().max().copied().unwrap_or(1).max(1) * ROW;
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } role="img" aria-label="dependency graph" {
            defs {
                marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8"
                    markerHeight="8" orient="auto" {
                    path d="M0,0 L10,5 L0,10 z" fill="#55606e" {}
                }
            }
            @if graph.nodes.is_empty() {
                text x=(PAD) y=(PAD + 14) { "No objects." }
            }
            @for (from, to, label) in &graph.edges {
                @let (x1, y1) = (at[*from].0 + BOX_W, at[*from].1 + BOX_H / 2);
                @let (x2, y2) = (at[*to].0, at[*to].1 + BOX_H / 2);
                line x1=(x1) y1=(y1) x2=(x2) y2=(y2) stroke="#55606e" stroke-width="1.5"
                    marker-end="url(#arrow)" {
                    title { (v(label)) }
                }
            }
            @for (i, id) in graph.nodes.iter().enumerate() {
                a href=(object_href(id)) {
                    rect x=(at[i].0) y=(at[i].1) width=(BOX_W) height=(BOX_H) rx="6"
                        fill=(fill(plan, id)) stroke="#55606e" {}
                    text x=(at[i].0 + 8) y=(at[i].1 + 16) fill="#55606e" { (cut(&id.kind)) }
                    text x=(at[i].0 + 8) y=(at[i].1 + 32) fill="#1d232a" font-weight="600" { (cut(&id.name)) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_core::ObjectId;

    /// An object stands one column right of the deepest object it references.
    #[test]
    fn objects_stand_right_of_what_they_reference() {
        let id = |n: &str| ObjectId::new("lab", "VM", n);
        let graph = ClusterGraph {
            nodes: vec![id("web"), id("tpl"), id("img"), id("lone")],
            // img <- tpl <- web, and img <- web.
            edges: vec![
                (2, 1, "spec.image".into()),
                (1, 0, "spec.clone".into()),
                (2, 0, "spec.disk".into()),
            ],
        };
        assert_eq!(depths(&graph), vec![2, 1, 0, 0]);
    }
}
