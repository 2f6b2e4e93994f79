//! Projects made from a display name (spec members M-DAILY "Names people type"):
//! `POST /v1/projects {"name":"Q2 Report"}` derives `q2-report`, collisions take `-2`,
//! `-3`…, the name is kept and listed, and the old `{"id"}` shape still works. Driven
//! through the router with `tower::ServiceExt::oneshot`; the folders are made for real.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, header};
use ferry_config::Config;
use ferry_config::limits::{ID_MAX_BYTES, PROJECT_NAME_MAX_BYTES};
use ferry_site::{Site, TokenKind};
use serde_json::{Value, json};
use tower::ServiceExt;

struct App {
    _tmp: tempfile::TempDir,
    data: std::path::PathBuf,
    router: Router,
    ann: String,
    bob: String,
}

fn app() -> App {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("site");
    let site = Arc::new(Site::open(&data, Config::default()).unwrap());
    site.add_person("ann").unwrap();
    site.add_person("bob").unwrap();
    let ann = site.create_token("ann", TokenKind::Person).unwrap();
    let bob = site.create_token("bob", TokenKind::Person).unwrap();
    let router = ferry_gateway::router(ferry_gateway::AppState::new(site).unwrap());
    App {
        _tmp: tmp,
        data,
        router,
        ann,
        bob,
    }
}

impl App {
    async fn call(&self, token: &str, method: Method, body: Option<Value>) -> (u16, Value) {
        let request = Request::builder()
            .method(method)
            .uri("/v1/projects")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_string())))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn create(&self, body: Value) -> (u16, Value) {
        self.call(&self.ann, Method::POST, Some(body)).await
    }

    async fn list(&self, token: &str) -> Vec<(String, String)> {
        let (status, body) = self.call(token, Method::GET, None).await;
        assert_eq!(status, 200, "{body}");
        body["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    p["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn project_public(&self, person: &str, id: &str) -> std::path::PathBuf {
        self.data
            .join("home")
            .join(person)
            .join("projects")
            .join(id)
            .join("public")
    }
}

#[tokio::test]
async fn a_name_gives_the_id_and_is_kept() {
    let app = app();
    for (name, id) in [
        ("Q2 Report", "q2-report"),
        ("Café Überblick (2026)", "cafe-uberblick-2026"),
        ("  Spaces   around  ", "spaces-around"),
    ] {
        let (status, body) = app.create(json!({ "name": name })).await;
        assert_eq!(status, 201, "{name}: {body}");
        assert_eq!(body["id"], id, "{name}");
        assert_eq!(body["name"], name.trim(), "{name}");
        assert!(body["created"].is_string());
        assert!(app.project_public("ann", id).join("attachments").is_dir());
    }
    // The old shape, and both at once.
    let (status, body) = app.create(json!({ "id": "plain" })).await;
    assert_eq!((status, &body["name"]), (201, &json!("plain")), "{body}");
    let (status, body) = app.create(json!({ "id": "mine", "name": "My Own" })).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (&body["id"], &body["name"]),
        (&json!("mine"), &json!("My Own"))
    );

    let listed = app.list(&app.ann).await;
    let want: Vec<(String, String)> = [
        ("cafe-uberblick-2026", "Café Überblick (2026)"),
        ("mine", "My Own"),
        ("plain", "plain"),
        ("q2-report", "Q2 Report"),
        ("spaces-around", "Spaces   around"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(listed, want);
    assert!(
        app.list(&app.bob).await.is_empty(),
        "bob sees ann's projects"
    );
}

#[tokio::test]
async fn a_taken_id_takes_the_next_suffix_within_the_id_limit() {
    let app = app();
    let mut ids = Vec::new();
    for name in ["Q2 Report", "q2 report", "Q2-REPORT!", "q2_report"] {
        let (status, body) = app.create(json!({ "name": name })).await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        ids,
        ["q2-report", "q2-report-2", "q2-report-3", "q2-report-4"]
    );
    // Another person's ids are theirs: bob gets the plain one.
    let (status, body) = app
        .call(&app.bob, Method::POST, Some(json!({ "name": "Q2 Report" })))
        .await;
    assert_eq!((status, &body["id"]), (201, &json!("q2-report")), "{body}");

    // A name as long as an id allows: the suffix cuts the base, never passes the limit.
    let long = "a".repeat(ID_MAX_BYTES + 5);
    let mut long_ids = Vec::new();
    for _ in 0..3 {
        let (status, body) = app.create(json!({ "name": long })).await;
        assert_eq!(status, 201, "{body}");
        long_ids.push(body["id"].as_str().unwrap().to_owned());
    }
    let a = |n: usize| "a".repeat(n);
    assert_eq!(
        long_ids,
        [
            a(ID_MAX_BYTES),
            format!("{}-2", a(ID_MAX_BYTES - 2)),
            format!("{}-3", a(ID_MAX_BYTES - 2))
        ]
    );
    // An explicit id that is taken is refused, as before.
    let (status, body) = app
        .create(json!({ "id": "q2-report", "name": "Again" }))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (409, &json!("exists")),
        "{body}"
    );
}

#[tokio::test]
async fn names_that_give_no_id_or_break_the_rules_are_clear_400s() {
    let app = app();
    for (body, code) in [
        (json!({ "name": "日本語" }), "invalid_project_name"),
        (json!({ "name": "!!!" }), "invalid_project_name"),
        (json!({ "name": "" }), "invalid_project_name"),
        (json!({ "name": "   " }), "invalid_project_name"),
        (json!({ "name": "two\nlines" }), "invalid_project_name"),
        (json!({ "name": "nul\u{0}byte" }), "invalid_project_name"),
        (
            json!({ "name": "x".repeat(PROJECT_NAME_MAX_BYTES + 1) }),
            "invalid_project_name",
        ),
        (json!({ "name": 5 }), "bad_json"),
        (json!({}), "invalid_request"),
        (json!({ "id": "Bad Id" }), "invalid_id"),
        (json!({ "id": "../x", "name": "fine" }), "invalid_id"),
        (json!({ "name": "ok", "extra": 1 }), "bad_json"),
    ] {
        let (status, answer) = app.create(body.clone()).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
    }
    let (status, answer) = app.create(json!({ "name": "日本語" })).await;
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("a-z, 0-9"),
        "{answer}"
    );
    // The name's length at the edges.
    for (len, ok) in [
        (PROJECT_NAME_MAX_BYTES - 1, true),
        (PROJECT_NAME_MAX_BYTES, true),
        (PROJECT_NAME_MAX_BYTES + 1, false),
    ] {
        let (status, answer) = app.create(json!({ "name": "b".repeat(len) })).await;
        assert_eq!(status == 201, ok, "{len}: {answer}");
    }
    // Hostile names make plain ids and are kept as text.
    for (name, id) in [
        ("../../etc/passwd", "etc-passwd"),
        ("<img src=x onerror=alert(1)>", "img-src-x-onerror-aler"),
        ("\u{202e}fdp.exe", "fdp-exe"),
    ] {
        let (status, body) = app.create(json!({ "name": name })).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(
            (body["id"].as_str().unwrap(), body["name"].as_str().unwrap()),
            (id, name)
        );
    }
    assert!(!app.data.join("etc").exists());
    let listed = app.list(&app.ann).await;
    assert_eq!(listed.len(), 5, "{listed:?}");
}
