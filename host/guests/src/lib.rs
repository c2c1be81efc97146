//! The WebAssembly components built from guest-kinds/ and policies/, embedded at build time.

/// What a bundled component is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A resource kind (`proxops:kind/kind`).
    Kind,
    /// A site policy (`proxops:policy/policy`).
    Policy,
}

/// One component embedded in the binary.
#[derive(Debug)]
pub struct Bundled {
    /// Cargo package it was built from, e.g. `proxops-kind-vm`.
    pub package: &'static str,
    pub role: Role,
    /// The component's bytes (a WebAssembly component, not a core module).
    pub bytes: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Bundled components with the given role.
pub fn bundled(role: Role) -> impl Iterator<Item = &'static Bundled> {
    BUNDLED.iter().filter(move |b| b.role == role)
}

/// Path of a test-only component (such as `proxops-kind-misbehave`) built alongside the
/// bundled ones.
pub fn test_guest(package: &str) -> Option<&'static str> {
    TEST_GUESTS
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, path)| *path)
}
