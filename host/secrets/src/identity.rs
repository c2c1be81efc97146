//! age identities, found where sops 3.11 looks for them, plus an identity file named by the caller.
//!
//! sops combines every source it finds: `SOPS_AGE_KEY` (key text), `SOPS_AGE_KEY_FILE`
//! (a file), `SOPS_AGE_KEY_CMD` (a command's output) and `<config dir>/sops/age/keys.txt`,
//! where the config dir is `$XDG_CONFIG_HOME` or `~/.config` on Linux and
//! `~/Library/Application Support` on macOS unless `XDG_CONFIG_HOME` is set. A missing
//! `keys.txt` is silently skipped; a broken source is reported only when no identity was
//! found at all. proxops does the same, with the caller's explicit file first (a broken
//! explicit file is always an error). SSH keys, plugin identities, passphrase-protected
//! identity files and `SOPS_AGE_KEY_CMD` are not supported and are reported as such.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use age::x25519;

use crate::error::SopsError;

/// A set of age X25519 identities (private keys). `Debug` shows only public keys and sources.
pub struct Identities {
    keys: Vec<x25519::Identity>,
    recipients: Vec<String>,
    sources: Vec<String>,
    notes: Vec<String>,
}

/// The parts of the process environment the lookup reads; tests build one by hand.
#[derive(Default, Clone)]
pub(crate) struct Env {
    pub(crate) age_key: Option<OsString>,
    pub(crate) age_key_file: Option<OsString>,
    pub(crate) age_key_cmd: bool,
    pub(crate) ssh_key_file: bool,
    /// `<UserConfigDir>`, if it could be determined.
    pub(crate) config_dir: Option<PathBuf>,
}

impl Env {
    fn capture() -> Env {
        let var = |name: &str| std::env::var_os(name);
        Env {
            age_key: var("SOPS_AGE_KEY"),
            age_key_file: var("SOPS_AGE_KEY_FILE"),
            age_key_cmd: var("SOPS_AGE_KEY_CMD").is_some(),
            ssh_key_file: var("SOPS_AGE_SSH_PRIVATE_KEY_FILE").is_some(),
            config_dir: user_config_dir(var("XDG_CONFIG_HOME"), var("HOME"), var("APPDATA")),
        }
    }
}

/// Go's `os.UserConfigDir`, with sops's macOS tweak of honouring `XDG_CONFIG_HOME`.
pub(crate) fn user_config_dir(
    xdg: Option<OsString>,
    home: Option<OsString>,
    appdata: Option<OsString>,
) -> Option<PathBuf> {
    let xdg = xdg.filter(|x| !x.is_empty()).map(PathBuf::from);
    let home = home.filter(|h| !h.is_empty()).map(PathBuf::from);
    if cfg!(windows) {
        appdata.filter(|a| !a.is_empty()).map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        xdg.or_else(|| home.map(|h| h.join("Library/Application Support")))
    } else {
        match xdg {
            // Go refuses a relative XDG_CONFIG_HOME.
            Some(x) if x.is_absolute() => Some(x),
            Some(_) => None,
            None => home.map(|h| h.join(".config")),
        }
    }
}

impl Identities {
    /// Identities from `explicit` (if given) and from everywhere sops looks. Fails if an
    /// explicit file is unusable or if no identity is found anywhere.
    pub fn from_env_and_defaults(explicit: Option<&Path>) -> Result<Identities, SopsError> {
        Identities::load(explicit, &Env::capture())
    }

    /// Identities from one age identity file (`#` comments and `AGE-SECRET-KEY-1…` lines).
    pub fn from_file(path: &Path) -> Result<Identities, SopsError> {
        let mut ids = Identities::empty();
        ids.add_file(path)?;
        ids.require_some(path.display().to_string())?;
        Ok(ids)
    }

    /// Identities from key text such as the content of a `keys.txt` or of `SOPS_AGE_KEY`.
    pub fn from_key_text(text: &str) -> Result<Identities, SopsError> {
        let mut ids = Identities::empty();
        ids.add_text("the given key text", text)?;
        ids.require_some("the given key text".to_owned())?;
        Ok(ids)
    }

    /// The public keys (`age1…`) of these identities.
    pub fn recipients(&self) -> &[String] {
        &self.recipients
    }

    /// How many distinct identities there are.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there is no identity at all.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &dyn age::Identity> {
        self.keys.iter().map(|k| k as &dyn age::Identity)
    }

    /// Remarks about sources that could not be used (never key material).
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    fn empty() -> Identities {
        Identities {
            keys: Vec::new(),
            recipients: Vec::new(),
            sources: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub(crate) fn load(explicit: Option<&Path>, env: &Env) -> Result<Identities, SopsError> {
        let mut ids = Identities::empty();
        let mut looked_at = Vec::new();
        let mut problems = Vec::new();
        if let Some(path) = explicit {
            looked_at.push(path.display().to_string());
            ids.add_file(path)?;
            if ids.is_empty() {
                return Err(SopsError::IdentitySource {
                    source_name: path.display().to_string(),
                    reason: "holds no age identity".to_owned(),
                });
            }
        }
        looked_at.push("SOPS_AGE_KEY".to_owned());
        if let Some(text) = &env.age_key {
            match text.to_str() {
                Some(text) => {
                    if let Err(e) = ids.add_text("SOPS_AGE_KEY", text) {
                        problems.push(e.to_string());
                    }
                }
                None => problems.push("SOPS_AGE_KEY is not valid UTF-8".to_owned()),
            }
        }
        looked_at.push("SOPS_AGE_KEY_FILE".to_owned());
        if let Some(file) = &env.age_key_file {
            let path = PathBuf::from(file);
            if let Err(e) = ids.add_file(&path) {
                problems.push(format!("SOPS_AGE_KEY_FILE: {e}"));
            }
        }
        if env.age_key_cmd {
            ids.notes
                .push("SOPS_AGE_KEY_CMD is set but proxops does not run it".to_owned());
        }
        if env.ssh_key_file {
            ids.notes.push(
                "SOPS_AGE_SSH_PRIVATE_KEY_FILE is set but proxops does not support SSH identities"
                    .to_owned(),
            );
        }
        match &env.config_dir {
            Some(dir) => {
                let path = dir.join("sops").join("age").join("keys.txt");
                looked_at.push(path.display().to_string());
                if path.exists()
                    && let Err(e) = ids.add_file(&path)
                {
                    problems.push(e.to_string());
                }
            }
            None => problems.push(
                "the user config directory could not be determined (HOME and XDG_CONFIG_HOME are unset)"
                    .to_owned(),
            ),
        }
        if ids.is_empty() {
            problems.append(&mut ids.notes);
            return Err(SopsError::NoIdentity {
                looked_at,
                problems,
            });
        }
        ids.notes.append(&mut problems);
        Ok(ids)
    }

    fn require_some(&self, source_name: String) -> Result<(), SopsError> {
        if self.is_empty() {
            return Err(SopsError::IdentitySource {
                source_name,
                reason: "holds no age identity".to_owned(),
            });
        }
        Ok(())
    }

    fn add_file(&mut self, path: &Path) -> Result<(), SopsError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SopsError::IdentitySource {
            source_name: name.clone(),
            reason: format!("cannot read: {e}"),
        })?;
        let text = zeroize::Zeroizing::new(text);
        self.add_text(&name, &text)
    }

    /// Parses identity text; every problem names the source and a line number, never the line.
    fn add_text(&mut self, source_name: &str, text: &str) -> Result<(), SopsError> {
        let fail = |reason: String| SopsError::IdentitySource {
            source_name: source_name.to_owned(),
            reason,
        };
        let trimmed = text.trim_start();
        if trimmed.starts_with("-----BEGIN AGE ENCRYPTED FILE-----")
            || trimmed.starts_with("age-encryption.org/")
        {
            return Err(fail(
                "passphrase-protected identity files are not supported; decrypt it with `age -d` into a file only you can read"
                    .to_owned(),
            ));
        }
        let mut parsed = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            // Newer sops versions also accept several keys on one line, separated by spaces.
            for word in line.split_whitespace() {
                if word.starts_with("AGE-PLUGIN-") {
                    return Err(fail(format!(
                        "line {}: age plugin identities are not supported",
                        n + 1
                    )));
                }
                if !word.starts_with("AGE-SECRET-KEY-1") {
                    return Err(fail(format!(
                        "line {} is not an age identity (expected AGE-SECRET-KEY-1...)",
                        n + 1
                    )));
                }
                let key = x25519::Identity::from_str(word).map_err(|why| {
                    fail(format!("line {}: not a valid age identity ({why})", n + 1))
                })?;
                parsed.push(key);
            }
        }
        let mut added = 0;
        for key in parsed {
            let public = key.to_public().to_string();
            if !self.recipients.contains(&public) {
                self.recipients.push(public);
                self.keys.push(key);
                added += 1;
            }
        }
        self.sources.push(format!("{source_name} ({added} new)"));
        Ok(())
    }
}

impl fmt::Debug for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identities")
            .field("recipients", &self.recipients)
            .field("sources", &self.sources)
            .field("notes", &self.notes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_text() -> (String, String) {
        let id = x25519::Identity::generate();
        let public = id.to_public().to_string();
        use age::secrecy::ExposeSecret;
        (id.to_string().expose_secret().to_owned(), public)
    }

    #[test]
    fn config_dir_follows_go() {
        let os = |s: &str| Some(OsString::from(s));
        if cfg!(target_os = "linux") {
            assert_eq!(
                user_config_dir(None, os("/home/u"), None),
                Some(PathBuf::from("/home/u/.config"))
            );
            assert_eq!(
                user_config_dir(os("/x"), os("/home/u"), None),
                Some(PathBuf::from("/x"))
            );
            assert_eq!(user_config_dir(os("rel"), os("/home/u"), None), None);
            assert_eq!(
                user_config_dir(os(""), os("/home/u"), None),
                Some(PathBuf::from("/home/u/.config"))
            );
        }
    }

    #[test]
    fn combines_explicit_env_and_default_sources() {
        let dir = tempfile::tempdir().unwrap();
        let (k1, p1) = key_text();
        let (k2, p2) = key_text();
        let (k3, p3) = key_text();
        let (k4, p4) = key_text();
        let explicit = dir.path().join("explicit.txt");
        std::fs::write(
            &explicit,
            format!("# created: now\n# public key: {p1}\n{k1}\n"),
        )
        .unwrap();
        let env_file = dir.path().join("env.txt");
        std::fs::write(&env_file, format!("{k3}\n")).unwrap();
        let keys_txt = dir.path().join("cfg/sops/age/keys.txt");
        std::fs::create_dir_all(keys_txt.parent().unwrap()).unwrap();
        std::fs::write(&keys_txt, format!("{k4}\r\n{k1}\n")).unwrap();
        let env = Env {
            age_key: Some(format!("{k2}\n").into()),
            age_key_file: Some(env_file.into()),
            config_dir: Some(dir.path().join("cfg")),
            ..Env::default()
        };
        let ids = Identities::load(Some(&explicit), &env).unwrap();
        assert_eq!(ids.recipients(), [p1, p2, p3, p4]);
        let debug = format!("{ids:?}");
        for k in [&k1, &k2, &k3, &k4] {
            assert!(!debug.contains(k.as_str()));
        }
    }

    #[test]
    fn broken_default_sources_are_reported_only_without_any_identity() {
        let dir = tempfile::tempdir().unwrap();
        let (k1, _) = key_text();
        let env = Env {
            age_key: Some("not-a-key".into()),
            age_key_file: Some(dir.path().join("missing.txt").into()),
            age_key_cmd: true,
            config_dir: Some(dir.path().to_owned()),
            ..Env::default()
        };
        let err = Identities::load(None, &env).unwrap_err().to_string();
        assert!(err.contains("no age identity found"), "{err}");
        assert!(
            err.contains("SOPS_AGE_KEY: line 1 is not an age identity"),
            "{err}"
        );
        assert!(err.contains("SOPS_AGE_KEY_FILE"), "{err}");
        assert!(err.contains("SOPS_AGE_KEY_CMD is set"), "{err}");
        assert!(!err.contains("not-a-key"), "{err}");

        let env = Env {
            age_key: Some(k1.into()),
            ..env
        };
        let ids = Identities::load(None, &env).unwrap();
        assert_eq!(ids.len(), 1);
    }

    #[test]
    fn a_broken_explicit_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (k1, _) = key_text();
        let env = Env {
            age_key: Some(k1.into()),
            ..Env::default()
        };
        let bad = dir.path().join("bad.txt");
        std::fs::write(&bad, "AGE-SECRET-KEY-1NOTREALLYAKEY\n").unwrap();
        let err = Identities::load(Some(&bad), &env).unwrap_err().to_string();
        assert!(err.contains("line 1: not a valid age identity"), "{err}");
        assert!(!err.contains("NOTREALLY"), "{err}");
        let missing = dir.path().join("nope.txt");
        let err = Identities::load(Some(&missing), &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope.txt: cannot read"), "{err}");
        std::fs::write(&bad, "-----BEGIN AGE ENCRYPTED FILE-----\nxx\n").unwrap();
        let err = Identities::load(Some(&bad), &env).unwrap_err().to_string();
        assert!(err.contains("passphrase-protected"), "{err}");
        std::fs::write(&bad, "AGE-PLUGIN-YUBIKEY-1XYZ\n").unwrap();
        let err = Identities::load(Some(&bad), &env).unwrap_err().to_string();
        assert!(err.contains("plugin identities are not supported"), "{err}");
        std::fs::write(&bad, "# only a comment\n").unwrap();
        let err = Identities::load(Some(&bad), &env).unwrap_err().to_string();
        assert!(err.contains("holds no age identity"), "{err}");
    }
}
