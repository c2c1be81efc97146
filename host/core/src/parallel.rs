//! An order-keeping parallel map on scoped threads, handing items out in small batches.
//!
//! Loading, validation and the guest calls of a plan each spread thousands of items over the
//! cores. Splitting them into one fixed chunk per thread left a core idle at the end of every
//! phase whenever one thread was slowed down (another process on a shared machine, a run of
//! slower items): the phase lasted as long as its slowest chunk. Here the threads take the
//! next batch from a shared counter until none is left, so they finish within one batch of
//! each other.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Items per batch: small enough that the threads end within a batch of each other, large
/// enough that the shared counter is touched rarely (each item costs microseconds or more).
fn batch_size(items: usize, threads: usize) -> usize {
    (items / (threads * 8)).clamp(1, 16)
}

/// `f` over `items` on `threads` scoped threads (at least one, at most one per item; none for
/// no items), the results in the order of `items`. Each thread starts from its own `init()`
/// state (a guest instance per kind, say), created on that thread. A panic in `f` is resumed
/// on the caller with its own payload once every thread has stopped.
pub fn map_ordered<T: Sync, R: Send, S>(
    items: &[T],
    threads: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    if items.is_empty() {
        return Vec::new();
    }
    let threads = threads.clamp(1, items.len());
    let batch = batch_size(items.len(), threads);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut state = init();
        let mut done: Vec<(usize, Vec<R>)> = Vec::new();
        loop {
            let start = next.fetch_add(batch, Ordering::Relaxed);
            if start >= items.len() {
                return done;
            }
            let end = (start + batch).min(items.len());
            let results = items[start..end]
                .iter()
                .map(|item| f(&mut state, item))
                .collect();
            done.push((start, results));
        }
    };
    let mut batches: Vec<(usize, Vec<R>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        let mut batches = Vec::new();
        let mut panic = None;
        for worker in workers {
            match worker.join() {
                Ok(done) => batches.extend(done),
                Err(payload) => panic = panic.or(Some(payload)),
            }
        }
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
        batches
    });
    batches.sort_unstable_by_key(|(start, _)| *start);
    batches
        .into_iter()
        .flat_map(|(_, results)| results)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Squares of `0..items` on `threads` threads, and the number of `init` calls.
    fn check(items: usize, threads: usize, expected_inits: usize) {
        let input: Vec<usize> = (0..items).collect();
        let inits = AtomicUsize::new(0);
        let out = map_ordered(
            &input,
            threads,
            || inits.fetch_add(1, Ordering::Relaxed),
            |_, &i| i * i,
        );
        let want: Vec<usize> = input.iter().map(|i| i * i).collect();
        assert_eq!(out, want, "{items} items on {threads} threads");
        assert_eq!(
            inits.load(Ordering::Relaxed),
            expected_inits,
            "{items} items on {threads} threads"
        );
    }

    #[test]
    fn results_keep_the_order_of_the_items() {
        check(0, 4, 0);
        check(1, 4, 1);
        check(3, 8, 3);
        check(17, 2, 2);
        check(1000, 3, 3);
        check(10_007, 2, 2);
        check(5, 0, 1);
    }

    #[test]
    fn a_slow_thread_leaves_the_rest_to_the_others() {
        // The first item holds its thread until every item outside its batch is done (or 10 s
        // pass). With one fixed chunk per thread, half of the items would wait behind it.
        let items: Vec<usize> = (0..64).collect();
        let others = items.len() - batch_size(items.len(), 2);
        let done = AtomicUsize::new(0);
        let out = map_ordered(
            &items,
            2,
            || (),
            |_, &i| {
                if i == 0 {
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while done.load(Ordering::Acquire) < others
                        && std::time::Instant::now() < deadline
                    {
                        std::thread::yield_now();
                    }
                    return done.load(Ordering::Acquire);
                }
                done.fetch_add(1, Ordering::Release);
                i
            },
        );
        assert_eq!(
            out[0], others,
            "items done by the other thread while the first waited"
        );
        assert_eq!(out[1..], items[1..]);
    }

    #[test]
    fn a_panic_reaches_the_caller_with_its_message() {
        let items: Vec<usize> = (0..100).collect();
        let caught = std::panic::catch_unwind(|| {
            map_ordered(
                &items,
                2,
                || (),
                |_, &i| {
                    assert!(i != 57, "item {i} is broken");
                    i
                },
            )
        })
        .expect_err("the panic is resumed");
        let message = caught.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message.contains("item 57 is broken"), "{message}");
    }
}
