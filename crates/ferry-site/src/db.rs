//! The metadata database: people, projects, tokens and the rest, in SQLite in the service
//! folder or in PostgreSQL (spec S-META), through ferry-sql's one interface.
//!
//! The gateway and the administration commands open the same database at once, and the
//! gateway reads tokens from it on every request (a token made by `ferry token create`
//! works at once).

use std::path::Path;

use ferry_config::MetadataConfig;
pub(crate) use ferry_sql::{Db, Exec, params};
use ferry_sql::{Migration, Step};

use crate::SiteError;
use crate::layout::SERVICE_DIR;
use crate::site::DB_FILE;

/// The base tables; modules with tables of their own add their schema to `SCHEMAS`.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS persons (
    id TEXT PRIMARY KEY,
    created INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (
    person TEXT NOT NULL REFERENCES persons(id),
    id TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (person, id)
);
CREATE TABLE IF NOT EXISTS chat_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    person TEXT NOT NULL REFERENCES persons(id),
    project TEXT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    attachments TEXT NOT NULL,
    created INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS chat_messages_by_workspace ON chat_messages (person, project, id);
CREATE TABLE IF NOT EXISTS tokens (
    prefix TEXT PRIMARY KEY,
    hash BLOB NOT NULL,
    person TEXT NOT NULL REFERENCES persons(id),
    kind TEXT NOT NULL,
    created INTEGER NOT NULL,
    -- 'relay': minted by the gateway for its own calls upstream, revoked at its next start.
    purpose TEXT NOT NULL DEFAULT ''
);
";

/// The schema's versions, applied in order at open (spec S-META). Version 1 is the
/// schema as it stood when versions began: on a SQLite database made before then, its
/// `IF NOT EXISTS` statements and added columns bring it to the same place.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        steps: &[
            Step::Sql(SCHEMA),
            Step::Sql(crate::chat::SCHEMA),
            Step::Sql(crate::interactions::SCHEMA),
            Step::Sql(crate::artifacts::SCHEMA),
            Step::Sql(crate::circles::SCHEMA),
            Step::Sql(crate::media::SCHEMA),
            Step::Sql(crate::nodes::SCHEMA),
            Step::Sql(crate::trash::SCHEMA),
            Step::Sql(crate::shares::SCHEMA),
            Step::Sql(crate::resumable::SCHEMA),
            // Added to databases made before them: whether a node is connected (N-ADMIN) and
            // a project's display name (M-DAILY; empty: shown by its id).
            Step::AddColumn {
                table: "nodes",
                column: "connected",
                decl: "INTEGER NOT NULL DEFAULT 0",
            },
            Step::AddColumn {
                table: "projects",
                column: "name",
                decl: "TEXT NOT NULL DEFAULT ''",
            },
        ],
    },
    Migration {
        // Several gateways on one site (S-GATEWAYS): who is running, and which gateway
        // holds each node's link.
        version: 2,
        steps: &[
            Step::Sql(crate::gateways::SCHEMA),
            Step::AddColumn {
                table: "nodes",
                column: "gateway",
                decl: "TEXT NOT NULL DEFAULT ''",
            },
            // The order rows were made in, for listings that show it (PostgreSQL has no
            // rowid): one more than the largest so far at each insert.
            Step::AddColumn {
                table: "media",
                column: "seq",
                decl: "INTEGER NOT NULL DEFAULT 0",
            },
            Step::AddColumn {
                table: "nodes",
                column: "seq",
                decl: "INTEGER NOT NULL DEFAULT 0",
            },
            Step::AddColumn {
                table: "interactions",
                column: "seq",
                decl: "INTEGER NOT NULL DEFAULT 0",
            },
        ],
    },
    Migration {
        // The audit trail of file movements (S-OPS).
        version: 3,
        steps: &[Step::Sql(crate::audit::SCHEMA)],
    },
    Migration {
        // The key that signs calls between gateways (S-GATEWAYS).
        version: 4,
        steps: &[Step::Sql(crate::gateways::KEYS_SCHEMA)],
    },
    Migration {
        // Which gateway writes a resumable upload now, and until when (S-GATEWAYS).
        version: 5,
        steps: &[
            Step::AddColumn {
                table: "resumable_uploads",
                column: "holder",
                decl: "TEXT NOT NULL DEFAULT ''",
            },
            Step::AddColumn {
                table: "resumable_uploads",
                column: "held_until",
                decl: "INTEGER NOT NULL DEFAULT 0",
            },
        ],
    },
    // Who brought each media record in: only that person's agents may use it.
    Migration {
        version: 6,
        steps: &[Step::AddColumn {
            table: "media",
            column: "person",
            decl: "TEXT",
        }],
    },
    // The file each share link was made for (`shares::file_mark`): another file put at
    // its path is not downloaded by it.
    Migration {
        version: 7,
        steps: &[Step::AddColumn {
            table: "shares",
            column: "file_mark",
            decl: "TEXT NOT NULL DEFAULT ''",
        }],
    },
    // What gateways remember of tokens and circles, and the leases that keep it exact.
    Migration {
        version: 8,
        steps: &[
            Step::Sql(crate::facts::SCHEMA),
            // Where a gateway's process id means something: its boot and process
            // namespace (`gateways.rs`).
            Step::AddColumn {
                table: "gateways",
                column: "machine",
                decl: "TEXT NOT NULL DEFAULT ''",
            },
        ],
    },
];

/// The value of a `seq` column for a row inserted now into `table`.
pub(crate) fn next_seq(table: &str) -> String {
    format!("(SELECT COALESCE(MAX(seq), 0) + 1 FROM {table})")
}

/// Every table of the schema, each after the tables it refers to.
pub(crate) const TABLES: &[&str] = &[
    "persons",
    "circles",
    "projects",
    "tokens",
    "chat_messages",
    "chat_starts",
    "interactions",
    "web_presence",
    "artifacts",
    "circle_members",
    "media",
    "nodes",
    "trash",
    "shares",
    "resumable_uploads",
    "gateways",
    "audit",
    "site_keys",
    "fact_changes",
    "fact_leases",
];

/// Opens the site's metadata: PostgreSQL when `[metadata] url` names it, else the SQLite
/// file in the service folder; brings its schema up to date.
pub(crate) fn open(data: &Path, config: &MetadataConfig) -> Result<Db, SiteError> {
    let db = match &config.url {
        Some(url) => Db::postgres(url, config.password.as_deref())?,
        None => {
            crate::metadata_move::refuse_moved(data)?;
            Db::sqlite(&data.join(SERVICE_DIR).join(DB_FILE))?
        }
    };
    db.migrate(MIGRATIONS)?;
    Ok(db)
}

/// Seconds since the Unix epoch, for `created` columns.
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made before projects had names opens, gains the column, and shows its
    /// projects by their ids; opening it again changes nothing.
    #[test]
    fn projects_made_before_names_are_shown_by_their_id() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(SERVICE_DIR)).unwrap();
        let path = tmp.path().join(SERVICE_DIR).join(DB_FILE);
        {
            let old = rusqlite::Connection::open(&path).unwrap();
            old.execute_batch(
                "CREATE TABLE persons (id TEXT PRIMARY KEY, created INTEGER NOT NULL);
                 CREATE TABLE projects (person TEXT NOT NULL REFERENCES persons(id),
                     id TEXT NOT NULL, created INTEGER NOT NULL, PRIMARY KEY (person, id));
                 INSERT INTO persons VALUES ('ann', 1);
                 INSERT INTO projects VALUES ('ann', 'q2', 2);",
            )
            .unwrap();
        }
        for _ in 0..2 {
            let db = open(tmp.path(), &MetadataConfig::default()).unwrap();
            let name: String = db
                .row(
                    "SELECT name FROM projects WHERE id = 'q2'",
                    params![],
                    |r| r.get(0),
                )
                .map_err(SiteError::from)
                .unwrap()
                .unwrap();
            assert_eq!(name, "");
        }
    }
}
