//! The sandbox crate's integration tests: real processes behind real walls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
