//! The PVE API client: the only crate that knows PVE's wire format (token auth, the
//! `{"data": …}` envelope, error bodies, UPIDs and task polling), over reqwest + rustls with
//! certificate pinning.

mod client;
mod error;
mod method;
mod tls;
mod upid;

pub use client::{Client, ClientConfig, Method, Param, encode_segment};
pub use error::PveError;
pub use tls::{TlsMode, https_builder};
pub use upid::{TaskOutcome, Upid};
