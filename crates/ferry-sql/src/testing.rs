//! For tests of every crate: a fresh, empty PostgreSQL database on the server named by
//! `FERRY_TEST_POSTGRES_URL` (`.ci/postgres start` runs one), dropped when done. A test
//! that needs it and finds no server fails, saying how to start one.

/// The variable naming the test server (a superuser's URL).
pub const URL_VARIABLE: &str = "FERRY_TEST_POSTGRES_URL";

/// A database of its own for one test.
pub struct PostgresDatabase {
    admin: String,
    name: String,
    url: String,
}

impl PostgresDatabase {
    /// Makes one; panics (failing the test) when no server is configured or reachable.
    pub fn create() -> PostgresDatabase {
        let admin = std::env::var(URL_VARIABLE).unwrap_or_else(|_| {
            panic!(
                "{URL_VARIABLE} is not set: this test needs PostgreSQL. \
                 Run `eval \"$(.ci/postgres start)\"` first (.ci/run does)"
            )
        });
        let name = format!("ferry_test_{}", random_suffix());
        let url = with_database(&admin, &name);
        admin_statement(&admin, &format!("CREATE DATABASE {name}"));
        PostgresDatabase { admin, name, url }
    }

    /// Its URL, with the server's credentials.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PostgresDatabase {
    fn drop(&mut self) {
        admin_statement(
            &self.admin,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// Runs one statement as the server's superuser, on a thread of its own (the driver
/// must not run inside a test's async runtime).
pub fn admin_statement(admin: &str, sql: &str) {
    let (admin, sql) = (admin.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&admin, postgres::NoTls)
            .unwrap_or_else(|e| panic!("the test PostgreSQL at {URL_VARIABLE}: {e}"));
        client
            .batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    })
    .join()
    .expect("the PostgreSQL admin thread");
}

fn with_database(url: &str, name: &str) -> String {
    match url.rfind('/') {
        Some(slash) if url[..slash].contains("://") && slash > url.find("://").unwrap_or(0) + 2 => {
            let (base, rest) = url.split_at(slash);
            let query = rest.find('?').map_or("", |q| &rest[q..]);
            format!("{base}/{name}{query}")
        }
        _ => format!("{url} dbname={name}"),
    }
}

fn random_suffix() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}_{nanos}_{n}", std::process::id())
}
