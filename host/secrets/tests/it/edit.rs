//! Adding entries to fixtures written by the real sops: what is added reads back, every other
//! ciphertext line is byte-for-byte the same, and every refusal writes nothing and says why.

use std::path::Path;

use proxops_secrets::{SopsDocument, SopsError, add_strings, set_strings};

use crate::common::{fixture, other_key, test_key};

/// 2026-11-30T12:00:00Z.
const NOW: u64 = 1_796_040_000;
const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAdoptedKeyForTests adopted@host";

fn entries<'a>(list: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    list.to_vec()
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

/// Adds `new` under `parent` of fixture `name`; checks the values, the untouched lines and
/// where the new lines went (`after`: the line just before the first inserted one).
fn check_added(name: &str, parent: &[&str], new: &[(&str, &str)], inserted: &[&str]) {
    let old = read(name);
    let out = add_strings(
        Path::new(name),
        &old,
        &test_key(),
        parent,
        &entries(new),
        NOW,
    )
    .unwrap_or_else(|e| panic!("{name}: {e}"));
    let doc = SopsDocument::from_yaml(Path::new(name), &out, &test_key()).unwrap();
    let before = SopsDocument::from_yaml(Path::new(name), &old, &test_key()).unwrap();
    let now: Vec<(String, &str)> = doc.entries("");
    for entry in before.entries("") {
        assert!(now.contains(&entry), "{name}: `{}` kept", entry.0);
    }
    for (n, v) in new {
        let path = match parent {
            [] => n.to_string(),
            _ => format!("{}.{n}", parent.join(".")),
        };
        assert_eq!(doc.get(&path), Ok(*v), "{name}: `{path}` added");
    }
    assert_eq!(
        doc.entries("").len(),
        before.entries("").len() + new.len(),
        "{name}"
    );
    // The diff is the inserted lines plus `lastmodified` and `mac`, nothing else.
    let meta = |l: &&str| {
        let t = l.trim_start();
        t.starts_with("lastmodified:") || t.starts_with("mac:")
    };
    let old_lines: Vec<&str> = old.lines().filter(|l| !meta(l)).collect();
    let new_lines: Vec<&str> = out.lines().filter(|l| !meta(l)).collect();
    // The new lines in order: walk both files, skipping what matches the old file's next line.
    let mut rest = old_lines.iter().peekable();
    let mut added: Vec<&str> = Vec::new();
    for line in &new_lines {
        if rest.peek() == Some(&line) {
            rest.next();
        } else {
            added.push(line);
        }
    }
    assert_eq!(added.len(), inserted.len(), "{name}: {added:#?}");
    for (got, want) in added.iter().zip(inserted) {
        assert!(
            got.starts_with(want),
            "{name}: inserted `{got}`, expected it to start with `{want}`"
        );
    }
    let removed: Vec<&&str> = rest.collect();
    assert!(
        removed.is_empty(),
        "{name}: lines lost or moved: {removed:?}"
    );
    assert!(
        out.contains("lastmodified: \"2026-11-30T12:00:00Z\""),
        "{name}"
    );
    assert!(!out.contains(KEY), "{name}: the value is encrypted");
}

#[test]
fn entries_go_at_the_end_of_their_mapping_and_nothing_else_changes() {
    check_added(
        "cluster.sops.yaml",
        &["cloud-init", "ssh-keys"],
        &[("adopted-0123456789abcdef", KEY)],
        &["        adopted-0123456789abcdef: ENC[AES256_GCM,data:"],
    );
    // The new line follows the last existing key of the block, before `passwords:`.
    let out = add_strings(
        Path::new("c"),
        &read("cluster.sops.yaml"),
        &test_key(),
        &["cloud-init", "ssh-keys"],
        &entries(&[("adopted-1", KEY)]),
        NOW,
    )
    .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("        adopted-1: ENC["))
        .unwrap();
    assert!(lines[at - 1].starts_with("        bob@host.example: ENC["));
    assert_eq!(lines[at + 1], "    passwords:");
}

/// A top-level entry gets sops's AAD for a top-level key (`name:`, not `:name:`), so it reads
/// back (with proxops's reader, which follows sops's rule).
#[test]
fn a_top_level_entry_reads_back() {
    let old = read("cluster.sops.yaml");
    let out = add_strings(
        Path::new("cluster.sops.yaml"),
        &old,
        &test_key(),
        &[],
        &entries(&[("top-secret", "v1")]),
        NOW,
    )
    .unwrap();
    let doc = SopsDocument::from_yaml(Path::new("cluster.sops.yaml"), &out, &test_key()).unwrap();
    assert_eq!(doc.get("top-secret"), Ok("v1"));
}

#[test]
fn missing_mappings_are_created_where_a_reader_expects_them() {
    check_added(
        "cluster.sops.yaml",
        &["cloud-init", "more-keys"],
        &[("a", KEY), ("b", "ssh-rsa AAAAB3Nza second")],
        &[
            "    more-keys:",
            "        a: ENC[AES256_GCM,data:",
            "        b: ENC[AES256_GCM,data:",
        ],
    );
    check_added(
        "cluster.sops.yaml",
        &["fresh", "ssh-keys"],
        &[("adopted-2", KEY)],
        &[
            "fresh:",
            "    ssh-keys:",
            "        adopted-2: ENC[AES256_GCM,data:",
        ],
    );
    // Every fixture proxops reads, in each of its layouts and rules.
    for name in [
        "edited-by-set.sops.yaml",
        "mac-only-encrypted.sops.yaml",
        "two-recipients.sops.yaml",
        "unencrypted-regex.sops.yaml",
        "canary.sops.yaml",
    ] {
        let doc = SopsDocument::open(&fixture(name), &test_key()).unwrap();
        let exists = !doc.entries("cloud-init.ssh-keys").is_empty();
        let want: &[&str] = if exists {
            &["adopted-3: ENC[AES256_GCM,data:"]
        } else {
            &["ssh-keys:", "adopted-3: ENC[AES256_GCM,data:"]
        };
        let old = read(name);
        let out = add_strings(
            Path::new(name),
            &old,
            &test_key(),
            &["cloud-init", "ssh-keys"],
            &entries(&[("adopted-3", KEY)]),
            NOW,
        );
        match out {
            Ok(out) => {
                let doc = SopsDocument::from_yaml(Path::new(name), &out, &test_key()).unwrap();
                assert_eq!(doc.get("cloud-init.ssh-keys.adopted-3"), Ok(KEY), "{name}");
                for w in want {
                    assert!(out.contains(w), "{name}: {w}\n{out}");
                }
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
}

#[test]
fn refusals_name_the_file_and_the_path_and_never_the_value() {
    let check = |name: &str, parent: &[&str], new: &[(&str, &str)], says: &str| {
        let err = add_strings(
            Path::new(name),
            &read(name),
            &test_key(),
            parent,
            &entries(new),
            NOW,
        )
        .expect_err(says)
        .to_string();
        assert!(err.contains(name), "{err}");
        assert!(err.contains(says), "`{says}` in: {err}");
        for (_, v) in new {
            assert!(v.is_empty() || !err.contains(v), "no value in: {err}");
        }
    };
    let ci = &["cloud-init", "ssh-keys"][..];
    check(
        "cluster.sops.yaml",
        ci,
        &[("alice", KEY)],
        "`cloud-init.ssh-keys.alice` already exists",
    );
    check(
        "cluster.sops.yaml",
        ci,
        &[("a.b", KEY)],
        "is not a plain key",
    );
    check(
        "cluster.sops.yaml",
        ci,
        &[("x", KEY), ("x", KEY)],
        "is given twice",
    );
    check(
        "cluster.sops.yaml",
        ci,
        &[("x", "two\nlines")],
        "is empty or spans lines",
    );
    check(
        "cluster.sops.yaml",
        ci,
        &[("x", "")],
        "is empty or spans lines",
    );
    check(
        "cluster.sops.yaml",
        &["settings", "list"],
        &[("x", KEY)],
        "`settings.list` is a list, not a mapping",
    );
    check(
        "cluster.sops.yaml",
        &["settings", "count"],
        &[("x", KEY)],
        "`settings.count` is an integer, not a mapping",
    );
    check(
        "cluster.sops.yaml",
        &["pve"],
        &[("x_unencrypted", KEY)],
        "leave `pve.x_unencrypted` unencrypted",
    );
    check("tampered-mac.sops.yaml", ci, &[("x", KEY)], "MAC");
    check(
        "tampered-swapped.sops.yaml",
        ci,
        &[("x", KEY)],
        "failed authentication",
    );
}

#[test]
fn a_key_that_cannot_open_the_file_adds_nothing() {
    let err = add_strings(
        Path::new("cluster.sops.yaml"),
        &read("cluster.sops.yaml"),
        &other_key(),
        &["cloud-init", "ssh-keys"],
        &entries(&[("x", KEY)]),
        NOW,
    )
    .unwrap_err();
    assert!(matches!(err, SopsError::NoMatchingIdentity { .. }), "{err}");
}

#[test]
fn set_strings_replaces_a_string_in_place_and_adds_the_rest() {
    let name = "cluster.sops.yaml";
    let old = read(name);
    let before = SopsDocument::from_yaml(Path::new(name), &old, &test_key()).unwrap();
    let ci = &["cloud-init", "ssh-keys"][..];
    let out = set_strings(
        Path::new(name),
        &old,
        &test_key(),
        ci,
        &entries(&[("alice", KEY), ("adopted-9", KEY)]),
        NOW,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let doc = SopsDocument::from_yaml(Path::new(name), &out, &test_key()).unwrap();
    assert_eq!(doc.get("cloud-init.ssh-keys.alice"), Ok(KEY));
    assert_eq!(doc.get("cloud-init.ssh-keys.adopted-9"), Ok(KEY));
    assert_eq!(doc.entries("").len(), before.entries("").len() + 1);
    let now = doc.entries("");
    for entry in before.entries("") {
        if entry.0 != "cloud-init.ssh-keys.alice" {
            assert!(now.contains(&entry), "`{}` kept", entry.0);
        }
    }
    // One line replaced where it was, one added, and the two metadata lines: nothing else.
    let changed = old
        .lines()
        .filter(|l| !out.lines().any(|m| m == *l))
        .count();
    assert_eq!(changed, 3, "alice, lastmodified and mac change:\n{out}");
    // add_strings still refuses the taken name; set_strings refuses a mapping.
    assert!(
        add_strings(
            Path::new(name),
            &old,
            &test_key(),
            ci,
            &entries(&[("alice", KEY)]),
            NOW
        )
        .is_err()
    );
    let err = set_strings(
        Path::new(name),
        &old,
        &test_key(),
        &["cloud-init"],
        &entries(&[("ssh-keys", KEY)]),
        NOW,
    )
    .expect_err("a mapping is not replaced")
    .to_string();
    assert!(
        err.contains("`cloud-init.ssh-keys` already exists"),
        "{err}"
    );
}
