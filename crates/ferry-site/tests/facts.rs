//! What a gateway remembers of tokens and circles on PostgreSQL (`facts.rs`, spec
//! S-GATEWAYS): two sites open on one database stand for two gateways (or for a gateway
//! and a command on the data dir). What one changes, the other sees at the next call,
//! though it remembers, and a gateway that stops gives its lease up.

use std::time::{Duration, Instant};

use ferry_config::Config;
use ferry_site::{Site, TokenKind};
use ferry_sql::testing::PostgresDatabase;
use ferry_sql::{Db, Exec, params};

/// Gateway-like sites `a` and `b` on one fresh PostgreSQL database; `b` remembers.
struct Pair {
    pg: PostgresDatabase,
    _tmp: tempfile::TempDir,
    a: Site,
    b: Site,
}

impl Pair {
    /// The database opened beside the sites, to change it behind their back.
    fn raw(&self) -> Db {
        Db::postgres(self.pg.url(), None).unwrap()
    }
}

fn pair() -> Pair {
    let pg = PostgresDatabase::create();
    let tmp = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.metadata.url = Some(pg.url().to_owned());
    let a = Site::open(tmp.path(), config.clone()).unwrap();
    let b = Site::open(tmp.path(), config).unwrap();
    b.keep_facts("gateway-b");
    let pair = Pair {
        pg,
        _tmp: tmp,
        a,
        b,
    };
    // Its lease is taken by its first renewal.
    let raw = pair.raw();
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
    pair
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
    p.raw()
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
        !p.raw()
            .exists("SELECT 1 FROM fact_leases", params![])
            .unwrap()
    );
    // And it asks the database again: a token revoked behind its back is refused.
    p.a.add_person("ann").unwrap();
    let ann = p.a.create_token("ann", TokenKind::Person).unwrap();
    assert!(p.b.authenticate(&ann).unwrap().is_some());
    p.raw()
        .execute("DELETE FROM tokens WHERE prefix = ?1", params![&ann[..12]])
        .unwrap();
    assert_eq!(p.b.authenticate(&ann).unwrap(), None);
}

/// Authenticates `token` twice (the first fills what is remembered); whether both took it.
fn taken_twice(site: &Site, token: &str) -> bool {
    (0..2).all(|_| site.authenticate(token).unwrap().is_some())
}

/// Leases no gateway trusts under any longer are swept, by the database's clock: one of
/// a gateway no longer registered once unrenewed for more than 3 s, any once unrenewed
/// for more than 60 s. (Exactly at a limit is not tried: the clock may tick between the
/// insert and the sweep; one second either side is.)
#[test]
fn leases_no_gateway_trusts_under_are_swept() {
    let p = pair();
    let raw = p.raw();
    p.a.register_gateway("young", "127.0.0.1:1").unwrap();
    p.a.register_gateway("old", "127.0.0.1:2").unwrap();
    let lease = |gateway: &str, age: i64| {
        raw.execute(
            "INSERT INTO fact_leases (gateway, seen, renewed) VALUES
             (?1, 0, CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT) - ?2)",
            params![gateway, age],
        )
        .unwrap();
    };
    lease("gone-long", 4);
    lease("gone-just", 2);
    lease("young", 59);
    lease("old", 61);
    p.a.sweep_gateways().unwrap();
    let leases: Vec<String> = raw
        .rows(
            "SELECT gateway FROM fact_leases ORDER BY gateway",
            params![],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(leases, ["gateway-b", "gone-just", "young"]);
}
