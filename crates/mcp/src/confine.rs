//! The sandbox that confines stdio servers whose table asks for walls
//! (`sandbox = "read-only"` or `"workspace-write"`).
//!
//! The binary sets it once it knows keel's home ([`confine_with`]), as it
//! sets the environment policy of commands; a server that asks for walls
//! in a process that set none is refused (fails closed). It must not know
//! how the walls are built: that is the [`Confiner`]'s.

use std::sync::{Arc, RwLock};

use keel_tools::Confiner;

static CONFINER: RwLock<Option<Arc<dyn Confiner>>> = RwLock::new(None);

/// Confines, from now on, every stdio server that asks for it with
/// `confiner`.
pub fn confine_with(confiner: Arc<dyn Confiner>) {
    *CONFINER.write().unwrap_or_else(|e| e.into_inner()) = Some(confiner);
}

/// The sandbox set by [`confine_with`].
pub fn confiner() -> Option<Arc<dyn Confiner>> {
    CONFINER.read().unwrap_or_else(|e| e.into_inner()).clone()
}
