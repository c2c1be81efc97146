//! End-to-end tests: the real `proxops` binary against fixture repositories and the
//! simulator. One integration-test binary for the whole workspace.

mod images;
mod inputs;
mod policies;
mod provision;
mod reconcile;
mod sim_serve;
mod support;
mod validate;
