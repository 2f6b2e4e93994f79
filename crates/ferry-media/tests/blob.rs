//! Blobs: streamed, capped, hashed, placed once.

use bytes::Bytes;
use ferry_media::blob::Placed;
use ferry_media::{Blobs, MediaError};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use sha2::Digest;

fn chunks(
    total: usize,
    chunk: usize,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    let piece = Bytes::from(vec![7u8; chunk]);
    let count = total / chunk;
    let rest = total % chunk;
    stream::iter((0..count).map(move |_| Ok(piece.clone()))).chain(stream::iter(
        (rest > 0).then(|| Ok(Bytes::from(vec![7u8; rest]))),
    ))
}

fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        out.push(entry.strip_prefix(dir).unwrap().display().to_string());
    }
    out.sort();
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return files;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn the_cap_at_limit_minus_one_limit_and_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let cap = 3 * 1024 * 1024 + 5;
    for (size, fits) in [(cap - 1, true), (cap, true), (cap + 1, false)] {
        let result = blobs.stage(chunks(size as usize, 65536), cap).await;
        match result {
            Ok(staged) => {
                assert!(fits, "{size}");
                assert_eq!(staged.size, size);
                blobs.discard(staged).await.unwrap();
            }
            Err(e) => {
                assert!(!fits, "{size}: {e}");
                assert!(matches!(e, MediaError::TooLarge { max_bytes } if max_bytes == cap));
                assert_eq!(e.code(), ferry_codes::Code::TooLarge);
            }
        }
    }
    assert_eq!(
        files_under(dir.path()),
        Vec::<String>::new(),
        "nothing left behind"
    );
}

#[tokio::test]
async fn content_is_keyed_by_its_sha256_and_placed_once() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let content = b"hello blobs".to_vec();
    let sha = ferry_fs::sha256_hex(&content);
    let one = stream::iter([Ok(Bytes::from(content.clone()))]);
    let staged = blobs.stage(one, 1024).await.unwrap();
    assert_eq!(staged.sha256, sha);
    assert_eq!(blobs.place(&staged).await.unwrap(), Placed::New);
    blobs.settle(staged).await.unwrap();
    let path = blobs.local_path(&sha).unwrap();
    assert!(path.ends_with(format!("blobs/{sha}")));
    let before = std::fs::metadata(&path).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));

    let again = blobs
        .stage(stream::iter([Ok(Bytes::from(content.clone()))]), 1024)
        .await
        .unwrap();
    assert_eq!(blobs.place(&again).await.unwrap(), Placed::Existing);
    blobs.settle(again).await.unwrap();
    let after = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec()),
        "kept, not rewritten"
    );

    let read: Vec<Bytes> = blobs.get(&sha).await.unwrap().try_collect().await.unwrap();
    assert_eq!(read.concat(), content);
    assert_eq!(files_under(dir.path()), vec![format!("blobs/{sha}")]);
}

#[tokio::test]
async fn a_failing_source_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let failing =
        chunks(2 * 1024 * 1024, 65536).chain(stream::iter([Err(std::io::Error::other("cut"))]));
    let err = blobs.stage(failing, u64::MAX).await.unwrap_err();
    assert!(matches!(err, MediaError::Source(_)), "{err}");
    assert_eq!(files_under(dir.path()), Vec::<String>::new());
}

/// `content` followed by an end that sets `digest` to `value`, as a checked body's
/// reader does once its trailer matched.
fn ending_with_digest(
    content: Vec<u8>,
    digest: ferry_media::blob::KnownDigest,
    value: Option<[u8; 32]>,
) -> impl futures_util::Stream<Item = std::io::Result<Bytes>> + Send {
    let end = stream::poll_fn(move |_| {
        if let Some(value) = value {
            let _ = digest.set(value);
        }
        std::task::Poll::Ready(None)
    });
    stream::iter([Ok(Bytes::from(content))]).chain(end)
}

#[tokio::test]
async fn a_hashed_stage_is_named_by_the_digest_its_source_set_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let content = b"hashed by its source".to_vec();
    let sha: [u8; 32] = sha2::Sha256::digest(&content).into();
    let digest = ferry_media::blob::KnownDigest::default();
    let source = ending_with_digest(content.clone(), digest.clone(), Some(sha));
    let staged = blobs.stage_hashed(source, 1024, digest).await.unwrap();
    assert_eq!(staged.sha256, ferry_fs::sha256_hex(&content));
    assert_eq!(staged.size, content.len() as u64);
    assert_eq!(blobs.place(&staged).await.unwrap(), Placed::New);
    blobs.settle(staged).await.unwrap();
    let read: Vec<Bytes> = blobs
        .get(&ferry_fs::sha256_hex(&content))
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(read.concat(), content);
}

#[tokio::test]
async fn a_hashed_stage_whose_source_ends_without_its_digest_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let digest = ferry_media::blob::KnownDigest::default();
    let source = ending_with_digest(vec![1; 4096], digest.clone(), None);
    let err = blobs
        .stage_hashed(source, 1 << 20, digest)
        .await
        .unwrap_err();
    assert!(matches!(err, MediaError::Source(_)), "{err}");
    assert_eq!(files_under(dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_hashed_stage_keeps_the_cap_at_limit_minus_one_limit_and_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let cap = 4096;
    for (size, fits) in [(cap - 1, true), (cap, true), (cap + 1, false)] {
        let digest = ferry_media::blob::KnownDigest::default();
        let source = ending_with_digest(vec![3; size as usize], digest.clone(), Some([9; 32]));
        match blobs.stage_hashed(source, cap, digest).await {
            Ok(staged) => {
                assert!(fits, "{size}");
                assert_eq!(staged.size, size);
                blobs.discard(staged).await.unwrap();
            }
            Err(e) => {
                assert!(!fits, "{size}: {e}");
                assert!(matches!(e, MediaError::TooLarge { max_bytes } if max_bytes == cap));
            }
        }
    }
    assert_eq!(files_under(dir.path()), Vec::<String>::new());
}

#[tokio::test]
async fn a_missing_blob_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::local(dir.path()).unwrap();
    let err = blobs.get(&"0".repeat(64)).await.err().unwrap();
    assert!(matches!(err, MediaError::BlobMissing(_)));
}

#[tokio::test]
async fn the_folder_is_closed_to_others() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    std::fs::create_dir(&media).unwrap();
    std::fs::set_permissions(&media, std::fs::Permissions::from_mode(0o755)).unwrap();
    Blobs::local(&media).unwrap();
    let mode = std::fs::metadata(&media).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}
