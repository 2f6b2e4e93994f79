//! `GET /v1/files/preview` (M-DAILY "Look before downloading") through the real `ferry
//! serve`: each kind of file, the picture with its safe headers, hostile files (a
//! decompression-bomb PNG, a malformed PDF, a PDF whose stream inflates past the
//! renderer's memory), and the confinement a download has.

mod support;

use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use reqwest::blocking::Response;
use serde_json::Value;
use support::{Server, assert_error, client, create_project, json_answer, sha256_hex, write_file};

struct Site {
    server: Server,
    http: reqwest::blocking::Client,
}

impl Site {
    fn start() -> Site {
        let site = Site {
            server: Server::start(),
            http: client(),
        };
        std::fs::create_dir_all(site.public()).unwrap();
        site
    }

    fn public(&self) -> PathBuf {
        self.server.home("me").join("public")
    }

    fn request(&self, token: &str, query: &[(&str, &str)]) -> Response {
        self.http
            .get(self.server.url("/v1/files/preview"))
            .bearer_auth(token)
            .query(query)
            .send()
            .unwrap()
    }

    /// The JSON preview of `path` in the main workspace.
    #[track_caller]
    fn preview(&self, path: &str) -> (u16, Value) {
        json_answer(self.request(&self.server.token, &[("path", path)]))
    }

    /// The JSON preview, which must succeed.
    #[track_caller]
    fn look(&self, path: &str) -> Value {
        let (status, body) = self.preview(path);
        assert_eq!(status, 200, "{path}: {body}");
        body
    }

    fn image(&self, path: &str) -> Response {
        self.request(&self.server.token, &[("path", path), ("format", "image")])
    }

    /// The gateway's peak resident memory so far, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.server.pid())).unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// A PNG of `width`×`height` with a gradient, made with the `image` crate.
fn gradient_png(width: u32, height: u32) -> Vec<u8> {
    let picture = image::RgbImage::from_fn(width, height, |x, y| {
        image::Rgb([(x % 256) as u8, (y % 256) as u8, 128])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    picture.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

/// One PNG chunk: length, type, data, CRC of type and data.
fn chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc.sum().to_be_bytes());
    out
}

/// A PNG whose header declares `width`×`height` RGBA pixels and whose data is `rows` rows
/// of zeros, compressed: a decompression bomb when the header is huge.
fn declared_png(width: u32, height: u32, rows: u32) -> Vec<u8> {
    let mut ihdr = width.to_be_bytes().to_vec();
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let row = vec![0u8; 1 + 4 * width as usize];
    for _ in 0..rows {
        zlib.write_all(&row).unwrap();
    }
    let idat = zlib.finish().unwrap();
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &ihdr));
    png.extend(chunk(b"IDAT", &idat));
    png.extend(chunk(b"IEND", b""));
    png
}

/// A PDF with one page per entry of `pages`, each showing its text in Helvetica, and a
/// correct cross-reference table.
fn simple_pdf(pages: &[&str]) -> Vec<u8> {
    pdf_with_streams(
        &pages
            .iter()
            .map(|text| {
                (
                    String::new(),
                    format!("BT /F1 24 Tf 72 700 Td ({text}) Tj ET 72 600 m 540 600 l 8 w S")
                        .into_bytes(),
                )
            })
            .collect::<Vec<_>>(),
    )
}

/// A PDF whose pages have the given content streams (extra dictionary entries, bytes).
fn pdf_with_streams(pages: &[(String, Vec<u8>)]) -> Vec<u8> {
    let page_count = pages.len();
    // 1 catalog, 2 pages, 3 font, then a page and its content per page.
    let mut objects: Vec<Vec<u8>> = Vec::new();
    objects.push(b"<< /Type /Catalog /Pages 2 0 R >>".to_vec());
    let kids: Vec<String> = (0..page_count)
        .map(|i| format!("{} 0 R", 4 + 2 * i))
        .collect();
    objects.push(
        format!(
            "<< /Type /Pages /Kids [{}] /Count {page_count} >>",
            kids.join(" ")
        )
        .into_bytes(),
    );
    objects.push(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec());
    for (i, (extra, content)) in pages.iter().enumerate() {
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            )
            .into_bytes(),
        );
        let mut stream = format!("<< /Length {}{extra} >>\nstream\n", content.len()).into_bytes();
        stream.extend_from_slice(content);
        stream.extend_from_slice(b"\nendstream");
        objects.push(stream);
    }
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend_from_slice(object);
        pdf.extend_from_slice(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        pdf.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    pdf.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    pdf
}

/// A zlib stream that inflates to `mib` MiB of spaces, made without compressing them
/// all: one flushed block that repeats the window's spaces, written `mib - 1` times.
fn spaces_inflating_to(mib: u64) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let chunk = vec![b' '; 1 << 20];
    let mut deflate = Compress::new(Compression::best(), false);
    let mut compressed = |input: &[u8], flush| {
        let mut out = Vec::with_capacity(1 << 20);
        deflate.compress_vec(input, &mut out, flush).unwrap();
        out
    };
    let first = compressed(&chunk, FlushCompress::Sync);
    // After the first MiB the window is all spaces, so this block means the same
    // wherever it is repeated.
    let repeated = compressed(&chunk, FlushCompress::Sync);
    let end = compressed(&[], FlushCompress::Finish);
    let mut out = vec![0x78, 0xDA];
    out.extend_from_slice(&first);
    for _ in 1..mib {
        out.extend_from_slice(&repeated);
    }
    out.extend_from_slice(&end);
    // Adler-32 of n bytes of value c: a = 1 + n·c, b = n + c·n(n+1)/2, both mod 65521.
    let (n, c, modulus) = (u128::from(mib) << 20, u128::from(b' '), 65_521u128);
    let a = (1 + n * c) % modulus;
    let b = (n + c * n * (n + 1) / 2) % modulus;
    out.extend_from_slice(&((b << 16 | a) as u32).to_be_bytes());
    out
}

#[test]
fn the_inflating_stream_is_what_it_claims() {
    let stream = spaces_inflating_to(3);
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(
        &mut flate2::read::ZlibDecoder::new(&stream[..]),
        &mut inflated,
    )
    .unwrap();
    assert_eq!(inflated.len(), 3 << 20);
    assert!(inflated.iter().all(|&byte| byte == b' '));
}

/// A zip with the given members (name, bytes).
fn zip_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        writer
            .start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

/// The headers every picture carries, and its PNG dimensions.
#[track_caller]
fn assert_safe_png(response: Response) -> (u32, u32) {
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "image/png");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(headers["content-security-policy"], "default-src 'none'");
    assert_eq!(headers["cache-control"], "private, no-store");
    let bytes = response.bytes().unwrap();
    let picture = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png).unwrap();
    (picture.width(), picture.height())
}

#[test]
fn an_image_is_described_then_shown_scaled_with_safe_headers() {
    let site = Site::start();
    let png = gradient_png(3000, 2000);
    write_file(&site.public().join("photo.png"), &png);

    let body = site.look("public/photo.png");
    assert_eq!(body["kind"], "image");
    assert_eq!(body["mediaType"], "image/png");
    assert_eq!(
        (body["width"].as_u64(), body["height"].as_u64()),
        (Some(3000), Some(2000))
    );
    assert_eq!(body["hasImage"], true);
    assert_eq!(body["note"], Value::Null);
    assert_eq!(body["size"], png.len());
    assert_eq!(body["sha256"], sha256_hex(&png));
    assert_eq!(body["path"], "public/photo.png");
    assert_eq!(body["name"], "photo.png");

    let (width, height) = assert_safe_png(site.image("public/photo.png"));
    assert_eq!((width, height), (1024, 683));
}

#[test]
fn text_json_csv_and_svg_come_as_json_strings() {
    let site = Site::start();
    let public = site.public();
    write_file(
        &public.join("notes.md"),
        "# Title\n<script>alert(1)</script>\r\nline two\n",
    );
    write_file(&public.join("data.json"), "{\"a\": [1, 2], \"b\": \"<b>\"}");
    write_file(
        &public.join("people.csv"),
        "name;city\n\"Doe; J\";Lyon\nRoe;Nice\n",
    );
    write_file(
        &public.join("logo.svg"),
        "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>alert(1)</script></svg>",
    );
    write_file(&public.join("empty.txt"), "");

    let md = site.look("public/notes.md");
    assert_eq!(md["kind"], "text");
    assert_eq!(md["text"], "# Title\n<script>alert(1)</script>\nline two\n");
    assert_eq!(md["truncated"], false);

    let json = site.look("public/data.json");
    assert_eq!(json["kind"], "text");
    assert_eq!(json["mediaType"], "application/json");
    assert_eq!(json["text"], "{\"a\": [1, 2], \"b\": \"<b>\"}");

    let csv = site.look("public/people.csv");
    assert_eq!(csv["kind"], "table");
    assert_eq!(csv["separator"], ";");
    assert_eq!(
        csv["rows"],
        serde_json::json!([["name", "city"], ["Doe; J", "Lyon"], ["Roe", "Nice"]])
    );

    // SVG is text to show, never a picture to render.
    let svg = site.look("public/logo.svg");
    assert_eq!(svg["kind"], "text", "{svg}");
    let (status, body) = json_answer(site.image("public/logo.svg"));
    assert_error(status, &body, 400, "no_preview_image");

    assert_eq!(site.look("public/empty.txt")["kind"], "empty");

    // A long text is cut at the limit and says so.
    write_file(&public.join("long.txt"), "x".repeat(200 * 1024));
    let long = site.look("public/long.txt");
    assert_eq!(long["truncated"], true);
    assert_eq!(long["text"].as_str().unwrap().len(), 64 * 1024);
}

#[test]
fn a_pdf_gives_its_pages_its_text_and_its_first_page_drawn() {
    let site = Site::start();
    let pdf = simple_pdf(&["Hello preview", "Second page"]);
    write_file(&site.public().join("report.pdf"), &pdf);

    let body = site.look("public/report.pdf");
    assert_eq!(body["kind"], "pdf", "{body}");
    assert_eq!(body["pages"], 2);
    assert!(
        body["text"].as_str().unwrap().contains("Hello preview"),
        "{body}"
    );
    assert_eq!(body["encrypted"], false);
    assert_eq!(body["hasImage"], true);

    let response = site.image("public/report.pdf");
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().unwrap();
    let page = image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
        .unwrap()
        .to_rgb8();
    // Letter, 612×792 points, drawn 1024 pixels high.
    assert_eq!((page.width(), page.height()), (791, 1024));
    // The thick rule at y = 600 pt is drawn: dark pixels across the page there.
    let rule_y = ((792.0 - 600.0) * 1024.0 / 792.0) as u32;
    let dark = (0..page.width())
        .filter(|&x| page.get_pixel(x, rule_y).0[0] < 64)
        .count();
    assert!(dark > 400, "{dark} dark pixels on the rule");
    // And the margin above the text is white.
    assert_eq!(page.get_pixel(10, 10).0, [255, 255, 255]);
}

#[test]
fn zip_and_office_files_list_their_members() {
    let site = Site::start();
    let public = site.public();
    write_file(
        &public.join("bundle.zip"),
        zip_of(&[("a.txt", b"hello"), ("dir/", b""), ("dir/b.csv", b"1,2\n")]),
    );
    let docx = zip_of(&[
        (
            "[Content_Types].xml",
            b"<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"><Override PartName=\"/word/document.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml\"/></Types>",
        ),
        ("word/document.xml", b"<w:document><w:body><w:p><w:r><w:t>Hi</w:t></w:r></w:p></w:body></w:document>"),
    ]);
    write_file(&public.join("letter.docx"), &docx);

    let zip = site.look("public/bundle.zip");
    assert_eq!(zip["kind"], "archive", "{zip}");
    assert_eq!(zip["memberCount"], 3);
    assert_eq!(zip["members"][0]["name"], "a.txt");
    assert_eq!(zip["members"][0]["size"], 5);
    assert_eq!(zip["members"][1]["dir"], true);
    assert_eq!(zip["truncated"], false);

    let office = site.look("public/letter.docx");
    assert_eq!(office["kind"], "archive", "{office}");
    let names: Vec<&str> = office["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["[Content_Types].xml", "word/document.xml"]);

    let (status, body) = json_answer(site.image("public/bundle.zip"));
    assert_error(status, &body, 400, "no_preview_image");
}

#[test]
fn anything_else_gets_type_size_and_hash() {
    let site = Site::start();
    let bytes = [0u8, 159, 146, 150, 0, 1, 2, 3, 255];
    write_file(&site.public().join("blob.bin"), bytes);
    let body = site.look("public/blob.bin");
    assert_eq!(body["kind"], "file");
    assert_eq!(body["size"], bytes.len());
    assert_eq!(body["sha256"], sha256_hex(&bytes));
    assert_eq!(body["note"], Value::Null);
}

#[test]
fn a_decompression_bomb_png_is_refused_quickly_with_flat_memory() {
    let site = Site::start();
    // 100,000 × 100,000 RGBA: 40 GB decoded, a few hundred bytes on disk.
    let bomb = declared_png(100_000, 100_000, 1);
    assert!(bomb.len() < 2048, "{}", bomb.len());
    write_file(&site.public().join("bomb.png"), &bomb);
    // 10,000 × 10,000 declared (at the pixel limit), its data cut short after 50 rows.
    let cut = declared_png(10_000, 10_000, 50);
    write_file(&site.public().join("cut.png"), &cut);
    let before = site.peak_rss_kib();

    let started = Instant::now();
    let body = site.look("public/bomb.png");
    assert_eq!(body["kind"], "image");
    assert_eq!(body["hasImage"], false);
    assert!(
        body["note"].as_str().unwrap().contains("pixel limit"),
        "{body}"
    );
    let (status, body) = json_answer(site.image("public/bomb.png"));
    assert_error(status, &body, 413, "image_too_large");

    let (status, body) = json_answer(site.image("public/cut.png"));
    assert_error(status, &body, 400, "damaged_file");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    let grown_mib = site.peak_rss_kib().saturating_sub(before) / 1024;
    // The cut image was allocated at its declared size (400 MB) at most, never 40 GB.
    assert!(grown_mib < 600, "the gateway grew by {grown_mib} MiB");
}

#[test]
fn a_malformed_or_bombed_pdf_is_a_clear_error_and_the_gateway_does_not_grow() {
    let site = Site::start();
    let public = site.public();
    write_file(
        &public.join("broken.pdf"),
        b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 9 0 R",
    );
    // A page whose content stream inflates to 1.5 GiB of spaces, over the renderer's
    // 1 GiB address space; the file is about 1.5 MB.
    let inflating = spaces_inflating_to(1536);
    let bomb = pdf_with_streams(&[(" /Filter /FlateDecode".to_owned(), inflating)]);
    write_file(&public.join("bomb.pdf"), &bomb);
    let before = site.peak_rss_kib();

    let broken = site.look("public/broken.pdf");
    assert_eq!(broken["kind"], "file", "{broken}");
    assert!(broken["note"].as_str().unwrap().contains("PDF"), "{broken}");
    let (status, body) = json_answer(site.image("public/broken.pdf"));
    assert_error(status, &body, 422, "render_failed");

    let (status, body) = json_answer(site.image("public/bomb.pdf"));
    assert_error(status, &body, 422, "render_failed");
    // The renderer's address space stops it; on a machine busy enough, its deadline may
    // come first. Either way it is refused whole, and the gateway does not grow.
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MiB of memory") || message.contains("longer than"),
        "{message}"
    );
    let grown_mib = site.peak_rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 200, "the gateway grew by {grown_mib} MiB");
    // The gateway still answers, and no rendering process is left behind.
    assert_eq!(site.look("public/broken.pdf")["kind"], "file");
    let children = std::fs::read_to_string(format!(
        "/proc/{}/task/{}/children",
        site.server.pid(),
        site.server.pid()
    ))
    .unwrap_or_default();
    assert_eq!(children.trim(), "", "processes left: {children}");
}

#[test]
fn oversize_inputs_answer_plainly() {
    let site = Site::start();
    let public = site.public();
    // 64 MiB + 1: a PNG header, then zeros (a sparse file).
    let limit = 64 * 1024 * 1024;
    let mut big = std::fs::File::create(public.join("huge.png")).unwrap();
    big.write_all(&gradient_png(8, 8)).unwrap();
    big.set_len(limit + 1).unwrap();
    drop(big);
    let body = site.look("public/huge.png");
    assert_eq!(body["kind"], "image", "{body}");
    assert_eq!(body["hasImage"], false);
    assert!(body["note"].as_str().unwrap().contains("limit"), "{body}");
    let (status, body) = json_answer(site.image("public/huge.png"));
    assert_error(status, &body, 413, "file_too_large");

    // At the limit the size alone refuses nothing.
    let mut at = std::fs::File::create(public.join("at.png")).unwrap();
    at.write_all(&gradient_png(8, 8)).unwrap();
    at.set_len(limit).unwrap();
    drop(at);
    let body = site.look("public/at.png");
    assert_eq!(body["hasImage"], true, "{body}");

    let mut pdf = std::fs::File::create(public.join("huge.pdf")).unwrap();
    pdf.write_all(b"%PDF-1.4\n").unwrap();
    pdf.set_len(limit + 1).unwrap();
    drop(pdf);
    let body = site.look("public/huge.pdf");
    assert_eq!(body["kind"], "file", "{body}");
    let (status, body) = json_answer(site.image("public/huge.pdf"));
    assert_error(status, &body, 413, "file_too_large");
}

#[test]
fn escapes_links_folders_and_other_people_get_what_a_download_gets() {
    let site = Site::start();
    let public = site.public();
    let outside = site.server.home("me").join("secret.txt");
    write_file(&outside, "not for the member");
    write_file(&public.join("folder/inner.txt"), "inner");
    symlink(&outside, public.join("link.txt")).unwrap();
    symlink(site.server.home("me"), public.join("dirlink")).unwrap();

    for path in [
        "public/link.txt",
        "public/dirlink/secret.txt",
        "public/../secret.txt",
        "secret.txt",
        "/etc/passwd",
        "public/missing.txt",
    ] {
        let (status, body) = site.preview(path);
        assert_error(status, &body, 404, "not_found");
        let (status, body) = json_answer(site.image(path));
        assert_error(status, &body, 404, "not_found");
    }
    let (status, body) = site.preview("public/folder");
    assert_error(status, &body, 400, "is_directory");
    let (status, body) = json_answer(site.request(
        &site.server.token,
        &[("path", "public/folder/inner.txt"), ("format", "html")],
    ));
    assert_error(status, &body, 400, "bad_query");

    // Another project's file is not in the main workspace, and another person reaches
    // neither.
    create_project(&site.server, &site.server.token, "q2");
    let q2 = site.server.home("me").join("projects/q2/public/plan.txt");
    write_file(&q2, "q2 plan");
    let (status, body) = site.preview("public/plan.txt");
    assert_error(status, &body, 404, "not_found");
    let (status, body) = json_answer(site.request(
        &site.server.token,
        &[("path", "public/plan.txt"), ("project", "q2")],
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["text"], "q2 plan");
    assert_eq!(body["project"], "q2");

    let bob = site.server.add_person("bob");
    let (status, body) = json_answer(site.request(&bob, &[("path", "public/folder/inner.txt")]));
    assert_error(status, &body, 404, "not_found");
    let (status, body) =
        json_answer(site.request(&bob, &[("path", "public/plan.txt"), ("project", "q2")]));
    assert_error(status, &body, 404, "unknown_project");
    let (status, body) = json_answer(
        site.http
            .get(site.server.url("/v1/files/preview"))
            .query(&[("path", "public/folder/inner.txt")])
            .send()
            .unwrap(),
    );
    assert_error(status, &body, 401, "unauthorized");
}
