//! Integration tests of keel-llm against the mock model server (one test
//! binary; each dialect has a module under `suite/`).

#[cfg(test)]
mod suite;
