//! Where teams run GitOps: `plan --format markdown` for pull requests, completions and the
//! man page.

use crate::support::{Lab, proxops, vm};

/// A description with every kind of markup a manifest could smuggle into a comment.
const HOSTILE: &str = "  pve-description: 'x ``` y ` <script>alert(1)</script> | a | @team **b** [l](javascript:z)'\n";

#[tokio::test(flavor = "multi_thread")]
async fn plan_markdown_is_stable_escaped_and_keeps_the_exit_codes() {
    let lab = Lab::start().await;
    lab.write("vm/lab/web.yaml", &vm("web", "pve01", 150, HOSTILE));
    lab.write("vm/lab/db.yaml", &vm("db", "pve02", 151, ""));
    let args = ["plan", "--format", "markdown", "--detailed-exitcode"];
    let first = lab.run(&args).await;
    assert_eq!(first.code, 2, "{}\n{}", first.stdout, first.stderr);
    let second = lab.run(&args).await;
    assert_eq!(
        first.stdout, second.stdout,
        "two runs over one state differ"
    );
    let md = &first.stdout;
    assert!(
        !outside_fences(md).contains("<script"),
        "raw HTML from a value:\n{md}"
    );
    // The description sits in a code block whose fence outgrows its ``` run.
    assert!(md.contains("\n````diff\n"), "{md}");
    assert!(md.contains("- **lab**: Plan: 2 to create"), "{md}");
    insta::assert_snapshot!("plan_markdown", md);

    // --json stays as it was, and --format json is the same.
    let json = lab.run(&["plan", "--json"]).await;
    let format_json = lab.run(&["plan", "--format", "json"]).await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert_eq!(json.stdout, format_json.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn plan_markdown_over_the_limit_is_cut_with_a_note() {
    let lab = Lab::start().await;
    for i in 0..40 {
        let name = format!("vm-{i:02}");
        lab.write(
            &format!("vm/lab/{name}.yaml"),
            &vm(&name, "pve01", 200 + i, HOSTILE),
        );
    }
    for (limit, cut) in [("4000", true), ("0", false)] {
        let run = lab
            .run(&[
                "plan",
                "--format",
                "markdown",
                "--max-chars",
                limit,
                "--detailed-exitcode",
            ])
            .await;
        assert_eq!(run.code, 2, "{}", run.stderr);
        let chars = run.stdout.trim_end().chars().count();
        assert_eq!(run.stdout.contains("**Truncated:**"), cut, "{}", run.stdout);
        if cut {
            assert!(chars <= 4000, "{chars} characters");
            assert!(run.stdout.contains("--max-chars 0"), "{}", run.stdout);
        } else {
            assert_eq!(run.stdout.matches("<details>").count(), 40);
        }
    }
}

/// The lines of a Markdown text that are not inside a fenced code block.
fn outside_fences(md: &str) -> String {
    let mut fence: Option<&str> = None;
    let mut out = String::new();
    for line in md.lines() {
        let ticks = &line[..line.len() - line.trim_start_matches('`').len()];
        match fence {
            Some(f) if ticks == f && line.trim_end() == f => fence = None,
            Some(_) => {}
            None if ticks.len() >= 3 => fence = Some(ticks),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert_eq!(fence, None, "an unclosed fence in:\n{md}");
    out
}

#[test]
fn completions_and_man_pages_name_real_subcommands() {
    for args in [
        &["completions", "bash"][..],
        &["completions", "zsh"],
        &["completions", "fish"],
        &["completions", "powershell"],
        &["man"],
        &["man", "plan"],
    ] {
        let run = proxops(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for sub in ["plan", "apply"] {
            assert!(run.stdout.contains(sub), "{args:?} does not name {sub}");
        }
    }
    let man = proxops(&["man", "plan"]);
    assert!(man.stdout.contains("\\-\\-max\\-chars"), "{}", man.stdout);
    let bad = proxops(&["man", "nope"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("no subcommand `nope`"),
        "{}",
        bad.stderr
    );
}
