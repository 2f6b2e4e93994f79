//! The media store in an S3 bucket (spec scale S-STORE), through the real binary: the
//! settings and their refusals, keys that never show, `ferry media list|show|sweep`
//! against the bucket, and `/readyz` naming the store when it does not answer. The
//! bucket is on the Garage `.ci/garage start` runs.

mod support;

use std::path::Path;

use ferry_media::testing::S3Bucket;
use serde_json::Value;
use support::{Options, Server, client, ferry_command, finish};

const SECRET: &str = "s3cr3t-never-shown-9b1e";
const KEY_ID: &str = "GKkeyidneverprinted";

fn print_config(data: &Path, env: &[(&str, &str)]) -> support::Finished {
    let mut cmd = ferry_command();
    cmd.args(["serve", "--print-config", "--data"]).arg(data);
    cmd.envs(env.iter().copied());
    finish(cmd)
}

#[test]
fn print_config_never_shows_the_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let out = print_config(
        tmp.path(),
        &[
            ("FERRY_MEDIA__BACKEND", "s3"),
            ("FERRY_MEDIA__ENDPOINT", "http://127.0.0.1:3900"),
            ("FERRY_MEDIA__BUCKET", "ferry-media"),
            ("FERRY_MEDIA__REGION", "garage"),
            ("FERRY_MEDIA__ACCESS_KEY_ID", KEY_ID),
            ("FERRY_MEDIA__SECRET_ACCESS_KEY", SECRET),
        ],
    );
    assert!(out.status.success(), "{}", out.both());
    assert!(!out.both().contains(SECRET), "{}", out.stdout);
    assert!(!out.both().contains(KEY_ID), "{}", out.stdout);
    for line in [
        "backend = \"s3\"",
        "bucket = \"ferry-media\"",
        "region = \"garage\"",
        "access_key_id = \"REDACTED\"",
        "secret_access_key = \"REDACTED\"",
    ] {
        assert!(out.stdout.contains(line), "{line}: {}", out.stdout);
    }
}

#[test]
fn an_s3_store_needs_a_bucket_both_keys_and_a_web_endpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let full = [
        ("FERRY_MEDIA__BACKEND", "s3"),
        ("FERRY_MEDIA__BUCKET", "ferry-media"),
        ("FERRY_MEDIA__ACCESS_KEY_ID", KEY_ID),
        ("FERRY_MEDIA__SECRET_ACCESS_KEY", SECRET),
    ];
    assert!(print_config(tmp.path(), &full).status.success());
    for (left_out, named) in [
        ("FERRY_MEDIA__BUCKET", "media.bucket"),
        ("FERRY_MEDIA__ACCESS_KEY_ID", "FERRY_MEDIA__ACCESS_KEY_ID"),
        (
            "FERRY_MEDIA__SECRET_ACCESS_KEY",
            "FERRY_MEDIA__SECRET_ACCESS_KEY",
        ),
    ] {
        let env: Vec<_> = full
            .iter()
            .copied()
            .filter(|(k, _)| *k != left_out)
            .collect();
        let out = print_config(tmp.path(), &env);
        assert!(!out.status.success(), "{left_out}");
        assert!(out.stderr.contains(named), "{left_out}: {}", out.stderr);
        assert!(!out.both().contains(SECRET));
    }
    for (key, value, named) in [
        ("FERRY_MEDIA__ENDPOINT", "ftp://store", "media.endpoint"),
        ("FERRY_MEDIA__BUCKET", "Not_A_Bucket", "media.bucket"),
        ("FERRY_MEDIA__BUCKET", "ab", "media.bucket"),
        ("FERRY_MEDIA__REGION", " ", "media.region"),
    ] {
        let mut env = full.to_vec();
        env.push((key, value));
        let out = print_config(tmp.path(), &env);
        assert!(!out.status.success(), "{key}={value}");
        assert!(out.stderr.contains(named), "{key}={value}: {}", out.stderr);
    }
    // A bucket given to the local store is a forgotten backend, said at once.
    let out = print_config(tmp.path(), &[("FERRY_MEDIA__BUCKET", "ferry-media")]);
    assert!(!out.status.success());
    assert!(out.stderr.contains("media.backend"), "{}", out.stderr);
}

/// Runs `ferry media ARGS…` on `data` with the bucket's environment.
fn media(data: &Path, bucket: &S3Bucket, args: &[&str]) -> (i32, Vec<Value>, String) {
    let mut cmd = ferry_command();
    cmd.arg("media").args(args).arg("--data").arg(data);
    cmd.envs(bucket.env());
    let out = finish(cmd);
    assert!(
        !out.both().contains(bucket.secret_access_key()),
        "{}",
        out.both()
    );
    let lines = out
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    (out.status.code().unwrap(), lines, out.stderr)
}

#[test]
fn put_list_show_and_sweep_against_the_bucket() {
    let bucket = S3Bucket::create();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let init = finish({
        let mut cmd = ferry_command();
        cmd.args(["site", "init", "--mode", "local", "--data"])
            .arg(&data);
        cmd
    });
    assert!(init.status.success(), "{}", init.both());
    // Over one part: a multipart upload, and an office document told from zip by
    // ranged reads of its end.
    let mut docx = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in [
        ("[Content_Types].xml", &b"<Types/>"[..]),
        ("_rels/.rels", b"<Relationships/>"),
        ("word/document.xml", b"<w:document/>"),
    ] {
        docx.start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        std::io::Write::write_all(&mut docx, bytes).unwrap();
    }
    let padding: Vec<u8> = (0..9 * 1024 * 1024u32).map(|i| (i % 241) as u8).collect();
    docx.start_file(
        "word/media/padding.bin",
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored),
    )
    .unwrap();
    std::io::Write::write_all(&mut docx, &padding).unwrap();
    let docx = docx.finish().unwrap().into_inner();
    let source = tmp.path().join("letter.zip");
    std::fs::write(&source, &docx).unwrap();

    let (code, lines, stderr) = media(&data, &bucket, &["put", source.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let record = lines[0].clone();
    let id = record["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("letter~") && id.ends_with(".docx"), "{id}");
    assert_eq!(record["size"], docx.len());
    assert_eq!(record["sha256"], ferry_fs::sha256_hex(&docx));
    assert_eq!(record.get("localPath"), None);
    // Under the site's own name in the bucket, which other sites may share.
    let location = record["location"].as_str().unwrap();
    assert!(
        location.starts_with(&format!("s3://{}/ferry-", bucket.name))
            && location.ends_with(&format!("/blobs/{}", ferry_fs::sha256_hex(&docx))),
        "{location}"
    );

    let (code, shown, _) = media(&data, &bucket, &["show", &id]);
    assert_eq!(code, 0);
    assert_eq!(shown, vec![record.clone()]);
    let (code, listed, _) = media(&data, &bucket, &["list"]);
    assert_eq!(code, 0);
    assert_eq!(listed, vec![record.clone()]);

    // Nothing expired: nothing goes. Once the record has expired, it goes; its blob is
    // younger than the grace period and stays for now (the sweep's blob side on S3 is
    // tested in ferry-site with FERRY_TEST_MEDIA=s3).
    let (code, report, _) = media(&data, &bucket, &["sweep"]);
    assert_eq!(code, 0);
    assert_eq!(report[0]["recordsRemoved"], 0);
    let db = rusqlite::Connection::open(data.join(".ferry").join("site.db")).unwrap();
    db.execute("UPDATE media SET expires = 0 WHERE id = ?1", [&id])
        .unwrap();
    let (code, report, _) = media(&data, &bucket, &["sweep"]);
    assert_eq!(code, 0);
    assert_eq!(report[0]["recordsRemoved"], 1);
    assert_eq!(report[0]["blobsRemoved"], 0);
    let (code, lines, _) = media(&data, &bucket, &["show", &id]);
    assert_eq!(code, 1);
    assert_eq!(lines[0]["error"]["code"], "unknown_media_id");
}

#[test]
fn readyz_names_the_store_when_the_bucket_does_not_answer_and_logs_no_key() {
    let bucket = S3Bucket::create();
    let server = Server::start_with(Options {
        env: bucket.env(),
        ..Options::default()
    });
    let ready = client().get(server.url("/readyz")).send().unwrap();
    assert_eq!(ready.status().as_u16(), 200);

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let mut env = bucket.env();
    for (key, value) in &mut env {
        if key == "FERRY_MEDIA__ENDPOINT" {
            *value = format!("http://{closed}");
        }
    }
    let down = Server::start_with(Options {
        env,
        ..Options::default()
    });
    let answer = client().get(down.url("/readyz")).send().unwrap();
    assert_eq!(answer.status().as_u16(), 503);
    let body: Value = answer.json().unwrap();
    assert_eq!(body["error"]["code"], "not_ready");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("media store"), "{message}");
    assert!(!message.contains(&closed.to_string()), "{message}");

    for gateway in [&server, &down] {
        let log = gateway.log();
        assert!(!log.contains(bucket.secret_access_key()), "{log}");
    }
}
