//! Blobs in an S3 bucket (spec scale S-STORE), on the Garage that `.ci/garage start`
//! runs: one PUT up to 8 MiB and multipart above, create-once placing, nothing left
//! behind by a put that fails or is dropped, and a store that is down or refuses the
//! keys told as such.

use std::time::Duration;

use bytes::Bytes;
use ferry_config::MediaConfig;
use ferry_media::blob::Placed;
use ferry_media::testing::S3Bucket;
use ferry_media::{Blobs, MediaError};
use futures_util::stream::{self, StreamExt};
use object_store::ObjectStoreExt;
use sha2::Digest;

const MIB: usize = 1024 * 1024;

fn on_garage() -> (S3Bucket, Blobs, tempfile::TempDir) {
    let bucket = S3Bucket::create();
    let mut media = MediaConfig::default();
    bucket.configure(&mut media);
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::s3(dir.path(), &media, "site-a").unwrap();
    (bucket, blobs, dir)
}

/// The byte at `offset` of test content: a pattern that does not repeat at any part
/// size, so parts placed out of order change the hash.
fn byte_at(offset: usize) -> u8 {
    (offset % 251) as u8
}

fn content(total: usize, chunk: usize) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> {
    stream::iter((0..total).step_by(chunk)).map(move |start| {
        let end = (start + chunk).min(total);
        Ok(Bytes::from((start..end).map(byte_at).collect::<Vec<u8>>()))
    })
}

fn sha256_of(total: usize) -> String {
    let mut hasher = sha2::Sha256::new();
    let bytes: Vec<u8> = (0..total).map(byte_at).collect();
    hasher.update(&bytes);
    ferry_fs::hex(&hasher.finalize())
}

async fn read_sha256(blobs: &Blobs, sha256: &str) -> (usize, String) {
    let mut hasher = sha2::Sha256::new();
    let mut size = 0;
    let mut bytes = blobs.get(sha256).await.unwrap();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.unwrap();
        size += chunk.len();
        hasher.update(&chunk);
    }
    (size, ferry_fs::hex(&hasher.finalize()))
}

/// Waits (bounded) for what a dropped put cleans up in the background.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: still not so after 10 s");
}

#[tokio::test]
async fn puts_around_the_multipart_threshold_are_whole_and_in_order() {
    let (_bucket, blobs, _dir) = on_garage();
    let part = 8 * MIB;
    for (size, chunk) in [
        (0, 65536),
        (part - 1, 65536),
        (part, 65536),
        (part + 1, 65536),
        (2 * part + 12345, 100_003),
    ] {
        let staged = blobs.stage(content(size, chunk), u64::MAX).await.unwrap();
        assert_eq!(staged.size, size as u64);
        assert_eq!(staged.sha256, sha256_of(size), "{size}");
        assert_eq!(blobs.place(&staged).await.unwrap(), Placed::New, "{size}");
        let sha256 = staged.sha256.clone();
        blobs.settle(staged).await.unwrap();
        // A multipart object's ETag names its parts ("…-2"); one PUT's is a plain MD5.
        let key = format!("blobs/{sha256}").into();
        let etag = blobs
            .object_store()
            .head(&key)
            .await
            .unwrap()
            .e_tag
            .unwrap();
        assert_eq!(etag.contains('-'), size > part, "{size}: {etag}");
        assert_eq!(read_sha256(&blobs, &sha256).await, (size, sha256.clone()));
        assert_eq!(
            blobs.location(&sha256),
            format!("s3://{}/site-a/blobs/{sha256}", _bucket.name)
        );
        assert_eq!(blobs.local_path(&sha256), None);
    }
    let keys = blobs.keys().await.unwrap();
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert!(keys.iter().all(|k| k.starts_with("blobs/")), "{keys:?}");
    assert_eq!(_bucket.unfinished_multipart_uploads(), 0);
}

#[tokio::test]
async fn the_same_content_is_placed_once() {
    let (_bucket, blobs, _dir) = on_garage();
    let first = blobs.stage(content(1000, 100), 1 << 20).await.unwrap();
    let second = blobs.stage(content(1000, 300), 1 << 20).await.unwrap();
    assert_eq!(first.sha256, second.sha256);
    assert_eq!(blobs.place(&first).await.unwrap(), Placed::New);
    assert_eq!(blobs.place(&second).await.unwrap(), Placed::Existing);
    blobs.settle(first).await.unwrap();
    blobs.settle(second).await.unwrap();
    assert_eq!(blobs.keys().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_cap_at_limit_minus_one_limit_and_plus_one() {
    let (_bucket, blobs, _dir) = on_garage();
    // Past one part, so the refused put had a multipart upload under way.
    let cap = (9 * MIB) as u64;
    for (size, fits) in [(cap - 1, true), (cap, true), (cap + 1, false)] {
        match blobs.stage(content(size as usize, 65536), cap).await {
            Ok(staged) => {
                assert!(fits, "{size}");
                blobs.discard(staged).await.unwrap();
            }
            Err(e) => {
                assert!(!fits, "{size}: {e}");
                assert!(matches!(e, MediaError::TooLarge { .. }), "{e}");
            }
        }
    }
    assert_eq!(blobs.keys().await.unwrap(), Vec::<String>::new());
    eventually("the refused put's upload is aborted", async || {
        _bucket.unfinished_multipart_uploads() == 0
    })
    .await;
}

#[tokio::test]
async fn a_failing_source_leaves_nothing_in_the_bucket() {
    let (bucket, blobs, _dir) = on_garage();
    for size in [3 * MIB, 20 * MIB] {
        let failing = content(size, 65536).chain(stream::iter([Err(std::io::Error::other(
            "the node went away",
        ))]));
        let err = blobs.stage(failing, u64::MAX).await.unwrap_err();
        assert!(matches!(err, MediaError::Source(_)), "{err}");
    }
    assert_eq!(blobs.keys().await.unwrap(), Vec::<String>::new());
    eventually("the failed put's upload is aborted", async || {
        bucket.unfinished_multipart_uploads() == 0
    })
    .await;
}

/// A put whose caller gives up midway (the future is dropped at an await, as when a
/// tool call is cancelled) aborts its multipart upload and leaves no temporary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_dropped_midway_aborts_its_upload() {
    let (bucket, blobs, _dir) = on_garage();
    let (sent, mut all_sent) = tokio::sync::mpsc::channel::<()>(1);
    // 20 MiB (two parts sent), then a source that never ends.
    let source = content(20 * MIB, 65536)
        .chain(stream::once(async move {
            let _ = sent.send(()).await;
            std::future::pending::<std::io::Result<Bytes>>().await
        }))
        .boxed();
    let put = {
        let blobs = blobs.clone();
        tokio::spawn(async move { blobs.stage(source, u64::MAX).await.map(|_| ()) })
    };
    all_sent.recv().await.unwrap();
    // The two parts are on their way or landed: the upload exists.
    eventually("the upload is under way", async || {
        bucket.unfinished_multipart_uploads() > 0
    })
    .await;
    put.abort();
    assert!(put.await.unwrap_err().is_cancelled());
    eventually("the dropped put's upload is aborted", async || {
        bucket.unfinished_multipart_uploads() == 0
    })
    .await;
    assert_eq!(blobs.keys().await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn a_store_that_is_down_or_refuses_the_keys_is_told() {
    let bucket = S3Bucket::create();
    let dir = tempfile::tempdir().unwrap();
    let mut media = MediaConfig::default();
    bucket.configure(&mut media);
    assert!(
        Blobs::s3(dir.path(), &media, "p")
            .unwrap()
            .check()
            .await
            .is_ok()
    );

    let mut wrong_secret = media.clone();
    wrong_secret.secret_access_key = Some("0".repeat(64));
    let blobs = Blobs::s3(dir.path(), &wrong_secret, "p").unwrap();
    let err = blobs.check().await.unwrap_err();
    assert!(
        !err.to_string().contains(bucket.secret_access_key()),
        "{err}"
    );
    let err = blobs.stage(content(10, 10), 100).await.unwrap_err();
    assert!(matches!(err, MediaError::Store(_)), "{err}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let mut down = media.clone();
    down.endpoint = Some(format!("http://{closed}"));
    let err = Blobs::s3(dir.path(), &down, "p")
        .unwrap()
        .check()
        .await
        .unwrap_err();
    assert!(
        !err.to_string().contains(bucket.secret_access_key()),
        "{err}"
    );
}
