//! The one interface, proven the same on both engines: a SQLite file and a real
//! PostgreSQL server (`FERRY_TEST_POSTGRES_URL`; `.ci/postgres start` runs one).

use std::sync::Arc;

use ferry_sql::testing::PostgresDatabase;
use ferry_sql::{Db, Engine, Error, Exec, Migration, Step, params};

/// A database on each engine; the guards keep them alive.
struct Both {
    _dir: tempfile::TempDir,
    _pg: PostgresDatabase,
    sqlite: Db,
    postgres: Db,
}

fn both() -> Both {
    let dir = tempfile::tempdir().unwrap();
    let pg = PostgresDatabase::create();
    Both {
        sqlite: Db::sqlite(&dir.path().join("t.db")).unwrap(),
        postgres: Db::postgres(pg.url(), None).unwrap(),
        _dir: dir,
        _pg: pg,
    }
}

impl Both {
    fn each(&self) -> [&Db; 2] {
        [&self.sqlite, &self.postgres]
    }
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        steps: &[Step::Sql(
            "CREATE TABLE IF NOT EXISTS items (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                name TEXT NOT NULL UNIQUE,
                size INTEGER NOT NULL,
                hash BLOB
            );
            CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, n INTEGER NOT NULL);",
        )],
    },
    Migration {
        version: 2,
        steps: &[Step::AddColumn {
            table: "items",
            column: "note",
            decl: "TEXT NOT NULL DEFAULT ''",
        }],
    },
];

/// id, name, size, hash, note.
type Item = (i64, String, i64, Option<Vec<u8>>, String);

#[test]
fn values_round_trip_the_same_on_both() {
    let both = both();
    for db in both.each() {
        db.migrate(MIGRATIONS).unwrap();
        assert_eq!(db.version().unwrap(), 2, "{:?}", db.engine());
        let hash = [0u8, 1, 255, 7];
        for (name, size) in [("a", i64::MAX), ("b ö ∑ 'quoted' ?1", i64::MIN), ("c", 0)] {
            db.execute(
                "INSERT INTO items (name, size, hash) VALUES (?1, ?2, ?3)",
                params![name, size, &hash[..]],
            )
            .unwrap();
        }
        db.execute(
            "INSERT INTO items (name, size, hash) VALUES (?1, ?2, ?3)",
            params!["d", 1i64, None::<Vec<u8>>],
        )
        .unwrap();
        let rows: Vec<Item> = db
            .rows(
                "SELECT id, name, size, hash, note FROM items ORDER BY id",
                params![],
                |r| Ok::<_, Error>((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].0, 1, "identities start at 1");
        assert_eq!(rows[1].1, "b ö ∑ 'quoted' ?1");
        assert_eq!((rows[0].2, rows[1].2), (i64::MAX, i64::MIN));
        assert_eq!(rows[2].3.as_deref(), Some(&hash[..]));
        assert_eq!(rows[3].3, None);
        assert_eq!(rows[3].4, "", "the added column's default");
        let sum: i64 = db
            .row(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM items WHERE size >= ?1",
                params![0i64],
                |r| r.get(0),
            )
            .unwrap()
            .unwrap();
        assert_eq!(sum, 3);
        let none: Option<i64> = db
            .row(
                "SELECT id FROM items WHERE name = ?1",
                params!["zzz"],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(none, None);
        let changed = db
            .execute(
                "UPDATE items SET note = ?2 WHERE size > ?1",
                params![0i64, "big"],
            )
            .unwrap();
        assert_eq!(changed, 2);
        let dup = db
            .execute(
                "INSERT INTO items (name, size) VALUES (?1, ?2)",
                params!["a", 1i64],
            )
            .unwrap_err();
        assert!(dup.is_unique_violation(), "{:?}: {dup}", db.engine());
        let ignored = db
            .execute(
                "INSERT INTO items (name, size) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params!["a", 1i64],
            )
            .unwrap();
        assert_eq!(ignored, 0);
        let returned: i64 = db
            .row(
                "INSERT INTO items (name, size) VALUES (?1, ?2) RETURNING id",
                params!["e", 5i64],
                |r| r.get(0),
            )
            .unwrap()
            .unwrap();
        assert!(returned > 4, "{:?}: ids only grow", db.engine());
        let nul = db
            .execute(
                "INSERT INTO items (name, size) VALUES (?1, 1)",
                params!["a\0b"],
            )
            .unwrap_err();
        assert!(nul.to_string().contains("NUL"), "{:?}: {nul}", db.engine());
        let wrong = db
            .row("SELECT name FROM items WHERE id = 1", params![], |r| {
                r.get::<i64>(0)
            })
            .unwrap_err();
        assert!(wrong.to_string().contains("column 0"), "{wrong}");
    }
}

#[test]
fn migrations_run_once_while_several_processes_start() {
    let both = both();
    for db in both.each() {
        // Eight starts at once, each its own connection: the version table ends with
        // one row per migration and no start fails.
        let url_or_path: Arc<Db> = match db.engine() {
            Engine::Sqlite => Arc::new(Db::sqlite(&both._dir.path().join("t.db")).unwrap()),
            Engine::Postgres => Arc::new(Db::postgres(both._pg.url(), None).unwrap()),
        };
        let starts: Vec<_> = (0..8)
            .map(|_| {
                let fresh = match db.engine() {
                    Engine::Sqlite => Db::sqlite(&both._dir.path().join("t.db")).unwrap(),
                    Engine::Postgres => Db::postgres(both._pg.url(), None).unwrap(),
                };
                std::thread::spawn(move || fresh.migrate(MIGRATIONS))
            })
            .collect();
        for start in starts {
            start.join().unwrap().unwrap();
        }
        let versions: Vec<i64> = url_or_path
            .rows(
                "SELECT version FROM schema_version ORDER BY version",
                params![],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(versions, [1, 2], "{:?}", db.engine());
        // A later start finds nothing to do.
        db.migrate(MIGRATIONS).unwrap();
    }
}

#[test]
fn transactions_commit_whole_or_not_at_all_and_conflicts_are_retried() {
    let both = both();
    for db in both.each() {
        db.migrate(MIGRATIONS).unwrap();
        db.execute("INSERT INTO counters (name, n) VALUES ('c', 0)", params![])
            .unwrap();
        // A failure inside rolls back what came before it.
        let failed: Result<(), Error> = db.transaction(|tx| {
            tx.execute("UPDATE counters SET n = 100 WHERE name = 'c'", params![])?;
            tx.execute("INSERT INTO items (name, size) VALUES ('x', 1)", params![])?;
            tx.execute("INSERT INTO items (name, size) VALUES ('x', 1)", params![])?;
            Ok(())
        });
        assert!(failed.unwrap_err().is_unique_violation());
        let n: i64 = db
            .row("SELECT n FROM counters WHERE name = 'c'", params![], |r| {
                r.get(0)
            })
            .unwrap()
            .unwrap();
        assert_eq!(n, 0, "{:?}", db.engine());
        assert_eq!(
            db.row("SELECT COUNT(*) FROM items", params![], |r| r.get::<i64>(0))
                .unwrap(),
            Some(0)
        );
    }
    // Read-modify-write from four threads at once: no increment is lost.
    for db in [Arc::new(both.sqlite), Arc::new(both.postgres)] {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        db.transaction(|tx| {
                            let n: i64 = tx
                                .row("SELECT n FROM counters WHERE name = 'c'", params![], |r| {
                                    r.get(0)
                                })?
                                .unwrap_or(0);
                            tx.execute(
                                "UPDATE counters SET n = ?1 WHERE name = 'c'",
                                params![n + 1],
                            )?;
                            Ok::<_, Error>(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let n: i64 = db
            .row("SELECT n FROM counters WHERE name = 'c'", params![], |r| {
                r.get(0)
            })
            .unwrap()
            .unwrap();
        assert_eq!(n, 100, "{:?}", db.engine());
    }
}

#[test]
fn a_parameter_of_the_wrong_kind_is_refused_not_misread() {
    let both = both();
    both.postgres.migrate(MIGRATIONS).unwrap();
    let e = both
        .postgres
        .execute(
            "INSERT INTO items (name, size) VALUES (?1, ?2)",
            params!["n", "not a number"],
        )
        .unwrap_err();
    assert!(e.to_string().contains("given text"), "{e}");
}

#[test]
fn a_server_that_is_down_is_an_error_not_a_hang() {
    // A port nothing listens on: the first call fails, quickly, as unreachable.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let db = Db::postgres(&format!("postgres://ferry@127.0.0.1:{port}/x"), Some("pw")).unwrap();
    let e = db.execute("SELECT 1", params![]).unwrap_err();
    assert!(e.is_unreachable(), "{e}");
    // The same for an async task's lookup, on the connection its runtime drives.
    let e = runtime()
        .block_on(db.row_async("SELECT 1", params![], |r| r.get::<i64>(0)))
        .unwrap_err();
    assert!(e.is_unreachable(), "{e}");
    assert!(Db::postgres("mysql://nope", None).is_err());
}

#[test]
fn a_connection_lost_midway_fails_the_transaction_and_the_next_call_reconnects() {
    let pg = PostgresDatabase::create();
    let db = Db::postgres(pg.url(), None).unwrap();
    db.migrate(MIGRATIONS).unwrap();
    let admin = std::env::var(ferry_sql::testing::URL_VARIABLE).unwrap();
    let result: Result<(), Error> = db.transaction(|tx| {
        tx.execute(
            "INSERT INTO items (name, size) VALUES ('before', 1)",
            params![],
        )?;
        let me: i64 = tx
            .row("SELECT CAST(pg_backend_pid() AS BIGINT)", params![], |r| {
                r.get(0)
            })?
            .unwrap();
        ferry_sql::testing::admin_statement(&admin, &format!("SELECT pg_terminate_backend({me})"));
        // Must fail: never run, alone, on a new connection.
        tx.execute(
            "INSERT INTO items (name, size) VALUES ('after', 1)",
            params![],
        )?;
        Ok(())
    });
    assert!(result.is_err());
    let names: Vec<String> = db
        .rows("SELECT name FROM items", params![], |r| r.get(0))
        .unwrap();
    assert!(names.is_empty(), "half a transaction landed: {names:?}");
}

#[test]
fn notifications_reach_another_process() {
    let pg = PostgresDatabase::create();
    let sender = Db::postgres(pg.url(), None).unwrap();
    let receiver = Db::postgres(pg.url(), None).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let _listener = receiver
        .listen("ferry_test", move |payload| drop(tx.send(payload)), || {})
        .expect("PostgreSQL listens");
    // The listener connects on its own thread: send until one arrives.
    let mut got = None;
    for i in 0..100 {
        sender.notify("ferry_test", &format!("hello {i}")).unwrap();
        if let Ok(p) = rx.recv_timeout(std::time::Duration::from_millis(100)) {
            got = Some(p);
            break;
        }
    }
    assert!(got.is_some_and(|p| p.starts_with("hello ")));
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Db::sqlite(&dir.path().join("t.db")).unwrap();
    assert!(sqlite.listen("x", |_| {}, || {}).is_none());
    sqlite.notify("x", "y").unwrap();
}

#[test]
fn an_idle_connection_the_server_closed_is_made_again_without_an_error() {
    let pg = PostgresDatabase::create();
    let db = Db::postgres(pg.url(), None).unwrap();
    db.migrate(MIGRATIONS).unwrap();
    let me: i64 = db
        .row("SELECT CAST(pg_backend_pid() AS BIGINT)", params![], |r| {
            r.get(0)
        })
        .unwrap()
        .unwrap();
    let admin = std::env::var(ferry_sql::testing::URL_VARIABLE).unwrap();
    ferry_sql::testing::admin_statement(&admin, &format!("SELECT pg_terminate_backend({me})"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    // The next statement on that (only) connection works, on a new one.
    let n = db
        .execute(
            "INSERT INTO items (name, size) VALUES ('after', 1)",
            params![],
        )
        .unwrap();
    assert_eq!(n, 1);
    let again: i64 = db
        .row("SELECT CAST(pg_backend_pid() AS BIGINT)", params![], |r| {
            r.get(0)
        })
        .unwrap()
        .unwrap();
    assert_ne!(again, me);
}

/// `sslmode=require` makes a TLS connection that verifies the server: against the CA of
/// `sslrootcert` (the test server's, from `.ci/postgres`), never against nothing; a
/// certificate for another name, or a CA nobody gave, is refused. Without it, plain TCP.
#[test]
fn tls_is_verified_when_asked_for() {
    let pg = PostgresDatabase::create();
    let ca = std::env::var("FERRY_TEST_POSTGRES_CA")
        .expect("FERRY_TEST_POSTGRES_CA: the test server's CA (.ci/postgres start sets it)");
    let encrypted = |db: &Db| -> bool {
        db.row(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            params![],
            |r| r.get::<bool>(0),
        )
        .unwrap()
        .unwrap()
    };
    let with = |query: &str| format!("{}?{query}", pg.url());
    let verified = Db::postgres(&with(&format!("sslmode=require&sslrootcert={ca}")), None).unwrap();
    assert!(encrypted(&verified));
    let full = Db::postgres(
        &with(&format!("sslmode=verify-full&sslrootcert={ca}")),
        None,
    )
    .unwrap();
    assert!(encrypted(&full));
    assert!(!encrypted(&Db::postgres(pg.url(), None).unwrap()));
    assert!(!encrypted(
        &Db::postgres(&with("sslmode=prefer"), None).unwrap()
    ));

    // The system's roots do not know the test CA; the certificate names 127.0.0.1 only.
    let unknown_ca = Db::postgres(&with("sslmode=require"), None).unwrap();
    let by_name = pg.url().replace("127.0.0.1", "localhost");
    let wrong_name =
        Db::postgres(&format!("{by_name}?sslmode=require&sslrootcert={ca}"), None).unwrap();
    for db in [&unknown_ca, &wrong_name] {
        let err = db.exists("SELECT 1", params![]).unwrap_err();
        assert!(err.to_string().contains("certificate"), "{err}");
    }
    // The connection async lookups share is made the same way.
    let runtime = runtime();
    let encrypted_async = |db: &Db| {
        runtime.block_on(db.row_async(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            params![],
            |r| r.get::<bool>(0),
        ))
    };
    assert_eq!(encrypted_async(&full).unwrap(), Some(true));
    assert_eq!(
        encrypted_async(&Db::postgres(pg.url(), None).unwrap()).unwrap(),
        Some(false)
    );
    for db in [&unknown_ca, &wrong_name] {
        let err = encrypted_async(db).unwrap_err();
        assert!(err.to_string().contains("certificate"), "{err}");
    }
    // A CA file that holds no certificate, or is not there, is said at once.
    let empty = tempfile::NamedTempFile::new().unwrap();
    for file in [empty.path().to_str().unwrap(), "/nonexistent/ca.pem"] {
        let refused = Db::postgres(&with(&format!("sslmode=require&sslrootcert={file}")), None);
        assert!(matches!(refused, Err(Error::Config(_))), "{file}");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The backend serving an async lookup.
async fn async_pid(db: &Db) -> i64 {
    db.row_async("SELECT CAST(pg_backend_pid() AS BIGINT)", params![], |r| {
        r.get(0)
    })
    .await
    .unwrap()
    .unwrap()
}

/// An async task's lookup reads what `row` reads, on both engines; on PostgreSQL through
/// one connection its runtime drives, which is made again after the server closed it or
/// the runtime that drove it ended.
#[test]
fn async_lookups_read_the_same_rows_and_outlive_their_connection() {
    let both = both();
    for db in both.each() {
        db.migrate(MIGRATIONS).unwrap();
        db.execute(
            "INSERT INTO items (name, size, hash) VALUES (?1, ?2, ?3)",
            params!["a", 7, vec![1u8, 0, 255]],
        )
        .unwrap();
    }
    let lookup = "SELECT name, size, hash FROM items WHERE name = ?1";
    let read = |r: &ferry_sql::Row| -> Result<(String, i64, Vec<u8>), Error> {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    };
    let first = runtime();
    for db in both.each() {
        let sync = db.row(lookup, params!["a"], read).unwrap();
        let (found, missing) = first.block_on(async {
            let found = db.row_async(lookup, params!["a"], read).await.unwrap();
            let missing = db.row_async(lookup, params!["b"], read).await.unwrap();
            (found, missing)
        });
        assert_eq!(found, sync);
        assert_eq!(found, Some(("a".to_owned(), 7, vec![1, 0, 255])));
        assert_eq!(missing, None);
        // The same refusal of a NUL as every other statement.
        let nul = first.block_on(db.row_async(lookup, params!["a\0b"], read));
        assert!(nul.unwrap_err().is_unstorable_parameter());
    }

    // Many lookups at once share the one connection.
    let pg = &both.postgres;
    let pids = first.block_on(async {
        let all = (0..32).map(|_| async_pid(pg));
        futures_util::future::join_all(all).await
    });
    assert!(pids.windows(2).all(|w| w[0] == w[1]), "{pids:?}");

    // The server closes it: the next lookup is made on a new one, without an error.
    let admin = std::env::var(ferry_sql::testing::URL_VARIABLE).unwrap();
    ferry_sql::testing::admin_statement(
        &admin,
        &format!("SELECT pg_terminate_backend({})", pids[0]),
    );
    std::thread::sleep(std::time::Duration::from_millis(100));
    let after_close = first.block_on(async_pid(pg));
    assert_ne!(after_close, pids[0]);

    // The runtime that drove it ends: another runtime's lookup makes its own.
    drop(first);
    let second = runtime();
    let after_runtime = second.block_on(async_pid(pg));
    assert_ne!(after_runtime, after_close);
}
