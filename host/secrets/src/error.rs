//! Errors. None of them ever holds a decrypted value: they name files, key paths and public recipients only.

use std::fmt;
use std::path::PathBuf;

/// Why a SOPS file could not be opened, decrypted or verified, or why no age identity was usable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SopsError {
    /// The file could not be read.
    #[error("cannot read SOPS file {}: {source}", file.display())]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML.
    #[error("SOPS file {}: invalid YAML at line {line}, column {col}: {reason}", file.display())]
    Yaml {
        file: PathBuf,
        line: usize,
        col: usize,
        reason: String,
    },
    /// The file uses a sops feature proxops refuses (key groups, no age recipient, several documents, ...).
    #[error("SOPS file {}: not supported: {reason}", file.display())]
    Unsupported { file: PathBuf, reason: String },
    /// The file is not a well-formed sops file (missing or broken metadata, a value that should be encrypted and is not, ...).
    #[error("SOPS file {}: malformed: {reason}", file.display())]
    Malformed { file: PathBuf, reason: String },
    /// An identity source (an identity file or `SOPS_AGE_KEY`) could not be used.
    #[error("age identities from {source_name}: {reason}")]
    IdentitySource { source_name: String, reason: String },
    /// No age identity was found anywhere.
    #[error("no age identity found (looked at: {}){}", looked_at.join(", "), notes_suffix(problems))]
    NoIdentity {
        looked_at: Vec<String>,
        problems: Vec<String>,
    },
    /// None of the identities could unwrap the file's data key.
    #[error(
        "SOPS file {}: none of the available age identities ({}) can decrypt it; it is encrypted to {}{}",
        file.display(),
        list_or_none(available),
        list_or_none(recipients),
        notes_suffix(notes)
    )]
    NoMatchingIdentity {
        file: PathBuf,
        /// The file's recipients (public keys).
        recipients: Vec<String>,
        /// The public keys of the identities that were tried.
        available: Vec<String>,
        notes: Vec<String>,
    },
    /// A value failed AES-GCM authentication: it was altered or moved to another key path.
    #[error(
        "SOPS file {}: the value at `{path}` failed authentication (it was altered or moved to another key)",
        file.display()
    )]
    ValueAuthentication { file: PathBuf, path: String },
    /// An entry could not be added; nothing was written.
    #[error("SOPS file {}: cannot add the entries: {reason}", file.display())]
    Edit { file: PathBuf, reason: String },
    /// The MAC over all values does not match: values were added, removed, reordered or altered outside sops.
    #[error("SOPS file {}: MAC mismatch: {detail}", file.display())]
    MacMismatch { file: PathBuf, detail: &'static str },
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(", ")
    }
}

fn notes_suffix(notes: &[String]) -> String {
    if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    }
}

/// Why [`crate::SopsDocument::get`] found no usable string. Messages name the path, never a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// Nothing exists at the path.
    Missing,
    /// The path holds `""` or `null`.
    Empty,
    /// The path is malformed, or it holds (or runs into) something that is not a string:
    /// a mapping, a list, an int, a bool, a float or a timestamp. The text says which, naming the path.
    Invalid(String),
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LookupError::Missing => f.write_str("not found"),
            LookupError::Empty => f.write_str("empty"),
            LookupError::Invalid(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for LookupError {}

/// A [`LookupError`] with the file and the path it is about, for messages to people.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret `{path}` in {}: {kind}", file.display())]
pub struct SecretError {
    pub file: PathBuf,
    pub path: String,
    pub kind: LookupError,
}
