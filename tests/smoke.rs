//! The first minute of a new user: start, upload, list, download.

mod support;

use support::{Server, client};

#[test]
fn upload_list_download() {
    let server = Server::start();
    let http = client();
    let form = reqwest::blocking::multipart::Form::new().part(
        "file",
        reqwest::blocking::multipart::Part::bytes(b"hello".to_vec()).file_name("hello.txt"),
    );
    let response = http
        .post(server.url("/v1/media"))
        .bearer_auth(&server.token)
        .multipart(form)
        .send()
        .unwrap();
    assert_eq!(response.status(), 201);
    let body: serde_json::Value = response.json().unwrap();
    assert_eq!(body["path"], "public/hello.txt");
    assert_eq!(body["size"], 5);

    let listing: serde_json::Value = http
        .get(server.url("/v1/files"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(listing["entries"][0]["path"], "public/attachments");
    assert_eq!(listing["entries"][1]["path"], "public/hello.txt");

    let text = http
        .get(server.url("/v1/files/content?path=public/hello.txt"))
        .bearer_auth(&server.token)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert_eq!(text, "hello");
}
