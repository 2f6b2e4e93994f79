//! The media store (spec core C-MEDIA): the bytes the gateway fetches from nodes or
//! receives, under ids like `train~k3j9x2m1q8ab.txt`.
//!
//! - [`id`]: ids, issued from a source name and the detected type, parsed strictly.
//! - [`blob`]: content-addressed blobs through `object_store`, written once.
//! - [`record`]: what is known of each id, behind [`MediaRecords`] (the site keeps them
//!   in its metadata database).
//! - [`store`]: [`MediaStore`], blobs and records together.
//! - [`sweep`]: expiry, and removing blobs no record references.
//! - [`trees`]: the folders `dir_fetch` extracts into, which live as long as their record.

pub mod blob;
mod error;
pub mod id;
pub mod record;
mod s3;
pub mod store;
pub mod sweep;
pub mod trees;

pub use blob::Blobs;
pub use error::MediaError;
pub use id::MediaId;
pub use record::{MediaRecord, MediaRecords, MediaSource};
pub use store::MediaStore;
pub use sweep::SweepReport;
pub use trees::LocalCopy;

#[doc(hidden)]
pub mod testing {
    //! For tests of every crate: an empty bucket of its own on the Garage that
    //! `.ci/garage start` runs (named by the `FERRY_TEST_S3_*` and
    //! `FERRY_TEST_GARAGE_CONFIG` variables). A test that needs one and finds no Garage
    //! fails, saying how to start one.

    use ferry_config::{MediaBackend, MediaConfig};

    /// The variable naming the test Garage's configuration file.
    pub const GARAGE_CONFIG_VARIABLE: &str = "FERRY_TEST_GARAGE_CONFIG";

    /// A fresh bucket, readable and writable with the tests' key. Left in place when
    /// dropped: the Garage is a throwaway one.
    pub struct S3Bucket {
        /// The bucket's name.
        pub name: String,
        endpoint: String,
        region: String,
        access_key_id: String,
        secret_access_key: String,
    }

    fn variable(name: &str) -> String {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: these tests need Garage; start one with \
                 eval \"$(.ci/garage start)\" (Garage: cargo install garage --locked --version 2.5.0)"
            )
        })
    }

    impl S3Bucket {
        /// Makes one; panics (failing the test) when no Garage is configured or it
        /// refuses.
        pub fn create() -> S3Bucket {
            let config = variable(GARAGE_CONFIG_VARIABLE);
            let access_key_id = variable("FERRY_TEST_S3_ACCESS_KEY_ID");
            let name = format!("ferry-test-{}", ferry_fs::random_hex::<8>());
            let garage = std::env::var("GARAGE").unwrap_or_else(|_| "garage".to_owned());
            for args in [
                vec!["bucket", "create", &name],
                vec![
                    "bucket",
                    "allow",
                    "--read",
                    "--write",
                    "--owner",
                    &name,
                    "--key",
                    &access_key_id,
                ],
            ] {
                let output = std::process::Command::new(&garage)
                    .arg("-c")
                    .arg(&config)
                    .args(&args)
                    .output()
                    .unwrap_or_else(|e| panic!("running {garage}: {e}"));
                assert!(
                    output.status.success(),
                    "garage {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            S3Bucket {
                name,
                endpoint: variable("FERRY_TEST_S3_ENDPOINT"),
                region: variable("FERRY_TEST_S3_REGION"),
                access_key_id,
                secret_access_key: variable("FERRY_TEST_S3_SECRET_ACCESS_KEY"),
            }
        }

        /// Multipart uploads begun in this bucket and neither completed nor aborted, as
        /// Garage counts them (`garage bucket info`).
        pub fn unfinished_multipart_uploads(&self) -> u64 {
            let config = variable(GARAGE_CONFIG_VARIABLE);
            let garage = std::env::var("GARAGE").unwrap_or_else(|_| "garage".to_owned());
            let output = std::process::Command::new(&garage)
                .arg("-c")
                .arg(&config)
                .args(["bucket", "info", &self.name])
                .output()
                .unwrap_or_else(|e| panic!("running {garage}: {e}"));
            assert!(output.status.success(), "garage bucket info: {output:?}");
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .find_map(|line| {
                    let count = line.strip_prefix("Unfinished uploads:")?.trim();
                    count.split_whitespace().next()?.parse().ok()
                })
                .unwrap_or(0)
        }

        /// `media` pointed at this bucket.
        pub fn configure(&self, media: &mut MediaConfig) {
            media.backend = MediaBackend::S3;
            media.endpoint = Some(self.endpoint.clone());
            media.bucket = Some(self.name.clone());
            media.region = self.region.clone();
            media.access_key_id = Some(self.access_key_id.clone());
            media.secret_access_key = Some(self.secret_access_key.clone());
        }

        /// The environment that points a gateway or a command at this bucket.
        pub fn env(&self) -> Vec<(String, String)> {
            [
                ("FERRY_MEDIA__BACKEND", "s3"),
                ("FERRY_MEDIA__ENDPOINT", &self.endpoint),
                ("FERRY_MEDIA__BUCKET", &self.name),
                ("FERRY_MEDIA__REGION", &self.region),
                ("FERRY_MEDIA__ACCESS_KEY_ID", &self.access_key_id),
                ("FERRY_MEDIA__SECRET_ACCESS_KEY", &self.secret_access_key),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
        }

        /// The tests' secret key, to look for where it must never appear.
        pub fn secret_access_key(&self) -> &str {
            &self.secret_access_key
        }
    }
}
