//! The first minute of a new user: start, upload, list, download.

mod support;

use support::{Server, client, list_files, upload};

#[test]
fn upload_list_download() {
    let server = Server::start();
    let (status, body) = upload(&server, &server.token, "hello.txt", b"hello", None);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["path"], "public/hello.txt");
    assert_eq!(body["size"], 5);

    let listing = list_files(&server, &server.token, None);
    assert_eq!(listing["entries"][0]["path"], "public/attachments");
    assert_eq!(listing["entries"][1]["path"], "public/hello.txt");

    let text = client()
        .get(server.url("/v1/files/content?path=public/hello.txt"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(text, "hello");
}

/// Each end-to-end file is its own test binary (parallel runs, `--test <file>` to pick
/// one), declared in `crates/ferry-cli/Cargo.toml`; cargo does not find them on its own,
/// so a file left out of the list would never run. This fails until it is declared.
#[test]
fn every_end_to_end_file_is_a_declared_test() {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(manifest_dir.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("autotests = false"),
        "the list is the manifest's"
    );
    // `name = "x"` followed by `path = "../../tests/x.rs"` in each `[[test]]` table.
    let mut declared = Vec::new();
    for table in manifest.split("[[test]]").skip(1) {
        let value = |key: &str| {
            table
                .lines()
                .find_map(|line| line.trim().strip_prefix(key)?.trim().strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_owned())
        };
        let (name, path) = (value("name").unwrap(), value("path").unwrap());
        assert_eq!(
            path,
            format!("../../tests/{name}.rs"),
            "the test is named by its file"
        );
        declared.push(name);
    }
    let mut files: Vec<String> = std::fs::read_dir(manifest_dir.join("../../tests"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    declared.sort();
    assert_eq!(
        files, declared,
        "every tests/*.rs needs a [[test]] table in crates/ferry-cli/Cargo.toml"
    );
}
