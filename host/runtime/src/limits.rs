//! Per-guest resource limits and the store limiter that enforces the memory cap.

use std::time::Duration;

use crate::{EPOCH_TICK, MAX_GUEST_MEMORY};

/// Limits applied to every call into one guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock budget of one call (enforced by epoch interruption).
    pub deadline: Duration,
    /// Cap on the guest's linear memory, in bytes (at most [`MAX_GUEST_MEMORY`]).
    pub memory: usize,
    /// Cap on the size of one call's result, in bytes.
    pub output: usize,
    /// Log lines kept per call; further lines are counted, not stored.
    pub log_lines: usize,
}

impl Limits {
    /// Defaults for resource kinds: planning a large VM must never come near them.
    pub const KIND: Limits = Limits {
        deadline: Duration::from_secs(5),
        memory: 256 << 20,
        output: 16 << 20,
        log_lines: 200,
    };

    /// Defaults for site policies: small, fast functions.
    pub const POLICY: Limits = Limits {
        deadline: Duration::from_secs(2),
        memory: 128 << 20,
        output: 1 << 20,
        log_lines: 100,
    };

    /// Deadline in epoch ticks (at least one).
    pub(crate) fn deadline_ticks(&self) -> u64 {
        ticks(self.deadline)
    }

    /// Reject limits the engine cannot honour.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.memory > MAX_GUEST_MEMORY {
            return Err(format!(
                "memory limit {} bytes is above the runtime's maximum of {MAX_GUEST_MEMORY}",
                self.memory
            ));
        }
        if self.deadline.is_zero() {
            return Err("deadline must be longer than zero".into());
        }
        Ok(())
    }
}

/// `d` in epoch ticks (at least one).
pub(crate) fn ticks(d: Duration) -> u64 {
    (d.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}

/// Enforces the memory cap and remembers that it refused a grow, so the trap that follows
/// is reported as a memory limit and not as a guest bug.
#[derive(Debug)]
pub(crate) struct Limiter {
    pub(crate) memory: usize,
    pub(crate) refused: bool,
}

/// The error a refused memory grow traps with.
#[derive(Debug)]
pub(crate) struct MemoryLimitExceeded {
    pub(crate) desired: usize,
}

impl std::fmt::Display for MemoryLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "memory grow to {} bytes refused", self.desired)
    }
}

impl std::error::Error for MemoryLimitExceeded {}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory {
            self.refused = true;
            return Err(wasmtime::Error::new(MemoryLimitExceeded { desired }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
