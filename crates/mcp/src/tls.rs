//! The TLS crypto of keel's MCP HTTP clients.
//!
//! rmcp's HTTP client is built on reqwest 0.13, whose own choice of crypto
//! is aws-lc (a second copy of what keel already links as `ring`, about
//! 2 MiB of code and a C build). keel builds reqwest without one and makes
//! rustls's `ring` the process's provider before the first MCP client is
//! made: [`ensure_provider`] is called on every path that builds one. It
//! must not know servers or tokens.

/// Makes `ring` the process's rustls provider, unless one is set already.
pub(crate) fn ensure_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may win the race; either way one is installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_https_client_can_be_built_after_it() {
        super::ensure_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        reqwest::Client::builder().build().unwrap();
    }
}
