//! One module per area.

mod conformance;
