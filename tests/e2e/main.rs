//! End-to-end tests: the real `proxops` binary against fixture repositories and the
//! simulator. One integration-test binary for the whole workspace.

mod access;
mod adopt;
mod adopt_props;
mod availability;
mod canary;
mod clients;
mod concurrency;
mod containers;
mod crash;
mod dataloss;
mod examples;
mod faults;
mod fleet;
mod gitops;
mod guests;
mod ha;
mod hostile;
mod images;
mod inputs;
mod kinds;
mod memo;
mod ownership_gate;
mod pipeline;
mod policies;
mod provision;
mod reconcile;
mod rollouts;
mod safety;
mod served;
mod sim_serve;
mod soak;
mod support;
mod validate;
