//! The classes of tool calls ([`Class`]: read, write, send, money), their
//! names and labels, and why a change to a protected place is held. A
//! leaf: `class` (classifying a call) and the shell analyser both use it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How far a call reaches. Ordered: `Read < Write < Send < Money`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Looks things up. Never asks.
    #[default]
    Read,
    /// Changes the workspace's own files.
    Write,
    /// Reaches people, services or the machine beyond the workspace; runs programs.
    Send,
    /// Spends money or deletes something.
    Money,
}

impl Class {
    pub const ALL: [Class; 4] = [Class::Read, Class::Write, Class::Send, Class::Money];

    pub fn as_str(self) -> &'static str {
        match self {
            Class::Read => "read",
            Class::Write => "write",
            Class::Send => "send",
            Class::Money => "money",
        }
    }

    /// The pill a prompt shows.
    pub fn label(self) -> &'static str {
        match self {
            Class::Read => "Reads",
            Class::Write => "Makes changes",
            Class::Send => "Reaches out",
            Class::Money => "Money or deletes",
        }
    }

    /// The class of an MCP tool from its annotations: `readOnlyHint` → read;
    /// an explicit `destructiveHint: true` → money; explicitly
    /// non-destructive and closed-world (`openWorldHint: false`) → write;
    /// anything else → send.
    pub fn from_mcp_hints(
        read_only: Option<bool>,
        destructive: Option<bool>,
        open_world: Option<bool>,
    ) -> Class {
        if read_only == Some(true) {
            Class::Read
        } else if destructive == Some(true) {
            Class::Money
        } else if destructive == Some(false) && open_world == Some(false) {
            Class::Write
        } else {
            Class::Send
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Class {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "read" => Ok(Class::Read),
            "write" => Ok(Class::Write),
            "send" => Ok(Class::Send),
            "money" => Ok(Class::Money),
            _ => Err(Error::Invalid {
                what: "approval class",
                value: s.to_owned(),
            }),
        }
    }
}

/// Why a change to keel's own state is money.
pub(crate) const PROTECTED_WHY: &str =
    "keel's own state (approvals, config, sessions) is protected; never covered by rules";

/// Why a change beyond the workspace is held.
pub(crate) const OUTSIDE_WHY: &str =
    "outside the workspace; held in every mode and never covered by rules";
