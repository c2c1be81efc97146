//! `proxops validate`, `kinds` and `schema`: diagnostics, the component cache, schemas.

use crate::support::{proxops, proxops_in, workspace};

#[test]
fn validate_reports_every_problem_with_file_and_field() {
    let run = proxops(&["validate", "tests/fixtures/invalid"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    insta::assert_snapshot!(run.stdout);
}

#[test]
fn validate_json_is_machine_readable() {
    let run = proxops(&["validate", "--json", "tests/fixtures/invalid"]);
    assert_eq!(run.code, 1);
    let diags: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let first = &diags.as_array().unwrap()[0];
    for field in ["file", "path", "severity", "message"] {
        assert!(first.get(field).is_some(), "missing {field} in {first}");
    }
}

/// Bundled kinds come precompiled in the binary: a fresh process with an empty cache folder
/// compiles nothing and writes nothing there. (The cache itself, and the fallback from a
/// precompiled artifact that does not fit, are tested in host/runtime.)
#[test]
fn a_fresh_process_loads_the_bundled_kinds_precompiled() {
    let cache = tempfile::tempdir().unwrap();
    let caches = |run: &crate::support::Run| -> Vec<String> {
        let rows: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r["cache"].as_str().unwrap().to_string())
            .collect()
    };
    let run = proxops_in(&workspace(), cache.path(), &["kinds", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        caches(&run).iter().all(|c| c == "precompiled"),
        "{}",
        run.stdout
    );
    let written: Vec<_> = std::fs::read_dir(cache.path())
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        written
            .iter()
            .all(|p| p.extension().is_none_or(|x| x != "cwasm")),
        "nothing compiled, nothing cached: {written:?}"
    );
    let kinds: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = kinds
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["DiskImage", "HARule", "ISO", "TemplateVM", "VM"]);
}

#[test]
fn schema_is_a_json_schema_for_the_kind() {
    let run = proxops(&["schema", "VM"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let schema: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(
        schema["$schema"]
            .as_str()
            .unwrap_or_default()
            .contains("json-schema.org"),
        "{schema}"
    );
    assert!(
        schema
            .pointer("/properties/spec/properties/disks")
            .is_some(),
        "{schema}"
    );

    let unknown = proxops(&["schema", "Toaster"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown
            .stderr
            .contains("unknown kind `Toaster`; known kinds:"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn graph_prints_the_dependencies_as_dot_and_mermaid() {
    let dot = proxops(&["graph", "examples/homelab"]);
    assert_eq!(dot.code, 0, "{}", dot.stderr);
    assert!(
        dot.stdout.starts_with("digraph proxops {"),
        "{}",
        dot.stdout
    );
    assert!(
        dot.stdout
            .contains("\"lab/TemplateVM/debian-12\" -> \"lab/VM/app-01\" [label=\"spec.clone\"]"),
        "{}",
        dot.stdout
    );
    let mermaid = proxops(&["graph", "--format", "mermaid", "examples/homelab"]);
    assert_eq!(mermaid.code, 0, "{}", mermaid.stderr);
    assert!(
        mermaid.stdout.starts_with("flowchart LR"),
        "{}",
        mermaid.stdout
    );
    assert!(
        mermaid.stdout.contains("-->|spec.clone|"),
        "{}",
        mermaid.stdout
    );
}
