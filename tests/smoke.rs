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
