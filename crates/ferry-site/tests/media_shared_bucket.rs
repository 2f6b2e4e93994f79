//! Two sites that share one S3 bucket (spec scale S-STORE): each keeps its blobs under
//! its own name, so one's sweep never takes the other's, whatever their clocks say. Runs
//! on the Garage `.ci/garage start` runs.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ferry_config::Config;
use ferry_media::MediaSource;
use ferry_media::testing::S3Bucket;
use ferry_site::Site;
use futures_util::TryStreamExt;

fn site_on(bucket: &S3Bucket, dir: &std::path::Path) -> Site {
    let mut config = ferry_site::testing::metadata(dir, Config::default());
    bucket.configure(&mut config.media);
    Site::open(dir, config).unwrap()
}

#[tokio::test]
async fn a_sweep_of_one_site_never_takes_another_sites_blobs_in_a_shared_bucket() {
    let bucket = S3Bucket::create();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (
        site_on(&bucket, dir_a.path()),
        site_on(&bucket, dir_b.path()),
    );
    let source = MediaSource {
        node: None,
        path: "/srv/kept.txt".into(),
        person: None,
    };
    let kept = a
        .media()
        .unwrap()
        .put(&b"site a's bytes"[..], "kept.txt", source)
        .await
        .unwrap();
    // B sweeps as if hours had passed and no blob were young: it sees none of A's.
    let later = SystemTime::now() + Duration::from_secs(7200);
    let b_store = b.media().unwrap().with_grace(Duration::ZERO);
    let report = b_store.sweep(later).await.unwrap();
    assert_eq!(report.blobs_removed, 0, "{report:?}");
    assert!(b_store.blobs().keys().await.unwrap().is_empty());
    let a_store = a.media().unwrap();
    let (_, bytes) = a_store.open(kept.id.as_str()).await.unwrap();
    let bytes: Vec<Bytes> = bytes.try_collect().await.unwrap();
    assert_eq!(bytes.concat(), b"site a's bytes");
    // Each site names its own place in the bucket, and keeps it across opens.
    let location = kept.location.clone().unwrap();
    assert_eq!(
        a.media().unwrap().get(kept.id.as_str()).unwrap().location,
        Some(location.clone())
    );
    assert!(
        location.starts_with(&format!("s3://{}/ferry-", bucket.name)),
        "{location}"
    );
    assert_ne!(a.store_name().unwrap(), b.store_name().unwrap());
}
