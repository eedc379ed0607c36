//! Stored rows read back into records, the same way for every backend:
//! which column of [`super::REQUEST_COLUMNS`], [`super::RULE_COLUMNS`] and
//! [`super::AUDIT_COLUMNS`] holds which field, and how a field is decoded
//! (enums from their names, JSON columns, `NULL` as `None`). A backend only
//! says how to read one text, integer or boolean column ([`Columns`]); it
//! must not know the record types.

use std::str::FromStr;

use serde::de::DeserializeOwned;

use super::{ApprovalRecord, AuditEntry, NewAudit};
use crate::error::Error;
use crate::rules::{Lifetime, Rule, RuleScope};

/// One row of a query, as a backend reads its columns.
pub(crate) trait Columns {
    /// The backend's error.
    type Error;
    /// A text column (`None` for `NULL`).
    fn text(&self, idx: usize) -> Result<Option<String>, Self::Error>;
    /// An integer column (`None` for `NULL`).
    fn int(&self, idx: usize) -> Result<Option<i64>, Self::Error>;
    /// A boolean column.
    fn flag(&self, idx: usize) -> Result<bool, Self::Error>;
    /// Column `idx` holds a value its field cannot take.
    fn invalid(&self, idx: usize, e: Error) -> Self::Error;
}

/// A field type read from one column.
trait Field: Sized {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error>;
}

fn required<T, R: Columns>(row: &R, idx: usize, v: Option<T>) -> Result<T, R::Error> {
    v.ok_or_else(|| {
        row.invalid(
            idx,
            Error::Invalid {
                what: "NULL in a column that needs a value",
                value: format!("column {idx}"),
            },
        )
    })
}

impl Field for String {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error> {
        let v = row.text(idx)?;
        required(row, idx, v)
    }
}

impl Field for Option<String> {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error> {
        row.text(idx)
    }
}

impl Field for i64 {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error> {
        let v = row.int(idx)?;
        required(row, idx, v)
    }
}

impl Field for Option<i64> {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error> {
        row.int(idx)
    }
}

impl Field for bool {
    fn read<R: Columns>(row: &R, idx: usize) -> Result<Self, R::Error> {
        row.flag(idx)
    }
}

fn get<T: Field, R: Columns>(row: &R, idx: usize) -> Result<T, R::Error> {
    T::read(row, idx)
}

pub(crate) fn parse<T: FromStr<Err = Error>, R: Columns>(
    row: &R,
    idx: usize,
) -> Result<T, R::Error> {
    let s: String = get(row, idx)?;
    s.parse().map_err(|e| row.invalid(idx, e))
}

fn parse_opt<T: FromStr<Err = Error>, R: Columns>(
    row: &R,
    idx: usize,
) -> Result<Option<T>, R::Error> {
    row.text(idx)?
        .map(|s| s.parse().map_err(|e| row.invalid(idx, e)))
        .transpose()
}

fn json<T: DeserializeOwned, R: Columns>(row: &R, idx: usize) -> Result<T, R::Error> {
    let s: String = get(row, idx)?;
    serde_json::from_str(&s).map_err(|e| row.invalid(idx, e.into()))
}

fn json_opt<T: DeserializeOwned, R: Columns>(row: &R, idx: usize) -> Result<Option<T>, R::Error> {
    row.text(idx)?
        .map(|s| serde_json::from_str(&s).map_err(|e| row.invalid(idx, e.into())))
        .transpose()
}

/// A row of `SELECT {REQUEST_COLUMNS}`.
pub(crate) fn record<R: Columns>(row: &R) -> Result<ApprovalRecord, R::Error> {
    Ok(ApprovalRecord {
        id: get(row, 0)?,
        workspace: get(row, 1)?,
        session_id: get(row, 2)?,
        call_id: get(row, 3)?,
        tool: get(row, 4)?,
        operation: get(row, 5)?,
        args: json(row, 6)?,
        digest: get(row, 7)?,
        class: parse(row, 8)?,
        reason: get(row, 9)?,
        understood: get(row, 10)?,
        offer: json_opt(row, 11)?,
        delivery: parse(row, 12)?,
        status: parse(row, 13)?,
        note: get(row, 14)?,
        by_message: get(row, 15)?,
        stop_turn: get(row, 16)?,
        decided_by: get(row, 17)?,
        approved_by: parse_opt(row, 18)?,
        rule_id: get(row, 19)?,
        idempotency_key: get(row, 20)?,
        revision: get(row, 21)?,
        created_at: get(row, 22)?,
        decided_at: get(row, 23)?,
        expires_at: get(row, 24)?,
        consumed_at: get(row, 25)?,
        finished_at: get(row, 26)?,
        outcome: get(row, 27)?,
        outcome_is_error: get(row, 28)?,
        reported_at: get(row, 29)?,
    })
}

/// A row of `SELECT {RULE_COLUMNS}`.
pub(crate) fn rule<R: Columns>(row: &R) -> Result<Rule, R::Error> {
    let kind: String = get(row, 4)?;
    let value: String = get(row, 5)?;
    let scope = RuleScope::from_parts(&kind, &value).map_err(|e| row.invalid(4, e))?;
    let session: Option<String> = get(row, 7)?;
    Ok(Rule {
        id: get(row, 0)?,
        workspace: get(row, 1)?,
        tool: get(row, 2)?,
        operation: get(row, 3)?,
        scope,
        label: get(row, 6)?,
        lifetime: match session {
            Some(session_id) => Lifetime::Session { session_id },
            None => Lifetime::Permanent,
        },
        created_at: get(row, 8)?,
        created_from: get(row, 9)?,
        last_matched_at: get(row, 10)?,
        match_count: get(row, 11)?,
    })
}

/// A row of `SELECT {AUDIT_COLUMNS}`.
pub(crate) fn audit<R: Columns>(row: &R) -> Result<AuditEntry, R::Error> {
    Ok(AuditEntry {
        id: get(row, 0)?,
        entry: NewAudit {
            at: get(row, 1)?,
            workspace: get(row, 2)?,
            session_id: get(row, 3)?,
            call_id: get(row, 4)?,
            request_id: get(row, 5)?,
            tool: get(row, 6)?,
            class: parse_opt(row, 7)?,
            mode: parse_opt(row, 8)?,
            outcome: get(row, 9)?,
            approved_by: parse_opt(row, 10)?,
            rule_ids: json(row, 11)?,
            decider: get(row, 12)?,
            detail: get(row, 13)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One column of a row held in memory.
    enum Cell {
        Text(&'static str),
        Int(i64),
        Flag(bool),
        Null,
    }

    struct Fake(Vec<Cell>);

    impl Columns for Fake {
        type Error = String;
        fn text(&self, idx: usize) -> Result<Option<String>, String> {
            match &self.0[idx] {
                Cell::Text(s) => Ok(Some((*s).to_owned())),
                Cell::Null => Ok(None),
                Cell::Int(_) | Cell::Flag(_) => Err(format!("column {idx} is not text")),
            }
        }
        fn int(&self, idx: usize) -> Result<Option<i64>, String> {
            match &self.0[idx] {
                Cell::Int(i) => Ok(Some(*i)),
                Cell::Null => Ok(None),
                Cell::Text(_) | Cell::Flag(_) => Err(format!("column {idx} is not an integer")),
            }
        }
        fn flag(&self, idx: usize) -> Result<bool, String> {
            match &self.0[idx] {
                Cell::Flag(b) => Ok(*b),
                Cell::Text(_) | Cell::Int(_) | Cell::Null => {
                    Err(format!("column {idx} is not a boolean"))
                }
            }
        }
        fn invalid(&self, idx: usize, e: Error) -> String {
            format!("column {idx}: {e}")
        }
    }

    fn request_row() -> Vec<Cell> {
        use Cell::*;
        vec![
            Text("apr_1"),
            Text("/ws"),
            Text("s1"),
            Text("c1"),
            Text("bash"),
            Null,
            Text(r#"{"command":"rm -rf x"}"#),
            Text("digest"),
            Text("write"),
            Text("deletes files"),
            Flag(true),
            Null,
            Text("wait"),
            Text("pending"),
            Null,
            Flag(false),
            Flag(false),
            Null,
            Null,
            Null,
            Null,
            Int(1),
            Int(1000),
            Null,
            Int(2000),
            Null,
            Null,
            Null,
            Flag(false),
            Null,
        ]
    }

    #[test]
    fn a_request_row_reads_into_its_record() {
        let r = record(&Fake(request_row())).unwrap();
        assert_eq!(r.id, "apr_1");
        assert_eq!(r.args["command"], "rm -rf x");
        assert_eq!(r.class, crate::Class::Write);
        assert_eq!(r.status, super::super::Status::Pending);
        assert_eq!(r.operation, None);
        assert_eq!((r.revision, r.expires_at, r.decided_at), (1, 2000, None));
        assert!(r.understood && !r.stop_turn);
    }

    #[test]
    fn bad_names_json_and_nulls_name_their_column() {
        let mut row = request_row();
        row[13] = Cell::Text("maybe");
        let e = record(&Fake(row)).unwrap_err();
        assert!(e.starts_with("column 13:") && e.contains("maybe"), "{e}");

        let mut row = request_row();
        row[6] = Cell::Text("{not json");
        assert!(record(&Fake(row)).unwrap_err().starts_with("column 6:"));

        let mut row = request_row();
        row[0] = Cell::Null;
        let e = record(&Fake(row)).unwrap_err();
        assert!(e.starts_with("column 0:") && e.contains("NULL"), "{e}");

        let mut row = request_row();
        row[21] = Cell::Null;
        assert!(record(&Fake(row)).unwrap_err().starts_with("column 21:"));
    }
}
