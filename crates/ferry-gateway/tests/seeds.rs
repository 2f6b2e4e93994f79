//! Writes the seed corpus of the gateway's fuzz targets (`fuzz/corpus/range`,
//! `fuzz/corpus/multipart`, `fuzz/corpus/content_disposition`), made here from the
//! headers and bodies clients and servers send:
//! `cargo test -p ferry-gateway --test seeds -- --ignored write_fuzz_seeds`.

use ferry_gateway::fuzzing::{etag_for, filename_from_content_disposition, parse_range};

/// The range seeds: eight bytes of the file's length, then `Range`, `If-Range` and
/// `If-None-Match`, 0xff between them. The file's ETag is made as the target makes it.
fn range_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seed = |len: u64, range: &str, if_range: &str, if_none_match: &str| {
        let mut out = len.to_le_bytes().to_vec();
        for (i, header) in [range, if_range, if_none_match].iter().enumerate() {
            if i > 0 {
                out.push(0xff);
            }
            out.extend_from_slice(header.as_bytes());
        }
        out
    };
    let etag = |len: u64| etag_for(len, i128::from(len) * 7, len ^ 0x5a5a);
    let e = etag(1000);
    vec![
        ("bounded", seed(1000, "bytes=0-99", &e, &e)),
        ("open", seed(1000, "bytes=100-", "", "*")),
        (
            "suffix",
            seed(1000, "bytes=-500", &format!("W/{e}"), &format!("W/{e}")),
        ),
        ("past_end", seed(1000, "bytes=1000-", "", "")),
        (
            "clamped",
            seed(10, "bytes=5-99999", &etag(10), "\"x\", \"y\""),
        ),
        ("reversed", seed(1000, "bytes=5-2", "", "")),
        ("several", seed(1000, "bytes=0-1,5-6", "", "")),
        ("spaced", seed(1000, " BYTES = 0 - 0 ,", "", "")),
        ("unit", seed(1000, "items=0-1", "", "")),
        (
            "overflow",
            seed(1000, "bytes=99999999999999999999-", "", ""),
        ),
        ("zero_suffix", seed(1000, "bytes=-0", "", "")),
        ("empty_file", seed(0, "bytes=0-0", "", "")),
        (
            "huge_file",
            seed(u64::MAX, "bytes=-18446744073709551615", "", ""),
        ),
        (
            "date",
            seed(1000, "bytes=0-1", "Sat, 29 Oct 1994 19:43:31 GMT", ""),
        ),
        (
            "list",
            seed(1000, "bytes=0-1", "", &format!("\"a,b\", W/\"c\" , {e}")),
        ),
    ]
}

/// The multipart seeds: a flags byte (bit 0: send a Content-Length; the rest: the size
/// of the chunks the body arrives in, less one), the Content-Type's length, the
/// Content-Type, then the body.
fn multipart_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seed = |flags: u8, content_type: &str, parts: &[(&str, Option<&str>, &[u8])]| {
        let mut body = Vec::new();
        for (name, filename, bytes) in parts {
            body.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"");
            body.extend_from_slice(name.as_bytes());
            body.push(b'"');
            if let Some(filename) = filename {
                body.extend_from_slice(b"; filename=\"");
                body.extend_from_slice(filename.as_bytes());
                body.push(b'"');
                body.extend_from_slice(b"\r\nContent-Type: application/octet-stream");
            }
            body.extend_from_slice(b"\r\n\r\n");
            body.extend_from_slice(bytes);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        let mut out = vec![flags, content_type.len() as u8];
        out.extend_from_slice(content_type.as_bytes());
        out.extend(body);
        out
    };
    let form = "multipart/form-data; boundary=XyZ";
    vec![
        (
            "file",
            seed(1, form, &[("file", Some("report.pdf"), b"%PDF-1.4 hi")]),
        ),
        (
            "fields",
            seed(
                0x0e,
                form,
                &[
                    ("project", None, b"alpha"),
                    ("folder", None, b"public/reports"),
                    ("file", Some("q2 (final).xlsx"), b"PK\x03\x04"),
                ],
            ),
        ),
        (
            "hostile_names",
            seed(
                0,
                form,
                &[
                    ("folder", None, b"public/attachments"),
                    ("file", Some("../../etc/passwd"), b"x"),
                    ("file", Some(".env\\..\\a\u{202e}b"), b""),
                ],
            ),
        ),
        (
            "folder_escape",
            seed(0x40, form, &[("folder", None, b"public/../../x")]),
        ),
        ("not_utf8", seed(2, form, &[("project", None, b"\xff\xfe")])),
        (
            "quoted_boundary",
            seed(
                3,
                "multipart/form-data; boundary=\"XyZ\"",
                &[("file", Some("a.txt"), b"a\r\n--Xy")],
            ),
        ),
        ("no_boundary", seed(0, "multipart/form-data", &[])),
        ("not_multipart", seed(0, "application/json", &[])),
        ("unterminated", {
            let mut s = seed(0xfe, form, &[("file", Some("a.txt"), b"abc")]);
            s.truncate(s.len() - 9);
            s
        }),
    ]
}

/// The content_disposition seeds: a header a server answers with (also read as a URL,
/// and as a file's name).
fn disposition_seeds() -> Vec<(&'static str, Vec<u8>)> {
    [
        ("quoted", "attachment; filename=\"report.pdf\""),
        (
            "extended",
            "attachment; filename*=UTF-8''relat%C3%B3rio.pdf; filename=\"fallback.pdf\"",
        ),
        ("spaced", "inline; FILENAME = \"a;b.pdf\" ; size=3"),
        ("latin1", "attachment; filename*=iso-8859-1'en'caf%E9.txt"),
        ("unterminated", "attachment; filename=\"unterminated"),
        (
            "bad_escape",
            "attachment; filename*=UTF-8''%ZZ; filename=plain.txt",
        ),
        ("escapes", "attachment; filename=\"a\\\"b\\\\c.txt\""),
        ("token", "attachment;filename=plain.txt"),
        (
            "continuation",
            "attachment; filename*0=\"a\"; filename*1=\"b\"",
        ),
        ("url", "https://example.com/files/a%2Fb%20c.pdf?x=1#y"),
        ("url_dir", "http://example.com/files/"),
        ("name", "relatório final (2).pdf"),
        ("name_controls", "a\"b\r\n\\.txt"),
    ]
    .into_iter()
    .map(|(name, text)| (name, text.as_bytes().to_vec()))
    .collect()
}

/// The tus seeds: eight bytes of the largest file, then headers, 0xff between them,
/// each a byte naming it (0 `Tus-Resumable`, 1 `Upload-Length`, 2 `Upload-Metadata`,
/// 3 `Upload-Offset`, 4 `Upload-Checksum`, 5 `Upload-Defer-Length`) and its value.
fn tus_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let seed = |max: u64, headers: &[(u8, &str)]| {
        let mut out = max.to_le_bytes().to_vec();
        for (i, (pick, value)) in headers.iter().enumerate() {
            if i > 0 {
                out.push(0xff);
            }
            out.push(*pick);
            out.extend_from_slice(value.as_bytes());
        }
        out
    };
    let b64 = |text: &str| data_encoding::BASE64.encode(text.as_bytes());
    let metadata = format!(
        "filename {},project {},folder {},overwrite {}",
        b64("report.pdf"),
        b64("q3"),
        b64("public/reports"),
        b64("false")
    );
    let sha = data_encoding::BASE64.encode(&[7u8; 32]);
    vec![
        (
            "creation",
            seed(1 << 30, &[(0, "1.0.0"), (1, "1048576"), (2, &metadata)]),
        ),
        (
            "part",
            seed(
                1 << 30,
                &[(0, "1.0.0"), (3, "524288"), (4, &format!("sha256 {sha}"))],
            ),
        ),
        (
            "over_max",
            seed(10, &[(0, "1.0.0"), (1, "11"), (2, &metadata)]),
        ),
        ("deferred", seed(1 << 30, &[(0, "1.0.0"), (5, "1")])),
        ("old_version", seed(1 << 30, &[(0, "0.2.2"), (1, "1")])),
        (
            "twice",
            seed(
                1 << 30,
                &[(1, "1"), (1, "2"), (2, "filename YQ,filename Yg")],
            ),
        ),
        ("md5", seed(1 << 30, &[(4, &format!("md5 {sha}"))])),
    ]
}

#[test]
#[ignore = "writes the fuzz corpus; run on purpose"]
fn write_fuzz_seeds() {
    ferry_fs::fuzzing::write_corpus("tus_headers", tus_seeds());
    ferry_fs::fuzzing::write_corpus("range", range_seeds());
    ferry_fs::fuzzing::write_corpus("multipart", multipart_seeds());
    ferry_fs::fuzzing::write_corpus("content_disposition", disposition_seeds());
}

#[test]
fn the_seeds_are_what_they_say() {
    use ferry_gateway::fuzzing::RangeRequest::{Full, Partial, Unsatisfiable};
    for (name, bytes) in range_seeds() {
        let len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        let range = bytes[8..].split(|&b| b == 0xff).next().unwrap();
        let got = parse_range(Some(std::str::from_utf8(range).unwrap()), len);
        let expected = match name {
            "bounded" => Partial {
                start: 0,
                end_inclusive: 99,
            },
            "date" | "list" => Partial {
                start: 0,
                end_inclusive: 1,
            },
            "open" => Partial {
                start: 100,
                end_inclusive: 999,
            },
            "suffix" => Partial {
                start: 500,
                end_inclusive: 999,
            },
            "clamped" => Partial {
                start: 5,
                end_inclusive: 9,
            },
            "spaced" => Partial {
                start: 0,
                end_inclusive: 0,
            },
            "huge_file" => Partial {
                start: 0,
                end_inclusive: u64::MAX - 1,
            },
            "past_end" | "zero_suffix" | "empty_file" => Unsatisfiable,
            _ => Full,
        };
        assert_eq!(got, expected, "{name}");
    }
    for (name, bytes) in tus_seeds() {
        let max = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        let names = ferry_gateway::fuzzing::TUS_HEADERS;
        let mut headers = axum::http::HeaderMap::new();
        for header in bytes[8..].split(|&b| b == 0xff) {
            headers.append(
                names[usize::from(header[0])],
                axum::http::HeaderValue::from_bytes(&header[1..]).unwrap(),
            );
        }
        let read = ferry_gateway::fuzzing::tus_headers(&headers, max);
        let created = read.creation.is_ok();
        assert_eq!(created, name == "creation", "{name}: {read:?}");
        assert_eq!(
            read.checksum.is_ok_and(|c| c.is_some()),
            name == "part",
            "{name}"
        );
        assert_eq!(
            read.version.is_ok(),
            !["old_version", "twice", "md5"].contains(&name)
        );
    }
    for (name, bytes) in disposition_seeds() {
        let read = filename_from_content_disposition(&bytes);
        let none = [
            "unterminated",
            "continuation",
            "url",
            "url_dir",
            "name",
            "name_controls",
        ];
        assert_eq!(read.is_none(), none.contains(&name), "{name}: {read:?}");
    }
}
