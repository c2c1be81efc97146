//! Decrypts a fixture holding a known canary secret and checks that no error, `Debug` or `Display` output shows it.

use crate::common::{fixture, other_key, test_key};
use proxops_secrets::{Identities, SopsDocument};

const CANARY: &str = "CANARY-3f9a7c21-never-print-me";

#[test]
fn the_canary_never_leaks_into_messages() {
    let path = fixture("canary.sops.yaml");
    let ids = test_key();
    let doc = SopsDocument::open(&path, &ids).unwrap();
    // The canary really is in the document...
    assert_eq!(doc.get("canary.secret"), Ok(CANARY));
    assert_eq!(doc.get("canary.nested.secret"), Ok(CANARY));
    assert_eq!(doc.get("pve.token"), Ok(CANARY));
    assert_eq!(doc.entries("canary").len(), 2);

    // ...and shows up in nothing meant for people.
    let mut shown = vec![format!("{doc:?}"), format!("{ids:?}")];
    for p in [
        "canary.secret.deeper",
        "canary.nested.secret.x.y",
        "pve.token.x",
        "canary.list",
        "canary.list.x",
        "canary.number",
        "canary",
        "canary.missing",
        "canary..secret",
    ] {
        let err = doc.get(p).unwrap_err();
        shown.push(format!("{err}"));
        shown.push(format!("{err:?}"));
        let err = doc.lookup(p).unwrap_err();
        shown.push(format!("{err}"));
        shown.push(format!("{err:?}"));
    }

    // Errors from broken copies of the file.
    let text = std::fs::read_to_string(&path).unwrap();
    let secret_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("secret: ENC["))
        .unwrap()
        .to_owned();
    let variants = [
        // Moved: fails authentication.
        text.replacen("    secret: ENC[", "    secrets: ENC[", 1),
        // Removed: MAC mismatch.
        text.replacen(&format!("{secret_line}\n"), "", 1),
        // Not encrypted although it must be.
        text.replacen(&secret_line, &format!("    secret: {CANARY}"), 1),
        // The MAC itself fails.
        text.lines()
            .map(|l| {
                if l.trim_start().starts_with("lastmodified:") {
                    "    lastmodified: \"2001-01-01T00:00:00Z\"".to_owned()
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    ];
    for (i, variant) in variants.iter().enumerate() {
        assert_ne!(variant, &text, "variant {i} changed the file");
        let err = SopsDocument::from_yaml(&path, variant, &ids)
            .expect_err(&format!("variant {i} must fail"));
        shown.push(format!("{err}"));
        shown.push(format!("{err:?}"));
    }
    let err = SopsDocument::open(&path, &other_key()).unwrap_err();
    shown.push(format!("{err}"));
    shown.push(format!("{err:?}"));

    // An identity source holding the canary as a "key".
    let err = Identities::from_key_text(&format!("{CANARY}\n")).unwrap_err();
    shown.push(format!("{err}"));
    shown.push(format!("{err:?}"));

    for text in &shown {
        eprintln!("SHOWN: {text}");
        assert!(!text.contains(CANARY), "the canary leaked into: {text}");
        assert!(
            !text.contains("never-print"),
            "part of the canary leaked into: {text}"
        );
    }
    // A decent amount of output was checked.
    assert!(shown.len() > 40, "{}", shown.len());
}

#[test]
fn identities_never_show_private_keys() {
    let ids = test_key();
    let key_file = std::fs::read_to_string(fixture("TEST-ONLY-age-key.txt")).unwrap();
    let secret = key_file
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-1"))
        .unwrap();
    let debug = format!("{ids:?}");
    assert!(!debug.contains(secret), "{debug}");
    assert!(!debug.contains(&secret[20..40]), "{debug}");
    assert!(debug.contains(&ids.recipients()[0]));
}
