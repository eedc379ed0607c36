//! keel-mcp's integration tests: the crate against real servers.

mod suite;
