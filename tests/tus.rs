//! `/v1/uploads` end to end (spec members M-DAILY: resumable uploads by tus 1.0, core,
//! creation, termination, checksum): a real `ferry serve`, real sockets, and what lands
//! on disk. Each refusal gets the tus-specified status, and nothing appears in `public/`
//! before the last byte.

mod support;

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::blocking::Response;
use serde_json::Value;
use sha2::{Digest, Sha256};
use support::{Server, client, error_code, read_response, sha256_hex, status_of, temporaries};

/// The small resumable cap most tests configure.
const CAP: u64 = 64 * 1024;

fn start() -> Server {
    Server::start_with_env(&[("FERRY_MEDIA__MAX_RESUMABLE_BYTES", &CAP.to_string())])
}

fn b64(text: &[u8]) -> String {
    data_encoding::BASE64.encode(text)
}

fn metadata(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k} {}", b64(v.as_bytes())))
        .collect::<Vec<_>>()
        .join(",")
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|v| v.to_str().unwrap().to_owned())
}

/// `POST /v1/uploads` declaring `length` bytes with `meta`; the answer.
fn create_as(server: &Server, token: &str, length: u64, meta: &[(&str, &str)]) -> Response {
    client()
        .post(server.url("/v1/uploads"))
        .bearer_auth(token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Length", length.to_string())
        .header("Upload-Metadata", metadata(meta))
        .send()
        .unwrap()
}

/// Creates an upload of `length` bytes named `name`; its URL path.
fn create(server: &Server, length: u64, name: &str) -> String {
    let response = create_as(server, &server.token, length, &[("filename", name)]);
    assert_eq!(response.status().as_u16(), 201, "{:?}", response.text());
    header(&response, "location").expect("a Location")
}

fn patch_as(
    server: &Server,
    token: &str,
    at: &str,
    offset: u64,
    bytes: &[u8],
    checksum: Option<&str>,
) -> Response {
    let mut request = client()
        .patch(server.url(at))
        .bearer_auth(token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Offset", offset.to_string())
        .header("Content-Type", "application/offset+octet-stream")
        .body(bytes.to_vec());
    if let Some(sum) = checksum {
        request = request.header("Upload-Checksum", sum);
    }
    request.send().unwrap()
}

fn patch(server: &Server, at: &str, offset: u64, bytes: &[u8]) -> Response {
    patch_as(server, &server.token, at, offset, bytes, None)
}

fn head_as(server: &Server, token: &str, at: &str) -> Response {
    client()
        .head(server.url(at))
        .bearer_auth(token)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap()
}

/// The offset `HEAD` reports.
fn offset_of(server: &Server, at: &str) -> u64 {
    let response = head_as(server, &server.token, at);
    assert_eq!(response.status().as_u16(), 200);
    header(&response, "upload-offset").unwrap().parse().unwrap()
}

fn status_code(response: Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().unwrap_or(Value::Null);
    (status, error_code(&body).to_owned())
}

fn sha256_b64(bytes: &[u8]) -> String {
    format!("sha256 {}", b64(&Sha256::digest(bytes)))
}

fn public_dir(server: &Server) -> PathBuf {
    server.home("me").join("public")
}

/// The names in `public/` (temporaries included), sorted.
fn public_names(server: &Server) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(public_dir(server))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `public/` holds nothing but `attachments/` and the staged temporaries.
#[track_caller]
fn assert_nothing_placed(server: &Server) {
    let placed: Vec<String> = public_names(server)
        .into_iter()
        .filter(|n| n != "attachments" && !n.starts_with(".ferry-tmp-"))
        .collect();
    assert!(placed.is_empty(), "placed before completion: {placed:?}");
}

fn bytes_of(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

// ---------------------------------------------------------------------------------------

#[test]
fn discovery_and_versions_follow_tus() {
    let server = start();
    let response = client()
        .request(reqwest::Method::OPTIONS, server.url("/v1/uploads"))
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(header(&response, "tus-version").unwrap(), "1.0.0");
    assert_eq!(header(&response, "tus-resumable").unwrap(), "1.0.0");
    assert_eq!(header(&response, "tus-max-size").unwrap(), CAP.to_string());
    assert_eq!(
        header(&response, "tus-checksum-algorithm").unwrap(),
        "sha256"
    );
    let extensions = header(&response, "tus-extension").unwrap();
    for ext in ["creation", "termination", "checksum"] {
        assert!(extensions.split(',').any(|e| e == ext), "{extensions}");
    }

    // A wrong or missing Tus-Resumable: 412 with the version spoken, on every method.
    let at = create(&server, 10, "v.txt");
    for version in [Some("0.2.2"), Some("1.0"), None] {
        let mut requests = vec![
            client()
                .post(server.url("/v1/uploads"))
                .header("Upload-Length", "5")
                .header("Upload-Metadata", metadata(&[("filename", "a.txt")])),
            client()
                .patch(server.url(&at))
                .header("Upload-Offset", "0")
                .header("Content-Type", "application/offset+octet-stream")
                .body("hello"),
            client().head(server.url(&at)),
            client().delete(server.url(&at)),
        ];
        for request in requests.drain(..) {
            let mut request = request.bearer_auth(&server.token);
            if let Some(v) = version {
                request = request.header("Tus-Resumable", v);
            }
            let response = request.send().unwrap();
            assert_eq!(response.status().as_u16(), 412, "{version:?}");
            assert_eq!(header(&response, "tus-version").unwrap(), "1.0.0");
            assert_eq!(header(&response, "tus-resumable").unwrap(), "1.0.0");
        }
    }
    assert_eq!(offset_of(&server, &at), 0, "nothing was written");

    // Every answer carries Tus-Resumable, a refusal of the token included.
    let response = client()
        .head(server.url(&at))
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    assert_eq!(header(&response, "tus-resumable").unwrap(), "1.0.0");
}

#[test]
fn parts_with_checksums_make_one_file_only_at_the_last_byte() {
    let server = start();
    let data = bytes_of(50_000, 7);
    let at = create(&server, data.len() as u64, "report.pdf");
    let head = head_as(&server, &server.token, &at);
    assert_eq!(header(&head, "cache-control").unwrap(), "no-store");
    assert_eq!(header(&head, "upload-length").unwrap(), "50000");
    let mut offset = 0usize;
    for part in data.chunks(16_384) {
        assert_nothing_placed(&server);
        let response = patch_as(
            &server,
            &server.token,
            &at,
            offset as u64,
            part,
            Some(&sha256_b64(part)),
        );
        assert_eq!(response.status().as_u16(), 204);
        offset += part.len();
        assert_eq!(
            header(&response, "upload-offset").unwrap(),
            offset.to_string()
        );
        if offset < data.len() {
            assert!(header(&response, "upload-expires").is_some());
            assert!(header(&response, "ferry-path").is_none());
        } else {
            assert_eq!(
                header(&response, "ferry-path").unwrap(),
                "public/report.pdf"
            );
            assert_eq!(header(&response, "ferry-size").unwrap(), "50000");
            assert_eq!(
                header(&response, "ferry-sha256").unwrap(),
                sha256_hex(&data)
            );
        }
    }
    assert_eq!(
        std::fs::read(public_dir(&server).join("report.pdf")).unwrap(),
        data
    );
    assert!(temporaries(&server.data).is_empty());
    // HEAD and GET tell the completed file.
    let head = head_as(&server, &server.token, &at);
    assert_eq!(header(&head, "upload-offset").unwrap(), "50000");
    assert_eq!(header(&head, "ferry-sha256").unwrap(), sha256_hex(&data));
    let status: Value = client()
        .get(server.url(&at))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(status["complete"], true);
    assert_eq!(status["file"]["path"], "public/report.pdf");
    assert_eq!(status["file"]["sha256"], sha256_hex(&data));
    // A PATCH once complete: at the end it changes nothing, elsewhere it is a mismatch.
    assert_eq!(patch(&server, &at, 50_000, b"").status().as_u16(), 204);
    assert_eq!(
        status_code(patch(&server, &at, 10, b"x")),
        (409, "offset_mismatch".into())
    );
}

#[test]
fn parts_out_of_order_and_offset_mismatches_are_409() {
    let server = start();
    let data = bytes_of(3000, 1);
    let at = create(&server, 3000, "notes.txt");
    // The second part first.
    assert_eq!(
        status_code(patch(&server, &at, 1000, &data[1000..2000])),
        (409, "offset_mismatch".into())
    );
    assert_eq!(offset_of(&server, &at), 0);
    assert_eq!(patch(&server, &at, 0, &data[..1000]).status().as_u16(), 204);
    // The same part again, and a part from before the offset.
    assert_eq!(
        status_code(patch(&server, &at, 0, &data[..1000])),
        (409, "offset_mismatch".into())
    );
    assert_eq!(
        status_code(patch(&server, &at, 500, &data[500..1500])),
        (409, "offset_mismatch".into())
    );
    assert_eq!(offset_of(&server, &at), 1000);
    assert_nothing_placed(&server);
    assert_eq!(
        patch(&server, &at, 1000, &data[1000..]).status().as_u16(),
        204
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("notes.txt")).unwrap(),
        data
    );
}

#[test]
fn a_checksum_mismatch_is_460_and_the_part_is_dropped() {
    let server = start();
    let data = bytes_of(2000, 3);
    let at = create(&server, 2000, "data.csv");
    assert_eq!(patch(&server, &at, 0, &data[..1000]).status().as_u16(), 204);
    let wrong = sha256_b64(b"something else");
    let response = patch_as(
        &server,
        &server.token,
        &at,
        1000,
        &data[1000..],
        Some(&wrong),
    );
    assert_eq!(status_code(response), (460, "checksum_mismatch".into()));
    assert_eq!(offset_of(&server, &at), 1000, "the part was dropped");
    // An algorithm not offered, and a digest that is not one: 400.
    let response = patch_as(
        &server,
        &server.token,
        &at,
        1000,
        &data[1000..],
        Some("md5 XUFAKrxLKna5cZ2REBfFkg=="),
    );
    assert_eq!(status_code(response), (400, "checksum_algorithm".into()));
    let response = patch_as(
        &server,
        &server.token,
        &at,
        1000,
        &data[1000..],
        Some("sha256 !!"),
    );
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(offset_of(&server, &at), 1000);
    assert_nothing_placed(&server);
    let right = sha256_b64(&data[1000..]);
    let response = patch_as(
        &server,
        &server.token,
        &at,
        1000,
        &data[1000..],
        Some(&right),
    );
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(
        header(&response, "ferry-sha256").unwrap(),
        sha256_hex(&data),
        "the digest is of the bytes kept, the dropped part not in it"
    );
}

#[test]
fn bytes_past_the_declared_length_are_413_and_dropped() {
    let server = start();
    let at = create(&server, 100, "short.txt");
    assert_eq!(patch(&server, &at, 0, &[b'a'; 60]).status().as_u16(), 204);
    // Declared in Content-Length: refused before the body is read.
    assert_eq!(
        status_code(patch(&server, &at, 60, &[b'b'; 41])),
        (413, "too_large".into())
    );
    assert_eq!(offset_of(&server, &at), 60);
    // Not declared (chunked): cut off while streaming, and the part dropped.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> = vec![Ok(vec![b'c'; 30]), Ok(vec![b'c'; 30])];
    let response = client()
        .patch(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Offset", "60")
        .header("Content-Type", "application/offset+octet-stream")
        .body(reqwest::blocking::Body::new(ChunkedReader::new(chunks)))
        .send()
        .unwrap();
    assert_eq!(status_code(response), (413, "too_large".into()));
    assert_eq!(offset_of(&server, &at), 60);
    assert_nothing_placed(&server);
    assert_eq!(patch(&server, &at, 60, &[b'd'; 40]).status().as_u16(), 204);
    let placed = std::fs::read(public_dir(&server).join("short.txt")).unwrap();
    assert_eq!(placed.len(), 100);
    assert_eq!(&placed[60..], &[b'd'; 40]);
}

/// A body reqwest cannot size, so it goes chunked.
struct ChunkedReader {
    chunks: std::vec::IntoIter<Result<Vec<u8>, std::io::Error>>,
    current: std::io::Cursor<Vec<u8>>,
}

impl ChunkedReader {
    fn new(chunks: Vec<Result<Vec<u8>, std::io::Error>>) -> ChunkedReader {
        ChunkedReader {
            chunks: chunks.into_iter(),
            current: std::io::Cursor::new(Vec::new()),
        }
    }
}

impl std::io::Read for ChunkedReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.current.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            match self.chunks.next() {
                Some(chunk) => self.current = std::io::Cursor::new(chunk?),
                None => return Ok(0),
            }
        }
    }
}

#[test]
fn the_cap_is_max_resumable_bytes_at_minus_one_at_and_plus_one() {
    let server = start();
    for (length, want) in [(CAP - 1, 201), (CAP, 201), (CAP + 1, 413)] {
        let response = create_as(&server, &server.token, length, &[("filename", "big.txt")]);
        assert_eq!(response.status().as_u16(), want, "{length}");
        if want == 413 {
            assert_eq!(status_code(response).1, "too_large");
        }
    }
    // The whole CAP arrives and is placed.
    let at = create(&server, CAP, "full.txt");
    let data = bytes_of(CAP as usize, 9);
    assert_eq!(patch(&server, &at, 0, &data).status().as_u16(), 204);
    assert_eq!(
        std::fs::metadata(public_dir(&server).join("full.txt"))
            .unwrap()
            .len(),
        CAP
    );
}

#[test]
fn creation_refuses_bad_declarations() {
    let server = start();
    let token = server.token.clone();
    let post = |headers: &[(&str, &str)]| {
        let mut request = client()
            .post(server.url("/v1/uploads"))
            .bearer_auth(&token)
            .header("Tus-Resumable", "1.0.0");
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        status_code(request.send().unwrap())
    };
    let name = metadata(&[("filename", "a.txt")]);
    assert_eq!(post(&[("Upload-Metadata", &name)]).0, 400, "no length");
    assert_eq!(
        post(&[("Upload-Length", "-1"), ("Upload-Metadata", &name)]).0,
        400
    );
    assert_eq!(
        post(&[("Upload-Defer-Length", "1"), ("Upload-Metadata", &name)]).0,
        400
    );
    assert_eq!(post(&[("Upload-Length", "5")]).0, 400, "no filename");
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", "filename %%%")]).0,
        400
    );
    let bad_ext = metadata(&[("filename", "run.exe")]);
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", &bad_ext)]),
        (400, "extension_not_allowed".into())
    );
    let unknown = metadata(&[("filename", "a.txt"), ("project", "nope")]);
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", &unknown)]),
        (404, "unknown_project".into())
    );
    let attachments = metadata(&[("filename", "a.txt"), ("folder", "public/attachments")]);
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", &attachments)]),
        (403, "managed_by_system".into())
    );
    let escape = metadata(&[("filename", "a.txt"), ("folder", "public/../..")]);
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", &escape)]).0,
        400
    );
    let missing = metadata(&[("filename", "a.txt"), ("folder", "public/none")]);
    assert_eq!(
        post(&[("Upload-Length", "5"), ("Upload-Metadata", &missing)]),
        (404, "folder_not_found".into())
    );
    assert!(temporaries(&server.data).is_empty());
}

#[test]
fn folders_overwrite_and_projects_follow_the_upload_rules() {
    let server = start();
    // The first access makes public/.
    support::list_files(&server, &server.token, None);
    std::fs::create_dir(public_dir(&server).join("reports")).unwrap();
    std::fs::write(public_dir(&server).join("kept.txt"), b"old").unwrap();
    // Into a folder.
    let response = create_as(
        &server,
        &server.token,
        3,
        &[("filename", "q.txt"), ("folder", "public/reports")],
    );
    let at = header(&response, "location").unwrap();
    let response = patch(&server, &at, 0, b"abc");
    assert_eq!(
        header(&response, "ferry-path").unwrap(),
        "public/reports/q.txt"
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("reports/q.txt")).unwrap(),
        b"abc"
    );
    // overwrite=false over an existing file: 409 exists at creation.
    let response = create_as(
        &server,
        &server.token,
        3,
        &[("filename", "kept.txt"), ("overwrite", "false")],
    );
    assert_eq!(response.status().as_u16(), 409);
    let body: Value = response.json().unwrap();
    assert_eq!(error_code(&body), "exists");
    // The kept file is named, as POST /v1/media names it, for the page to ask.
    assert_eq!(body["error"]["existing"]["path"], "public/kept.txt");
    assert_eq!(body["error"]["existing"]["size"], 3);
    // ... and when the file appears during the upload, at the last byte; the file stays.
    let response = create_as(
        &server,
        &server.token,
        3,
        &[("filename", "late.txt"), ("overwrite", "false")],
    );
    let at = header(&response, "location").unwrap();
    std::fs::write(public_dir(&server).join("late.txt"), b"first").unwrap();
    assert_eq!(
        status_code(patch(&server, &at, 0, b"new")),
        (409, "exists".into())
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("late.txt")).unwrap(),
        b"first"
    );
    assert!(temporaries(&server.data).is_empty());
    // Replacing by default, with the renamed name told.
    let response = create_as(&server, &server.token, 3, &[("filename", "kept .txt")]);
    let at = header(&response, "location").unwrap();
    let response = patch(&server, &at, 0, b"new");
    assert_eq!(
        header(&response, "ferry-renamed-from").unwrap(),
        "kept%20.txt"
    );
    // An empty file is placed at creation.
    let response = create_as(&server, &server.token, 0, &[("filename", "empty.txt")]);
    assert_eq!(response.status().as_u16(), 201);
    assert_eq!(header(&response, "ferry-path").unwrap(), "public/empty.txt");
    assert_eq!(
        std::fs::metadata(public_dir(&server).join("empty.txt"))
            .unwrap()
            .len(),
        0
    );
    // Into a project.
    support::create_project(&server, &server.token, "q2");
    let response = create_as(
        &server,
        &server.token,
        2,
        &[("filename", "p.txt"), ("project", "q2")],
    );
    let at = header(&response, "location").unwrap();
    assert_eq!(patch(&server, &at, 0, b"hi").status().as_u16(), 204);
    let placed = server.workspace("me", Some("q2")).join("public/p.txt");
    assert_eq!(std::fs::read(placed).unwrap(), b"hi");
}

#[test]
fn another_persons_upload_is_unknown() {
    let server = start();
    let other = server.add_person("bea");
    let at = create(&server, 10, "mine.txt");
    assert_eq!(patch(&server, &at, 0, b"hello").status().as_u16(), 204);
    assert_eq!(head_as(&server, &other, &at).status().as_u16(), 404);
    assert_eq!(
        status_code(patch_as(&server, &other, &at, 5, b"EVIL!", None)),
        (404, "unknown_upload".into())
    );
    let response = client()
        .delete(server.url(&at))
        .bearer_auth(&other)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    let response = client()
        .get(server.url(&at))
        .bearer_auth(&other)
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
    // An id never made is the same 404.
    assert_eq!(
        head_as(
            &server,
            &server.token,
            "/v1/uploads/00000000000000000000000000000000"
        )
        .status()
        .as_u16(),
        404
    );
    // Untouched: the owner finishes it.
    assert_eq!(offset_of(&server, &at), 5);
    assert_eq!(patch(&server, &at, 5, b"world").status().as_u16(), 204);
    assert_eq!(
        std::fs::read(public_dir(&server).join("mine.txt")).unwrap(),
        b"helloworld"
    );
    assert!(!server.home("bea").join("public/mine.txt").exists());
}

#[test]
fn termination_removes_the_staged_bytes() {
    let server = start();
    let at = create(&server, 10, "gone.txt");
    assert_eq!(patch(&server, &at, 0, b"hello").status().as_u16(), 204);
    assert_eq!(temporaries(&server.data).len(), 1);
    let response = client()
        .delete(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 204);
    assert!(temporaries(&server.data).is_empty());
    assert_eq!(head_as(&server, &server.token, &at).status().as_u16(), 404);
    assert_eq!(
        status_code(patch(&server, &at, 5, b"world")),
        (404, "unknown_upload".into())
    );
    assert_nothing_placed(&server);
}

/// Starts a PATCH by hand that declares `total` bytes and sends `sent` of them.
fn partial_patch(server: &Server, at: &str, offset: u64, total: usize, sent: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "PATCH {at} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Tus-Resumable: 1.0.0\r\nUpload-Offset: {offset}\r\n\
         Content-Type: application/offset+octet-stream\r\nContent-Length: {total}\r\n\r\n",
        server.addr, server.token
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(sent).unwrap();
    stream.flush().unwrap();
    stream
}

/// Waits until `HEAD` reports `want`.
fn wait_offset(server: &Server, at: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = offset_of(server, at);
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "offset stayed {now}, not {want}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn concurrent_patches_one_writes_the_other_is_423() {
    let server = start();
    let data = bytes_of(20_000, 5);
    let at = create(&server, 20_000, "race.txt");
    let mut first = partial_patch(&server, &at, 0, 20_000, &data[..8000]);
    wait_offset(&server, &at, 8000);
    // A second writer, at the same offset and at the current one: locked out.
    assert_eq!(
        status_code(patch(&server, &at, 0, &data)),
        (423, "upload_locked".into())
    );
    assert_eq!(
        status_code(patch(&server, &at, 8000, &data[8000..])),
        (423, "upload_locked".into())
    );
    let delete = client()
        .delete(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .send()
        .unwrap();
    assert_eq!(delete.status().as_u16(), 423);
    // The first one ends and its bytes are all there, in order.
    first.write_all(&data[8000..]).unwrap();
    let answer = read_response(&mut first);
    assert_eq!(status_of(&answer), 204, "{answer}");
    assert_eq!(
        std::fs::read(public_dir(&server).join("race.txt")).unwrap(),
        data
    );
}

#[test]
fn a_dropped_connection_keeps_what_arrived_and_the_upload_resumes() {
    let server = start();
    let data = bytes_of(30_000, 11);
    let at = create(&server, 30_000, "resume.txt");
    let stream = partial_patch(&server, &at, 0, 30_000, &data[..12_000]);
    wait_offset(&server, &at, 12_000);
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);
    // Once the server has let go, the rest goes from where it stood.
    let deadline = Instant::now() + Duration::from_secs(10);
    let response = loop {
        let response = patch(&server, &at, 12_000, &data[12_000..]);
        if response.status().as_u16() != 423 || Instant::now() > deadline {
            break response;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(
        header(&response, "ferry-sha256").unwrap(),
        sha256_hex(&data)
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("resume.txt")).unwrap(),
        data
    );
}

#[test]
fn a_dropped_part_under_a_checksum_is_not_kept() {
    let server = start();
    let data = bytes_of(10_000, 13);
    let at = create(&server, 10_000, "strict.txt");
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    let head = format!(
        "PATCH {at} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
         Tus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nUpload-Checksum: {}\r\n\
         Content-Type: application/offset+octet-stream\r\nContent-Length: 10000\r\n\r\n",
        server.addr,
        server.token,
        sha256_b64(&data)
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&data[..4000]).unwrap();
    wait_offset(&server, &at, 4000);
    stream.shutdown(Shutdown::Both).unwrap();
    drop(stream);
    wait_offset(&server, &at, 0);
}

#[test]
fn an_expired_upload_is_410_and_its_bytes_are_removed() {
    let server = Server::start_with_env(&[
        ("FERRY_MEDIA__MAX_RESUMABLE_BYTES", &CAP.to_string()),
        ("FERRY_MEDIA__RESUMABLE_EXPIRY_SECS", "1"),
    ]);
    let at = create(&server, 10, "late.txt");
    assert_eq!(patch(&server, &at, 0, b"hello").status().as_u16(), 204);
    assert_eq!(temporaries(&server.data).len(), 1);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(
        status_code(patch(&server, &at, 5, b"world")),
        (410, "upload_expired".into())
    );
    assert_eq!(head_as(&server, &server.token, &at).status().as_u16(), 410);
    assert!(temporaries(&server.data).is_empty());
    assert_nothing_placed(&server);
}

#[test]
fn an_upload_survives_a_restart_and_stale_ones_go_at_start() {
    let mut server = start();
    let data = bytes_of(40_000, 17);
    let at = create(&server, 40_000, "across.txt");
    assert_eq!(
        patch(&server, &at, 0, &data[..25_000]).status().as_u16(),
        204
    );
    server.restart();
    assert_eq!(offset_of(&server, &at), 25_000);
    assert_nothing_placed(&server);
    let response = patch(&server, &at, 25_000, &data[25_000..]);
    assert_eq!(response.status().as_u16(), 204);
    assert_eq!(
        header(&response, "ferry-sha256").unwrap(),
        sha256_hex(&data),
        "the bytes before the restart were hashed again"
    );
    assert_eq!(
        std::fs::read(public_dir(&server).join("across.txt")).unwrap(),
        data
    );
}

#[test]
fn a_stale_staged_file_is_removed_at_the_next_start() {
    let mut server = Server::start_with_env(&[
        ("FERRY_MEDIA__MAX_RESUMABLE_BYTES", &CAP.to_string()),
        ("FERRY_MEDIA__RESUMABLE_EXPIRY_SECS", "1"),
    ]);
    let at = create(&server, 10, "stale.txt");
    assert_eq!(patch(&server, &at, 0, b"hello").status().as_u16(), 204);
    assert_eq!(temporaries(&server.data).len(), 1);
    std::thread::sleep(Duration::from_millis(1500));
    server.restart();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !temporaries(&server.data).is_empty() {
        assert!(Instant::now() < deadline, "the stale temporary stayed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(head_as(&server, &server.token, &at).status().as_u16(), 410);
}

#[test]
fn a_patch_needs_its_content_type_and_offset() {
    let server = start();
    let at = create(&server, 10, "ct.txt");
    let response = client()
        .patch(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .header("Upload-Offset", "0")
        .header("Content-Type", "application/octet-stream")
        .body("hello")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 415);
    let response = client()
        .patch(server.url(&at))
        .bearer_auth(&server.token)
        .header("Tus-Resumable", "1.0.0")
        .header("Content-Type", "application/offset+octet-stream")
        .body("hello")
        .send()
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert_eq!(offset_of(&server, &at), 0);
}

#[test]
fn a_nul_in_a_name_or_an_id_is_a_clear_refusal_and_places_nothing() {
    let server = start();
    // No metadata engine stores a NUL: the request is refused, never a server error.
    let response = create_as(&server, &server.token, 1, &[("filename", "a\0b.txt")]);
    assert_eq!(status_code(response), (400, "bad_request".to_owned()));
    for method in [
        reqwest::Method::GET,
        reqwest::Method::HEAD,
        reqwest::Method::PATCH,
        reqwest::Method::DELETE,
    ] {
        let response = client()
            .request(method.clone(), server.url("/v1/uploads/a%00b"))
            .bearer_auth(&server.token)
            .header("Tus-Resumable", "1.0.0")
            .header("Upload-Offset", "0")
            .header("Content-Type", "application/offset+octet-stream")
            .body(Vec::new())
            .send()
            .unwrap();
        let status = response.status().as_u16();
        assert!((400..500).contains(&status), "{method}: {status}");
    }
    assert_nothing_placed(&server);
}
