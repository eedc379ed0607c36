//! core (being written).
