//! SIGINT and SIGTERM during apply and watch: stop starting work, finish what is in flight,
//! exit 130 or 143; a second signal exits at once.

use std::sync::Arc;

use crate::exit;
use crate::output::errln;

/// The signal that interrupted an apply, as its exit code (130 SIGINT, 143 SIGTERM).
pub(crate) fn watch_signals() -> (
    tokio::sync::watch::Receiver<bool>,
    Arc<std::sync::atomic::AtomicU8>,
) {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let code = Arc::new(std::sync::atomic::AtomicU8::new(0));
    let seen = code.clone();
    // The streams are made here, before anything is sent, and kept: a signal that arrives
    // while the first one is being handled is buffered, never lost.
    #[cfg(unix)]
    let streams = {
        use tokio::signal::unix::{SignalKind, signal};
        signal(SignalKind::interrupt()).and_then(|i| Ok((i, signal(SignalKind::terminate())?)))
    };
    tokio::spawn(async move {
        #[cfg(unix)]
        let (mut int, mut term) = match streams {
            Ok(s) => s,
            Err(e) => {
                errln!("warning: cannot watch for signals ({e}); ^C stops proxops at once");
                return;
            }
        };
        #[cfg(unix)]
        let which = tokio::select! {
            _ = int.recv() => exit::INTERRUPTED,
            _ = term.recv() => exit::TERMINATED,
        };
        #[cfg(not(unix))]
        let which = {
            let _ = tokio::signal::ctrl_c().await;
            exit::INTERRUPTED
        };
        seen.store(which, std::sync::atomic::Ordering::SeqCst);
        errln!(
            "proxops: interrupted; finishing the actions in flight (a stopped guest is started again), starting nothing new; a second signal exits at once"
        );
        let _ = tx.send(true);
        // A second signal: the operator wants out now, whatever is in flight.
        #[cfg(unix)]
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        errln!("proxops: second signal; exiting now, actions in flight are abandoned");
        std::process::exit(i32::from(which));
    });
    (rx, code)
}
