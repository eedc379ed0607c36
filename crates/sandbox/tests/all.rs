//! The sandbox crate's integration tests: real processes behind real walls.

mod suite;
