//! Reading the `--json` output of `proxops plan` back as planned actions (for `policy test --plan`).

use proxops_runtime::kind::{Change, Operation};
use proxops_runtime::policy::{ActionView, PolicyOperation, policy_operation};
use serde::Deserialize;

use crate::plan::PlanView;

use super::check::{ManifestInput, PlannedAction, redact};

/// The `--json` output of `proxops plan` as `policy test --plan` reads it: the list of
/// [`PlanView`]s `plan --json` writes (or one of them, or `{"clusters": [...]}`). Unknown
/// fields are ignored; fields a hand-written plan leaves out take their defaults.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PlanFile {
    List(Vec<PlanView>),
    Wrapped { clusters: Vec<PlanView> },
    One(PlanView),
}

/// The operation a policy sees for an operation named in a plan file: `create`, `update`,
/// `delete`, or a kind's step name (see [`policy_operation`]).
fn parse_operation(s: &str) -> Option<PolicyOperation> {
    let op = match s {
        "" => return None,
        "create" => Operation::Create,
        "update" => Operation::Update,
        "delete" => Operation::Delete,
        step => Operation::Step(step.to_string()),
    };
    Some(policy_operation(&op))
}

/// Planned actions per cluster from a plan JSON file (`proxops plan --json`). Each object's
/// document is taken from `documents` (matched by kind and name, then cluster when known);
/// values already shown as `(sensitive)` stay redacted and are flagged sensitive.
pub fn actions_from_plan_json(
    text: &str,
    documents: &[ManifestInput],
) -> Result<Vec<(String, Vec<PlannedAction>)>, String> {
    let file: PlanFile = serde_json::from_str(text)
        .map_err(|e| format!("not a plan as written by `proxops plan --json` ({e})"))?;
    let clusters = match file {
        PlanFile::List(c) | PlanFile::Wrapped { clusters: c } => c,
        PlanFile::One(c) => vec![c],
    };
    let mut out = Vec::new();
    for c in clusters {
        let mut actions = Vec::new();
        for o in c.objects {
            let (kind, name, file) = (&o.object.id.kind, &o.object.id.name, &o.object.file);
            let doc = documents
                .iter()
                .filter(|d| &d.kind == kind && &d.name == name)
                .find(|d| d.cluster == c.cluster || d.cluster.is_empty())
                .or_else(|| {
                    file.as_ref()
                        .and_then(|f| documents.iter().find(|d| &d.file == f))
                });
            for a in o.actions {
                let operation = parse_operation(&a.operation)
                    .ok_or_else(|| format!("{kind} {name}: unknown operation `{}`", a.operation))?;
                let changes = a
                    .changes
                    .into_iter()
                    .map(|ch| {
                        let sensitive = ch.old.as_deref() == Some("(sensitive)")
                            || ch.new.as_deref() == Some("(sensitive)");
                        Change {
                            key: ch.key,
                            old: ch.old,
                            new: ch.new,
                            sensitive,
                        }
                    })
                    .map(|ch| redact(&ch))
                    .collect();
                actions.push(PlannedAction {
                    file: file.clone(),
                    view: ActionView {
                        cluster: c.cluster.clone(),
                        kind: kind.clone(),
                        name: name.clone(),
                        operation,
                        summary: a.summary,
                        destructive: a.destructive,
                        requires_stop: a.requires_stop,
                        running: o.running,
                        changes,
                        document: doc.map(|d| d.document.to_string()),
                    },
                });
            }
        }
        out.push((c.cluster, actions));
    }
    Ok(out)
}
