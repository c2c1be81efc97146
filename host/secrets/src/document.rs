//! Opening a SOPS YAML file: metadata, data key, value decryption, MAC check, and dot-path lookup.

use std::cmp::Reverse;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use regex_automata::meta::Regex;
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use crate::cipher::{CipherError, Encrypted, looks_encrypted};
use crate::error::{LookupError, SecretError, SopsError};
use crate::identity::Identities;
use crate::yaml::{self, Node, Resolved, canonical_timestamp, go_format_float, go_parse_bool};

/// sops's `MACOnlyEncryptedInitialization`: sha256("sops"), fed first when `mac_only_encrypted` is set.
const MAC_ONLY_ENCRYPTED_INIT: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

const DEFAULT_UNENCRYPTED_SUFFIX: &str = "_unencrypted";

/// The largest SOPS file proxops reads (the limit of every YAML file proxops reads).
pub const MAX_BYTES: usize = 1024 * 1024;

/// A decrypted, MAC-verified SOPS YAML file held in memory. Values are zeroized on drop;
/// `Debug` shows the file name and the number of values, never a value.
pub struct SopsDocument {
    file: PathBuf,
    root: Value,
}

/// A decrypted tree. Only leaf values are secret.
enum Value {
    Map(Vec<(String, Value)>),
    Seq(Vec<Value>),
    Leaf(Leaf),
    Null,
}

struct Leaf {
    kind: Kind,
    /// The value; for non-strings, its canonical text.
    text: Zeroizing<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
    Time,
    Bytes,
}

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Str => "a string",
            Kind::Int => "an integer",
            Kind::Float => "a float",
            Kind::Bool => "a boolean",
            Kind::Time => "a timestamp",
            Kind::Bytes => "raw bytes",
        }
    }
}

/// Which leaves sops encrypts (`shouldBeEncrypted` without the comment rules, which are refused).
enum Rule {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(Regex),
    EncryptedRegex(Regex),
}

impl Rule {
    fn encrypts(&self, path: &[String]) -> bool {
        match self {
            Rule::UnencryptedSuffix(s) => !path.iter().any(|p| p.ends_with(s.as_str())),
            Rule::EncryptedSuffix(s) => path.iter().any(|p| p.ends_with(s.as_str())),
            Rule::UnencryptedRegex(r) => !path.iter().any(|p| r.is_match(p.as_str())),
            Rule::EncryptedRegex(r) => path.iter().any(|p| r.is_match(p.as_str())),
        }
    }
}

struct AgeStanza {
    recipient: String,
    enc: String,
}

struct Metadata {
    age: Vec<AgeStanza>,
    other_key_types: Vec<&'static str>,
    lastmodified: String,
    mac: String,
    rule: Rule,
    mac_only_encrypted: bool,
}

/// A file decrypted but not yet checked against its MAC: what reading and editing share.
pub(crate) struct Decoded {
    pub(crate) file: PathBuf,
    root: Value,
    meta: Metadata,
    pub(crate) key: Zeroizing<[u8; 32]>,
    /// The MAC the values hash to, in sops's form (128 uppercase hex digits).
    pub(crate) computed_mac: String,
}

impl Decoded {
    /// Parses `text`, unwraps the data key with `identities` and decrypts every value,
    /// hashing them in document order. The stored MAC is not checked: see [`Decoded::verify_mac`].
    pub(crate) fn read(
        path: &Path,
        text: &str,
        identities: &Identities,
    ) -> Result<Decoded, SopsError> {
        if text.len() > MAX_BYTES {
            return Err(unsupported(
                path,
                format!("it is larger than {MAX_BYTES} bytes, the limit for YAML files"),
            ));
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let file = path.to_owned();
        let tree = yaml::parse(text).map_err(|e| match e {
            yaml::ParseError::Syntax { line, col, info } => SopsError::Yaml {
                file: file.clone(),
                line,
                col,
                reason: info,
            },
            yaml::ParseError::Unsupported(reason) => unsupported(path, reason),
        })?;
        let Some(Node::Map(mut entries)) = tree else {
            return Err(malformed(
                path,
                "the top level is not a mapping, so this is not a sops YAML file",
            ));
        };
        let Some(at) = entries.iter().position(|(k, _)| k == "sops") else {
            return Err(malformed(
                path,
                "it has no top-level `sops` metadata; is it encrypted with sops?",
            ));
        };
        let (_, meta) = entries.remove(at);
        let meta = Metadata::from_node(path, meta)?;
        let key = data_key(path, &meta, identities)?;

        let mut walker = Walker {
            file: path,
            key: &key,
            rule: &meta.rule,
            mac_only_encrypted: meta.mac_only_encrypted,
            hash: Sha512::new(),
        };
        if meta.mac_only_encrypted {
            walker.hash.update(MAC_ONLY_ENCRYPTED_INIT);
        }
        let mut path_keys = Vec::new();
        let root = walker.walk(Node::Map(entries), &mut path_keys, "")?;
        let computed_mac = hex::encode_upper(walker.hash.finalize());
        Ok(Decoded {
            file,
            root,
            meta,
            key,
            computed_mac,
        })
    }

    /// Checks the stored `sops.mac` (authenticated with `sops.lastmodified`) against the values.
    pub(crate) fn verify_mac(&self) -> Result<(), SopsError> {
        let path = self.file.as_path();
        let mac = Encrypted::parse(&self.meta.mac)
            .map_err(|_| malformed(path, "`sops.mac` is not an ENC[AES256_GCM,...] value"))?;
        let aad = canonical_timestamp(&self.meta.lastmodified, false)
            .ok_or_else(|| malformed(path, "`sops.lastmodified` is not an RFC 3339 timestamp"))?;
        let stored = mac.decrypt(&self.key, &aad).map_err(|_| SopsError::MacMismatch {
            file: self.file.clone(),
            detail: "the stored MAC cannot be authenticated (`sops.mac` or `sops.lastmodified` was altered)",
        })?;
        if stored.as_slice() != self.computed_mac.as_bytes() {
            return Err(SopsError::MacMismatch {
                file: self.file.clone(),
                detail: "the values were added, removed, reordered or altered outside sops",
            });
        }
        Ok(())
    }

    /// Whether the file's rules encrypt a value at this key path.
    pub(crate) fn encrypts(&self, path: &[String]) -> bool {
        self.meta.rule.encrypts(path)
    }

    /// What is at `dot_path` (made of the given segments, which may themselves hold dots).
    pub(crate) fn describe_at(&self, segments: &[&str]) -> Option<&'static str> {
        let mut node = &self.root;
        for seg in segments {
            let Value::Map(entries) = node else {
                return Some(node.describe());
            };
            match entries.iter().find(|(k, _)| k == seg) {
                Some((_, v)) => node = v,
                None => return None,
            }
        }
        Some(node.describe())
    }

    /// The document as a reader sees it.
    pub(crate) fn into_document(self) -> SopsDocument {
        SopsDocument {
            file: self.file,
            root: self.root,
        }
    }
}

impl SopsDocument {
    /// Reads `path`, unwraps its data key with `identities`, decrypts every value and verifies the MAC.
    ///
    /// The path is opened as given: callers reading a file a repository names read it
    /// through the repository's rooted directory and use [`SopsDocument::from_bytes`].
    pub fn open(path: &Path, identities: &Identities) -> Result<SopsDocument, SopsError> {
        let read_error = |source| SopsError::Read {
            file: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_error)?;
        let mut bytes = Vec::new();
        file.take(MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(read_error)?;
        SopsDocument::from_bytes(path, &bytes, identities)
    }

    /// Like [`SopsDocument::open`] on bytes already read; `path` is used for messages only.
    /// More than [`MAX_BYTES`] bytes, or bytes that are not UTF-8, are refused before parsing.
    pub fn from_bytes(
        path: &Path,
        bytes: &[u8],
        identities: &Identities,
    ) -> Result<SopsDocument, SopsError> {
        if bytes.len() > MAX_BYTES {
            return Err(unsupported(
                path,
                format!("it is larger than {MAX_BYTES} bytes, the limit for YAML files"),
            ));
        }
        let text =
            std::str::from_utf8(bytes).map_err(|_| malformed(path, "it is not UTF-8 text"))?;
        SopsDocument::from_yaml(path, text, identities)
    }

    /// Like [`SopsDocument::open`] on text already read; `path` is used for messages only.
    /// A leading byte order mark is skipped.
    pub fn from_yaml(
        path: &Path,
        text: &str,
        identities: &Identities,
    ) -> Result<SopsDocument, SopsError> {
        let decoded = Decoded::read(path, text, identities)?;
        decoded.verify_mac()?;
        Ok(SopsDocument {
            file: decoded.file,
            root: decoded.root,
        })
    }

    /// The file this document was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The string at a dot-path such as `cloud-init.ssh-keys.alice` or `pve.token`.
    ///
    /// Keys that themselves contain dots (`alice@host.example`) are found too: at each
    /// mapping the longest key that matches the rest of the path is tried first.
    /// Lists cannot be indexed. `""` and `null` are [`LookupError::Empty`].
    pub fn get(&self, dot_path: &str) -> Result<&str, LookupError> {
        check_path(dot_path)?;
        let value = match find(&self.root, dot_path) {
            Found::Value(v) => v,
            Found::Missing => return Err(LookupError::Missing),
            Found::Blocked { rest, what } => {
                let consumed = &dot_path[..dot_path.len() - rest.len() - 1];
                return Err(LookupError::Invalid(format!(
                    "`{dot_path}` cannot exist: `{consumed}` is {what}, not a mapping"
                )));
            }
        };
        match value {
            Value::Leaf(Leaf {
                kind: Kind::Str,
                text,
            }) if text.is_empty() => Err(LookupError::Empty),
            Value::Leaf(Leaf {
                kind: Kind::Str,
                text,
            }) => Ok(text.as_str()),
            Value::Null => Err(LookupError::Empty),
            other => Err(LookupError::Invalid(format!(
                "`{dot_path}` holds {}, not a string",
                other.describe()
            ))),
        }
    }

    /// [`SopsDocument::get`] with an error that names the file and the path.
    pub fn lookup(&self, dot_path: &str) -> Result<&str, SecretError> {
        self.get(dot_path).map_err(|kind| SecretError {
            file: self.file.clone(),
            path: dot_path.to_owned(),
            kind,
        })
    }

    /// Every string leaf (including `""`) under `prefix`, as (full dot-path, value), in file order.
    ///
    /// `prefix` is a dot-path to a mapping (or to a single string); `""` means the whole
    /// document. A prefix that does not exist or is malformed gives an empty list. Values
    /// inside lists are left out because dot-paths cannot address them.
    pub fn entries(&self, prefix: &str) -> Vec<(String, &str)> {
        let mut out = Vec::new();
        if prefix.is_empty() {
            collect(&self.root, "", &mut out);
        } else if check_path(prefix).is_ok()
            && let Found::Value(v) = find(&self.root, prefix)
        {
            collect(v, prefix, &mut out);
        }
        out
    }
}

impl fmt::Debug for SopsDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SopsDocument")
            .field("file", &self.file)
            .field("values", &self.root.count_leaves())
            .finish_non_exhaustive()
    }
}

impl Value {
    fn describe(&self) -> &'static str {
        match self {
            Value::Map(_) => "a mapping",
            Value::Seq(_) => "a list",
            Value::Leaf(l) => l.kind.describe(),
            Value::Null => "null",
        }
    }

    fn count_leaves(&self) -> usize {
        match self {
            Value::Map(entries) => entries.iter().map(|(_, v)| v.count_leaves()).sum(),
            Value::Seq(items) => items.iter().map(Value::count_leaves).sum(),
            Value::Leaf(_) | Value::Null => 1,
        }
    }
}

fn check_path(dot_path: &str) -> Result<(), LookupError> {
    let problem = if dot_path.is_empty() {
        Some("it is empty")
    } else if dot_path.split('.').any(str::is_empty) {
        Some("it has an empty segment (a leading, trailing or doubled dot)")
    } else if dot_path.chars().any(char::is_control) {
        Some("it contains a control character")
    } else {
        None
    };
    match problem {
        Some(why) => Err(LookupError::Invalid(format!(
            "`{}` is not a valid secret path: {why}",
            dot_path.escape_debug()
        ))),
        None => Ok(()),
    }
}

enum Found<'a, 'p> {
    Value(&'a Value),
    Missing,
    /// The path runs into a non-mapping; `rest` is what was left to resolve.
    Blocked {
        rest: &'p str,
        what: &'static str,
    },
}

fn find<'a, 'p>(node: &'a Value, rest: &'p str) -> Found<'a, 'p> {
    let Value::Map(entries) = node else {
        return Found::Blocked {
            rest,
            what: node.describe(),
        };
    };
    let mut candidates: Vec<&(String, Value)> = entries
        .iter()
        .filter(|(k, _)| {
            rest == k
                || (rest.starts_with(k.as_str()) && rest.as_bytes().get(k.len()) == Some(&b'.'))
        })
        .collect();
    candidates.sort_by_key(|(k, _)| Reverse(k.len()));
    let mut blocked = None;
    for (k, v) in candidates {
        if rest.len() == k.len() {
            return Found::Value(v);
        }
        match find(v, &rest[k.len() + 1..]) {
            Found::Value(found) => return Found::Value(found),
            Found::Missing => {}
            b @ Found::Blocked { .. } => {
                blocked.get_or_insert(b);
            }
        }
    }
    blocked.unwrap_or(Found::Missing)
}

fn collect<'a>(node: &'a Value, path: &str, out: &mut Vec<(String, &'a str)>) {
    match node {
        Value::Map(entries) => {
            for (k, v) in entries {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect(v, &sub, out);
            }
        }
        Value::Leaf(Leaf {
            kind: Kind::Str,
            text,
        }) => out.push((path.to_owned(), text.as_str())),
        Value::Leaf(_) | Value::Seq(_) | Value::Null => {}
    }
}

fn malformed(file: &Path, reason: impl Into<String>) -> SopsError {
    SopsError::Malformed {
        file: file.to_owned(),
        reason: reason.into(),
    }
}

fn unsupported(file: &Path, reason: impl Into<String>) -> SopsError {
    SopsError::Unsupported {
        file: file.to_owned(),
        reason: reason.into(),
    }
}

/// The text of a metadata scalar; `None` for a missing key or `null`.
fn meta_str(
    file: &Path,
    entries: &[(String, Node)],
    key: &str,
) -> Result<Option<String>, SopsError> {
    match entries.iter().find(|(k, _)| k == key) {
        None => Ok(None),
        Some((_, Node::Scalar(s))) if s.resolve() == Resolved::Null => Ok(None),
        Some((_, Node::Scalar(s))) => Ok(Some(s.text.clone())),
        Some(_) => Err(malformed(file, format!("`sops.{key}` is not a scalar"))),
    }
}

fn non_empty_list(entries: &[(String, Node)], key: &str) -> bool {
    entries.iter().any(|(k, v)| {
        k == key
            && match v {
                Node::Seq(items) => !items.is_empty(),
                Node::Map(m) => !m.is_empty(),
                Node::Scalar(s) => s.resolve() != Resolved::Null,
            }
    })
}

impl Metadata {
    fn from_node(file: &Path, node: Node) -> Result<Metadata, SopsError> {
        let Node::Map(entries) = node else {
            return Err(malformed(file, "`sops` metadata is not a mapping"));
        };
        if non_empty_list(&entries, "key_groups") {
            return Err(unsupported(
                file,
                "it uses sops key groups (Shamir secret sharing); re-encrypt it with plain age recipients",
            ));
        }
        let other_key_types: Vec<&'static str> =
            ["pgp", "kms", "gcp_kms", "azure_kv", "hc_vault", "hckms"]
                .into_iter()
                .filter(|t| non_empty_list(&entries, t))
                .collect();
        let mut age = Vec::new();
        match entries.iter().find(|(k, _)| k == "age") {
            None => {}
            Some((_, Node::Seq(items))) => {
                for (i, item) in items.iter().enumerate() {
                    let Node::Map(fields) = item else {
                        return Err(malformed(file, format!("`sops.age[{i}]` is not a mapping")));
                    };
                    let recipient = meta_str(file, fields, "recipient")?.unwrap_or_default();
                    let Some(enc) = meta_str(file, fields, "enc")? else {
                        return Err(malformed(file, format!("`sops.age[{i}]` has no `enc`")));
                    };
                    age.push(AgeStanza { recipient, enc });
                }
            }
            Some((_, Node::Scalar(s))) if s.resolve() == Resolved::Null => {}
            Some(_) => return Err(malformed(file, "`sops.age` is not a list")),
        }
        if age.is_empty() {
            let others = if other_key_types.is_empty() {
                "none".to_owned()
            } else {
                other_key_types.join(", ")
            };
            return Err(unsupported(
                file,
                format!(
                    "it has no age recipient (key types it uses: {others}); proxops reads only files encrypted to age recipients"
                ),
            ));
        }
        let lastmodified = meta_str(file, &entries, "lastmodified")?
            .ok_or_else(|| malformed(file, "`sops.lastmodified` is missing"))?;
        let mac = meta_str(file, &entries, "mac")?
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                malformed(
                    file,
                    "`sops.mac` is missing, so the file cannot be verified",
                )
            })?;
        let mac_only_encrypted = match entries.iter().find(|(k, _)| k == "mac_only_encrypted") {
            None => false,
            Some((_, Node::Scalar(s))) => match (s.resolve(), s.text.as_str()) {
                (Resolved::Bool(b), _) => b,
                (Resolved::Null, _) => false,
                (_, t) => go_parse_bool(t)
                    .ok_or_else(|| malformed(file, "`sops.mac_only_encrypted` is not a boolean"))?,
            },
            Some(_) => {
                return Err(malformed(
                    file,
                    "`sops.mac_only_encrypted` is not a boolean",
                ));
            }
        };

        let mut rules = Vec::new();
        for key in [
            "unencrypted_suffix",
            "encrypted_suffix",
            "unencrypted_regex",
            "encrypted_regex",
            "unencrypted_comment_regex",
            "encrypted_comment_regex",
        ] {
            if let Some(v) = meta_str(file, &entries, key)?.filter(|v| !v.is_empty()) {
                rules.push((key, v));
            }
        }
        if rules.len() > 1 {
            let names: Vec<_> = rules.iter().map(|(k, _)| *k).collect();
            return Err(unsupported(
                file,
                format!(
                    "it sets several encryption rules ({}); sops allows only one",
                    names.join(", ")
                ),
            ));
        }
        let regex = |key: &str, pattern: &str| {
            Regex::new(pattern).map_err(|_| {
                unsupported(
                    file,
                    format!("`sops.{key}` is a regular expression proxops cannot evaluate"),
                )
            })
        };
        let rule = match rules.pop() {
            None => Rule::UnencryptedSuffix(DEFAULT_UNENCRYPTED_SUFFIX.to_owned()),
            Some(("unencrypted_suffix", v)) => Rule::UnencryptedSuffix(v),
            Some(("encrypted_suffix", v)) => Rule::EncryptedSuffix(v),
            Some((key @ "unencrypted_regex", v)) => Rule::UnencryptedRegex(regex(key, &v)?),
            Some((key @ "encrypted_regex", v)) => Rule::EncryptedRegex(regex(key, &v)?),
            Some((key, _)) => {
                return Err(unsupported(
                    file,
                    format!(
                        "`sops.{key}` (comment-based encryption rules) is not supported; use a key-based rule such as encrypted_regex"
                    ),
                ));
            }
        };
        Ok(Metadata {
            age,
            other_key_types,
            lastmodified,
            mac,
            rule,
            mac_only_encrypted,
        })
    }
}

/// Unwraps the 32-byte data key from the first `sops.age` stanza one of `identities` opens.
fn data_key(
    file: &Path,
    meta: &Metadata,
    identities: &Identities,
) -> Result<Zeroizing<[u8; 32]>, SopsError> {
    let mut notes: Vec<String> = identities.notes().to_vec();
    for stanza in &meta.age {
        let armored = age::armor::ArmoredReader::new(stanza.enc.as_bytes());
        let decryptor = match age::Decryptor::new(armored) {
            Ok(d) => d,
            Err(e) => {
                notes.push(format!(
                    "the age stanza for {} is unreadable ({e})",
                    stanza.recipient
                ));
                continue;
            }
        };
        match decryptor.decrypt(identities.keys()) {
            Ok(mut reader) => {
                let mut buf = Zeroizing::new(Vec::with_capacity(64));
                if reader.read_to_end(&mut buf).is_err() || buf.len() != 32 {
                    return Err(malformed(
                        file,
                        format!(
                            "the data key wrapped for {} is not 32 bytes",
                            stanza.recipient
                        ),
                    ));
                }
                let mut key = Zeroizing::new([0u8; 32]);
                key.copy_from_slice(&buf);
                return Ok(key);
            }
            Err(age::DecryptError::NoMatchingKeys) => {}
            Err(e) => notes.push(format!(
                "the age stanza for {} could not be decrypted ({e})",
                stanza.recipient
            )),
        }
    }
    let recipients: Vec<String> = meta.age.iter().map(|s| s.recipient.clone()).collect();
    if recipients.iter().any(|r| r.starts_with("ssh-")) {
        notes
            .push("SSH recipients need an SSH identity, which proxops does not support".to_owned());
    }
    if recipients
        .iter()
        .any(|r| r.starts_with("age1") && r[4..].contains('1'))
    {
        notes.push(
            "plugin and post-quantum recipients need identities proxops does not support"
                .to_owned(),
        );
    }
    if !meta.other_key_types.is_empty() {
        notes.push(format!(
            "the file's {} keys cannot be used by proxops",
            meta.other_key_types.join(", ")
        ));
    }
    Err(SopsError::NoMatchingIdentity {
        file: file.to_owned(),
        recipients,
        available: identities.recipients().to_vec(),
        notes,
    })
}

struct Walker<'a> {
    file: &'a Path,
    key: &'a [u8; 32],
    rule: &'a Rule,
    mac_only_encrypted: bool,
    hash: Sha512,
}

impl Walker<'_> {
    /// Decrypts `node` (at sops path `path`, shown to people as `shown`), hashing leaves in document order.
    fn walk(
        &mut self,
        node: Node,
        path: &mut Vec<String>,
        shown: &str,
    ) -> Result<Value, SopsError> {
        match node {
            Node::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, v) in entries {
                    let sub = if shown.is_empty() {
                        k.clone()
                    } else {
                        format!("{shown}.{k}")
                    };
                    path.push(k);
                    let value = self.walk(v, path, &sub)?;
                    let k = path.pop().unwrap_or_default();
                    out.push((k, value));
                }
                Ok(Value::Map(out))
            }
            Node::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    out.push(self.walk(item, path, &format!("{shown}[{i}]"))?);
                }
                Ok(Value::Seq(out))
            }
            Node::Scalar(s) => self.leaf(s, path, shown),
        }
    }

    fn leaf(&mut self, s: yaml::Scalar, path: &[String], shown: &str) -> Result<Value, SopsError> {
        let resolved = s.resolve();
        if resolved == Resolved::Null {
            // sops neither encrypts nor hashes nulls.
            return Ok(Value::Null);
        }
        if resolved == Resolved::Uint {
            return Err(unsupported(
                self.file,
                format!(
                    "the value at `{shown}` is an integer above 2^63-1, which sops cannot handle"
                ),
            ));
        }
        let encrypted = self.rule.encrypts(path);
        let leaf = if !encrypted {
            let (kind, text) = match resolved {
                Resolved::Str => (Kind::Str, s.text),
                Resolved::Bool(b) => (Kind::Bool, if b { "True" } else { "False" }.to_owned()),
                Resolved::Int(i) => (Kind::Int, i.to_string()),
                Resolved::Float(f) => (Kind::Float, go_format_float(f)),
                Resolved::Time(t) => (Kind::Time, t),
                Resolved::Null | Resolved::Uint => unreachable!("handled above"),
            };
            if !self.mac_only_encrypted {
                self.hash.update(text.as_bytes());
            }
            Leaf {
                kind,
                text: Zeroizing::new(text),
            }
        } else if resolved == Resolved::Str && s.text.is_empty() {
            // sops stores "" in clear and hashes nothing for it.
            Leaf {
                kind: Kind::Str,
                text: Zeroizing::new(String::new()),
            }
        } else if resolved != Resolved::Str || !looks_encrypted(&s.text) {
            return Err(malformed(
                self.file,
                format!(
                    "the value at `{shown}` is not encrypted although the file's rules say it must be (was it edited by hand?)"
                ),
            ));
        } else {
            self.decrypt(&s.text, path, shown)?
        };
        Ok(Value::Leaf(leaf))
    }

    fn decrypt(&mut self, text: &str, path: &[String], shown: &str) -> Result<Leaf, SopsError> {
        let enc = Encrypted::parse(text).map_err(|e| {
            let CipherError::Format(why) = e else {
                unreachable!("parsing does not authenticate")
            };
            malformed(
                self.file,
                format!("the value at `{shown}` is not a valid encrypted value: {why}"),
            )
        })?;
        let aad = format!("{}:", path.join(":"));
        let mut plain =
            enc.decrypt(self.key, &aad)
                .map_err(|_| SopsError::ValueAuthentication {
                    file: self.file.to_owned(),
                    path: shown.to_owned(),
                })?;
        let bad_type = |what: &str| {
            malformed(
                self.file,
                format!("the value at `{shown}` does not decrypt to {what}"),
            )
        };
        let bytes: Vec<u8> = std::mem::take(&mut *plain);
        let text = match String::from_utf8(bytes) {
            Ok(t) => Zeroizing::new(t),
            Err(e) => {
                let mut bytes = e.into_bytes();
                if enc.kind != "bytes" {
                    zeroize::Zeroize::zeroize(&mut bytes);
                    return Err(bad_type("UTF-8 text"));
                }
                self.hash.update(&bytes);
                let leaf = Leaf {
                    kind: Kind::Bytes,
                    text: Zeroizing::new(String::from_utf8_lossy(&bytes).into_owned()),
                };
                zeroize::Zeroize::zeroize(&mut bytes);
                return Ok(leaf);
            }
        };
        // The MAC covers sops's canonical form of the typed value (`ToBytes`).
        let (kind, canonical): (Kind, Option<Zeroizing<String>>) = match enc.kind.as_str() {
            "str" => (Kind::Str, None),
            "bytes" => (Kind::Bytes, None),
            "int" => {
                let i: i64 = text.parse().map_err(|_| bad_type("an integer"))?;
                (Kind::Int, Some(Zeroizing::new(i.to_string())))
            }
            "float" => {
                let f: f64 = text.parse().map_err(|_| bad_type("a float"))?;
                (Kind::Float, Some(Zeroizing::new(go_format_float(f))))
            }
            "bool" => {
                let b = go_parse_bool(&text).ok_or_else(|| bad_type("a boolean"))?;
                (
                    Kind::Bool,
                    Some(Zeroizing::new(if b { "True" } else { "False" }.to_owned())),
                )
            }
            "time" => {
                let t = canonical_timestamp(&text, true).ok_or_else(|| bad_type("a timestamp"))?;
                (Kind::Time, Some(Zeroizing::new(t)))
            }
            "comment" => {
                return Err(malformed(
                    self.file,
                    format!("the value at `{shown}` is an encrypted comment, not a value"),
                ));
            }
            _ => {
                return Err(malformed(
                    self.file,
                    format!("the value at `{shown}` has an unknown type `{}`", enc.kind),
                ));
            }
        };
        let text = canonical.unwrap_or(text);
        self.hash.update(text.as_bytes());
        Ok(Leaf { kind, text })
    }
}

#[cfg(test)]
mod tests;
