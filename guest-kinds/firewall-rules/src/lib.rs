//! PVE firewall rules as the `Firewall` kind (a guest's rule list) and the `SecurityGroup` kind
//! (a cluster security group's) both keep them: the rule model, and the calls that turn one
//! positional rule list into another with the fewest moves.
//!
//! A plain library linked into both components: a crate that exports a component cannot be
//! shared by two of them (each would export the other's kind).

pub mod order;
pub mod rules;

#[cfg(test)]
mod tests;
