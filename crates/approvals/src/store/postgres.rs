//! The PostgreSQL approval store.
//!
//! Owns [`PostgresStore`]: a few `tokio-postgres` connections per store
//! ([`POOL_SIZE`], a [`keel_pg::Pool`]; plain TCP or a unix socket, no TLS:
//! meant for a server on the same machine or a private network), made
//! again when the server dropped them; reads and the writes that are safe
//! to repeat run again across a server restart (a request's insert is
//! keyed by its id, so a retried one finds its own row);
//! the schema migrated on open (`pg_schema.rs`), and the SQL for the
//! [`ApprovalStore`] operations with the same semantics as the SQLite store:
//! decisions are single `UPDATE ... WHERE id = $ AND revision = $ AND
//! status = 'pending'` statements, so two processes deciding the same row
//! cannot both win; consume, finish and reported marks happen once. The
//! connection string is a secret (it may hold a password): it is only ever
//! shown through [`redact_dsn`]. It must not know about classes' meaning or
//! waiting.

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use keel_pg::{Pool, Retry};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Config, Row, Statement};

use super::changes::ChangeFeed;
use super::pg_schema::migrate;
use super::rows::{Columns, audit, parse, record, rule};
use super::{
    AUDIT_COLUMNS, ApprovalRecord, ApprovalStore, AuditEntry, AuditFilter, DecisionUpdate,
    NewAudit, NewRequest, REQUEST_COLUMNS, RULE_COLUMNS, RequestFilter, own_row,
};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::rules::{Lifetime, Rule};

/// Connections per process to the approvals database (each is a server
/// backend; made on first use): a turn's check does not wait behind a
/// slow audit listing or another session's decision.
pub const POOL_SIZE: usize = 4;
/// What the connections are for, in log lines.
const WHAT: &str = "approvals";

/// The approvals database on a PostgreSQL server.
pub struct PostgresStore {
    /// The connection string with any password replaced by `***`.
    redacted: String,
    /// A few connections, made again when the server closed them.
    pool: Pool,
    /// Ticks on the schema's status-change notifications.
    feed: ChangeFeed,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.redacted)
            .finish_non_exhaustive()
    }
}

/// `dsn` with the password (in a URL's user info, or a `password`
/// parameter) replaced by `***`, for messages and `config show`.
pub fn redact_dsn(dsn: &str) -> String {
    let mut out = dsn.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "***");
            }
        }
    }
    redact_password_params(&out)
}

/// Replaces the value of every `password=` parameter (URL query or
/// `key=value` form) by `***`.
fn redact_password_params(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("password") {
        let start = search + found;
        let boundary = start == 0 || matches!(lower.as_bytes()[start - 1], b'?' | b'&' | b' ');
        let mut value_start = start + "password".len();
        while lower.as_bytes().get(value_start) == Some(&b' ') {
            value_start += 1;
        }
        if !boundary || lower.as_bytes().get(value_start) != Some(&b'=') {
            search = start + 1;
            continue;
        }
        value_start += 1;
        while lower.as_bytes().get(value_start) == Some(&b' ') {
            value_start += 1;
        }
        let value_end = if lower.as_bytes().get(value_start) == Some(&b'\'') {
            lower[value_start + 1..]
                .find('\'')
                .map_or(lower.len(), |i| value_start + 1 + i + 1)
        } else {
            lower[value_start..]
                .find(['&', ' ', '#'])
                .map_or(lower.len(), |i| value_start + i)
        };
        out.push_str(&text[copied..value_start]);
        out.push_str("***");
        copied = value_end;
        search = value_end.max(start + 1);
    }
    out.push_str(&text[copied..]);
    out
}

impl PostgresStore {
    /// Connects to the server at `dsn` (a `postgres://` URL or a
    /// `key=value` connection string) and migrates the schema.
    pub async fn open(dsn: &str) -> Result<Self> {
        let redacted = redact_dsn(dsn);
        let config = Config::from_str(dsn)
            .map_err(|e| Error::Config(format!("invalid PostgreSQL connection string: {e}")))?;
        let mut client = keel_pg::connect(&config, WHAT).await.map_err(|e| {
            Error::Config(format!(
                "cannot connect to the PostgreSQL server: {}",
                keel_pg::describe(&e)
            ))
        })?;
        migrate(&mut client).await?;
        Ok(Self {
            feed: ChangeFeed::postgres(config.clone(), redacted.clone()),
            pool: Pool::new(config, redacted.clone(), WHAT, POOL_SIZE, Some(client)),
            redacted,
        })
    }

    /// The connection string with any password hidden.
    pub fn redacted_url(&self) -> &str {
        &self.redacted
    }

    /// `run` once more on a new connection while the server is away (a
    /// restart), for up to [`keel_pg::RECONNECT_WINDOW`]: only for work
    /// that is safe to run twice.
    async fn again<T, F>(&self, run: impl Fn() -> F) -> Result<T>
    where
        F: Future<Output = std::result::Result<T, tokio_postgres::Error>>,
    {
        let mut retry = Retry::new(WHAT);
        loop {
            match run().await {
                Err(e) if retry.wait(&e).await => {}
                done => return Ok(done?),
            }
        }
    }

    /// The rows of `sql`, which is safe to run twice (see [`again`](Self::again)).
    async fn query_again(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        self.again(|| self.query_on(sql, params)).await
    }

    /// At most one row of `sql`, run once.
    async fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>> {
        Ok(self.query_opt_on(sql, params).await?)
    }

    /// At most one row of `sql`, which is safe to run twice.
    async fn query_opt_again(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>> {
        self.again(|| self.query_opt_on(sql, params)).await
    }

    /// The count of rows `sql` changed, run once.
    async fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        Ok(self.execute_on(sql, params).await?)
    }

    /// The count of rows `sql` changed, which is safe to run twice.
    async fn execute_again(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.again(|| self.execute_on(sql, params)).await
    }

    /// A connection of the caller's own and `sql` prepared on it; a
    /// connection lost while preparing is let go.
    async fn prepared(
        &self,
        sql: &str,
    ) -> std::result::Result<(keel_pg::Lease<'_>, Statement), tokio_postgres::Error> {
        let mut c = self.pool.lease().await?;
        match c.prepare_cached(sql).await {
            Ok(statement) => Ok((c, statement)),
            Err(e) => c.settle(Err(e)),
        }
    }

    async fn query_on(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
        let (c, statement) = self.prepared(sql).await?;
        let done = c.query(&statement, params).await;
        c.settle(done)
    }

    async fn query_opt_on(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Option<Row>, tokio_postgres::Error> {
        let (c, statement) = self.prepared(sql).await?;
        let done = c.query_opt(&statement, params).await;
        c.settle(done)
    }

    async fn execute_on(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<u64, tokio_postgres::Error> {
        let (c, statement) = self.prepared(sql).await?;
        let done = c.execute(&statement, params).await;
        c.settle(done)
    }

    async fn get_request_row(&self, id: &str) -> Result<Option<ApprovalRecord>> {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM approval_requests WHERE id = $1");
        self.query_opt_again(&sql, &[&id])
            .await?
            .map(|r| record(&r))
            .transpose()
    }
}

/// PostgreSQL's side of the shared row mapping (`super::rows`).
impl Columns for Row {
    type Error = Error;
    fn text(&self, idx: usize) -> Result<Option<String>> {
        Ok(self.try_get(idx)?)
    }
    fn int(&self, idx: usize) -> Result<Option<i64>> {
        Ok(self.try_get(idx)?)
    }
    fn flag(&self, idx: usize) -> Result<bool> {
        Ok(self.try_get(idx)?)
    }
    fn invalid(&self, _idx: usize, e: Error) -> Error {
        e
    }
}

/// `LIMIT $n` takes NULL as "no limit".
fn limit_value(limit: Option<usize>) -> Option<i64> {
    limit.map(|l| i64::try_from(l).unwrap_or(i64::MAX))
}

/// A `WHERE` clause over text columns that equal the given values, the
/// values numbered from `$1`.
fn where_equal(filters: Vec<(&str, Option<String>)>) -> (String, Vec<String>) {
    let mut clauses = Vec::new();
    let mut values = Vec::new();
    for (column, value) in filters {
        if let Some(v) = value {
            values.push(v);
            clauses.push(format!("{column} = ${}", values.len()));
        }
    }
    let sql = if clauses.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", clauses.join(" AND "))
    };
    (sql, values)
}

#[async_trait]
impl ApprovalStore for PostgresStore {
    fn change_feed(&self) -> Option<ChangeFeed> {
        Some(self.feed.clone())
    }

    async fn insert_request(&self, r: NewRequest) -> Result<ApprovalRecord> {
        let offer = r.offer.as_ref().map(serde_json::to_string).transpose()?;
        let args = serde_json::to_string(&r.args)?;
        let sql = format!(
            "INSERT INTO approval_requests (id, workspace, session_id, call_id, tool, \
             operation, args_json, digest, class, reason, understood, offer_json, delivery, \
             status, revision, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 'pending', 0, $14, $15) \
             ON CONFLICT (id) DO NOTHING RETURNING {REQUEST_COLUMNS}"
        );
        // Keyed by its id: run again after the server went away, it finds
        // the row its first run committed.
        let row = self
            .query_opt_again(
                &sql,
                &[
                    &r.id,
                    &r.workspace,
                    &r.session_id,
                    &r.call_id,
                    &r.tool,
                    &r.operation,
                    &args,
                    &r.digest,
                    &r.class.as_str(),
                    &r.reason,
                    &r.understood,
                    &offer,
                    &r.delivery.as_str(),
                    &r.created_at,
                    &r.expires_at,
                ],
            )
            .await?;
        match row {
            Some(row) => record(&row),
            None => match self.get_request_row(&r.id).await? {
                Some(stored) => own_row(&r, stored),
                None => Err(Error::RequestNotFound(r.id)),
            },
        }
    }

    async fn get_request(&self, id: &str) -> Result<Option<ApprovalRecord>> {
        self.get_request_row(id).await
    }

    async fn latest_for_call(
        &self,
        session_id: &str,
        call_id: &str,
    ) -> Result<Option<ApprovalRecord>> {
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM approval_requests \
             WHERE session_id = $1 AND call_id = $2 ORDER BY created_at DESC, seq DESC LIMIT 1"
        );
        self.query_opt_again(&sql, &[&session_id, &call_id])
            .await?
            .map(|r| record(&r))
            .transpose()
    }

    async fn list_requests(&self, filter: RequestFilter) -> Result<Vec<ApprovalRecord>> {
        let (mut where_sql, values) = where_equal(vec![
            ("workspace", filter.workspace),
            ("session_id", filter.session_id),
            ("status", filter.status.map(|s| s.as_str().to_owned())),
            ("delivery", filter.delivery.map(|d| d.as_str().to_owned())),
        ]);
        if filter.unconsumed {
            let joiner = if where_sql.is_empty() {
                "WHERE"
            } else {
                " AND"
            };
            where_sql.push_str(joiner);
            where_sql.push_str(" consumed_at IS NULL");
        }
        let limit = limit_value(filter.limit);
        let sql = format!(
            "SELECT {REQUEST_COLUMNS} FROM approval_requests {where_sql} \
             ORDER BY created_at DESC, seq DESC LIMIT ${}",
            values.len() + 1
        );
        let mut params: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        params.push(&limit);
        self.query_again(&sql, &params)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    async fn decide(
        &self,
        id: &str,
        revision: i64,
        u: DecisionUpdate,
    ) -> Result<Option<ApprovalRecord>> {
        let update = "UPDATE approval_requests SET status = $1, note = $2, by_message = $3, \
             stop_turn = $4, decided_by = $5, approved_by = $6, rule_id = $7, \
             idempotency_key = $8, decided_at = $9, revision = revision + 1 \
             WHERE id = $10 AND revision = $11 AND status = 'pending'";
        let approved_by = u.approved_by.map(|a| a.as_str());
        let status = u.status.as_str();
        let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &status,
            &u.note,
            &u.by_message,
            &u.stop_turn,
            &u.decided_by,
            &approved_by,
            &u.rule_id,
            &u.idempotency_key,
            &u.decided_at,
            &id,
            &revision,
        ];
        // The decision's audit line is written by the same statement, so it
        // is committed with the decision or not at all.
        let audit = u.audit.as_ref();
        let (class, mode, audit_by, rule_ids) = match audit {
            Some(a) => (
                a.class.map(|c| c.as_str()),
                a.mode.map(|m| m.as_str()),
                a.approved_by.map(|b| b.as_str()),
                serde_json::to_string(&a.rule_ids)?,
            ),
            None => (None, None, None, String::new()),
        };
        let sql = match audit {
            None => format!("{update} RETURNING {REQUEST_COLUMNS}"),
            Some(a) => {
                params.extend([
                    &a.at as &(dyn tokio_postgres::types::ToSql + Sync),
                    &a.workspace,
                    &a.session_id,
                    &a.call_id,
                    &a.request_id,
                    &a.tool,
                    &class,
                    &mode,
                    &a.outcome,
                    &audit_by,
                    &rule_ids,
                    &a.decider,
                    &a.detail,
                ]);
                format!(
                    "WITH d AS ({update} RETURNING {REQUEST_COLUMNS}), \
                     a AS (INSERT INTO approval_audit (at, workspace, session_id, call_id, \
                     request_id, tool, class, mode, outcome, approved_by, rule_ids, decider, \
                     detail) SELECT $12::bigint, $13::text, $14::text, $15::text, $16::text, \
                     $17::text, $18::text, $19::text, $20::text, $21::text, $22::text, \
                     $23::text, $24::text FROM d) \
                     SELECT * FROM d"
                )
            }
        };
        self.query_opt(&sql, &params)
            .await?
            .map(|r| record(&r))
            .transpose()
    }

    async fn consume(&self, id: &str, at: i64) -> Result<bool> {
        Ok(self
            .execute(
                "UPDATE approval_requests SET consumed_at = $1 \
                 WHERE id = $2 AND status <> 'pending' AND consumed_at IS NULL",
                &[&at, &id],
            )
            .await?
            == 1)
    }

    async fn finish(
        &self,
        id: &str,
        at: i64,
        outcome: Option<String>,
        is_error: bool,
    ) -> Result<bool> {
        // Run again after a lost answer it changes nothing, so its audit
        // line is not written twice.
        Ok(self
            .execute_again(
                "UPDATE approval_requests SET finished_at = $1, outcome = $2, \
                 outcome_is_error = $3 WHERE id = $4 AND finished_at IS NULL",
                &[&at, &outcome, &is_error, &id],
            )
            .await?
            == 1)
    }

    async fn has_unreported_drafts(&self, session_id: &str) -> Result<bool> {
        let row = self
            .query_opt_again(
                "SELECT EXISTS (SELECT 1 FROM approval_requests \
                 WHERE session_id = $1 AND delivery = 'draft' AND reported_at IS NULL)",
                &[&session_id],
            )
            .await?;
        Ok(match row {
            Some(row) => row.try_get(0)?,
            None => false,
        })
    }

    async fn mark_reported(&self, ids: &[String], at: i64) -> Result<()> {
        // One statement: all of them or none.
        self.execute_again(
            "UPDATE approval_requests SET reported_at = $1 \
             WHERE id = ANY($2) AND reported_at IS NULL",
            &[&at, &ids],
        )
        .await?;
        Ok(())
    }

    async fn insert_rule(&self, r: Rule) -> Result<()> {
        let session = match &r.lifetime {
            Lifetime::Permanent => None,
            Lifetime::Session { session_id } => Some(session_id.clone()),
        };
        self.execute_again(
            "INSERT INTO approval_rules (id, workspace, tool, operation, scope_kind, \
             scope_value, label, session_id, created_at, created_from, last_matched_at, \
             match_count) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
             ON CONFLICT (id) DO NOTHING",
            &[
                &r.id,
                &r.workspace,
                &r.tool,
                &r.operation,
                &r.scope.kind(),
                &r.scope.value(),
                &r.label,
                &session,
                &r.created_at,
                &r.created_from,
                &r.last_matched_at,
                &r.match_count,
            ],
        )
        .await?;
        Ok(())
    }

    async fn list_rules(&self, workspace: Option<&str>) -> Result<Vec<Rule>> {
        let rows = match workspace {
            Some(ws) => {
                let sql = format!(
                    "SELECT {RULE_COLUMNS} FROM approval_rules WHERE workspace = $1 \
                     ORDER BY created_at, seq"
                );
                self.query_again(&sql, &[&ws]).await?
            }
            None => {
                let sql =
                    format!("SELECT {RULE_COLUMNS} FROM approval_rules ORDER BY created_at, seq");
                self.query_again(&sql, &[]).await?
            }
        };
        rows.iter().map(rule).collect()
    }

    async fn get_rule(&self, id: &str) -> Result<Option<Rule>> {
        let sql = format!("SELECT {RULE_COLUMNS} FROM approval_rules WHERE id = $1");
        self.query_opt_again(&sql, &[&id])
            .await?
            .map(|r| rule(&r))
            .transpose()
    }

    async fn delete_rule(&self, id: &str) -> Result<bool> {
        Ok(self
            .execute("DELETE FROM approval_rules WHERE id = $1", &[&id])
            .await?
            == 1)
    }

    async fn touch_rules(&self, ids: &[String], at: i64) -> Result<()> {
        self.execute(
            "UPDATE approval_rules SET match_count = match_count + 1, last_matched_at = $1 \
             WHERE id = ANY($2)",
            &[&at, &ids],
        )
        .await?;
        Ok(())
    }

    async fn get_mode(&self, workspace: &str) -> Result<Option<Mode>> {
        let row = self
            .query_opt_again(
                "SELECT mode FROM approval_modes WHERE workspace = $1",
                &[&workspace],
            )
            .await?;
        row.map(|r| parse(&r, 0)).transpose()
    }

    async fn set_mode(&self, workspace: &str, mode: Mode, at: i64) -> Result<()> {
        self.execute_again(
            "INSERT INTO approval_modes (workspace, mode, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (workspace) DO UPDATE SET mode = excluded.mode, \
             updated_at = excluded.updated_at",
            &[&workspace, &mode.as_str(), &at],
        )
        .await?;
        Ok(())
    }

    async fn append_audit(&self, e: NewAudit) -> Result<()> {
        let rule_ids = serde_json::to_string(&e.rule_ids)?;
        self.execute(
            "INSERT INTO approval_audit (at, workspace, session_id, call_id, request_id, tool, \
             class, mode, outcome, approved_by, rule_ids, decider, detail) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            &[
                &e.at,
                &e.workspace,
                &e.session_id,
                &e.call_id,
                &e.request_id,
                &e.tool,
                &e.class.map(|c| c.as_str()),
                &e.mode.map(|m| m.as_str()),
                &e.outcome,
                &e.approved_by.map(|a| a.as_str()),
                &rule_ids,
                &e.decider,
                &e.detail,
            ],
        )
        .await?;
        Ok(())
    }

    async fn audit(&self, filter: AuditFilter) -> Result<Vec<AuditEntry>> {
        let (where_sql, values) = where_equal(vec![
            ("workspace", filter.workspace),
            ("call_id", filter.call_id),
            ("request_id", filter.request_id),
        ]);
        let limit = limit_value(filter.limit);
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM approval_audit {where_sql} ORDER BY id DESC LIMIT ${}",
            values.len() + 1
        );
        let mut params: Vec<&(dyn ToSql + Sync)> =
            values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
        params.push(&limit);
        self.query_again(&sql, &params)
            .await?
            .iter()
            .map(audit)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::redact_dsn;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_dsn("postgres://keel:s3cret@127.0.0.1:5432/keel"),
            "postgres://keel:***@127.0.0.1:5432/keel"
        );
        assert_eq!(
            redact_dsn("postgresql://keel@db/keel?password=s3cret&sslmode=disable"),
            "postgresql://keel@db/keel?password=***&sslmode=disable"
        );
        assert_eq!(
            redact_dsn("host=db user=keel password='a b' dbname=keel"),
            "host=db user=keel password=*** dbname=keel"
        );
        assert_eq!(
            redact_dsn("postgres://keel@127.0.0.1/keel"),
            "postgres://keel@127.0.0.1/keel"
        );
        assert_eq!(redact_dsn("host=/run/pg user=x"), "host=/run/pg user=x");
    }
}
