//! Approval modes: which classes ask.
//!
//! Owns [`Mode`] (`outside`, `everything`, `money_only`) and the one function
//! that answers "does this mode ask for this class". Where a workspace's mode
//! is stored is the store's business; it must not know about rules, requests
//! or the agent loop.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::class::Class;
use crate::error::{Error, Result};

/// A workspace's approval mode. There is no "never" mode: a rule lets a
/// call run unasked, and money always asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// "Before anything outside" (the default): asks for send and money.
    #[default]
    Outside,
    /// "Before everything": asks for write, send and money.
    Everything,
    /// "Only money and deletes": asks for money.
    MoneyOnly,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Outside, Mode::Everything, Mode::MoneyOnly];

    /// Whether a call of `class` is held for a person under this mode
    /// (before rules are considered). Read never asks.
    pub fn asks(self, class: Class) -> bool {
        match self {
            Mode::Everything => class >= Class::Write,
            Mode::Outside => class >= Class::Send,
            Mode::MoneyOnly => class >= Class::Money,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Outside => "outside",
            Mode::Everything => "everything",
            Mode::MoneyOnly => "money_only",
        }
    }

    /// A short label for menus.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Outside => "Before anything outside",
            Mode::Everything => "Before everything",
            Mode::MoneyOnly => "Only for money and deletes",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "outside" => Ok(Mode::Outside),
            "everything" => Ok(Mode::Everything),
            "money_only" | "money" => Ok(Mode::MoneyOnly),
            _ => Err(Error::Invalid {
                what: "approval mode",
                value: s.to_owned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_times_classes() {
        use Class::*;
        let table = [
            (Mode::Outside, [false, false, true, true]),
            (Mode::Everything, [false, true, true, true]),
            (Mode::MoneyOnly, [false, false, false, true]),
        ];
        for (mode, expected) in table {
            for (class, want) in [Read, Write, Send, Money].into_iter().zip(expected) {
                assert_eq!(mode.asks(class), want, "{mode} × {class}");
            }
        }
    }

    #[test]
    fn default_is_outside_and_names_round_trip() {
        assert_eq!(Mode::default(), Mode::Outside);
        for m in Mode::ALL {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
            assert!(!m.label().is_empty());
        }
        assert_eq!("money-only".parse::<Mode>().unwrap(), Mode::MoneyOnly);
        assert!("never".parse::<Mode>().is_err());
    }
}
