//! `proxops plan --format markdown`: a plan for a pull-request comment. Every foreign value is
//! cleaned first (secrets redacted, control characters escaped: [`crate::output::inline`]),
//! then escaped for Markdown and HTML; values go in code fences longer than any backtick run
//! they hold. The text stays under a size bound, leaving out whole sections from the end.

use std::fmt::Write as _;

use proxops_reconcile::plan::{ObjectView, PlanView};

use crate::output::inline;
use crate::render::value;

/// GitHub's limit for one comment, in characters.
pub const DEFAULT_LIMIT: usize = 65_536;

/// The smallest limit that leaves room for the summary and the closing note.
pub const MIN_LIMIT: usize = 1_000;

/// `--max-chars`: 0 (no limit) or at least [`MIN_LIMIT`].
pub fn parse_limit(text: &str) -> Result<usize, String> {
    let n: usize = text
        .parse()
        .map_err(|_| format!("`{text}`: expected a number of characters"))?;
    if n != 0 && n < MIN_LIMIT {
        return Err(format!(
            "{n} leaves no room for the plan; use 0 (no limit) or at least {MIN_LIMIT}"
        ));
    }
    Ok(n)
}

/// One cluster of the plan, as plan saw it.
#[derive(Debug)]
pub struct Cluster {
    pub name: String,
    /// The plan (secret values already `(sensitive)`), or `None` when the cluster was not
    /// planned (the reason is in the job log).
    pub view: Option<PlanView>,
    /// `render::plan_summary`'s line.
    pub summary: String,
    /// Policy findings, as `PolicyReport::lines`.
    pub findings: Vec<String>,
}

/// One foreign value as Markdown text that renders as itself: no emphasis, link, mention,
/// table cell or HTML can come out of it, inside a paragraph, a list item or `<summary>`.
pub fn text(value: &str) -> String {
    let clean = inline(value);
    let mut out = String::with_capacity(clean.len());
    for c in clean.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '|' | '~' | '\\' | '#' | '@' | '!'
            | '$' => write!(out, "&#{};", u32::from(c)).unwrap(),
            c => out.push(c),
        }
    }
    out
}

/// A fenced code block holding `body` (lines already cleaned): the fence is longer than the
/// longest run of backticks in the body, so nothing inside can close it.
pub fn fenced(info: &str, body: &str) -> String {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}{info}\n{body}\n{fence}\n")
}

fn symbol(operation: &str) -> &'static str {
    match operation {
        "create" => "+",
        "delete" => "-",
        proxops_runtime::kind::POWER => ">",
        _ => "~",
    }
}

/// The lines of one object's code block: actions with their changes, drift, pending changes.
fn object_body(o: &ObjectView) -> String {
    let mut lines = Vec::new();
    if let Some(r) = &o.relocated {
        lines.push(format!(
            "i relocated by HA from {} to {}; planned where it is",
            inline(&r.from),
            inline(&r.to)
        ));
    }
    for a in &o.actions {
        let mut marks = String::new();
        if a.destructive {
            marks.push_str("  [destructive]");
        }
        if a.requires_stop {
            marks.push_str("  [stop required]");
        }
        if o.sandboxed {
            marks.push_str(&crate::render::endpoint_marks(&a.calls));
        }
        lines.push(format!(
            "{} {}{marks}",
            symbol(&a.operation),
            inline(&a.summary)
        ));
        if o.sandboxed {
            lines.extend(
                crate::render::call_lines(&a.calls)
                    .into_iter()
                    .map(|l| format!("    {l}")),
            );
        }
        for c in &a.changes {
            lines.push(match (&c.old, &c.new) {
                (None, Some(_)) => format!("    + {} = {}", inline(&c.key), value(&c.new)),
                (Some(_), None) => format!("    - {} = {}", inline(&c.key), value(&c.old)),
                _ => format!(
                    "    ~ {}: {} -> {}",
                    inline(&c.key),
                    value(&c.old),
                    value(&c.new)
                ),
            });
        }
    }
    if o.actions.is_empty() {
        for d in &o.drift {
            lines.push(format!(
                "~ drift {}: {} -> {} (reported, not changed)",
                inline(&d.path),
                value(&d.live),
                value(&d.desired)
            ));
        }
    }
    for p in &o.pending {
        lines.push(format!(
            "… {} pending until reboot: {} -> {}",
            inline(&p.path),
            value(&p.live),
            value(&p.desired)
        ));
    }
    lines.join("\n")
}

/// The one-line summary of an object in `<summary>`.
fn object_summary(cluster: &str, o: &ObjectView) -> String {
    let mut what = Vec::new();
    if !o.actions.is_empty() {
        let ops: Vec<&str> = o.actions.iter().map(|a| symbol(&a.operation)).collect();
        what.push(format!(
            "{} ({})",
            count(o.actions.len(), "action", "actions"),
            ops.join("")
        ));
    } else if !o.drift.is_empty() {
        what.push(count(o.drift.len(), "drift", "drifts"));
    }
    if !o.pending.is_empty() {
        what.push(format!("{} pending", o.pending.len()));
    }
    format!(
        "{} · {} {}: {}",
        text(cluster),
        text(&o.object.id.kind),
        text(&o.object.id.name),
        what.join(", ")
    )
}

fn count(n: usize, one: &str, many: &str) -> String {
    crate::render::count(n, one, many)
}

/// The plan as Markdown, at most `limit` characters (0: no limit). Sections are the title and
/// cluster summaries, then what needs a human (errors, policy findings, anomalies), then one
/// collapsible section per object with something to show, clusters and objects in name order
/// so two runs over the same state give the same text. Past the limit, the sections from the
/// first one that does not fit are left out and a closing line says how many.
pub fn render(clusters: &[Cluster], limit: usize) -> String {
    let mut clusters: Vec<&Cluster> = clusters.iter().collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    let mut sections = Vec::new();

    let mut head = String::from("### proxops plan\n\n");
    for c in &clusters {
        match &c.view {
            Some(_) => writeln!(head, "- **{}**: {}", text(&c.name), text(&c.summary)).unwrap(),
            None => writeln!(
                head,
                "- **{}**: not planned; the job log says why",
                text(&c.name)
            )
            .unwrap(),
        }
    }
    sections.push(head);

    let mut attention = Vec::new();
    for c in &clusters {
        for f in &c.findings {
            attention.push(format!("- **{}** {}\n", text(&c.name), text(f)));
        }
        let Some(view) = &c.view else { continue };
        for o in sorted(view) {
            let who = format!("{} {}", text(&o.object.id.kind), text(&o.object.id.name));
            if let Some(e) = &o.error {
                attention.push(format!(
                    "- **{}** ✗ {who}: cannot plan: {}\n",
                    text(&c.name),
                    text(e)
                ));
            }
            for a in &o.anomalies {
                let path = if a.path.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", text(&a.path))
                };
                attention.push(format!(
                    "- **{}** ! {who}: {path}{}\n",
                    text(&c.name),
                    text(&a.message)
                ));
            }
        }
    }
    if !attention.is_empty() {
        sections.push("\n#### Needs attention\n\n".to_string());
        sections.extend(attention);
    }

    let mut rollout = Vec::new();
    for c in &clusters {
        let Some(view) = &c.view else { continue };
        if view.rollout.is_empty() {
            continue;
        }
        let lines = crate::render::rollout_lines(&view.rollout);
        rollout.push(format!(
            "**{}**\n\n{}",
            text(&c.name),
            fenced("text", &lines.join("\n"))
        ));
    }
    if !rollout.is_empty() {
        sections.push("\n#### Rollout\n\n".to_string());
        sections.extend(rollout);
    }

    let mut details = Vec::new();
    for c in &clusters {
        let Some(view) = &c.view else { continue };
        for o in sorted(view) {
            if o.actions.is_empty() && o.drift.is_empty() && o.pending.is_empty() {
                continue;
            }
            details.push(format!(
                "<details><summary>{}</summary>\n\n{}\n</details>\n",
                object_summary(&c.name, o),
                fenced("diff", &object_body(o))
            ));
        }
    }
    if !details.is_empty() {
        sections.push("\n#### Changes\n\n".to_string());
        sections.extend(details);
    }
    bounded(&sections, limit)
}

/// The objects of a plan in (kind, name) order.
fn sorted(view: &PlanView) -> Vec<&ObjectView> {
    let mut objects: Vec<&ObjectView> = view.objects.iter().collect();
    objects.sort_by(|a, b| a.object.id.cmp(&b.object.id));
    objects
}

/// The longest the closing line of a cut text can be.
const NOTE_RESERVE: usize = 300;

/// `sections` joined, at most `limit` characters (0: all): from the first section that does not
/// fit, the rest are left out and a closing line says how many and how to see them all.
fn bounded(sections: &[String], limit: usize) -> String {
    let total: usize = sections.iter().map(|s| s.chars().count()).sum();
    if limit == 0 || total <= limit {
        return sections.concat();
    }
    let budget = limit.saturating_sub(NOTE_RESERVE);
    let mut out = String::new();
    let mut used = 0;
    let mut kept = 0;
    for s in sections {
        let n = s.chars().count();
        if used + n > budget {
            break;
        }
        out.push_str(s);
        used += n;
        kept += 1;
    }
    let left = sections.len() - kept;
    write!(
        out,
        "\n**Truncated:** {left} of {} sections left out to stay under {limit} characters; \
         the job log has the whole plan (`proxops plan`), or run `proxops plan --format markdown --max-chars 0`.\n",
        sections.len()
    )
    .unwrap();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_text_cannot_make_markup() {
        for (raw, expected) in [
            ("web", "web"),
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert&#40;1&#41;&lt;/script&gt;",
            ),
            ("a|b", "a&#124;b"),
            ("`x`", "&#96;x&#96;"),
            ("**bold** _it_", "&#42;&#42;bold&#42;&#42; &#95;it&#95;"),
            ("[x](javascript:y)", "&#91;x&#93;&#40;javascript:y&#41;"),
            ("@team ping", "&#64;team ping"),
            ("line\n# title", "line&#92;u{a}&#35; title"),
            ("&amp;", "&amp;amp;"),
        ] {
            assert_eq!(text(raw), expected, "text({raw:?})");
        }
    }

    #[test]
    fn fences_outgrow_every_backtick_run() {
        for (body, fence) in [
            ("plain", "```"),
            ("a ` b", "```"),
            ("a ``` b", "````"),
            ("`````", "``````"),
        ] {
            let block = fenced("diff", body);
            assert!(block.starts_with(&format!("{fence}diff\n")), "{block}");
            assert!(block.ends_with(&format!("\n{fence}\n")), "{block}");
            assert!(!block.starts_with(&format!("{fence}`")), "{block}");
        }
    }

    #[test]
    fn limits_are_none_or_room_enough() {
        for (text, ok) in [
            ("0", true),
            ("1000", true),
            ("65536", true),
            ("999", false),
            ("x", false),
        ] {
            assert_eq!(parse_limit(text).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn a_long_text_is_cut_at_a_section_with_a_note() {
        let sections: Vec<String> = (0..100).map(|i| format!("{i:0>99}\n")).collect();
        for (limit, kept) in [(0, 100), (10_000, 100), (5_000, 47), (1_000, 7)] {
            let out = bounded(&sections, limit);
            assert!(
                limit == 0 || out.chars().count() <= limit,
                "{limit}: {}",
                out.len()
            );
            let shown = out.lines().filter(|l| l.len() == 99).count();
            assert_eq!(shown, kept, "limit {limit}");
            assert_eq!(out.contains("**Truncated:**"), kept < 100, "limit {limit}");
        }
    }
}
