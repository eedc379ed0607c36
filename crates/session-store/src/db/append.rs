//! Appending to a session file in the database: the compare-and-swap on
//! its line count, and recognising an earlier try of the same append that
//! committed before its connection was lost. It must not know how files
//! are found or read (the parent module).

use std::io;
use std::time::SystemTime;

use super::{DbFile, columns_of, insert_lines, lines_of, millis};
use crate::summary::Facts;

/// Whether `lines` are the file's lines from `first` on, and its last: an
/// append that committed before its connection was lost. (Entries carry
/// random ids, so another writer's lines never match.)
async fn already_appended(
    tx: &tokio_postgres::Transaction<'_>,
    key: &str,
    first: i64,
    lines: &[String],
) -> Result<bool, tokio_postgres::Error> {
    let Some(file) = tx
        .query_opt(
            "SELECT lines FROM keel_session_files WHERE path = $1",
            &[&key],
        )
        .await?
    else {
        return Ok(false);
    };
    let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
    if file.try_get::<_, i64>(0)? != first + count {
        return Ok(false);
    }
    let stored = tx
        .query(
            "SELECT line FROM keel_session_lines WHERE path = $1 AND seq >= $2 ORDER BY seq",
            &[&key, &first],
        )
        .await?;
    Ok(stored.len() == lines.len()
        && stored
            .iter()
            .zip(lines)
            .all(|(row, line)| row.try_get::<_, &str>(0).is_ok_and(|s| s == line)))
}

impl DbFile {
    /// Appends whole lines, if nobody else appended since this handle's
    /// last look (else `Modified`-style error: the session changed). When
    /// the connection is lost mid-way it tries again on a new one (see
    /// [`Pool::again`](crate::pool::Pool::again)), and an earlier try that
    /// did commit counts once.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        let lines = lines_of(bytes)?;
        if lines.is_empty() {
            return Ok(());
        }
        let added = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        let grown = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let (key, from) = (self.key.clone(), self.lines);
        let now = millis(SystemTime::now());
        let facts = Facts::of(lines.iter().map(String::as_bytes));
        let (messages, first, named, name) = columns_of(&facts);
        let appended = self.db.run_again(async |c| {
            let tx = c.transaction().await?;
            let updated = tx
                .execute(
                    "UPDATE keel_session_files SET lines = lines + $3, bytes = bytes + $4, \
                     modified_ms = greatest(modified_ms + 1, $5), messages = messages + $6, \
                     first_message = coalesce(first_message, $7), \
                     named = named OR $8, name = CASE WHEN $8 THEN $9 ELSE name END \
                     WHERE path = $1 AND lines = $2",
                    &[
                        &key, &from, &added, &grown, &now, &messages, &first, &named, &name,
                    ],
                )
                .await?;
            if updated == 0 {
                // An earlier try whose answer was lost may have committed.
                return already_appended(&tx, &key, from, &lines).await;
            }
            insert_lines(&tx, &key, from, &lines).await?;
            tx.commit().await?;
            Ok(true)
        })?;
        if !appended {
            return Err(io::Error::other(format!(
                "session {} was changed by another writer since it was opened",
                self.key
            )));
        }
        self.lines += added;
        Ok(())
    }
}

#[cfg(test)]
impl DbFile {
    /// A second handle that still believes the file is as this one found
    /// it: an append through it is what a try whose commit was not heard
    /// sends again.
    pub(crate) fn before_its_last_append(&self, lines: i64) -> DbFile {
        DbFile {
            db: self.db,
            key: self.key.clone(),
            lines: self.lines - lines,
        }
    }
}
