//! Guest migration over HTTP.
