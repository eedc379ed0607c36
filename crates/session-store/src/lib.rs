//! Session files (being written).
