//! Parallel guest calls: items are split across worker threads, each with its own lazily
//! created instance per kind (bundled kinds are trusted to be reused within a cycle).

use proxops_runtime::{GuestError, KindInstance};

use crate::KindRegistry;

/// One worker's instances, one slot per kind in the registry.
pub struct Instances<'r> {
    registry: &'r KindRegistry,
    slots: Vec<Option<KindInstance>>,
}

impl Instances<'_> {
    /// The instance of kind `index`, created on first use.
    pub fn get(&mut self, index: usize) -> Result<&mut KindInstance, GuestError> {
        if self.slots[index].is_none() {
            self.slots[index] = Some(self.registry.get(index).instance()?);
        }
        Ok(self.slots[index].as_mut().expect("just created"))
    }
}

/// Map `f` over `items` on up to `available_parallelism` threads, keeping order.
pub fn par_map<T: Sync, R: Send>(
    registry: &KindRegistry,
    items: &[T],
    f: impl Fn(&mut Instances<'_>, &T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len().max(1));
    let chunk = items.len().div_ceil(threads).max(1);
    let new_instances = || Instances {
        registry,
        slots: (0..registry.len()).map(|_| None).collect(),
    };
    if threads <= 1 {
        let mut instances = new_instances();
        return items.iter().map(|item| f(&mut instances, item)).collect();
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                let f = &f;
                scope.spawn(move || {
                    let mut instances = new_instances();
                    part.iter()
                        .map(|item| f(&mut instances, item))
                        .collect::<Vec<R>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker thread panicked"))
            .collect()
    })
}
