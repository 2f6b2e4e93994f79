//! Versioned schema changes. Each migration is applied once, in order, and its version
//! recorded in `schema_version`; the first process to start applies what is missing
//! while others wait for it.
//!
//! Migration 1 of a site may meet a SQLite database made before versions were kept:
//! its statements are `IF NOT EXISTS` and its added columns are added only where
//! missing, so it brings such a database to version 1 as it would an empty one.

/// One schema version.
#[derive(Debug)]
pub struct Migration {
    /// Its number: 1, 2, … in order.
    pub version: i64,
    /// What it does.
    pub steps: &'static [Step],
}

/// One change of schema.
#[derive(Debug)]
pub enum Step {
    /// Statements (separated by `;`) in SQLite's type names.
    Sql(&'static str),
    /// Adds a column unless the table has it already.
    AddColumn {
        /// The table.
        table: &'static str,
        /// The new column.
        column: &'static str,
        /// Its type and default, as in `INTEGER NOT NULL DEFAULT 0`.
        decl: &'static str,
    },
}

/// The table that records which versions were applied.
pub(crate) const VERSION_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY)";

/// The key of the PostgreSQL advisory lock migrations run under ("ferry" in ASCII).
pub(crate) const ADVISORY_LOCK_KEY: i64 = 0x0066_6572_7279;
