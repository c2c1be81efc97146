//! Reads fixtures made once by the real sops 3.11.0 (tests/fixtures/sops/make-fixtures.sh).

use crate::common::{fixture, other_key, test_key};
use proxops_secrets::{LookupError, SopsDocument, SopsError};

/// What a lookup should give.
#[derive(Debug)]
enum Want {
    Is(&'static str),
    Missing,
    Empty,
    /// `LookupError::Invalid` whose message contains this text.
    Invalid(&'static str),
}
use Want::*;

fn open(name: &str) -> SopsDocument {
    SopsDocument::open(&fixture(name), &test_key())
        .unwrap_or_else(|e| panic!("{name} does not open: {e}"))
}

/// The one helper every data-driven case goes through.
fn check(name: &str, path: &str, want: Want) {
    let doc = open(name);
    let got = doc.get(path);
    let ok = match (&want, &got) {
        (Is(v), Ok(g)) => v == g,
        (Missing, Err(LookupError::Missing)) => true,
        (Empty, Err(LookupError::Empty)) => true,
        (Invalid(needle), Err(LookupError::Invalid(msg))) => {
            msg.contains(needle) && msg.contains(&path.escape_debug().to_string())
        }
        _ => false,
    };
    assert!(ok, "{name} `{path}`: wanted {want:?}, got {got:?}");
}

fn check_all(name: &str, cases: &[(&str, Want)]) {
    for (path, want) in cases {
        let want = match want {
            Is(v) => Is(v),
            Missing => Missing,
            Empty => Empty,
            Invalid(n) => Invalid(n),
        };
        check(name, path, want);
    }
}

fn refused(name: &str, needle: &str) -> SopsError {
    let err = SopsDocument::open(&fixture(name), &test_key())
        .expect_err(&format!("{name} must be refused"));
    let msg = err.to_string();
    assert!(msg.contains(name), "the message names the file: {msg}");
    assert!(msg.contains(needle), "{name}: {msg}");
    err
}

#[test]
fn cluster_strings() {
    check_all(
        "cluster.sops.yaml",
        &[
            (
                "cloud-init.ssh-keys.alice",
                Is("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@laptop"),
            ),
            (
                "cloud-init.ssh-keys.bob@host.example",
                Is("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAnotherFakeKey bob"),
            ),
            (
                "cloud-init.passwords.root",
                Is("correct horse battery staple"),
            ),
            ("cloud-init.passwords.quoted-number", Is("123")),
            ("cloud-init.passwords.yes-word", Is("yes")),
            ("pve.token", Is("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d")),
            ("pve.token_id_unencrypted", Is("proxops@pve!reconciler")),
            ("settings.multiline", Is("line one\nline two\n")),
            ("settings.unicode", Is("grüße ✓")),
        ],
    );
}

#[test]
fn cluster_missing_empty_and_invalid() {
    check_all(
        "cluster.sops.yaml",
        &[
            ("cloud-init.ssh-keys.carol", Missing),
            ("cloud-init.passwords.Root", Missing),
            ("nope", Missing),
            ("nope.deeper", Missing),
            ("sops.mac", Missing),
            ("cloud-init.passwords.empty", Empty),
            ("cloud-init.passwords.unset", Empty),
            ("settings.count", Invalid("an integer")),
            ("settings.ratio", Invalid("a float")),
            ("settings.enabled", Invalid("a boolean")),
            ("settings.expires", Invalid("a timestamp")),
            ("settings.stamp", Invalid("a timestamp")),
            ("pve.port_unencrypted", Invalid("an integer")),
            ("pve.insecure_unencrypted", Invalid("a boolean")),
            // sops rewrote `1e3` as `1000`, which reads back as an int.
            ("pve.ratio_unencrypted", Invalid("an integer")),
            ("settings.list", Invalid("a list")),
            ("settings.list.name", Invalid("`settings.list` is a list")),
            ("cloud-init.passwords", Invalid("a mapping")),
            ("pve.token.deeper", Invalid("`pve.token` is a string")),
            ("cloud-init.passwords.empty.x", Invalid("a string")),
            ("", Invalid("empty")),
            (".pve.token", Invalid("empty segment")),
            ("pve.token.", Invalid("empty segment")),
            ("pve..token", Invalid("empty segment")),
            ("pve.tok\nen", Invalid("control character")),
        ],
    );
}

#[test]
fn edited_by_sops_set() {
    check_all(
        "edited-by-set.sops.yaml",
        &[
            (
                "cloud-init.ssh-keys.carol",
                Is("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICarolsFakeKey carol"),
            ),
            (
                "cloud-init.ssh-keys.alice",
                Is("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@laptop"),
            ),
            ("pve.token", Is("changed-by-sops-set")),
            ("new-group.entry", Is("added")),
            ("cloud-init.passwords.empty", Empty),
        ],
    );
}

#[test]
fn regex_and_suffix_rules() {
    for name in [
        "encrypted-regex.sops.yaml",
        "unencrypted-regex.sops.yaml",
        "encrypted-suffix.sops.yaml",
    ] {
        check_all(
            name,
            &[
                ("cloud-init.passwords.root", Is("regex-root-password")),
                ("cloud-init.comment", Is("not secret at all")),
                ("pve.token", Is("regex-token-value")),
                ("pve.host", Is("pve1.example")),
                ("pve.port", Invalid("an integer")),
            ],
        );
    }
    // The rules really left some values in clear and encrypted others.
    let text = std::fs::read_to_string(fixture("encrypted-regex.sops.yaml")).unwrap();
    assert!(text.contains("host: pve1.example"));
    assert!(!text.contains("regex-token-value"));
}

#[test]
fn mac_only_encrypted() {
    check_all(
        "mac-only-encrypted.sops.yaml",
        &[
            ("pve.token", Is("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d")),
            ("pve.token_id_unencrypted", Is("proxops@pve!reconciler")),
            ("cloud-init.passwords.empty", Empty),
        ],
    );
    // With mac_only_encrypted, sops does not cover unencrypted values by the MAC.
    let path = fixture("mac-only-encrypted.sops.yaml");
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "token_id_unencrypted: proxops@pve!reconciler",
        "token_id_unencrypted: edited@pve!x",
    );
    let doc = SopsDocument::from_yaml(&path, &text, &test_key()).unwrap();
    assert_eq!(doc.get("pve.token_id_unencrypted"), Ok("edited@pve!x"));
}

#[test]
fn any_matching_recipient_opens_the_file() {
    for ids in [test_key(), other_key()] {
        let doc = SopsDocument::open(&fixture("two-recipients.sops.yaml"), &ids).unwrap();
        assert_eq!(doc.get("pve.token"), Ok("small-token"));
    }
}

#[test]
fn entries_lists_string_leaves_under_a_prefix() {
    let doc = open("cluster.sops.yaml");
    let keys = doc.entries("cloud-init.ssh-keys");
    assert_eq!(
        keys,
        vec![
            (
                "cloud-init.ssh-keys.alice".to_owned(),
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTestsOnly alice@laptop"
            ),
            (
                "cloud-init.ssh-keys.bob@host.example".to_owned(),
                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAnotherFakeKey bob"
            ),
        ]
    );
    let passwords: Vec<_> = doc
        .entries("cloud-init.passwords")
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        passwords,
        [
            "cloud-init.passwords.root",
            "cloud-init.passwords.empty",
            "cloud-init.passwords.quoted-number",
            "cloud-init.passwords.yes-word",
        ]
    );
    assert_eq!(
        doc.entries("pve.token"),
        vec![(
            "pve.token".to_owned(),
            "8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d"
        )]
    );
    assert!(doc.entries("cloud-init.ssh").is_empty());
    assert!(doc.entries("nope").is_empty());
    assert!(doc.entries("bad..prefix").is_empty());
    let all = doc.entries("");
    assert_eq!(
        all.len(),
        10,
        "{:?}",
        all.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for (path, value) in &all {
        assert_eq!(doc.get(path).unwrap_or(""), *value, "{path}");
    }
}

#[test]
fn tampered_files_are_refused() {
    let err = refused("tampered-swapped.sops.yaml", "failed authentication");
    assert!(
        matches!(err, SopsError::ValueAuthentication { ref path, .. } if path == "cloud-init.ssh-keys.alice")
    );
    let err = refused("tampered-mac.sops.yaml", "MAC mismatch");
    assert!(matches!(err, SopsError::MacMismatch { .. }));
    refused("tampered-removed.sops.yaml", "MAC mismatch");
    refused("tampered-lastmodified.sops.yaml", "cannot be authenticated");
}

#[test]
fn unsupported_files_are_refused() {
    refused("multi-doc.sops.yaml", "2 YAML documents");
    refused("key-groups.sops.yaml", "key groups");
    refused("comment-regex.sops.yaml", "encrypted_comment_regex");
}

#[test]
fn a_file_for_other_recipients_names_them() {
    let err = refused(
        "other-key-only.sops.yaml",
        "none of the available age identities",
    );
    let other = other_key().recipients()[0].clone();
    let mine = test_key().recipients()[0].clone();
    let msg = err.to_string();
    assert!(msg.contains(&other), "names the file's recipient: {msg}");
    assert!(msg.contains(&mine), "names the identity tried: {msg}");
}

/// Edits the metadata of a real file in memory (the MAC does not cover it).
fn with_metadata(edit: impl Fn(&str) -> String) -> Result<SopsDocument, SopsError> {
    let path = fixture("cluster.sops.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changed something");
    SopsDocument::from_yaml(&path, &edited, &test_key())
}

#[test]
fn old_metadata_layout_is_accepted() {
    let doc = with_metadata(|t| {
        t.replace(
            "sops:\n    age:",
            "sops:\n    kms: []\n    gcp_kms: []\n    azure_kv: []\n    hc_vault: []\n    pgp: []\n    age:",
        )
        .replace("lastmodified: \"", "lastmodified: '")
        .replace("Z\"\n    mac:", "Z'\n    mac:")
    })
    .unwrap();
    assert_eq!(
        doc.get("pve.token"),
        Ok("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d")
    );
    // Unquoted, as older sops versions wrote it.
    let doc = with_metadata(|t| {
        let start = t.find("lastmodified: \"").unwrap();
        let mut s = t.to_owned();
        s.remove(start + "lastmodified: ".len());
        s.replacen("Z\"\n    mac:", "Z\n    mac:", 1)
    })
    .unwrap();
    assert_eq!(
        doc.get("pve.token"),
        Ok("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d")
    );
}

#[test]
fn metadata_problems_are_refused() {
    let cut_age = |t: &str| {
        let start = t.find("    age:\n").unwrap();
        let end = t.find("    lastmodified:").unwrap();
        format!(
            "{}    pgp:\n        - fp: ABCDEF\n{}",
            &t[..start],
            &t[end..]
        )
    };
    let err = with_metadata(cut_age).unwrap_err().to_string();
    assert!(
        err.contains("no age recipient (key types it uses: pgp)"),
        "{err}"
    );

    let err = with_metadata(|t| {
        t.replace(
            "unencrypted_suffix: _unencrypted",
            "unencrypted_suffix: _unencrypted\n    encrypted_regex: ^x$",
        )
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("several encryption rules"), "{err}");

    let err = with_metadata(|t| t.replace("    mac: ENC", "    mac_was: ENC"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`sops.mac` is missing"), "{err}");

    let err = with_metadata(|t| t.replace("\nsops:\n", "\nnot-sops:\n"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no top-level `sops` metadata"), "{err}");

    // Hand-written clear text where the rules say "encrypted".
    let err = with_metadata(|t| {
        t.replace(
            "    token_id_unencrypted: proxops@pve!reconciler",
            "    token_id_unencrypted: proxops@pve!reconciler\n    clear: oops",
        )
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("`pve.clear` is not encrypted"), "{err}");

    // Moving a value under another key breaks its authentication (the key path is the AAD).
    let err =
        with_metadata(|t| t.replacen("        alice: ENC", "        alicia: ENC", 1)).unwrap_err();
    assert!(
        matches!(err, SopsError::ValueAuthentication { ref path, .. } if path == "cloud-init.ssh-keys.alicia"),
        "{err}"
    );
}

#[test]
fn missing_and_non_sops_files() {
    let ids = test_key();
    let err = SopsDocument::open(&fixture("no-such-file.yaml"), &ids).unwrap_err();
    assert!(matches!(err, SopsError::Read { .. }));
    assert!(err.to_string().contains("no-such-file.yaml"));
    let err = SopsDocument::open(&fixture("plain/small.yaml"), &ids)
        .unwrap_err()
        .to_string();
    assert!(err.contains("no top-level `sops` metadata"), "{err}");
    let err = SopsDocument::from_yaml(&fixture("x.yaml"), "a: [unclosed\n", &ids)
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid YAML at line"), "{err}");
}

#[test]
fn identities_from_env_and_defaults_take_an_explicit_file() {
    let ids =
        proxops_secrets::Identities::from_env_and_defaults(Some(&fixture("TEST-ONLY-age-key.txt")))
            .unwrap();
    assert!(ids.recipients().contains(&test_key().recipients()[0]));
    let doc = SopsDocument::open(&fixture("cluster.sops.yaml"), &ids).unwrap();
    assert_eq!(
        doc.get("pve.token"),
        Ok("8d9f3c2a-1b4e-4f6a-9c7d-2e5b8a1f0c3d")
    );
    let err = proxops_secrets::Identities::from_env_and_defaults(Some(&fixture("nope.txt")))
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope.txt: cannot read"), "{err}");
}
