//! Finding things (M-DAILY "Find things": `GET /v1/files/search`) and whole folders
//! ("Whole folders": `GET /v1/files/archive`), through the real `ferry serve`.

mod support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use reqwest::blocking::Client;
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
