//! SOPS secrets behind a small trait, so that validation, planning and adoption are plain
//! functions: native unit tests resolve from a map, the component calls the WIT imports
//! `proxops:kind/secrets.resolve`, `find`, `reference` and `matches`.
//!
//! A third-party kind never gets a value (`resolve` answers `Denied`): it puts the token
//! [`Secrets::reference`] returns as a call parameter's whole value, and the host sends the
//! value in its place, if the operator's grant lets that ref fill that parameter.
//!
//! A resolved value is held in a [`Secret`], whose `Debug` never prints it; diagnostics built
//! here name the reference (the dot-path), never the value.

use std::collections::BTreeMap;
use std::fmt;

/// Why a secret could not be given (plain form of WIT `secret-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretError {
    /// The kind was not granted access to secrets.
    Denied,
    /// No value at that dot-path.
    Missing,
    /// The value is empty.
    Empty,
    /// The dot-path is malformed or points at a non-string value.
    Invalid(String),
    /// Anything else the host reports.
    Other(String),
}

impl SecretError {
    /// What to tell the operator about reference `path` (never a value).
    pub fn message(&self, path: &str) -> String {
        match self {
            SecretError::Denied => format!(
                "cannot use `{path}`: this kind is not granted access to it (a third-party kind gets references through `secrets.reference`, never values; its grant names the refs under `grant.secrets`)"
            ),
            SecretError::Missing => {
                format!(
                    "`{path}` is not in the cluster's SOPS document; add it, or fix the reference"
                )
            }
            SecretError::Empty => format!(
                "`{path}` is empty in the cluster's SOPS document; a missing or empty secret is never treated as \"nothing to write\""
            ),
            SecretError::Invalid(why) => format!("`{path}` cannot be resolved: {why}"),
            SecretError::Other(why) => format!("resolving `{path}` failed: {why}"),
        }
    }
}

/// A secret value. `Debug` prints `(sensitive)`; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(sensitive)")
    }
}

/// A source of secrets.
pub trait Secrets {
    /// Resolve a dot-path such as `cloud-init.ssh-keys.alice`.
    fn resolve(&self, path: &str) -> Result<Secret, SecretError>;

    /// The dot-path of the entry below `prefix` whose value equals `value`, if any (adopt
    /// matching a live value it already holds; no other value is revealed).
    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError>;

    /// A token standing for the secret at `path`, to be used as the whole value of a call
    /// parameter; the host sends the value in its place. In what the host lets a third-party
    /// kind read, a live value equal to the secret appears as this token too.
    fn reference(&self, path: &str) -> Result<String, SecretError> {
        let _ = path;
        Err(SecretError::Other(
            "this secret source cannot make references".into(),
        ))
    }

    /// Whether the secret at `path` equals `value`, compared where the value is.
    fn matches(&self, path: &str, value: &str) -> Result<bool, SecretError> {
        Ok(self.resolve(path)?.expose() == value)
    }
}

/// What [`MapSecrets`] answers for `reference`: the host's tokens carry a per-run nonce, this
/// one a fixed word, so native tests can compare them.
pub const NATIVE_REFERENCE_PREFIX: &str = "proxops-secret-ref:native:";

/// Secrets from a map (tests, benchmarks). A path that is absent is `Missing`, an empty value
/// is `Empty`, like the host.
#[derive(Default, Clone)]
pub struct MapSecrets(pub BTreeMap<String, String>);

impl MapSecrets {
    /// From `(path, value)` pairs.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        MapSecrets(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }
}

impl fmt::Debug for MapSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

impl Secrets for MapSecrets {
    fn resolve(&self, path: &str) -> Result<Secret, SecretError> {
        match self.0.get(path) {
            None => Err(SecretError::Missing),
            Some(v) if v.is_empty() => Err(SecretError::Empty),
            Some(v) => Ok(Secret::new(v.clone())),
        }
    }

    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
        let below = format!("{prefix}.");
        Ok(self
            .0
            .iter()
            .find(|(k, v)| k.starts_with(&below) && v.as_str() == value)
            .map(|(k, _)| k.clone()))
    }

    fn reference(&self, path: &str) -> Result<String, SecretError> {
        self.resolve(path)?;
        Ok(format!("{NATIVE_REFERENCE_PREFIX}{path}"))
    }
}

/// No access to secrets: every lookup is `Denied`.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSecrets;

impl Secrets for NoSecrets {
    fn resolve(&self, _path: &str) -> Result<Secret, SecretError> {
        Err(SecretError::Denied)
    }

    fn find(&self, _prefix: &str, _value: &str) -> Result<Option<String>, SecretError> {
        Err(SecretError::Denied)
    }

    fn reference(&self, _path: &str) -> Result<String, SecretError> {
        Err(SecretError::Denied)
    }

    fn matches(&self, _path: &str, _value: &str) -> Result<bool, SecretError> {
        Err(SecretError::Denied)
    }
}

/// The host's secrets (the WIT import). Outside the component there is no host: a lookup goes
/// to the source [`with_native`] set for the current thread, and fails with `Other` when none
/// is set.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostSecrets;

impl Secrets for HostSecrets {
    #[cfg(target_arch = "wasm32")]
    fn resolve(&self, path: &str) -> Result<Secret, SecretError> {
        crate::bindings::proxops::kind::secrets::resolve(path)
            .map(Secret::new)
            .map_err(from_host)
    }

    #[cfg(target_arch = "wasm32")]
    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
        crate::bindings::proxops::kind::secrets::find(prefix, value).map_err(from_host)
    }

    #[cfg(target_arch = "wasm32")]
    fn reference(&self, path: &str) -> Result<String, SecretError> {
        crate::bindings::proxops::kind::secrets::reference(path).map_err(from_host)
    }

    #[cfg(target_arch = "wasm32")]
    fn matches(&self, path: &str, value: &str) -> Result<bool, SecretError> {
        crate::bindings::proxops::kind::secrets::matches(path, value).map_err(from_host)
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn resolve(&self, path: &str) -> Result<Secret, SecretError> {
        native::with(|s| s.map_or_else(|| Err(outside()), |s| s.resolve(path)))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn find(&self, prefix: &str, value: &str) -> Result<Option<String>, SecretError> {
        native::with(|s| s.map_or_else(|| Err(outside()), |s| s.find(prefix, value)))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn reference(&self, path: &str) -> Result<String, SecretError> {
        native::with(|s| s.map_or_else(|| Err(outside()), |s| s.reference(path)))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn matches(&self, path: &str, value: &str) -> Result<bool, SecretError> {
        native::with(|s| s.map_or_else(|| Err(outside()), |s| s.matches(path, value)))
    }
}

/// Run `f` with `secrets` standing in for the host's on this thread: what [`HostSecrets`]
/// answers outside a component, so that a kind's `wit::Guest` functions can run natively
/// (benchmarks, a host that links a kind as a library) with the secrets the host would grant.
/// The previous source, if any, is back when `f` returns or panics. Inside a component the
/// WIT import answers and this only runs `f`.
pub fn with_native<R>(secrets: Box<dyn Secrets>, f: impl FnOnce() -> R) -> R {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _restore = native::Swap::install(secrets);
        f()
    }
    #[cfg(target_arch = "wasm32")]
    {
        drop(secrets);
        f()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::cell::RefCell;

    use super::Secrets;

    thread_local! {
        static SOURCE: RefCell<Option<Box<dyn Secrets>>> = const { RefCell::new(None) };
    }

    /// Call `f` with the current thread's source.
    pub(super) fn with<R>(f: impl FnOnce(Option<&dyn Secrets>) -> R) -> R {
        SOURCE.with(|s| f(s.borrow().as_deref()))
    }

    /// Puts the previous source back when dropped.
    pub(super) struct Swap(Option<Box<dyn Secrets>>);

    impl Swap {
        pub(super) fn install(secrets: Box<dyn Secrets>) -> Swap {
            Swap(SOURCE.with(|s| s.replace(Some(secrets))))
        }
    }

    impl Drop for Swap {
        fn drop(&mut self) {
            let previous = self.0.take();
            SOURCE.with(|s| *s.borrow_mut() = previous);
        }
    }
}

#[cfg(target_arch = "wasm32")]
fn from_host(e: crate::bindings::proxops::kind::secrets::SecretError) -> SecretError {
    use crate::bindings::proxops::kind::secrets::SecretError as Host;
    match e {
        Host::Denied => SecretError::Denied,
        Host::Missing => SecretError::Missing,
        Host::Empty => SecretError::Empty,
        Host::Invalid(m) => SecretError::Invalid(m),
        Host::Other(m) => SecretError::Other(m),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn outside() -> SecretError {
    SecretError::Other("secrets are only available inside the component".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_secrets_natively_answer_from_the_thread_source() {
        assert!(matches!(
            HostSecrets.resolve("a.b"),
            Err(SecretError::Other(_))
        ));
        let map = MapSecrets::from_pairs(&[("a.b", "v"), ("keys.k", "line")]);
        let inner = with_native(Box::new(map), || {
            assert_eq!(HostSecrets.resolve("a.b").unwrap().expose(), "v");
            assert_eq!(HostSecrets.find("keys", "line"), Ok(Some("keys.k".into())));
            // Nested: the inner source answers, and the outer one is back after it.
            with_native(Box::new(NoSecrets), || HostSecrets.resolve("a.b"))
        });
        assert_eq!(inner, Err(SecretError::Denied));
        assert!(matches!(
            HostSecrets.resolve("a.b"),
            Err(SecretError::Other(_))
        ));
    }
}
