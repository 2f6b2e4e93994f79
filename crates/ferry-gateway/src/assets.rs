//! The web client, served at `/` from files embedded at build time (spec M-WEB).

use axum::body::Body;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;

use crate::ApiError;

include!(concat!(env!("OUT_DIR"), "/assets.rs"));

/// Only what the page itself needs: its own scripts, the gateway's API (`'self'` covers its
/// own `ws:`/`wss:` origin for the node terminals), and no framing, inline script or form
/// posts anywhere.
///
/// Styles also allow `'unsafe-inline'`, for the terminal alone: xterm.js's DOM renderer
/// sizes rows and draws the 256-colour palette through `<style>` elements it writes at run
/// time, and truecolor through `style` attributes, so neither a hash nor a nonce (the page
/// is static) can name them. Scripts stay `'self'` only: inline styles can restyle the
/// page, never run code, and the page builds its own markup from text nodes only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; \
     frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Serves an embedded file, `/` being `index.html`; anything else is the API's 404.
pub async fn serve(uri: Uri) -> Response {
    let path = match uri.path() {
        "/" => "/index.html",
        other => other,
    };
    let Some((_, bytes)) = ASSETS.iter().find(|(url, _)| *url == path) else {
        return ApiError::new(Code::NoRoute, "no such route").into_response();
    };
    let mut response = Response::new(Body::from(*bytes));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" | "webmanifest" => "application/json",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code points of the page's `HIDDEN_CHARS` class (`\p{Cc}`, `\uXXXX`,
    /// `\u{X…}` and ranges of them), read from the embedded `format.js`.
    fn page_hidden_chars() -> Vec<std::ops::RangeInclusive<u32>> {
        let (_, js) = ASSETS.iter().find(|(url, _)| *url == "/format.js").unwrap();
        let js = std::str::from_utf8(js).unwrap();
        let start = js.find("const HIDDEN_CHARS = String.raw`").unwrap();
        let class = &js[start..].split('`').nth(1).unwrap();
        let mut rest = class
            .strip_prefix(r"\p{Cc}")
            .expect("starts with the controls");
        let mut ranges = vec![0..=0x1F, 0x7F..=0x9F];
        let one = |rest: &mut &str| -> u32 {
            let s = rest.strip_prefix(r"\u").unwrap();
            let (hex, tail) = match s.strip_prefix('{') {
                Some(braced) => braced.split_once('}').unwrap(),
                None => s.split_at(4),
            };
            *rest = tail;
            u32::from_str_radix(hex, 16).unwrap()
        };
        while !rest.is_empty() {
            let first = one(&mut rest);
            let last = match rest.strip_prefix('-') {
                Some(tail) => {
                    rest = tail;
                    one(&mut rest)
                }
                None => first,
            };
            ranges.push(first..=last);
        }
        ranges
    }

    #[test]
    fn only_the_pages_own_files_and_the_vendored_ones_it_loads_are_served() {
        let vendored: Vec<&str> = ASSETS
            .iter()
            .map(|(url, _)| *url)
            .filter(|url| url.starts_with("/vendor/"))
            .collect();
        assert_eq!(
            vendored,
            [
                "/vendor/addon-fit.mjs",
                "/vendor/marked.mjs",
                "/vendor/purify.mjs",
                "/vendor/xterm.css",
                "/vendor/xterm.mjs"
            ]
        );
        for (url, bytes) in ASSETS {
            assert!(
                !url.contains("node_modules")
                    && !url.contains("/tests/")
                    && !url.ends_with("package.json"),
                "{url} is served"
            );
            assert!(!bytes.is_empty(), "{url} is empty");
        }
        // The terminal's module is the ES module build, its CSS the stylesheet.
        let (_, xterm) = ASSETS
            .iter()
            .find(|(u, _)| *u == "/vendor/xterm.mjs")
            .unwrap();
        let xterm = std::str::from_utf8(xterm).unwrap();
        assert!(xterm.contains("export{") && xterm.contains(" as Terminal}"));
        assert_eq!(
            content_type("/vendor/xterm.mjs"),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type("/vendor/xterm.css"), "text/css; charset=utf-8");
    }

    #[test]
    fn the_page_and_the_server_show_the_same_characters_as_markers() {
        let page = page_hidden_chars();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let in_page = page.iter().any(|r| r.contains(&u32::from(c)));
            assert_eq!(
                in_page,
                ferry_fs::is_hidden_or_spoofing(c),
                "U+{:04X}: format.js and ferry-fs disagree",
                u32::from(c)
            );
        }
        // The page also marks lone surrogates, which a Rust `char` cannot hold.
        assert!(
            page.iter()
                .any(|r| r.contains(&0xD800) && r.contains(&0xDFFF))
        );
    }
}
