//! The WebAssembly components built from guest-kinds/ and policies/, embedded at build time,
//! with the bundled kinds also precompiled for the build's target.

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
    /// `bytes` compiled at build time for the build's target, in the frame of
    /// `proxops_engine::frame`; `None` for policies and when the build could not precompile.
    /// The runtime uses it only if wasmtime accepts it for its engine and CPU.
    pub precompiled: Option<&'static [u8]>,
}

include!(concat!(env!("OUT_DIR"), "/guests.rs"));

/// Bundled components with the given role.
pub fn bundled(role: Role) -> impl Iterator<Item = &'static Bundled> {
    BUNDLED.iter().filter(move |b| b.role == role)
}

/// Path of a built component (bundled or test-only, such as `proxops-kind-misbehave`), as
/// left by the build in `target/guests`; for tests and tools that need a `.wasm` file.
pub fn artifact_path(package: &str) -> Option<&'static str> {
    PATHS
        .iter()
        .find(|(p, _)| *p == package)
        .map(|(_, path)| *path)
}
