//! Integration tests of proxops-secrets: fixtures written by the real sops 3.11.0, the canary
//! that must never leak, and the oracle (sops encrypts during the run, proxops reads back).

mod canary;
mod common;
mod edit;
mod fixtures;
mod oracle;
mod props;
