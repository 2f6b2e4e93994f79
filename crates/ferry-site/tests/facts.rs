//! What a gateway remembers of tokens and circles on PostgreSQL (`facts.rs`, spec
//! S-GATEWAYS): two sites open on one database stand for two gateways. What one changes,
//! the other sees at the next call, though it remembers, and a gateway that stops gives
//! its lease up.

use std::time::{Duration, Instant};

use ferry_config::Config;
use ferry_site::{Site, TokenKind};
use ferry_sql::testing::PostgresDatabase;
use ferry_sql::{Db, Exec, params};

/// Gateway-like sites `a` and `b` on one fresh PostgreSQL database; `b` remembers.
struct Pair {
    db: PostgresDatabase,
    _tmp: tempfile::TempDir,
    a: Site,
    b: Site,
}

fn pair() -> Pair {
    let db = PostgresDatabase::create();
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.metadata.url = Some(db.url().to_owned());
    let a = Site::open(tmp.path(), config.clone()).unwrap();
    let b = Site::open(tmp.path(), config).unwrap();
    b.keep_facts("gateway-b");
    // Its lease is taken by its first renewal.
    let raw = raw(&db);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !raw
        .exists(
            "SELECT 1 FROM fact_leases WHERE gateway = 'gateway-b'",
            params![],
        )
        .unwrap()
    {
        assert!(Instant::now() < deadline, "gateway b took no lease");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    Pair {
        db,
        _tmp: tmp,
        a,
        b,
    }
}

/// The database opened beside the sites, to change it behind their back.
fn raw(db: &PostgresDatabase) -> Db {
    Db::postgres(db.url(), None).unwrap()
}

#[test]
fn a_revoke_through_one_is_refused_by_the_other_at_its_next_call() {
    let p = pair();
    p.a.add_person("ann").unwrap();
    p.a.add_person("bob").unwrap();
    let ann = p.a.create_token("ann", TokenKind::Person).unwrap();
    let bob = p.a.create_token("bob", TokenKind::Admin).unwrap();
    assert!(p.b.authenticate(&ann).unwrap().is_some());
    assert!(taken_twice(&p.b, &bob));
    // Bob's row goes behind ferry's back: `b` still takes his token, so it answers from
    // what it remembers, not from the database.
    raw(&p.db)
        .execute("DELETE FROM tokens WHERE prefix = ?1", params![&bob[..12]])
        .unwrap();
    assert!(
        p.b.authenticate(&bob).unwrap().is_some(),
        "b does not remember tokens"
    );
    // Ann's revoke through `a` makes `b` forget everything before it returns.
    assert_eq!(p.a.revoke_tokens(&ann[..12]).unwrap(), 1);
    assert_eq!(p.b.authenticate(&ann).unwrap(), None);
    assert_eq!(p.b.authenticate(&bob).unwrap(), None);
}

#[test]
fn a_member_added_through_one_is_in_the_circle_for_the_other_at_its_next_call() {
    let p = pair();
    p.a.add_person("ann").unwrap();
    p.a.add_circle("team", &[]).unwrap();
    assert!(p.b.circles_of("ann").unwrap().is_empty());
    assert!(p.b.circles_of("ann").unwrap().is_empty());
    p.a.add_circle("team", &["ann".to_owned()]).unwrap();
    assert_eq!(p.b.circles_of("ann").unwrap(), ["team"]);
}

#[test]
fn a_revoke_is_refused_though_the_notification_never_arrives() {
    let p = pair();
    p.a.add_person("ann").unwrap();
    let ann = p.a.create_token("ann", TokenKind::Person).unwrap();
    assert!(taken_twice(&p.b, &ann));
    // Every listening connection to the database is cut before the revoke, so the
    // announcement is heard by no one: `b` learns of it by its lease alone.
    let admin = std::env::var(ferry_sql::testing::URL_VARIABLE).unwrap();
    ferry_sql::testing::admin_statement(
        &admin,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE query LIKE 'LISTEN%ferry_facts%'",
    );
    assert_eq!(p.a.revoke_tokens(&ann[..12]).unwrap(), 1);
    assert_eq!(p.b.authenticate(&ann).unwrap(), None);
}

#[test]
fn a_gateway_that_stops_gives_its_lease_up() {
    let p = pair();
    p.b.gateway_stopped("gateway-b").unwrap();
    assert!(
        !raw(&p.db)
            .exists("SELECT 1 FROM fact_leases", params![])
            .unwrap()
    );
    // And it asks the database again: a token revoked behind its back is refused.
    p.a.add_person("ann").unwrap();
    let ann = p.a.create_token("ann", TokenKind::Person).unwrap();
    assert!(p.b.authenticate(&ann).unwrap().is_some());
    raw(&p.db)
        .execute("DELETE FROM tokens WHERE prefix = ?1", params![&ann[..12]])
        .unwrap();
    assert_eq!(p.b.authenticate(&ann).unwrap(), None);
}

/// Authenticates `token` twice (the first fills what is remembered); whether both took it.
fn taken_twice(site: &Site, token: &str) -> bool {
    (0..2).all(|_| site.authenticate(token).unwrap().is_some())
}

/// A lease unrenewed past 60 s (by the database's clock) of a gateway no longer
/// registered is swept; a younger one is kept, as is that of the gateway renewing it.
/// (Exactly 60 s is not tried: the clock may tick between the insert and the sweep.)
#[test]
fn a_lease_long_unrenewed_of_a_gateway_gone_is_swept() {
    let p = pair();
    let raw = raw(&p.db);
    raw.execute(
        "INSERT INTO fact_leases (gateway, seen, renewed) VALUES
         ('gone', 0, CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT) - 61),
         ('quiet', 0, CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT) - 59)",
        params![],
    )
    .unwrap();
    p.a.sweep_gateways().unwrap();
    let leases: Vec<String> = raw
        .rows(
            "SELECT gateway FROM fact_leases ORDER BY gateway",
            params![],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(leases, ["gateway-b", "quiet"]);
}
