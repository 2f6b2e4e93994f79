//! Finding things (M-DAILY "Find things": `GET /v1/files/search`) and whole folders
//! ("Whole folders": `GET /v1/files/archive`), through the real `ferry serve`.

mod support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use std::io::Read;
use std::process::Command;

use reqwest::blocking::{Client, Response};
use serde_json::Value;
use support::{Options, Server, assert_error, client, create_project, json_answer, write_file};

/// `SEARCH_QUERY_MAX_BYTES`.
const QUERY_MAX_BYTES: usize = 1024;
/// `SEARCH_MAX_RESULTS`.
const MAX_RESULTS: usize = 200;

struct Site {
    server: Server,
    http: Client,
}

impl Site {
    fn start() -> Site {
        Site::start_with(Options::default())
    }

    fn start_with(options: Options) -> Site {
        let site = Site {
            server: Server::start_with(options),
            http: client(),
        };
        std::fs::create_dir_all(site.public()).unwrap();
        site
    }

    fn public(&self) -> PathBuf {
        self.server.home("me").join("public")
    }

    fn search_as(&self, token: &str, params: &[(&str, &str)]) -> (u16, Value) {
        json_answer(
            self.http
                .get(self.server.url("/v1/files/search"))
                .bearer_auth(token)
                .query(params)
                .send()
                .unwrap(),
        )
    }

    fn search(&self, params: &[(&str, &str)]) -> (u16, Value) {
        self.search_as(&self.server.token, params)
    }

    /// The paths a search found, asserting its 200.
    #[track_caller]
    fn found(&self, params: &[(&str, &str)]) -> Vec<String> {
        let (status, body) = self.search(params);
        assert_eq!(status, 200, "{body}");
        paths(&body)
    }

    fn archive_as(&self, token: &str, params: &[(&str, &str)]) -> Response {
        self.http
            .get(self.server.url("/v1/files/archive"))
            .bearer_auth(token)
            .query(params)
            .send()
            .unwrap()
    }

    fn archive(&self, params: &[(&str, &str)]) -> Response {
        self.archive_as(&self.server.token, params)
    }

    /// The zip of `path`, asserting a 200 of type `application/zip`, saved to a file.
    #[track_caller]
    fn zip_of(&self, path: &str) -> PathBuf {
        let mut response = self.archive(&[("path", path)]);
        assert_eq!(response.status().as_u16(), 200, "{path}");
        assert_eq!(response.headers()["content-type"], "application/zip");
        let mut bytes = Vec::new();
        response.read_to_end(&mut bytes).unwrap();
        let out = self.server.data.parent().unwrap().join("download.zip");
        std::fs::write(&out, bytes).unwrap();
        out
    }
}

/// What Python's zipfile (a reader written by others) finds in the zip at `path`: each
/// entry's name, whether it is a folder, its bytes as text; `testzip` must pass.
fn python_reads(path: &Path) -> Value {
    let script = r#"
import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    bad = z.testzip()
    assert bad is None, bad
    out = []
    for info in z.infolist():
        assert info.flag_bits & 0x800 or info.filename.isascii(), info.filename
        data = z.read(info)
        out.append({"name": info.filename, "dir": info.is_dir(), "size": info.file_size,
                    "text": data.decode("utf-8", "replace")})
    print(json.dumps(out))
"#;
    let output = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "python zipfile: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// `unzip -t` from Debian's unzip, when it is installed: another reader's verdict.
fn unzip_tests_ok(path: &Path) {
    let Ok(output) = Command::new("unzip").arg("-t").arg(path).output() else {
        return;
    };
    assert!(
        output.status.success(),
        "unzip -t: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn names(listing: &Value) -> Vec<String> {
    listing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_owned())
        .collect()
}

fn paths(body: &Value) -> Vec<String> {
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {body}"))
        .iter()
        .map(|r| r["path"].as_str().unwrap().to_owned())
        .collect()
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

// ---------------------------------------------------------------------------- search

#[test]
fn names_match_whatever_their_case_and_accents() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("Relatório Final.pdf"), "x");
    write_file(&public.join("docs/RELATORIO-2.txt"), "x");
    std::fs::create_dir_all(public.join("Relatórios Antigos")).unwrap();
    write_file(
        &public.join("docs/other.txt"),
        "relatorio inside, not in the name",
    );
    write_file(&public.join("ﬁnance.md"), "x");

    let want = [
        "public/Relatório Final.pdf",
        "public/Relatórios Antigos",
        "public/docs/RELATORIO-2.txt",
    ];
    assert_eq!(site.found(&[("q", "relatorio")]), want);
    assert_eq!(site.found(&[("q", "RELATÓRIO")]), want);
    assert_eq!(site.found(&[("q", "rElAtÓrIo")]), want);
    // Compatibility forms fold too: the ligature "ﬁ" is "fi".
    assert_eq!(site.found(&[("q", "FINANCE")]), ["public/ﬁnance.md"]);

    let (_, body) = site.search(&[("q", "relatório final")]);
    let hit = &body["results"][0];
    assert_eq!(hit["name"], "Relatório Final.pdf");
    assert_eq!(hit["type"], "file");
    assert_eq!(hit["size"], 1);
    assert!(support::is_rfc3339(hit["mtime"].as_str().unwrap()), "{hit}");
    assert!(hit.get("line").is_none(), "{hit}");
    assert_eq!(body["truncated"], false);
    let (_, body) = site.search(&[("q", "antigos")]);
    assert_eq!(body["results"][0]["type"], "dir");
    assert!(body["results"][0].get("size").is_none());
}

#[test]
fn regex_metacharacters_are_taken_literally() {
    let site = Site::start();
    let public = site.public();
    for name in [
        "a.*b.txt",
        "axxb.txt",
        "(x)[y].md",
        "plus+.txt",
        "star*",
        "back\\slash.txt",
    ] {
        write_file(&public.join(name), "x");
    }
    assert_eq!(site.found(&[("q", ".*")]), ["public/a.*b.txt"]);
    assert_eq!(site.found(&[("q", "a.b")]), Vec::<String>::new());
    assert_eq!(site.found(&[("q", "(x)[")]), ["public/(x)[y].md"]);
    assert_eq!(site.found(&[("q", "+.")]), ["public/plus+.txt"]);
    assert_eq!(site.found(&[("q", "r*")]), ["public/star*"]);
    assert_eq!(site.found(&[("q", "k\\s")]), ["public/back\\slash.txt"]);
    assert_eq!(site.found(&[("q", "^a")]), Vec::<String>::new());
    assert_eq!(site.found(&[("q", "%")]), Vec::<String>::new());
}

#[test]
fn content_is_searched_only_when_asked_and_only_in_text() {
    let site = Site::start();
    let public = site.public();
    write_file(
        &public.join("notes/minutes.md"),
        "# Minutes\n\nThe quarterly Résumé numbers are in.\nResume twice.\n",
    );
    write_file(
        &public.join("ascii.txt"),
        "one\ntwo\nthe RESUME of it\r\nfour\n",
    );
    // Binary (a NUL and a PNG signature) is never read as text.
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR resume ".to_vec();
    png.extend([0u8; 64]);
    write_file(&public.join("picture.png"), &png);
    // Over 1 MiB: matched by name alone.
    let mut big = "resume\n".to_owned();
    big.push_str(&"x".repeat(1024 * 1024));
    write_file(&public.join("big.txt"), big);
    // A long line is cut around the match, on character boundaries.
    let long = format!("{}resume{}\n", "é".repeat(300), "ü".repeat(300));
    write_file(&public.join("long.txt"), &long);

    assert_eq!(site.found(&[("q", "resume")]), Vec::<String>::new());
    let (status, body) = site.search(&[("q", "RÉSUMÉ"), ("content", "true")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        paths(&body),
        [
            "public/ascii.txt",
            "public/long.txt",
            "public/notes/minutes.md"
        ]
    );
    let results = body["results"].as_array().unwrap();
    assert_eq!(results[0]["line"]["number"], 3);
    assert_eq!(results[0]["line"]["text"], "the RESUME of it");
    assert_eq!(results[2]["line"]["number"], 3);
    assert_eq!(
        results[2]["line"]["text"],
        "The quarterly Résumé numbers are in."
    );
    let cut = results[1]["line"]["text"].as_str().unwrap();
    assert!(cut.len() <= 240 + 6, "{cut}");
    assert!(cut.starts_with('…') || cut.contains("resume"), "{cut}");
    // A name match wins: no line, and the file is listed once.
    write_file(&public.join("resume.txt"), "resume");
    let (_, body) = site.search(&[("q", "resume"), ("content", "true")]);
    assert_eq!(paths(&body).len(), 4);
    let by_name = &body["results"][3];
    assert_eq!(by_name["path"], "public/resume.txt");
    assert!(by_name.get("line").is_none());
    // Literal in content too.
    write_file(&public.join("code.txt"), "let x = a.*b;\nlet y = axb;\n");
    let (_, body) = site.search(&[("q", "a.*b"), ("content", "true")]);
    assert_eq!(paths(&body), ["public/code.txt"]);
    assert_eq!(body["results"][0]["line"]["number"], 1);
    // content=false is the default, and anything but a boolean is refused.
    assert_eq!(
        site.found(&[("q", "numbers"), ("content", "false")]),
        Vec::<String>::new()
    );
    let (status, body) = site.search(&[("q", "numbers"), ("content", "yes")]);
    assert_error(status, &body, 400, "bad_query");
}

#[test]
fn links_are_matched_by_name_and_never_followed() {
    let site = Site::start();
    let public = site.public();
    let outside = site.server.data.parent().unwrap().join("outside");
    write_file(&outside.join("secret-report.txt"), "report inside");
    write_file(&public.join("real.txt"), "report inside");
    symlink(&outside, public.join("elsewhere")).unwrap();
    symlink(public.join("real.txt"), public.join("report-link")).unwrap();
    symlink("loop", public.join("loop")).unwrap();
    mkfifo(&public.join("report-fifo"));
    write_file(&public.join(".ferry-tmp-report"), "report inside");

    let (status, body) = site.search(&[("q", "report"), ("content", "true")]);
    assert_eq!(status, 200, "{body}");
    // The link by its own name; the file by its content; nothing through a link, no
    // FIFO (which would hang a reader), no temporary.
    assert_eq!(paths(&body), ["public/real.txt", "public/report-link"]);
    assert_eq!(body["results"][1]["type"], "link");
    assert_eq!(site.found(&[("q", "secret")]), Vec::<String>::new());
    assert_eq!(site.found(&[("q", "loop")]), ["public/loop"]);
}

#[test]
fn query_length_is_bounded() {
    let site = Site::start();
    write_file(&site.public().join("a.txt"), "x");
    for len in [QUERY_MAX_BYTES - 1, QUERY_MAX_BYTES] {
        let (status, body) = site.search(&[("q", &"a".repeat(len))]);
        assert_eq!(status, 200, "{len}: {body}");
    }
    for q in ["a".repeat(QUERY_MAX_BYTES + 1), "a".repeat(10 * 1024)] {
        let (status, body) = site.search(&[("q", &q), ("content", "true")]);
        assert_error(status, &body, 400, "bad_query");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("at most 1024"), "{message}");
    }
    // Multi-byte characters count in bytes.
    let (status, body) = site.search(&[("q", &"é".repeat(QUERY_MAX_BYTES / 2 + 1))]);
    assert_error(status, &body, 400, "bad_query");
    for empty in ["", "   ", "\u{301}"] {
        let (status, body) = site.search(&[("q", empty)]);
        assert_error(status, &body, 400, "bad_query");
        assert!(body["error"]["message"].as_str().unwrap().contains("empty"));
    }
    let (status, body) = site.search(&[]);
    assert_error(status, &body, 400, "bad_query");
    let (status, body) = site.search(&[("q", "a"), ("depth", "3")]);
    assert_error(status, &body, 400, "bad_query");
}

#[test]
fn results_stop_at_their_limit_and_say_so() {
    let site = Site::start();
    let public = site.public();
    for i in 0..MAX_RESULTS {
        write_file(&public.join(format!("d{}/hit-{i:03}.txt", i % 7)), "x");
    }
    let (_, body) = site.search(&[("q", "hit-")]);
    assert_eq!(paths(&body).len(), MAX_RESULTS);
    assert_eq!(body["truncated"], false);
    let mut sorted = paths(&body);
    sorted.sort();
    assert_eq!(sorted, paths(&body), "results come by path");

    write_file(&public.join("hit-extra.txt"), "x");
    let (_, body) = site.search(&[("q", "hit-")]);
    assert_eq!(paths(&body).len(), MAX_RESULTS);
    assert_eq!(body["truncated"], true);
}

#[test]
fn each_person_and_project_searches_their_own() {
    let site = Site::start();
    write_file(&site.public().join("mine-plan.txt"), "plan");
    create_project(&site.server, &site.server.token, "q2");
    write_file(
        &site
            .server
            .workspace("me", Some("q2"))
            .join("public/q2-plan.txt"),
        "plan",
    );
    assert_eq!(site.found(&[("q", "plan")]), ["public/mine-plan.txt"]);
    assert_eq!(
        site.found(&[("q", "plan"), ("project", "q2")]),
        ["public/q2-plan.txt"]
    );
    let (status, body) = site.search(&[("q", "plan"), ("project", "nope")]);
    assert_error(status, &body, 404, "unknown_project");

    let bob = site.server.add_person("bob");
    let (status, body) = site.search_as(&bob, &[("q", "plan"), ("content", "true")]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(paths(&body), Vec::<String>::new());
    let (status, body) = site.search_as(&bob, &[("q", "plan"), ("project", "q2")]);
    assert_error(status, &body, 404, "unknown_project");
    let (status, body) = site.search_as("not-a-token", &[("q", "plan")]);
    assert_error(status, &body, 401, "unauthorized");
}

// --------------------------------------------------------------------------- archive

#[test]
fn a_folder_comes_back_whole_through_another_reader() {
    let site = Site::start();
    let public = site.public();
    let reports = public.join("Relatórios 2026");
    write_file(&reports.join("résumé ü.txt"), "héllo wörld");
    write_file(&reports.join("sub/deeper/notes.md"), "# notes\n");
    write_file(&reports.join("sub/empty.txt"), "");
    std::fs::create_dir_all(reports.join("vazio")).unwrap();
    let outside = site.server.data.parent().unwrap().join("outside");
    write_file(&outside.join("secret.txt"), "secret");
    symlink(&outside, reports.join("link-to-outside")).unwrap();
    symlink(outside.join("secret.txt"), reports.join("secret-link.txt")).unwrap();
    symlink(".", reports.join("loop")).unwrap();
    symlink("self", reports.join("self")).unwrap();
    mkfifo(&reports.join("fifo"));
    write_file(&reports.join(".ferry-tmp-half"), "half");
    // Fine names here, but a separator to many unzippers: `..\..\evil.txt` would be
    // unpacked two folders above the target (zip-slip).
    write_file(&reports.join("..\\..\\evil.txt"), "evil");
    std::fs::create_dir_all(reports.join("C:\\Windows")).unwrap();

    let response = site.archive(&[("path", "public/Relatórios 2026")]);
    assert_eq!(response.status().as_u16(), 200);
    let disposition = response.headers()["content-disposition"].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment;")
            && disposition.contains("filename*=UTF-8''Relat%C3%B3rios%202026.zip"),
        "{disposition}"
    );
    drop(response);
    let zip = site.zip_of("public/Relatórios 2026");
    unzip_tests_ok(&zip);
    let listing = python_reads(&zip);
    assert_eq!(
        names(&listing),
        [
            "Relatórios 2026/",
            "Relatórios 2026/résumé ü.txt",
            "Relatórios 2026/sub/",
            "Relatórios 2026/sub/deeper/",
            "Relatórios 2026/sub/deeper/notes.md",
            "Relatórios 2026/sub/empty.txt",
            "Relatórios 2026/vazio/",
        ]
    );
    let entries = listing.as_array().unwrap();
    assert_eq!(entries[1]["text"], "héllo wörld");
    assert_eq!(entries[4]["text"], "# notes\n");
    assert_eq!(entries[5]["size"], 0);
    assert_eq!(entries[6]["dir"], true);
}

#[test]
fn the_root_and_the_attachments_may_be_zipped_and_escapes_are_not_found() {
    let site = Site::start();
    let public = site.public();
    write_file(&public.join("a.txt"), "a");
    write_file(&public.join("attachments/from-agent.txt"), "delivered");
    let outside = site.server.data.parent().unwrap().join("outside");
    write_file(&outside.join("secret.txt"), "secret");
    symlink(&outside, public.join("linked")).unwrap();

    let listing = python_reads(&site.zip_of("public"));
    assert_eq!(
        names(&listing),
        [
            "public/",
            "public/a.txt",
            "public/attachments/",
            "public/attachments/from-agent.txt",
        ]
    );
    let listing = python_reads(&site.zip_of("public/attachments"));
    assert_eq!(
        names(&listing),
        ["attachments/", "attachments/from-agent.txt"]
    );

    for escape in [
        "public/linked",
        "public/linked/",
        "public/../outside",
        "public/attachments/../../outside",
        "../outside",
        "/etc",
        "home/me/public",
        "public/missing",
    ] {
        let response = site.archive(&[("path", escape)]);
        let (status, body) = json_answer(response);
        assert_eq!(status, 404, "{escape:?}: {body}");
    }
    let (status, body) = json_answer(site.archive(&[("path", "")]));
    assert_error(status, &body, 400, "bad_path");
    let (status, body) = json_answer(site.archive(&[("path", "public/a.txt")]));
    assert_error(status, &body, 400, "not_a_directory");
    let (status, body) = json_answer(site.archive(&[("paths", "public")]));
    assert_error(status, &body, 400, "bad_query");
    // Another person zips their own public/, never mine.
    let bob = site.server.add_person("bob");
    let mut response = site.archive_as(&bob, &[("path", "public")]);
    assert_eq!(response.status().as_u16(), 200);
    let mut bytes = Vec::new();
    response.read_to_end(&mut bytes).unwrap();
    let theirs = site.server.data.parent().unwrap().join("bob.zip");
    std::fs::write(&theirs, bytes).unwrap();
    assert_eq!(
        names(&python_reads(&theirs)),
        ["public/", "public/attachments/"]
    );
    let (status, body) =
        json_answer(site.archive_as(&bob, &[("path", "public"), ("project", "q2")]));
    assert_error(status, &body, 404, "unknown_project");
}

#[test]
fn the_byte_cap_is_tested_at_its_limit() {
    let cap = 1000u64;
    let site = Site::start_with(Options {
        env: vec![("FERRY_FILES__ARCHIVE_MAX_BYTES".to_owned(), cap.to_string())],
        ..Options::default()
    });
    let public = site.public();
    write_file(&public.join("f/a.bin"), vec![1u8; 600]);
    for (second, ok) in [
        (cap - 600 - 1, true),
        (cap - 600, true),
        (cap - 600 + 1, false),
    ] {
        write_file(&public.join("f/b.bin"), vec![2u8; second as usize]);
        let response = site.archive(&[("path", "public/f")]);
        if ok {
            assert_eq!(response.status().as_u16(), 200, "{second}");
            let zip = site.zip_of("public/f");
            assert_eq!(names(&python_reads(&zip)).len(), 3);
        } else {
            let (status, body) = json_answer(response);
            assert_error(status, &body, 413, "too_large");
            let message = body["error"]["message"].as_str().unwrap();
            assert!(message.contains("1000 bytes"), "{message}");
        }
    }
}

#[test]
fn a_file_that_grows_past_the_cap_breaks_the_stream() {
    let cap = 96u64 * 1024 * 1024;
    let site = Site::start_with(Options {
        env: vec![("FERRY_FILES__ARCHIVE_MAX_BYTES".to_owned(), cap.to_string())],
        ..Options::default()
    });
    let folder = site.public().join("growing");
    std::fs::create_dir_all(&folder).unwrap();
    // Sparse: no disk is spent. The first file keeps the writer busy (and blocked on
    // the unread body) while the second grows past the cap.
    let first = std::fs::File::create(folder.join("a-first.bin")).unwrap();
    first.set_len(64 * 1024 * 1024).unwrap();
    let second = std::fs::File::create(folder.join("b-second.bin")).unwrap();
    second.set_len(1024).unwrap();

    let mut response = site.archive(&[("path", "public/growing")]);
    assert_eq!(response.status().as_u16(), 200);
    let mut head = vec![0u8; 64 * 1024];
    response.read_exact(&mut head).unwrap();
    assert_eq!(&head[..4], b"PK\x03\x04");
    second.set_len(cap).unwrap();
    let mut rest = Vec::new();
    let read = response.read_to_end(&mut rest);
    assert!(
        read.is_err(),
        "the body ended cleanly after {} bytes: a cut zip would pass for whole",
        rest.len() + head.len()
    );
    assert!(site.server.log().contains("folder download aborted"));
}

#[test]
fn a_fifo_in_the_folder_does_not_hang_the_zip() {
    let site = Site::start();
    let folder = site.public().join("pipes");
    write_file(&folder.join("real.txt"), "real");
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    mkfifo(&folder.join("a-fifo"));
    mkfifo(&folder.join("sub/z-fifo"));
    let started = std::time::Instant::now();
    let listing = python_reads(&site.zip_of("public/pipes"));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(names(&listing), ["pipes/", "pipes/real.txt", "pipes/sub/"]);
}

/// A 5 GiB sparse file: zip64 fields, read back by Python's zipfile, while the
/// gateway's memory stays flat. The download is saved sparse (runs of zeros skipped),
/// so the test spends no disk on it.
#[test]
fn a_five_gib_file_streams_as_zip64_with_flat_memory() {
    let site = Site::start_with(Options {
        env: vec![(
            "FERRY_FILES__ARCHIVE_MAX_BYTES".to_owned(),
            (6u64 << 30).to_string(),
        )],
        ..Options::default()
    });
    let folder = site.public().join("huge");
    std::fs::create_dir_all(&folder).unwrap();
    let big = std::fs::File::create(folder.join("sparse.bin")).unwrap();
    big.set_len(5 << 30).unwrap();
    write_file(&folder.join("after.txt"), "after the big one");
    let url = format!("{}?path=public/huge", site.server.url("/v1/files/archive"));
    let saved = site.server.data.parent().unwrap().join("huge.zip");
    let script = r#"
import json, sys, urllib.request, zipfile, zlib
url, token, out = sys.argv[1:4]
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
zero = bytes(1 << 20)
total = 0
with urllib.request.urlopen(req) as r, open(out, "wb") as f:
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        total += len(chunk)
        if chunk == zero[:len(chunk)]:
            f.seek(len(chunk), 1)
        else:
            f.write(chunk)
    f.truncate()
with zipfile.ZipFile(out) as z:
    result = []
    for info in z.infolist():
        crc = 0
        with z.open(info) as member:
            while True:
                block = member.read(1 << 22)
                if not block:
                    break
                crc = zlib.crc32(block, crc)
        assert crc == info.CRC, info.filename
        result.append({"name": info.filename, "size": info.file_size})
print(json.dumps({"total": total, "entries": result}))
"#;
    let output = Command::new("python3")
        .args(["-c", script, &url, &site.server.token])
        .arg(&saved)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let got: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        got["entries"],
        serde_json::json!([
            {"name": "huge/", "size": 0},
            {"name": "huge/after.txt", "size": 17},
            {"name": "huge/sparse.bin", "size": 5u64 << 30},
        ])
    );
    assert!(got["total"].as_u64().unwrap() > 5 << 30);
    // Peak resident memory of the gateway: far below the file's size.
    let status = std::fs::read_to_string(format!("/proc/{}/status", site.server.pid())).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(
        peak_kib < 256 * 1024,
        "the gateway peaked at {peak_kib} KiB"
    );
}

/// The zip writers running in the gateway (their threads are named `ferry-zip`).
fn zip_writers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "ferry-zip")
        .count()
}

#[test]
fn a_client_that_goes_away_ends_the_writer() {
    let site = Site::start();
    let folder = site.public().join("big");
    std::fs::create_dir_all(&folder).unwrap();
    let file = std::fs::File::create(folder.join("sparse.bin")).unwrap();
    file.set_len(1 << 30).unwrap();
    let mut response = site.archive(&[("path", "public/big")]);
    let mut head = vec![0u8; 64 * 1024];
    response.read_exact(&mut head).unwrap();
    assert_eq!(zip_writers(site.server.pid()), 1);
    drop(response);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while zip_writers(site.server.pid()) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer outlived its reader"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(site.found(&[("q", "sparse")]), ["public/big/sparse.bin"]);
}
