//! Adoption tests.
