//! Integration tests of the `keel` binary: each spawns the real binary
//! against the scripted mock model server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
