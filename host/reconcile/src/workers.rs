//! Parallel guest calls: worker threads take the items in small batches, each with its own lazily
//! created instance per bundled kind (trusted to be reused within a cycle); third-party kinds
//! get a fresh instance per object.
//! The workers are plain threads, never tokio's: wasmtime-wasi's synchronous bindings block
//! on their own runtime, which a tokio thread must not do (a guest printing or sleeping
//! would crash the host). Instances share their kind's run (see [`KindRegistry`]), so a kind
//! that fails on one worker is not called again on any.
//!
//! Every guest call goes through [`KindCalls`] (`proxops_runtime::calls`), which a component
//! instance implements and so can a native backend registered with
//! [`KindRegistry::register_native`].

use proxops_runtime::GuestError;
use proxops_runtime::calls::KindCalls;

use crate::registry::KindRegistry;

/// One worker's instances, one slot per kind in the registry.
pub struct Instances<'r> {
    registry: &'r KindRegistry,
    slots: Vec<Option<Box<dyn KindCalls>>>,
}

impl Instances<'_> {
    /// The instance of kind `index`, created on first use; a third-party kind gets a fresh
    /// one every time (one per object), so nothing one object's call left in its memory
    /// reaches another's.
    pub fn get(&mut self, index: usize) -> Result<&mut dyn KindCalls, GuestError> {
        let slot = &mut self.slots[index];
        if slot.is_none() || !self.registry.reuses_instances(index) {
            *slot = Some(self.registry.instance(index)?);
        }
        Ok(slot.as_deref_mut().expect("just created"))
    }
}

/// Worker threads for guest calls: `available_parallelism`, at most one per item.
fn threads_for(items: usize) -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.max(1))
}

/// Map `f` over `items` on up to `available_parallelism` threads, keeping order; the threads
/// take small batches by a shared counter ([`proxops_core::parallel`]). Called from a tokio
/// thread, even a single item goes to a worker thread of its own.
pub fn par_map<T: Sync, R: Send>(
    registry: &KindRegistry,
    items: &[T],
    f: impl Fn(&mut Instances<'_>, &T) -> R + Sync,
) -> Vec<R> {
    let threads = threads_for(items.len());
    let new_instances = || Instances {
        registry,
        slots: (0..registry.len()).map(|_| None).collect(),
    };
    let on_tokio = tokio::runtime::Handle::try_current().is_ok();
    if threads <= 1 && !on_tokio {
        let mut instances = new_instances();
        return items.iter().map(|item| f(&mut instances, item)).collect();
    }
    proxops_core::parallel::map_ordered(items, threads, new_instances, f)
}
