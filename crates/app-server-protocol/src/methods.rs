//! The method catalogue: what exists in the protocol, in which profile, and
//! whether a request's `params` member is required.
//!
//! The table itself is generated data (`method_table.rs`); this module owns
//! the lookups and the error texts that name methods, phrased as the Codex
//! server phrases them (it deserialises requests with serde, so an unknown
//! method reads `unknown variant …, expected one of …`).

pub use crate::method_table::{
    CLIENT_NOTIFICATIONS, CLIENT_REQUESTS, SERVER_NOTIFICATIONS, SERVER_REQUESTS,
};

/// Which schema profile declares a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// In the stable schema: always available.
    Stable,
    /// Only in the experimental schema: needs `capabilities.experimentalApi`.
    Experimental,
}

/// What a request's `params` member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Params {
    /// An object type: the member is required (`{}` is fine).
    Object,
    /// An object type or `null`: the member may be omitted.
    Optional,
    /// `null`: the member may be omitted.
    None,
}

/// One client request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodSpec {
    pub name: &'static str,
    pub stability: Stability,
    pub params: Params,
}

/// The client request `name`, if the protocol has it.
pub fn client_request(name: &str) -> Option<&'static MethodSpec> {
    CLIENT_REQUESTS.iter().find(|m| m.name == name)
}

/// The profile of a server notification, if the protocol has it.
pub fn server_notification(name: &str) -> Option<Stability> {
    SERVER_NOTIFICATIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, s)| *s)
}

/// `unknown variant `x`, expected one of `a`, `b`, …` (serde's wording).
pub fn unknown_method_message(name: &str) -> String {
    let mut out = format!("unknown variant `{name}`, expected one of ");
    for (i, m) in CLIENT_REQUESTS.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push('`');
        out.push_str(m.name);
        out.push('`');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_matches_the_schema_counts() {
        let stable = CLIENT_REQUESTS
            .iter()
            .filter(|m| m.stability == Stability::Stable)
            .count();
        assert_eq!(stable, 109);
        assert_eq!(CLIENT_REQUESTS.len(), 184);
        assert_eq!(
            client_request("configRequirements/read").map(|m| m.params),
            Some(Params::None)
        );
        assert_eq!(
            client_request("thread/queue/list").map(|m| m.stability),
            Some(Stability::Experimental)
        );
        assert_eq!(
            server_notification("item/agentMessage/delta"),
            Some(Stability::Stable)
        );
        assert!(
            unknown_method_message("a/b")
                .starts_with("unknown variant `a/b`, expected one of `initialize`")
        );
    }
}
