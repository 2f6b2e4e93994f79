//! Share links (spec M-DAILY "Share a file"), through the real `ferry serve`: a signed
//! link downloads one file without a token until it expires or is revoked, and every
//! tampered, expired, revoked or swapped link fails without following anything.

mod support;

use std::os::unix::fs::symlink;
use std::time::Duration;

use reqwest::blocking::Response;
use serde_json::{Value, json};
use support::{Server, assert_error, client, create_project, upload};

/// The bounds of a link's life, in seconds (ferry-config's `SHARE_*_EXPIRY_SECS`).
const MIN_SECS: i64 = 60;
const MAX_SECS: i64 = 30 * 24 * 3600;

fn answer(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn share(server: &Server, token: &str, body: Value) -> (u16, Value) {
    answer(
        client()
            .post(server.url("/v1/shares"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap(),
    )
}

fn shared(server: &Server, token: &str, path: &str) -> Value {
    let (status, body) = share(server, token, json!({"path": path, "expiresInSecs": 3600}));
    assert_eq!(status, 201, "{body}");
    body
}

/// The URL of a new link to `path`.
fn link(server: &Server, token: &str, path: &str) -> String {
    shared(server, token, path)["url"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// `GET` of a link, as a stranger: no token.
fn open(server: &Server, url: &str) -> Response {
    client().get(server.url(url)).send().unwrap()
}

fn open_answer(server: &Server, url: &str) -> (u16, Value) {
    answer(open(server, url))
}

fn live(server: &Server, token: &str) -> Vec<Value> {
    let (status, body) = answer(
        client()
            .get(server.url("/v1/shares"))
            .bearer_auth(token)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 200, "{body}");
    body["shares"].as_array().unwrap().clone()
}

#[test]
fn a_link_downloads_the_file_without_a_token() {
    let server = Server::start_with_env(&[("RUST_LOG", "debug")]);
    let token = &server.token;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    assert_eq!(upload(&server, token, "report.pdf", &bytes, None).0, 201);

    let made = shared(&server, token, "public//report.pdf");
    let url = made["url"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap();
    assert_eq!(made["path"], "public/report.pdf");
    assert_eq!(id.len(), 32);
    assert!(url.starts_with(&format!("/s/{id}?sig=")), "{url}");
    assert!(support::is_rfc3339(made["expiresAt"].as_str().unwrap()));

    let response = open(&server, &url);
    assert_eq!(response.status().as_u16(), 200);
    let headers = response.headers().clone();
    assert_eq!(response.bytes().unwrap().as_ref(), bytes.as_slice());
    let header = |name: &str| headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert!(header("content-disposition").starts_with("attachment;"));
    assert!(header("content-disposition").contains("report.pdf"));
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("cache-control"), "private, no-store");
    assert_eq!(header("referrer-policy"), "no-referrer");

    // Ranges, as the download route answers them.
    let response = client()
        .get(server.url(&url))
        .header("Range", "bytes=1000-1009")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 206);
    assert_eq!(response.bytes().unwrap().as_ref(), &bytes[1000..1010]);

    // Listed for its person, with the same link.
    let listed = live(&server, token);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["url"], url.as_str());
    assert_eq!(listed[0]["name"], "report.pdf");
    // Another person sees none of it.
    let bob = server.add_person("bob");
    assert!(live(&server, &bob).is_empty());

    // The signature never reaches the log, even at DEBUG.
    let sig = url.split_once("sig=").unwrap().1;
    let log = server.log();
    assert!(log.contains("/s/{id}"), "the route is logged");
    assert!(!log.contains(sig), "the signature is never logged");
}

#[test]
fn the_life_of_a_link_is_bounded() {
    let server = Server::start();
    let token = &server.token;
    assert_eq!(upload(&server, token, "a.txt", b"a", None).0, 201);
    for secs in [MIN_SECS, MIN_SECS + 1, MAX_SECS - 1, MAX_SECS] {
        let (status, body) = share(
            &server,
            token,
            json!({"path": "public/a.txt", "expiresInSecs": secs}),
        );
        assert_eq!(status, 201, "{secs}: {body}");
    }
    for secs in [-1, 0, MIN_SECS - 1, MAX_SECS + 1, i64::MAX] {
        let (status, body) = share(
            &server,
            token,
            json!({"path": "public/a.txt", "expiresInSecs": secs}),
        );
        assert_error(status, &body, 400, "invalid_request");
    }
    for bad in [
        json!({"path": "public/a.txt", "expiresInSecs": "3600"}),
        json!({"path": "public/a.txt"}),
        json!({"path": "public/a.txt", "expiresInSecs": 3600, "extra": 1}),
    ] {
        let (status, body) = share(&server, token, bad.clone());
        assert_error(status, &body, 400, "bad_json");
    }
}

#[test]
fn only_a_file_that_is_there_can_be_shared() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    std::fs::create_dir_all(public.join("dir")).unwrap();
    std::fs::write(server.home("me").join("secret.txt"), b"s").unwrap();
    std::fs::write(public.join("real.txt"), b"r").unwrap();
    symlink(public.join("real.txt"), public.join("link.txt")).unwrap();
    for (path, status, code) in [
        ("public/dir", 400, "is_directory"),
        ("public", 400, "is_directory"),
        ("public/none.txt", 404, "not_found"),
        ("public/link.txt", 404, "not_found"),
        ("secret.txt", 404, "not_found"),
        ("public/../secret.txt", 400, "path_escapes"),
    ] {
        let (got, body) = share(&server, token, json!({"path": path, "expiresInSecs": 60}));
        assert_error(got, &body, status, code);
    }
    let bob = server.add_person("bob");
    create_project(&server, token, "p1");
    assert_eq!(upload(&server, token, "in-p.txt", b"p", Some("p1")).0, 201);
    let (status, body) = share(
        &server,
        &bob,
        json!({"path": "public/in-p.txt", "project": "p1", "expiresInSecs": 60}),
    );
    assert_error(status, &body, 404, "unknown_project");
    let (status, body) = share(
        &server,
        token,
        json!({"path": "public/in-p.txt", "project": "p1", "expiresInSecs": 60}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["project"], "p1");
    let response = open(&server, body["url"].as_str().unwrap());
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.bytes().unwrap().as_ref(), b"p");
    assert!(live(&server, token).len() == 1);
    let unauthenticated = client()
        .post(server.url("/v1/shares"))
        .json(&json!({"path": "public/real.txt", "expiresInSecs": 60}))
        .send()
        .unwrap();
    assert_eq!(unauthenticated.status().as_u16(), 401);
}

#[test]
fn tampered_and_unknown_links_are_not_found() {
    let server = Server::start();
    let token = &server.token;
    assert_eq!(upload(&server, token, "a.txt", b"alpha", None).0, 201);
    assert_eq!(upload(&server, token, "b.txt", b"beta", None).0, 201);
    let a = shared(&server, token, "public/a.txt");
    let b = shared(&server, token, "public/b.txt");
    let (a_url, b_url) = (a["url"].as_str().unwrap(), b["url"].as_str().unwrap());
    let (a_id, a_sig) = a_url[3..].split_once("?sig=").unwrap();
    let (b_id, b_sig) = b_url[3..].split_once("?sig=").unwrap();
    let mut flipped = a_sig.as_bytes().to_vec();
    flipped[0] = if flipped[0] == b'a' { b'b' } else { b'a' };
    let flipped = String::from_utf8(flipped).unwrap();
    let cases = [
        format!("/s/{a_id}?sig={flipped}"),
        format!("/s/{a_id}?sig={}", a_sig.to_uppercase()),
        format!("/s/{a_id}?sig={}", &a_sig[..63]),
        format!("/s/{a_id}?sig={a_sig}0"),
        format!("/s/{a_id}?sig={b_sig}"),
        format!("/s/{b_id}?sig={a_sig}"),
        format!("/s/{a_id}"),
        format!("/s/{a_id}?sig="),
        format!("/s/{}?sig={a_sig}", a_id.to_uppercase()),
        format!("/s/..%2F..%2Fv1%2Ffiles?sig={a_sig}"),
        format!("/s/{}?sig={a_sig}", "a".repeat(32)),
    ];
    for url in cases {
        let (status, body) = open_answer(&server, &url);
        assert_error(status, &body, 404, "not_found");
        let text = body.to_string();
        assert!(
            !text.contains("a.txt") && !text.contains("public"),
            "{text}"
        );
    }
    // The real links still work.
    assert_eq!(open(&server, a_url).bytes().unwrap().as_ref(), b"alpha");
    assert_eq!(open(&server, b_url).bytes().unwrap().as_ref(), b"beta");
    // A token does not stand in for the signature.
    let response = client()
        .get(server.url(&format!("/s/{a_id}")))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}

#[test]
fn a_revoked_link_stops_at_once_and_only_its_person_may_revoke_it() {
    let server = Server::start();
    let token = &server.token;
    let bob = server.add_person("bob");
    assert_eq!(upload(&server, token, "a.txt", b"alpha", None).0, 201);
    let made = shared(&server, token, "public/a.txt");
    let (url, id) = (made["url"].as_str().unwrap(), made["id"].as_str().unwrap());
    let revoke = |who: &str, id: &str| {
        answer(
            client()
                .delete(server.url(&format!("/v1/shares/{id}")))
                .bearer_auth(who)
                .send()
                .unwrap(),
        )
    };
    let (status, body) = revoke(&bob, id);
    assert_error(status, &body, 404, "not_found");
    assert_eq!(open(&server, url).status().as_u16(), 200);
    for bad in ["..", "%2e%2e%2f", &id.to_uppercase(), &id[..31]] {
        let (status, body) = revoke(token, bad);
        assert!(status == 404 || status == 405, "{bad}: {status} {body}");
    }
    assert_eq!(revoke(token, id).0, 204);
    let (status, body) = open_answer(&server, url);
    assert_error(status, &body, 410, "share_revoked");
    assert!(live(&server, token).is_empty());
    assert!(
        server.home("me").join("public/a.txt").is_file(),
        "the file stays"
    );
}

#[test]
fn a_path_since_replaced_by_a_link_or_a_folder_is_refused() {
    let server = Server::start();
    let token = &server.token;
    let public = server.home("me").join("public");
    let outside = server.data.parent().unwrap().join("outside.txt");
    std::fs::write(&outside, b"not shared").unwrap();
    for name in ["a.txt", "b.txt", "c.txt", "other.txt"] {
        assert_eq!(upload(&server, token, name, name.as_bytes(), None).0, 201);
    }
    std::fs::create_dir_all(public.join("d")).unwrap();
    std::fs::write(public.join("d/x.txt"), b"x").unwrap();
    let a = shared(&server, token, "public/a.txt");
    let b = shared(&server, token, "public/b.txt");
    let c = shared(&server, token, "public/c.txt");
    let x = shared(&server, token, "public/d/x.txt");

    // A link to a file outside, and a link to another file inside public/.
    std::fs::remove_file(public.join("a.txt")).unwrap();
    symlink(&outside, public.join("a.txt")).unwrap();
    std::fs::remove_file(public.join("b.txt")).unwrap();
    symlink(public.join("other.txt"), public.join("b.txt")).unwrap();
    // A folder in the file's place.
    std::fs::remove_file(public.join("c.txt")).unwrap();
    std::fs::create_dir(public.join("c.txt")).unwrap();
    // A folder on the way replaced by a link to a copy of it.
    std::fs::rename(public.join("d"), public.join("d2")).unwrap();
    symlink(public.join("d2"), public.join("d")).unwrap();
    for made in [&a, &b, &c, &x] {
        let (status, body) = open_answer(&server, made["url"].as_str().unwrap());
        assert_error(status, &body, 404, "not_found");
        assert!(!body.to_string().contains("outside"), "{body}");
    }
    // Put back as a file, by a new upload of the same name: another file, which the
    // link was not made for (`a_link_downloads_only_the_file_it_was_made_for`).
    std::fs::remove_file(public.join("b.txt")).unwrap();
    assert_eq!(upload(&server, token, "b.txt", b"b, again", None).0, 201);
    let (status, body) = open_answer(&server, b["url"].as_str().unwrap());
    assert_error(status, &body, 404, "not_found");
}

#[test]
fn an_expired_link_says_so() {
    let server = Server::start();
    let token = &server.token;
    assert_eq!(upload(&server, token, "a.txt", b"alpha", None).0, 201);
    let (status, made) = share(
        &server,
        token,
        json!({"path": "public/a.txt", "expiresInSecs": MIN_SECS}),
    );
    assert_eq!(status, 201, "{made}");
    let url = made["url"].as_str().unwrap();
    assert_eq!(open(&server, url).status().as_u16(), 200);
    std::thread::sleep(Duration::from_secs(MIN_SECS as u64 + 1));
    let (status, body) = open_answer(&server, url);
    assert_error(status, &body, 410, "share_expired");
    assert!(live(&server, token).is_empty());
}

#[test]
fn a_link_downloads_only_the_file_it_was_made_for() {
    let server = Server::start();
    let token = &server.token;
    let file = server.home("me").join("public/rep.txt");
    assert_eq!(
        upload(&server, token, "rep.txt", b"version one", None).0,
        201
    );
    let url = link(&server, token, "public/rep.txt");
    assert_eq!(
        open(&server, &url).bytes().unwrap().as_ref(),
        b"version one"
    );

    // Deleted for good, then another file put at its name, however it comes: the link
    // does not download the newcomer (file systems reuse a freed inode, so the mark
    // holds the moment it last changed as well).
    let (status, _) = answer(
        client()
            .delete(server.url("/v1/files?path=public/rep.txt&forever=true"))
            .bearer_auth(token)
            .send()
            .unwrap(),
    );
    assert_eq!(status, 204);
    let (status, body) = open_answer(&server, &url);
    assert_error(status, &body, 404, "not_found");
    assert_eq!(
        upload(&server, token, "rep.txt", b"PRIVATE new", None).0,
        201
    );
    let (status, body) = open_answer(&server, &url);
    assert_error(status, &body, 404, "not_found");
    std::fs::remove_file(&file).unwrap();
    std::fs::write(&file, b"PRIVATE by hand").unwrap();
    let (status, body) = open_answer(&server, &url);
    assert_error(status, &body, 404, "not_found");

    // A link made for the file now there works, and ends when the file is replaced.
    let url = link(&server, token, "public/rep.txt");
    assert_eq!(
        open(&server, &url).bytes().unwrap().as_ref(),
        b"PRIVATE by hand"
    );
    assert_eq!(upload(&server, token, "rep.txt", b"replaced", None).0, 201);
    let (status, body) = open_answer(&server, &url);
    assert_error(status, &body, 404, "not_found");
}
