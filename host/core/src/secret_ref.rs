//! Secret references: the token a kind puts in a call parameter in place of a secret's value
//! (`proxops:kind@0.2.1`, `secrets.reference`). The host mints it with this run's random
//! nonce, so no manifest, live value or earlier run can spell one, checks it against the
//! kind's grant, shows it as `(secret <ref>)`, and puts the value in only at the wire.

use std::sync::OnceLock;

/// What every token starts with, whichever run minted it.
pub const MARK: &str = "proxops-secret-ref:";

/// `proxops-secret-ref:<nonce>:`, the nonce 128 random bits drawn once per process.
fn prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let mut nonce = [0u8; 16];
        // Without an OS random source there is no safe nonce: refs then never resolve.
        if getrandom::fill(&mut nonce).is_err() {
            return format!("{MARK}unavailable:");
        }
        format!("{MARK}{}:", hex::encode(nonce))
    })
}

/// The token standing for the secret at `path` in this run.
pub fn token(path: &str) -> String {
    format!("{}{path}", prefix())
}

/// The ref a parameter value stands for: `Some` only when the whole value is a token this run
/// minted.
pub fn parse(value: &str) -> Option<&str> {
    let path = value.strip_prefix(prefix())?;
    (crate::grant::check_secret_path(path).is_ok() && !prefix().contains("unavailable"))
        .then_some(path)
}

/// Whether `text` holds something that looks like a token (this run's or not): a value that
/// does but is not one whole token of this run is refused, never sent as it is.
pub fn mentions(text: &str) -> bool {
    text.contains(MARK)
}

/// `text` (a JSON document PVE answered) with each secret value of `refs` (`(ref, value)`)
/// replaced by the ref's token, as a string and inside longer strings: what a third-party kind
/// reads in place of a live value equal to a secret it was granted.
pub fn scrub_json(text: &str, refs: &[(String, String)]) -> String {
    let mut out = text.to_string();
    // Longest first: a secret that holds another is replaced whole, not around the other.
    let mut refs: Vec<&(String, String)> = refs.iter().collect();
    refs.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
    for (path, value) in refs {
        // The value as it appears between the quotes of a JSON string.
        let quoted = serde_json::to_string(value).unwrap_or_default();
        let inner = &quoted[1..quoted.len().saturating_sub(1).max(1)];
        if !inner.is_empty() && out.contains(inner) {
            out = out.replace(inner, &token(path));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_this_runs_and_whole() {
        let t = token("ct.root");
        assert_eq!(parse(&t), Some("ct.root"));
        assert!(mentions(&t));
        // Another run's nonce, a token inside a longer value, a bare mark: not refs.
        assert_eq!(
            parse("proxops-secret-ref:00000000000000000000000000000000:ct.root"),
            None
        );
        assert_eq!(parse(&format!("x{t}")), None);
        assert_eq!(parse(&format!("{t},mp=/etc")), None);
        assert_eq!(parse(&token("ct..root")), None);
        assert!(mentions(&format!("a {t} b")));
        assert!(!mentions("proxops secret"));
    }

    #[test]
    fn scrubbing_replaces_values_by_their_tokens() {
        let refs = vec![("ct.note".to_string(), "hunter2-\"quoted\"".to_string())];
        let body = r#"{"description":"hunter2-\"quoted\"","name":"x hunter2-\"quoted\" y"}"#;
        let got = scrub_json(body, &refs);
        assert!(!got.contains("hunter2"), "{got}");
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["description"], token("ct.note"));
        assert_eq!(v["name"], format!("x {} y", token("ct.note")));
        // One secret inside another: the longer is replaced whole.
        let refs = vec![
            ("short".to_string(), "hunter22".to_string()),
            ("long".to_string(), "hunter22-and-more".to_string()),
        ];
        let got = scrub_json(r#"{"a":"hunter22-and-more","b":"hunter22"}"#, &refs);
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["a"], token("long"));
        assert_eq!(v["b"], token("short"));
    }
}
