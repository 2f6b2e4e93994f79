//! `ferry site migrate-metadata` (spec S-META): a SQLite site's metadata moves into an
//! empty PostgreSQL database whole, the counts are checked, the SQLite file is left as it
//! was, and the site then runs on PostgreSQL as it did.

use ferry_config::Config;
use ferry_site::{ChatRole, NodeHello, Site, TokenKind, migrate_metadata};
use ferry_sql::testing::PostgresDatabase;
use sha2::{Digest, Sha256};

fn file_hash(path: &std::path::Path) -> Vec<u8> {
    Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

#[test]
fn a_sqlite_site_moves_to_postgres_whole_and_the_file_stays_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let (token, project, chat_before) = {
        let site = Site::open(&data, Config::default()).unwrap();
        site.add_person("ann").unwrap();
        site.add_person("bob").unwrap();
        let token = site.create_token("ann", TokenKind::Person).unwrap();
        let project = site
            .add_named_project_with("ann", "Q2 report", None, |_| {
                Ok::<_, ferry_site::SiteError>(())
            })
            .unwrap();
        for i in 0..5 {
            site.append_chat("ann", None, ChatRole::User, &format!("hello {i}"), &[])
                .unwrap();
        }
        site.add_circle("team", &["ann".to_owned(), "bob".to_owned()])
            .unwrap();
        site.record_hello(&NodeHello {
            id: "a".repeat(20),
            public_key: "a".repeat(64),
            name: "box".into(),
            platform: "linux".into(),
            shell: "bash".into(),
            commands: vec!["dir.list".into()],
        })
        .unwrap();
        let chat = site.chat_page("ann", None, None, 50).unwrap().messages;
        (token, project, chat)
    };
    let file = data.join(".ferry").join(ferry_site::DB_FILE);
    let before = file_hash(&file);

    let pg = PostgresDatabase::create();
    let copied = migrate_metadata(&data, pg.url(), None).unwrap();
    assert!(copied.iter().all(|t| t.sqlite == t.postgres), "{copied:?}");
    let count = |table: &str| copied.iter().find(|t| t.table == table).unwrap().postgres;
    assert_eq!(count("persons"), 2);
    assert_eq!(count("chat_messages"), 5);
    assert_eq!(count("circle_members"), 2);
    assert_eq!(count("nodes"), 1);
    assert_eq!(file_hash(&file), before, "the SQLite file was changed");

    // The site on PostgreSQL: the same people, token, project, chat and circle.
    let mut config = Config::default();
    config.metadata.url = Some(pg.url().to_owned());
    let site = Site::open(&data, config).unwrap();
    assert_eq!(site.persons().unwrap(), ["ann", "bob"]);
    let who = site
        .authenticate(&token)
        .unwrap()
        .expect("the token still works");
    assert_eq!(who.person, "ann");
    assert_eq!(site.projects("ann").unwrap()[0].id, project.id);
    assert_eq!(site.projects("ann").unwrap()[0].name, "Q2 report");
    let chat = site.chat_page("ann", None, None, 50).unwrap().messages;
    assert_eq!(chat, chat_before);
    assert_eq!(site.circles_of("bob").unwrap(), ["team"]);
    // New rows take ids after the copied ones.
    site.append_chat("ann", None, ChatRole::Assistant, "after", &[])
        .unwrap();
    let chat = site.chat_page("ann", None, None, 50).unwrap().messages;
    assert_eq!(chat.len(), 6);
    assert!(chat[5].id > chat[4].id);
    drop(site);

    // The SQLite file is not used any more: opening the site without the URL is refused,
    // saying where the metadata went (never with the password).
    let stale = Site::open(&data, Config::default()).err().expect("refused");
    assert!(stale.to_string().contains("PostgreSQL"), "{stale}");
    assert!(stale.to_string().contains("[metadata] url"), "{stale}");
    let userinfo = pg
        .url()
        .split_once("://")
        .unwrap()
        .1
        .split_once('@')
        .unwrap()
        .0;
    assert!(!stale.to_string().contains(userinfo), "{stale}");
    // A database that is not empty is refused, and nothing in it changes.
    let again = migrate_metadata(&data, pg.url(), None).unwrap_err();
    assert!(again.to_string().contains("not empty"), "{again}");
    assert_eq!(file_hash(&file), before);
}

#[test]
fn a_site_without_sqlite_metadata_or_a_bad_address_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let pg = PostgresDatabase::create();
    let e = migrate_metadata(tmp.path(), pg.url(), None).unwrap_err();
    assert!(e.to_string().contains("no SQLite metadata"), "{e}");
    let data = tmp.path().join("site");
    Site::open(&data, Config::default()).unwrap();
    assert!(migrate_metadata(&data, "postgres://nobody@127.0.0.1:1/none", Some("x")).is_err());
}

/// A run stopped midway (issue 15's crash harness kills `ferry site migrate-metadata`):
/// one stopped after it made the schema but before its copy was kept leaves tables with
/// no row, which the next run takes for empty; one stopped after the copy was kept but
/// before the note leaves the whole copy, which the next run finds whole and only notes.
#[test]
fn a_run_stopped_midway_is_completed_by_the_next() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    {
        let site = Site::open(&data, Config::default()).unwrap();
        site.add_person("ann").unwrap();
        for i in 0..3 {
            site.append_chat("ann", None, ChatRole::User, &format!("hello {i}"), &[])
                .unwrap();
        }
    }
    let pg = PostgresDatabase::create();
    // The schema alone, as a run killed before its copy committed leaves it.
    let mut config = Config::default();
    config.metadata.url = Some(pg.url().to_owned());
    drop(Site::open(&tmp.path().join("other"), config.clone()).unwrap());

    let copied = migrate_metadata(&data, pg.url(), None).unwrap();
    let count = |copied: &[ferry_site::TableCopied], table: &str| {
        let found = copied.iter().find(|t| t.table == table).unwrap();
        assert_eq!(found.sqlite, found.postgres, "{copied:?}");
        found.postgres
    };
    assert_eq!(count(&copied, "chat_messages"), 3);

    // The copy kept, the note not yet written: the next run only writes it.
    let note = data.join(".ferry").join("metadata-moved");
    std::fs::remove_file(&note).unwrap();
    let again = migrate_metadata(&data, pg.url(), None).unwrap();
    assert_eq!(again, copied);
    assert!(note.is_file());
    let site = Site::open(&data, config).unwrap();
    assert_eq!(site.persons().unwrap(), ["ann"]);
    // The identities moved with the copy: a new message takes the next id.
    site.append_chat("ann", None, ChatRole::Assistant, "after", &[])
        .unwrap();
    let chat = site.chat_page("ann", None, None, 50).unwrap().messages;
    assert_eq!(chat.len(), 4);
    // Once the site on PostgreSQL changed it, it is no longer this site's copy.
    drop(site);
    let e = migrate_metadata(&data, pg.url(), None).unwrap_err();
    assert!(e.to_string().contains("not empty"), "{e}");
}
