//! The commands of the `host_uris` sub-protocol (the `impl Server` half;
//! the types and the broker live in `crate::host_uris`).

use crate::command::SetHostUriSchemesArgs;
use crate::server::Server;
use crate::wire_errors::{self, WireError};
use keel_tools::host::{HostScheme, uri_scheme};
use serde_json::{Value, json};
use std::collections::BTreeMap;

impl Server {
    pub(crate) fn set_host_uri_schemes(
        &mut self,
        args: SetHostUriSchemesArgs,
    ) -> Result<Option<Value>, WireError> {
        let mut schemes = BTreeMap::new();
        for def in args.schemes {
            let raw = def
                .scheme
                .trim()
                .trim_end_matches("://")
                .trim_end_matches(':');
            let Some(name) = uri_scheme(&format!("{raw}://")) else {
                return Err(wire_errors::host_scheme_invalid(&format!(
                    "{:?} is not a URI scheme (a letter, then letters, digits, '+', '-' or \
                     '.'; at least two characters)",
                    def.scheme
                )));
            };
            if matches!(name.as_str(), "file" | "http" | "https") {
                return Err(wire_errors::host_scheme_invalid(&format!(
                    "{name} cannot be owned by the host"
                )));
            }
            let _ = def.description;
            schemes.insert(
                name,
                HostScheme {
                    writable: def.writable,
                    immutable: def.immutable,
                },
            );
        }
        let names: Vec<String> = schemes.keys().cloned().collect();
        self.brokers.host_uris.lock().schemes = schemes;
        Ok(Some(json!({"schemes": names})))
    }
}
