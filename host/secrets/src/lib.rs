//! Native reader for SOPS YAML files encrypted to age recipients (sops 3.x format).
//!
//! [`SopsDocument::open`] unwraps the data key with one of the caller's age
//! [`Identities`], decrypts every value, verifies the MAC and keeps the
//! decrypted tree in memory (zeroized on drop). [`SopsDocument::get`] resolves
//! dot-paths such as `cloud-init.ssh-keys.alice` or `pve.token`. [`add_strings`] adds
//! entries as `sops set` does: other ciphertexts untouched, a new MAC, read back before use.
//!
//! Refused with an error naming the file: key groups (Shamir), files without an
//! age recipient, several YAML documents, comment-based encryption rules, YAML
//! anchors and tags, duplicate keys, nesting deeper than 64 levels, files over 1 MiB, and any
//! file whose MAC or values fail authentication.
//! No error, `Debug` or `Display` output ever contains a decrypted value.

mod cipher;
mod document;
mod edit;
mod error;
mod identity;
mod yaml;

pub use document::{MAX_BYTES, SopsDocument};
pub use edit::{add_strings, set_strings};
pub use error::{LookupError, SecretError, SopsError};
pub use identity::Identities;
