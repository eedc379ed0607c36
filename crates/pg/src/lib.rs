//! What keel's PostgreSQL stores (the approvals store, the sessions
//! database) share: the few connections a process keeps to the server
//! ([`Pool`], in `pool.rs`), and the driver's errors: [`lost`] tells a
//! connection that failed from a statement the server refused, so work
//! that is safe to repeat can be tried again on a new connection, and
//! [`describe`] says what the server or the socket said
//! (`tokio_postgres::Error`'s own text is only its kind). It must not know
//! any schema or store.

mod pool;

pub use pool::{Conn, FIRST_PAUSE, LAST_PAUSE, Lease, Pool, RECONNECT_WINDOW, Retry, connect};

/// Whether `e` says the connection failed rather than the statement: it was
/// closed, its I/O failed, or the server is shutting down or starting up
/// (SQLSTATE class 08, and 57P01–57P03).
pub fn lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let code = code.code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// A PostgreSQL error with its cause: the server's message (and detail),
/// or the chain of I/O errors under it.
pub fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return match db.detail() {
            Some(detail) => format!("{}: {} ({detail})", db.severity(), db.message()),
            None => format!("{}: {}", db.severity(), db.message()),
        };
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
