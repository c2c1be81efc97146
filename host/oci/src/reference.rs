//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:DIGEST`.

use std::fmt;

use crate::OciError;

/// Where a component lives in a registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host` or `host:port`.
    pub registry: String,
    /// `team/policies/require-owner`.
    pub repository: String,
    /// A tag, or `sha256:<hex>`.
    pub reference: String,
}

impl Reference {
    /// Parse `oci://…`; the tag defaults to `latest`.
    pub fn parse(text: &str) -> Result<Reference, OciError> {
        let bad = || OciError::Reference(text.to_string());
        let rest = text.strip_prefix("oci://").ok_or_else(bad)?;
        let (registry, path) = rest.split_once('/').ok_or_else(bad)?;
        let (repository, reference) = if let Some((repo, digest)) = path.split_once('@') {
            let hex = digest.strip_prefix("sha256:").ok_or_else(bad)?;
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            (repo, digest.to_ascii_lowercase())
        } else {
            match path.rsplit_once(':') {
                Some((repo, tag)) if !tag.contains('/') => (repo, tag.to_string()),
                _ => (path, "latest".to_string()),
            }
        };
        let host_ok = !registry.is_empty()
            && registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
        // The distribution spec's repository grammar: lower-case components separated by `/`.
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                    })
            });
        let tag_ok = reference.starts_with("sha256:")
            || (!reference.is_empty()
                && reference.len() <= 128
                && reference
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')));
        if !(host_ok && repo_ok && tag_ok) {
            return Err(bad());
        }
        Ok(Reference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            reference,
        })
    }

    /// Whether the registry is on this machine (reached over plain HTTP).
    pub fn is_loopback(&self) -> bool {
        let host = match self.registry.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => &self.registry,
        };
        matches!(host, "localhost" | "127.0.0.1" | "[::1]")
    }

    /// `https://REGISTRY` (`http://` for a loopback registry).
    pub fn base_url(&self) -> String {
        let scheme = if self.is_loopback() { "http" } else { "https" };
        format!("{scheme}://{}", self.registry)
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sep = if self.reference.starts_with("sha256:") {
            '@'
        } else {
            ':'
        };
        write!(
            f,
            "oci://{}/{}{sep}{}",
            self.registry, self.repository, self.reference
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (registry, repository, start of the reference) a text parses into.
    type Parsed<'a> = Option<(&'a str, &'a str, &'a str)>;

    /// (text, what it parses into) or `None` for a refusal.
    #[test]
    fn parses() {
        let digest = "a".repeat(64);
        let digested = format!("oci://ghcr.io/acme/p@sha256:{digest}");
        let cases: Vec<(&str, Parsed)> = vec![
            (
                "oci://ghcr.io/acme/policies/owner:1.2.0",
                Some(("ghcr.io", "acme/policies/owner", "1.2.0")),
            ),
            (
                "oci://127.0.0.1:5000/p/owner:v1",
                Some(("127.0.0.1:5000", "p/owner", "v1")),
            ),
            (
                "oci://localhost:5000/owner",
                Some(("localhost:5000", "owner", "latest")),
            ),
            (&digested, Some(("ghcr.io", "acme/p", "sha256:aaaa"))),
            ("ghcr.io/acme/p:1", None),
            ("oci://ghcr.io", None),
            ("oci://ghcr.io/Acme/p:1", None),
            ("oci://ghcr.io/acme//p:1", None),
            ("oci://ghcr.io/acme/p@sha256:abc", None),
            ("oci://ghcr.io/acme/p:t/ag", None),
            ("oci://gh cr.io/acme/p:1", None),
        ];
        for (text, want) in cases {
            let got = Reference::parse(text).ok();
            match (want, got) {
                (None, None) => {}
                (Some((reg, repo, reference)), Some(r)) => {
                    assert_eq!(r.registry, reg, "{text}");
                    assert_eq!(r.repository, repo, "{text}");
                    assert!(
                        r.reference.starts_with(reference),
                        "{text}: {}",
                        r.reference
                    );
                    assert_eq!(Reference::parse(&r.to_string()).unwrap(), r, "{text}");
                }
                (want, got) => panic!("{text}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn loopback_registries_use_http() {
        for (text, url) in [
            ("oci://127.0.0.1:5000/p:1", "http://127.0.0.1:5000"),
            ("oci://localhost/p:1", "http://localhost"),
            ("oci://[::1]:5000/p:1", "http://[::1]:5000"),
            ("oci://ghcr.io/p:1", "https://ghcr.io"),
            (
                "oci://127.0.0.1.example.com/p:1",
                "https://127.0.0.1.example.com",
            ),
        ] {
            assert_eq!(Reference::parse(text).unwrap().base_url(), url, "{text}");
        }
    }
}
