//! Where Temporal is and which queue keel's workflows run on.
//!
//! Owns [`TemporalSettings`] and its defaults. The command line, the
//! environment and `config.toml` are read by the binary; this module only
//! checks what they give (an address is `HOST:PORT`, or a URL with
//! `http`/`https`) and turns it into what the SDK connects to.

use crate::error::{Error, Result};

/// The environment variable of the address (`--temporal`).
pub const ADDRESS_ENV: &str = "KEEL_TEMPORAL_ADDRESS";
/// The environment variable of the namespace.
pub const NAMESPACE_ENV: &str = "KEEL_TEMPORAL_NAMESPACE";
/// The environment variable of the task queue.
pub const TASK_QUEUE_ENV: &str = "KEEL_TEMPORAL_TASK_QUEUE";
/// Temporal's own default namespace.
pub const DEFAULT_NAMESPACE: &str = "default";
/// The task queue keel's workers poll unless told otherwise.
pub const DEFAULT_TASK_QUEUE: &str = "keel";

/// A Temporal cluster and the part of it keel uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemporalSettings {
    /// `HOST:PORT` or `http(s)://HOST:PORT` of the frontend service.
    pub address: String,
    pub namespace: String,
    pub task_queue: String,
}

impl TemporalSettings {
    /// Settings for `address` with the default namespace and task queue.
    pub fn new(address: &str) -> Result<Self> {
        let settings = Self {
            address: address.trim().to_owned(),
            namespace: DEFAULT_NAMESPACE.to_owned(),
            task_queue: DEFAULT_TASK_QUEUE.to_owned(),
        };
        settings.url()?;
        Ok(settings)
    }

    /// The URL the client connects to.
    pub fn url(&self) -> Result<String> {
        let address = self.address.as_str();
        let (scheme, rest) = match address.split_once("://") {
            Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
            Some((scheme, _)) => {
                return Err(Error::Config(format!(
                    "the Temporal address {address:?} has the scheme {scheme:?}; use HOST:PORT, http:// or https://"
                )));
            }
            None => ("http", address),
        };
        let authority = rest.trim_end_matches('/');
        let port = authority
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        match port {
            Some((host, Ok(_))) if !host.is_empty() && !authority.contains('/') => {
                Ok(format!("{scheme}://{authority}"))
            }
            _ => Err(Error::Config(format!(
                "the Temporal address {address:?} is not HOST:PORT (for example 127.0.0.1:7233)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_become_an_http_url() {
        let s = TemporalSettings::new("127.0.0.1:7233").unwrap();
        assert_eq!(s.url().unwrap(), "http://127.0.0.1:7233");
        assert_eq!(s.namespace, "default");
        assert_eq!(s.task_queue, "keel");
        let tls = TemporalSettings::new("https://temporal.example:7233/").unwrap();
        assert_eq!(tls.url().unwrap(), "https://temporal.example:7233");
    }

    #[test]
    fn an_address_without_a_port_or_with_another_scheme_is_refused() {
        for bad in [
            "localhost",
            "grpc://h:7233",
            ":7233",
            "h:port",
            "h:7233/x",
            "",
        ] {
            let e = TemporalSettings::new(bad).unwrap_err().to_string();
            assert!(e.contains("Temporal address"), "{bad}: {e}");
        }
    }
}
