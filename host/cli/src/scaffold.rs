//! What `proxops kind new` and `proxops policy new` share: the crate-name rule, the refusal of
//! a non-empty folder, writing the files, and the standalone `Cargo.toml` of a guest crate.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The wit-bindgen a scaffold depends on: the version proxops's own guests use.
const WIT_BINDGEN_VERSION: &str = "0.63";

/// Whether `name` can name a guest crate: a lower-case letter, then letters, digits and `-`,
/// not ending in `-`, at most 64 characters.
pub(crate) fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
        && name.len() <= 64
}

/// Check that a crate for a `what` (`kind`, `policy`) can be named `name` and created in `dir`
/// (absent or empty), before anything is written.
pub(crate) fn check_target(what: &str, name: &str, dir: &Path) -> anyhow::Result<()> {
    if !valid_name(name) {
        bail!(
            "`{name}` is not a crate name for a {what}; use lower-case letters, digits and `-`, starting with a letter"
        );
    }
    if dir.exists()
        && std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!(
            "{} exists and is not empty; choose another --dir",
            dir.display()
        );
    }
    Ok(())
}

/// Write `files` (paths relative to `dir`, folders created as needed); returns `dir`.
pub(crate) fn write_files(dir: &Path, files: &[(&str, String)]) -> anyhow::Result<PathBuf> {
    for (rel, content) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, content)
            .with_context(|| format!("cannot write {}", path.display()))?;
        #[cfg(unix)]
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
                .with_context(|| format!("cannot make {} executable", path.display()))?;
        }
    }
    Ok(dir.to_path_buf())
}

/// The `Cargo.toml` of a standalone guest crate named `name`; `tested` says what `cargo test`
/// runs natively (`the logic`, `the rules`).
pub(crate) fn cargo_toml(name: &str, tested: &str) -> String {
    format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
# cdylib: the component; rlib: so that `cargo test` runs {tested} natively.
crate-type = ["cdylib", "rlib"]

[dependencies]
wit-bindgen = {{ version = "{WIT_BINDGEN_VERSION}", default-features = false, features = ["macros", "realloc", "std"] }}
serde_json = "1"

[profile.release]
opt-level = "s"

# This crate is its own workspace, even when created inside another one.
[workspace]
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for (name, ok) in [
            ("require-owner", true),
            ("pool-kind", true),
            ("a1", true),
            ("A", false),
            ("1a", false),
            ("a_b", false),
            ("a-", false),
            ("", false),
        ] {
            assert_eq!(valid_name(name), ok, "{name}");
        }
        assert!(valid_name(&"a".repeat(64)));
        assert!(!valid_name(&"a".repeat(65)));
    }

    #[test]
    fn the_target_must_be_a_valid_name_and_an_empty_or_absent_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(check_target("kind", "k", dir.path()).is_ok(), "empty");
        assert!(check_target("kind", "k", &dir.path().join("new")).is_ok());
        std::fs::write(dir.path().join("x"), "").unwrap();
        let busy = check_target("kind", "k", dir.path()).unwrap_err();
        assert!(busy.to_string().contains("is not empty"), "{busy}");
        let bad = check_target("policy", "Bad", &dir.path().join("new")).unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("`Bad` is not a crate name for a policy"),
            "{bad}"
        );
    }
}
