//! The media store of a site (spec core C-MEDIA): records in the metadata database on
//! disk, blobs under the media folder, the sweeper.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_config::Config;
use ferry_media::{MediaError, MediaRecord, MediaSource, MediaStore};
use ferry_site::Site;
use ferry_site::layout::MEDIA_DIR;
use ferry_sql::{Exec, params};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

const HOUR: Duration = Duration::from_secs(3600);

fn site(dir: &Path) -> Site {
    Site::open(dir, ferry_site::testing::config(dir)).unwrap()
}

fn from_node(path: &str) -> MediaSource {
    MediaSource {
        node: Some("build-box".to_owned()),
        path: path.to_owned(),
        person: None,
    }
}

async fn put(store: &MediaStore, bytes: &[u8], name: &str) -> MediaRecord {
    store
        .put(bytes, name, from_node(&format!("/srv/{name}")))
        .await
        .unwrap()
}

async fn read(store: &MediaStore, id: &str) -> Vec<u8> {
    let (_, bytes) = store.open(id).await.unwrap();
    let chunks: Vec<Bytes> = bytes.try_collect().await.unwrap();
    chunks.concat()
}

fn files_under(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    let mut names: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    names.sort();
    names
}

/// What the media store holds: the files of its folder (trees, and on the local backend
/// the blobs, temporaries and multipart staging files), and the keys of its bucket.
async fn media_files(data: &Path, store: &MediaStore) -> Vec<String> {
    let mut names = std::collections::BTreeSet::from_iter(files_under(&data.join(MEDIA_DIR)));
    names.extend(store.blobs().keys().await.unwrap());
    names.into_iter().collect()
}

async fn stored(store: &MediaStore, record: &MediaRecord) -> bool {
    store.blobs().exists(&record.sha256).await.unwrap()
}

/// Sets a record's expiry behind the store's back, as time passing would.
fn expire(data: &Path, id: &str) {
    let db = ferry_site::testing::metadata_db(data);
    let n = db
        .execute("UPDATE media SET expires = 0 WHERE id = ?1", params![id])
        .unwrap();
    assert_eq!(n, 1);
}

fn png() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0".to_vec();
    bytes.extend([0x1f, 0x15, 0xc4, 0x89]);
    bytes
}

fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        writer
            .start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn docx() -> Vec<u8> {
    zip_of(&[
        ("[Content_Types].xml", b"<Types/>"),
        ("_rels/.rels", b"<Relationships/>"),
        ("word/document.xml", b"<w:document/>"),
    ])
}

fn extension(id: &str) -> &str {
    id.rsplit_once('.').unwrap().1
}

#[tokio::test]
async fn a_put_is_recorded_on_disk_with_every_field() {
    let data = tempfile::tempdir().unwrap();
    let content = b"import torch\nprint('train')\n";
    let record = put(&site(data.path()).media().unwrap(), content, "train.py").await;

    // Another open of the site reads it back from the database file.
    let store = site(data.path()).media().unwrap();
    let again = store.get(record.id.as_str()).unwrap();
    assert_eq!(again, record);
    assert!(record.id.as_str().starts_with("train~"), "{}", record.id);
    assert_eq!(extension(record.id.as_str()), "txt");
    assert_eq!(record.original_name, "train.py");
    assert_eq!(record.source, from_node("/srv/train.py"));
    assert_eq!(record.size, content.len() as u64);
    assert_eq!(record.sha256, ferry_fs::sha256_hex(content));
    assert!(
        record.media_type.starts_with("text/"),
        "{}",
        record.media_type
    );
    assert_eq!(record.expires - record.created, 168 * 3600);
    let location = record.location.clone().unwrap();
    assert!(location.ends_with(&format!("blobs/{}", record.sha256)));
    if ferry_site::testing::media_on_s3() {
        assert!(location.starts_with("s3://ferry-test-"), "{location}");
        assert_eq!(record.local_path, None);
    } else {
        let local = record.local_path.clone().unwrap();
        assert_eq!(std::fs::read(&local).unwrap(), content);
        assert_eq!(local.display().to_string(), location);
    }
    assert_eq!(read(&store, record.id.as_str()).await, content);
    assert_eq!(store.list().unwrap(), vec![record.clone()]);

    let json = serde_json::to_value(&record).unwrap();
    for key in [
        "id",
        "originalName",
        "source",
        "size",
        "sha256",
        "mediaType",
        "created",
        "expires",
        "location",
    ] {
        assert!(json.get(key).is_some(), "{key}: {json}");
    }
    assert_eq!(
        json.get("localPath").is_some(),
        !ferry_site::testing::media_on_s3(),
        "{json}"
    );
    assert_eq!(json["source"]["node"], "build-box");
}

#[tokio::test]
async fn the_extension_is_the_detected_type_not_the_name() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let unknown: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let docx = docx();
    let plain_zip = zip_of(&[("a.txt", b"a")]);
    for (bytes, name, expected) in [
        (&b"print(1)\n"[..], "train.py", "txt"),
        (&png()[..], "photo.jpg", "png"),
        (&b""[..], "empty.bin", "txt"),
        (&unknown[..], "data.txt", "bin"),
        (&docx[..], "letter.zip", "docx"),
        (&plain_zip[..], "bundle.docx", "zip"),
    ] {
        let record = put(&store, bytes, name).await;
        assert_eq!(extension(record.id.as_str()), expected, "{name}");
        let stem = name.rsplit_once('.').unwrap().0;
        assert!(
            record.id.as_str().starts_with(&format!("{stem}~")),
            "{}",
            record.id
        );
    }
}

#[tokio::test]
async fn the_same_content_twice_is_two_ids_and_one_blob() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let a = put(&store, b"same bytes", "a.txt").await;
    let b = put(&store, b"same bytes", "a.txt").await;
    assert_ne!(a.id, b.id);
    assert_eq!(a.sha256, b.sha256);
    assert_eq!(
        media_files(data.path(), &store).await,
        vec![format!("blobs/{}", a.sha256)]
    );
}

#[tokio::test]
async fn ids_from_outside_that_this_store_never_issued_are_unknown() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let record = put(&store, b"bytes", "notes.txt").await;
    let local = record.location.clone().unwrap();
    let other_store = tempfile::tempdir().unwrap();
    let foreign = put(
        &site(other_store.path()).media().unwrap(),
        b"bytes",
        "notes.txt",
    )
    .await;
    let expired = put(&store, b"old bytes", "old.txt").await;
    expire(data.path(), expired.id.as_str());
    for value in [
        local,
        format!("./{}", record.id),
        format!("../{}", record.id),
        format!("blobs/{}", record.sha256),
        format!("{}/", record.id),
        format!("x\\{}", record.id),
        record.sha256.clone(),
        "train~k3j9x2m1q8ab.txt".to_owned(),
        foreign.id.to_string(),
        expired.id.to_string(),
        String::new(),
    ] {
        let err = store.get(&value).unwrap_err();
        assert_eq!(err.code(), Code::UnknownMediaId, "{value:?}");
        assert!(store.open(&value).await.is_err(), "{value:?}");
    }
    assert_eq!(store.get(record.id.as_str()).unwrap().id, record.id);
}

#[tokio::test]
async fn the_put_cap_at_limit_minus_one_limit_and_plus_one() {
    let data = tempfile::tempdir().unwrap();
    let cap = 100_000u64;
    let store = site(data.path()).media().unwrap().with_max_bytes(cap);
    for (size, fits) in [(cap - 1, true), (cap, true), (cap + 1, false)] {
        let bytes = vec![b'x'; size as usize];
        match store
            .put(&bytes[..], "big.txt", from_node("/srv/big.txt"))
            .await
        {
            Ok(record) => {
                assert!(fits, "{size}");
                assert_eq!(record.size, size);
            }
            Err(e) => {
                assert!(!fits, "{size}: {e}");
                assert_eq!(e.code(), Code::TooLarge);
            }
        }
    }
    assert_eq!(
        store.list().unwrap().len(),
        2,
        "no record for the refused put"
    );
    for file in media_files(data.path(), &store).await {
        assert!(file.starts_with("blobs/"), "nothing but blobs: {file}");
    }
}

#[tokio::test]
async fn a_put_cut_off_midway_leaves_no_record_and_no_visible_blob() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let cut =
        stream::iter([Ok(Bytes::from(vec![1u8; 3 * 1024 * 1024]))]).chain(stream::iter([Err(
            std::io::Error::other("the node went away"),
        )]));
    let err = store
        .put_stream(cut, "big.bin", from_node("/srv/big.bin"))
        .await
        .unwrap_err();
    assert!(matches!(err, MediaError::Source(_)), "{err}");
    assert!(store.list().unwrap().is_empty());
    assert_eq!(media_files(data.path(), &store).await, Vec::<String>::new());
}

#[tokio::test]
async fn sweep_removes_expired_records_then_blobs_no_record_references() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let a = put(&store, b"shared", "a.txt").await;
    let b = put(&store, b"shared", "b.txt").await;
    let c = put(&store, b"alone", "c.txt").await;
    let later = SystemTime::now() + 2 * HOUR;

    expire(data.path(), a.id.as_str());
    expire(data.path(), c.id.as_str());
    let report = store.sweep(later).await.unwrap();
    assert_eq!((report.records_removed, report.blobs_removed), (2, 1));
    assert!(
        stored(&store, &a).await,
        "b still references the shared blob"
    );
    assert!(!stored(&store, &c).await);
    assert_eq!(read(&store, b.id.as_str()).await, b"shared");

    // A sweep with nothing to do removes nothing.
    assert_eq!(store.sweep(later).await.unwrap(), Default::default());

    // At its real expiry (168 hours), the last record and its blob go.
    let past_ttl = SystemTime::now() + 169 * HOUR;
    let report = store.sweep(past_ttl).await.unwrap();
    assert_eq!((report.records_removed, report.blobs_removed), (1, 1));
    assert!(store.list().unwrap().is_empty());
    assert_eq!(media_files(data.path(), &store).await, Vec::<String>::new());
}

#[tokio::test]
async fn the_ttl_comes_from_the_configuration() {
    let data = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.media.ttl_hours = 1;
    let store = Site::open(
        data.path(),
        ferry_site::testing::metadata(data.path(), config),
    )
    .unwrap()
    .media()
    .unwrap();
    let record = put(&store, b"short-lived", "s.txt").await;
    assert_eq!(record.expires - record.created, 3600);
    let before = SystemTime::UNIX_EPOCH + Duration::from_secs(record.expires as u64 - 1);
    assert_eq!(store.sweep(before).await.unwrap().records_removed, 0);
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(record.expires as u64);
    assert_eq!(store.sweep(at).await.unwrap().records_removed, 1);
}

/// A put that crashed after placing its blob, before recording it, leaves a blob no
/// record references: it outlives the grace period, then goes.
#[tokio::test]
async fn a_young_unreferenced_blob_is_kept_for_the_grace_period() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let blobs = store.blobs();
    let staged = blobs
        .stage(stream::iter([Ok(Bytes::from_static(b"orphan"))]), 1024)
        .await
        .unwrap();
    let sha = staged.sha256.clone();
    blobs.place(&staged).await.unwrap();
    blobs.settle(staged).await.unwrap();
    let grace = Duration::from_secs(ferry_config::limits::MEDIA_BLOB_GRACE_SECS);
    let report = store.sweep(SystemTime::now()).await.unwrap();
    assert_eq!(report.blobs_removed, 0);
    let within = SystemTime::now() + grace - Duration::from_secs(60);
    assert_eq!(store.sweep(within).await.unwrap().blobs_removed, 0);
    assert!(blobs.exists(&sha).await.unwrap());
    let past = SystemTime::now() + grace + Duration::from_secs(60);
    assert_eq!(store.sweep(past).await.unwrap().blobs_removed, 1);
    assert!(!blobs.exists(&sha).await.unwrap());
}

/// A put that found its blob already there, then met a sweep that removed it before
/// the put's record was in, puts the blob back from its own temporary.
#[tokio::test]
async fn a_blob_swept_under_a_put_of_the_same_content_is_put_back() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let old = put(&store, b"popular", "old.txt").await;
    expire(data.path(), old.id.as_str());
    let blobs = store.blobs();
    let staged = blobs
        .stage(stream::iter([Ok(Bytes::from_static(b"popular"))]), 1024)
        .await
        .unwrap();
    assert_eq!(
        blobs.place(&staged).await.unwrap(),
        ferry_media::blob::Placed::Existing
    );
    let report = store.sweep(SystemTime::now() + 2 * HOUR).await.unwrap();
    assert_eq!(report.blobs_removed, 1);
    assert!(!blobs.exists(&old.sha256).await.unwrap());
    blobs.settle(staged).await.unwrap();
    assert!(blobs.exists(&old.sha256).await.unwrap());
    assert_eq!(
        media_files(data.path(), &store).await,
        vec![format!("blobs/{}", old.sha256)]
    );
}

/// A sweep that stopped after moving a blob aside: the next one puts a referenced blob
/// back and drops an unreferenced one.
#[tokio::test]
async fn a_sweep_cut_off_midway_is_finished_by_the_next() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let kept = put(&store, b"still wanted", "kept.txt").await;
    let gone = put(&store, b"not wanted", "gone.txt").await;
    let objects = store.blobs().object_store();
    for sha in [&kept.sha256, &gone.sha256] {
        let (from, to) = (format!("blobs/{sha}"), format!("trash/{sha}"));
        objects.rename(&from.into(), &to.into()).await.unwrap();
    }
    expire(data.path(), gone.id.as_str());
    let report = store.sweep(SystemTime::now()).await.unwrap();
    assert_eq!((report.blobs_kept, report.blobs_removed), (1, 1));
    assert_eq!(read(&store, kept.id.as_str()).await, b"still wanted");
    assert_eq!(
        media_files(data.path(), &store).await,
        vec![format!("blobs/{}", kept.sha256)]
    );
}

/// Puts of the same contents race sweeps that see every blob as old (no grace), while
/// bait records of those contents keep expiring, so the blobs keep falling
/// unreferenced: a put that returned always has its blob, right then and at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn puts_and_sweeps_at_once_lose_no_blob() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path())
        .media()
        .unwrap()
        .with_grace(Duration::ZERO);
    let done = Arc::new(AtomicBool::new(false));
    let db_path = data.path().to_path_buf();
    let sweeper = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let (mut sweeps, mut kept) = (0, 0);
            while !done.load(Ordering::Relaxed) {
                kept += store
                    .sweep(SystemTime::now() + HOUR)
                    .await
                    .unwrap()
                    .blobs_kept;
                sweeps += 1;
            }
            (sweeps, kept)
        })
    };
    let baiter = {
        let (store, done) = (store.clone(), done.clone());
        tokio::spawn(async move {
            let db = ferry_site::testing::metadata_db(&db_path);
            let mut k = 0;
            while !done.load(Ordering::Relaxed) {
                let content = format!("content {}", k % 5);
                let source = MediaSource {
                    node: None,
                    path: "bait".to_owned(),
                    person: None,
                };
                store
                    .put(content.as_bytes(), "c.txt", source)
                    .await
                    .unwrap();
                db.execute(
                    "UPDATE media SET expires = 0 WHERE source_path = 'bait'",
                    params![],
                )
                .unwrap();
                k += 1;
            }
        })
    };
    let mut puts = Vec::new();
    for i in 0..6 {
        let store = store.clone();
        puts.push(tokio::spawn(async move {
            let mut records = Vec::new();
            for j in 0..40 {
                let content = format!("content {}", (i + j) % 5);
                let record = put(&store, content.as_bytes(), "c.txt").await;
                let bytes = read(&store, record.id.as_str()).await;
                assert_eq!(bytes, content.as_bytes(), "{}", record.id);
                records.push(record);
            }
            records
        }));
    }
    let mut records = Vec::new();
    for task in puts {
        records.extend(task.await.unwrap());
    }
    done.store(true, Ordering::Relaxed);
    baiter.await.unwrap();
    let (sweeps, kept) = sweeper.await.unwrap();
    eprintln!("{sweeps} sweeps; blobs a sweep put back: {kept}");
    for record in &records {
        let bytes = read(&store, record.id.as_str()).await;
        assert_eq!(ferry_fs::sha256_hex(&bytes), record.sha256, "{}", record.id);
        assert!(store.blobs().exists(&record.sha256).await.unwrap());
    }
}
/// What a put that died mid-stream left (its temporary) goes once it has sat unwritten
/// for a day; a temporary being written is left alone.
#[tokio::test]
async fn a_dead_puts_temporary_is_removed_after_a_day_idle() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    if ferry_site::testing::media_on_s3() {
        // What a put that crashed left: its temporary object.
        let objects = store.blobs().object_store();
        let key = "tmp/0123456789abcdef".into();
        objects
            .put(&key, b"half a blob".to_vec().into())
            .await
            .unwrap();
    } else {
        // The multipart writer's staging file, which the store's own listing hides.
        let tmp = data.path().join(MEDIA_DIR).join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("0123456789abcdef#1"), b"half a blob").unwrap();
    }
    let day = Duration::from_secs(ferry_config::limits::MEDIA_TEMPORARY_IDLE_MAX_SECS);
    let report = store.sweep(SystemTime::now() + day - HOUR).await.unwrap();
    assert_eq!(report.temporaries_removed, 0);
    let report = store.sweep(SystemTime::now() + day + HOUR).await.unwrap();
    assert_eq!(report.temporaries_removed, 1);
    assert_eq!(media_files(data.path(), &store).await, Vec::<String>::new());
}

/// A source name or path from outside is kept as given, up to 4096 bytes: at the limit
/// it is recorded, one byte over it is `bad_path` before any byte is read.
#[tokio::test]
async fn source_names_and_paths_at_limit_minus_one_limit_and_plus_one() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let max = ferry_fs::PATH_MAX_BYTES;
    for (len, fits) in [(max - 1, true), (max, true), (max + 1, false)] {
        let name = format!("{}.txt", "n".repeat(len - 4));
        let by_name = store.put(&b"x"[..], &name, from_node("/srv/x")).await;
        let path = format!("/{}", "p".repeat(len - 1));
        let by_path = store.put(&b"x"[..], "x.txt", from_node(&path)).await;
        for result in [by_name, by_path] {
            match result {
                Ok(record) => {
                    assert!(fits, "{len}");
                    assert!(record.original_name.len() == len || record.source.path.len() == len);
                    assert_eq!(store.get(record.id.as_str()).unwrap(), record);
                }
                Err(e) => {
                    assert!(!fits, "{len}: {e}");
                    assert_eq!(e.code(), Code::BadPath);
                }
            }
        }
    }
    assert_eq!(store.list().unwrap().len(), 4);
    let name = "tab\tnew\nline\u{0}nul\u{202e}bidi.txt";
    let record = store.put(&b"x"[..], name, from_node(name)).await.unwrap();
    // Kept as given, but for the NUL: no file system has one in a name, and the records
    // keep it as U+FFFD on every metadata engine.
    let kept = name.replace('\0', "\u{FFFD}");
    let got = store.get(record.id.as_str()).unwrap();
    assert_eq!(got.original_name, kept);
    assert_eq!(got.source.path, kept);
    assert!(
        record.id.as_str().starts_with("tab_new_line_nul_bidi~"),
        "{}",
        record.id
    );
}

#[tokio::test]
async fn a_fetched_tree_lives_as_long_as_its_record_and_a_dead_extraction_goes() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let kept = put(&store, b"tree one", "one.tar.gz").await;
    let expired = put(&store, b"tree two", "two.tar.gz").await;
    for record in [&kept, &expired] {
        let tree = store.tree_path(&record.id);
        std::fs::create_dir_all(tree.join("sub")).unwrap();
        std::fs::write(tree.join("sub/f.txt"), b"x").unwrap();
    }
    let root = data.path().join(MEDIA_DIR);
    // A tree whose record never existed, and an extraction a crash left.
    std::fs::create_dir_all(root.join("dir-fetch-stray~aaaaaaaaaaaa.gz/a")).unwrap();
    let temporary = root.join(".tmp-dir-fetch-x~bbbbbbbbbbbb.gz");
    std::fs::create_dir_all(temporary.join("half")).unwrap();

    expire(data.path(), expired.id.as_str());
    let report = store.sweep(SystemTime::now() + HOUR).await.unwrap();
    assert_eq!(report.trees_removed, 2);
    assert!(store.tree_path(&kept.id).join("sub/f.txt").exists());
    assert!(!store.tree_path(&expired.id).exists());
    assert!(!root.join("dir-fetch-stray~aaaaaaaaaaaa.gz").exists());
    // The extraction is young: it may be one in progress.
    assert_eq!(report.tree_temporaries_removed, 0);
    assert!(temporary.exists());
    let report = store.sweep(SystemTime::now() + 25 * HOUR).await.unwrap();
    assert_eq!(report.tree_temporaries_removed, 1);
    assert!(!temporary.exists());

    // Removing a record takes its tree with it.
    assert!(store.remove(&kept.id).unwrap());
    assert!(!store.tree_path(&kept.id).exists());
    assert!(!store.remove(&kept.id).unwrap());
}

/// A record an agent of one person brought in is that person's: another person's agent
/// is told its id is unknown, as if it had never been issued. An operator's put is any
/// person's.
#[tokio::test]
async fn a_media_id_serves_the_person_whose_agent_brought_it_in() {
    let data = tempfile::tempdir().unwrap();
    let store = site(data.path()).media().unwrap();
    let of = |person: Option<&str>| MediaSource {
        node: Some("build-box".to_owned()),
        path: "/srv/secret.txt".to_owned(),
        person: person.map(str::to_owned),
    };
    let anns = store
        .put(&b"ann's"[..], "secret.txt", of(Some("ann")))
        .await
        .unwrap();
    let operators = store
        .put(&b"for all"[..], "shared.txt", of(None))
        .await
        .unwrap();
    assert_eq!(
        site(data.path())
            .media()
            .unwrap()
            .get(anns.id.as_str())
            .unwrap()
            .source
            .person
            .as_deref(),
        Some("ann"),
        "kept in the records"
    );
    assert!(store.open_as(anns.id.as_str(), "ann").await.is_ok());
    let refused = store.open_as(anns.id.as_str(), "bob").await.err().unwrap();
    assert_eq!(refused.code(), Code::UnknownMediaId);
    for person in ["ann", "bob"] {
        assert!(store.open_as(operators.id.as_str(), person).await.is_ok());
    }
}
