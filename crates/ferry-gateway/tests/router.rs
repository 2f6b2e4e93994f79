//! The router alone, driven with `tower::ServiceExt::oneshot` (no socket): who may call
//! which route, and the one shape of every error, `{"error":{"code","message"}}`.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use ferry_config::Config;
use ferry_site::{Site, TokenKind};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A local site: `ann` with project `q3`, `bob` with project `bq`, and their tokens.
struct App {
    _tmp: tempfile::TempDir,
    site: Arc<Site>,
    router: Router,
    ann: String,
    ann_harness: String,
    ann_admin: String,
    bob: String,
}

fn app() -> App {
    let tmp = tempfile::tempdir().unwrap();
    let site = Arc::new(Site::open(&tmp.path().join("site"), Config::default()).unwrap());
    for (person, project) in [("ann", "q3"), ("bob", "bq")] {
        site.add_person(person).unwrap();
        site.add_project(person, project).unwrap();
    }
    let token = |person, kind| site.create_token(person, kind).unwrap();
    let (ann, ann_harness, ann_admin, bob) = (
        token("ann", TokenKind::Person),
        token("ann", TokenKind::Harness),
        token("ann", TokenKind::Admin),
        token("bob", TokenKind::Person),
    );
    let router = ferry_gateway::router(ferry_gateway::AppState::new(site.clone()).unwrap());
    App {
        _tmp: tmp,
        site,
        router,
        ann,
        ann_harness,
        ann_admin,
        bob,
    }
}

/// How a request presents itself.
#[derive(Clone, Copy, Debug)]
enum Auth<'a> {
    None,
    Bearer(&'a str),
    Raw(&'a str),
}

impl App {
    async fn send(&self, method: Method, uri: &str, auth: Auth<'_>, body: Option<Value>) -> Answer {
        let mut request = Request::builder().method(method).uri(uri);
        match auth {
            Auth::None => {}
            Auth::Bearer(token) => {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            Auth::Raw(value) => request = request.header(header::AUTHORIZATION, value),
        }
        let body = match body {
            Some(value) => {
                let text = value.to_string();
                request = request
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::CONTENT_LENGTH, text.len());
                Body::from(text)
            }
            None => Body::empty(),
        };
        let response = self
            .router
            .clone()
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        Answer {
            status,
            content_type,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }
}

struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    body: Value,
}

impl Answer {
    /// Asserts the one error shape with this status and code.
    #[track_caller]
    fn assert_error(&self, status: StatusCode, code: &str, what: &str) {
        assert_eq!(self.status, status, "{what}: {}", self.body);
        assert_eq!(
            self.content_type.as_deref(),
            Some("application/json"),
            "{what}"
        );
        let error = self.body["error"].as_object().unwrap_or_else(|| {
            panic!("{what}: no error object in {}", self.body);
        });
        assert_eq!(
            self.body.as_object().unwrap().len(),
            1,
            "{what}: {}",
            self.body
        );
        let mut keys: Vec<&str> = error.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["code", "message"], "{what}");
        assert_eq!(error["code"], code, "{what}: {}", self.body);
        assert!(
            !error["message"].as_str().unwrap().is_empty(),
            "{what}: an empty message"
        );
    }
}

/// Every route a member calls, with a body that would be valid.
fn member_routes() -> Vec<(Method, &'static str, Option<Value>)> {
    vec![
        (Method::GET, "/v1/files", None),
        (Method::GET, "/v1/files/content?path=public/a.txt", None),
        (Method::DELETE, "/v1/files?path=public/a.txt", None),
        (
            Method::POST,
            "/v1/files/mkdir",
            Some(json!({"path": "public/new"})),
        ),
        (
            Method::POST,
            "/v1/files/move",
            Some(json!({"from": "public/a.txt", "to": "public/b.txt"})),
        ),
        (Method::GET, "/v1/projects", None),
        (Method::POST, "/v1/projects", Some(json!({"id": "new"}))),
        (Method::GET, "/v1/events", None),
        (Method::GET, "/v1/chat/history", None),
        (Method::POST, "/v1/media", None),
        (Method::GET, "/v1/trash", None),
        (
            Method::POST,
            "/v1/trash/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/restore",
            Some(json!({})),
        ),
        (
            Method::DELETE,
            "/v1/trash/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            None,
        ),
        (Method::GET, "/v1/shares", None),
        (
            Method::POST,
            "/v1/shares",
            Some(json!({"path": "public/a.txt", "expiresInSecs": 60})),
        ),
        (
            Method::DELETE,
            "/v1/shares/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            None,
        ),
    ]
}

#[tokio::test]
async fn member_routes_refuse_a_missing_unknown_or_wrong_kind_of_token() {
    let app = app();
    let forged = format!("{}x", app.ann);
    let refusals = [
        Auth::None,
        Auth::Bearer("not-a-token"),
        Auth::Bearer(&forged),
        Auth::Bearer(""),
        Auth::Raw(&app.ann),
        Auth::Raw("Basic YW5uOnB3"),
        Auth::Bearer(&app.ann_harness),
    ];
    for (method, uri, body) in member_routes() {
        for auth in refusals {
            let answer = app.send(method.clone(), uri, auth, body.clone()).await;
            answer.assert_error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                &format!("{method} {uri} with {auth:?}"),
            );
        }
    }
    // Nothing was done on the way.
    assert!(!app.site.path().join("home/ann/public/new").exists());
    let projects: Vec<String> = app
        .site
        .projects("ann")
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(projects, ["q3"]);
}

#[tokio::test]
async fn a_json_body_that_is_not_an_object_is_refused_whatever_it_holds() {
    let app = app();
    // serde's structs would also take their fields as an array, in order.
    for (method, uri, body) in member_routes() {
        let Some(valid) = body else { continue };
        let fields: Vec<Value> = valid.as_object().unwrap().values().cloned().collect();
        for body in [
            json!(fields),
            json!(null),
            json!("x"),
            json!(1),
            json!([null]),
        ] {
            let answer = app
                .send(
                    method.clone(),
                    uri,
                    Auth::Bearer(&app.ann),
                    Some(body.clone()),
                )
                .await;
            answer.assert_error(
                StatusCode::BAD_REQUEST,
                "bad_json",
                &format!("{method} {uri} with {body}"),
            );
        }
    }
    assert!(!app.site.path().join("home/ann/public/new").exists());
}

#[tokio::test]
async fn a_member_token_cannot_act_as_the_harness() {
    let app = app();
    let body = json!({"url": "http://127.0.0.1:9/x", "filename": "x.txt"});
    for auth in [
        Auth::None,
        Auth::Bearer("not-a-token"),
        Auth::Bearer(&app.ann),
        Auth::Bearer(&app.ann_admin),
    ] {
        let answer = app
            .send(Method::POST, "/v1/deliveries", auth, Some(body.clone()))
            .await;
        answer.assert_error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            &format!("{auth:?}"),
        );
    }
}

#[tokio::test]
async fn the_right_tokens_are_let_in() {
    let app = app();
    for token in [&app.ann, &app.ann_admin] {
        let answer = app
            .send(Method::GET, "/v1/files", Auth::Bearer(token), None)
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
        let answer = app
            .send(
                Method::GET,
                "/v1/files?project=q3",
                Auth::Bearer(token),
                None,
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    }
    // The scheme's name in either spelling the gateway accepts.
    let answer = app
        .send(
            Method::GET,
            "/v1/files",
            Auth::Raw(&format!("bearer {}", app.ann)),
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test]
async fn another_persons_project_is_not_found_and_left_alone() {
    let app = app();
    let bob_public = app.site.path().join("home/bob/projects/bq/public");
    let _ = std::fs::create_dir_all(&bob_public);
    std::fs::write(bob_public.join("a.txt"), "bob's").unwrap();
    for project in ["bq", "nope"] {
        let routes: Vec<(Method, String, Option<Value>)> = vec![
            (Method::GET, format!("/v1/files?project={project}"), None),
            (
                Method::GET,
                format!("/v1/files/content?path=public/a.txt&project={project}"),
                None,
            ),
            (
                Method::DELETE,
                format!("/v1/files?path=public/a.txt&project={project}"),
                None,
            ),
            (
                Method::POST,
                "/v1/files/mkdir".to_owned(),
                Some(json!({"path": "public/planted", "project": project})),
            ),
            (
                Method::POST,
                "/v1/files/move".to_owned(),
                Some(json!({"from": "public/a.txt", "to": "public/b.txt", "project": project})),
            ),
        ];
        for (method, uri, body) in routes {
            let answer = app
                .send(method.clone(), &uri, Auth::Bearer(&app.ann), body)
                .await;
            // The same answer as for a project that does not exist: nothing tells them apart.
            answer.assert_error(
                StatusCode::NOT_FOUND,
                "unknown_project",
                &format!("{method} {uri}"),
            );
            let message = answer.body["error"]["message"].as_str().unwrap();
            assert_eq!(message, format!("there is no project \"{project}\""));
        }
    }
    assert_eq!(
        std::fs::read_to_string(bob_public.join("a.txt")).unwrap(),
        "bob's"
    );
    assert!(!bob_public.join("planted").exists() && !bob_public.join("b.txt").exists());
    // Bob himself still reaches it.
    let answer = app
        .send(
            Method::GET,
            "/v1/files?project=bq",
            Auth::Bearer(&app.bob),
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
}

#[tokio::test]
async fn a_clients_mistake_gets_a_4xx_in_the_one_error_shape() {
    let app = app();
    let ann = Auth::Bearer(&app.ann);
    let cases: Vec<(Method, &str, Option<Value>, StatusCode, &str)> = vec![
        (
            Method::GET,
            "/v1/nothing-here",
            None,
            StatusCode::NOT_FOUND,
            "no_route",
        ),
        (
            Method::PUT,
            "/v1/files",
            None,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Method::GET,
            "/v1/files?surprise=1",
            None,
            StatusCode::BAD_REQUEST,
            "bad_query",
        ),
        (
            Method::GET,
            "/v1/files/content",
            None,
            StatusCode::BAD_REQUEST,
            "bad_query",
        ),
        (
            Method::POST,
            "/v1/files/mkdir",
            Some(json!({"path": 7})),
            StatusCode::BAD_REQUEST,
            "bad_json",
        ),
        (
            Method::POST,
            "/v1/files/mkdir",
            Some(json!({"path": "public/x", "extra": true})),
            StatusCode::BAD_REQUEST,
            "bad_json",
        ),
        (
            Method::GET,
            "/v1/files/content?path=public/missing.txt",
            None,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::GET,
            "/v1/files/content?path=../../etc/passwd",
            None,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (method, uri, body, status, code) in cases {
        let answer = app.send(method.clone(), uri, ann, body).await;
        answer.assert_error(status, code, &format!("{method} {uri}"));
    }
    // A body that is not JSON at all, and one not labelled as JSON.
    for (content_type, status, code) in [
        ("application/json", StatusCode::BAD_REQUEST, "bad_json"),
        (
            "text/plain",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "bad_content_type",
        ),
    ] {
        let request = Request::post("/v1/files/mkdir")
            .header(header::AUTHORIZATION, format!("Bearer {}", app.ann))
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from("{not json"))
            .unwrap();
        let response = app.router.clone().oneshot(request).await.unwrap();
        let got = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(got, status, "{content_type}: {body}");
        assert_eq!(body["error"]["code"], code, "{content_type}: {body}");
    }
}

// ------------------------------------------------------------------------ node admin

/// Records a hello from the key whose hex digits are all `digit`, as the link would.
fn paired(site: &Site, digit: char, commands: &[&str]) -> String {
    let hello = ferry_site::NodeHello {
        id: std::iter::repeat_n(digit, 20).collect(),
        public_key: std::iter::repeat_n(digit, 64).collect(),
        name: "box".into(),
        platform: "linux".into(),
        shell: "bash".into(),
        commands: commands.iter().map(|c| c.to_string()).collect(),
    };
    site.record_hello(&hello).unwrap().id
}

/// Non-admins see the node routes as routes that do not exist.
#[tokio::test]
async fn the_node_routes_are_hidden_from_everyone_but_an_admin() {
    let app = app();
    let id = paired(&app.site, 'a', &["dir.list"]);
    let approve = format!("/v1/nodes/{id}/approve");
    let revoke = format!("/v1/nodes/{id}");
    for auth in [
        Auth::None,
        Auth::Bearer("fy_not_a_token"),
        Auth::Raw("Basic YWRtaW46YWRtaW4="),
        Auth::Bearer(&app.ann),
        Auth::Bearer(&app.ann_harness),
        Auth::Bearer(&app.bob),
    ] {
        let what = format!("{auth:?}");
        let answers = [
            app.send(Method::GET, "/v1/nodes", auth, None).await,
            app.send(Method::POST, &approve, auth, Some(json!({})))
                .await,
            app.send(Method::POST, &approve, auth, Some(json!("junk")))
                .await,
            app.send(Method::DELETE, &revoke, auth, None).await,
            app.send(Method::PUT, "/v1/nodes", auth, None).await,
            app.send(Method::GET, &approve, auth, None).await,
            app.send(Method::PATCH, &revoke, auth, None).await,
        ];
        for answer in answers {
            answer.assert_error(StatusCode::NOT_FOUND, "no_route", &what);
        }
    }
    // Nothing a non-admin sent changed the node.
    assert_eq!(
        app.site.node(&id).unwrap().state,
        ferry_site::NodeState::Pending
    );
}

#[tokio::test]
async fn an_admin_lists_approves_and_revokes_nodes() {
    let app = app();
    let admin = Auth::Bearer(&app.ann_admin);
    app.send(Method::PUT, "/v1/nodes", admin, None)
        .await
        .assert_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "PUT");
    let empty = app.send(Method::GET, "/v1/nodes", admin, None).await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.body, json!({"nodes": []}));

    let id = paired(&app.site, 'a', &["dir.list", "file.fetch"]);
    let listed = app.send(Method::GET, "/v1/nodes", admin, None).await;
    let node = &listed.body["nodes"][0];
    assert_eq!(node["id"], id.as_str());
    assert_eq!(node["name"], "box");
    assert_eq!(node["state"], "pending");
    assert_eq!(node["platform"], "linux");
    assert_eq!(node["shell"], "bash");
    assert_eq!(
        node["advertisedCommands"],
        json!(["dir.list", "file.fetch"])
    );
    assert_eq!(node["approvedCommands"], json!([]));
    assert_eq!(node["connected"], false);

    let uri = format!("/v1/nodes/{id}/approve");
    let some = app
        .send(
            Method::POST,
            &uri,
            admin,
            Some(json!({"commands": ["file.fetch"]})),
        )
        .await;
    assert_eq!(some.status, StatusCode::OK, "{}", some.body);
    assert_eq!(some.body["state"], "approved");
    assert_eq!(some.body["approvedCommands"], json!(["file.fetch"]));
    assert_eq!(some.body["pendingCommands"], json!(["dir.list"]));

    // No body, or a body without `commands`: everything advertised.
    let all = app.send(Method::POST, &uri, admin, None).await;
    assert_eq!(
        all.body["approvedCommands"],
        json!(["dir.list", "file.fetch"])
    );
    let all = app.send(Method::POST, &uri, admin, Some(json!({}))).await;
    assert_eq!(
        all.body["approvedCommands"],
        json!(["dir.list", "file.fetch"])
    );

    let revoked = app
        .send(Method::DELETE, &format!("/v1/nodes/{id}"), admin, None)
        .await;
    assert_eq!(revoked.status, StatusCode::OK);
    assert_eq!(revoked.body["state"], "revoked");
    app.send(Method::POST, &uri, admin, None)
        .await
        .assert_error(
            StatusCode::CONFLICT,
            "node_revoked",
            "approve a revoked node",
        );
    assert!(app.site.served_commands(&id).unwrap().is_empty());
}

#[tokio::test]
async fn an_admins_hostile_ids_and_bodies_are_clear_refusals() {
    let app = app();
    let admin = Auth::Bearer(&app.ann_admin);
    let id = paired(&app.site, 'a', &["dir.list"]);
    let long = "a".repeat(5000);
    for bad in ["bbbbbbbbbbbbbbbbbbbb", "%2e%2e", "%FF", "A", long.as_str()] {
        app.send(
            Method::POST,
            &format!("/v1/nodes/{bad}/approve"),
            admin,
            None,
        )
        .await
        .assert_error(StatusCode::NOT_FOUND, "unknown_node", bad);
        app.send(Method::DELETE, &format!("/v1/nodes/{bad}"), admin, None)
            .await
            .assert_error(StatusCode::NOT_FOUND, "unknown_node", bad);
    }
    let uri = format!("/v1/nodes/{id}/approve");
    for (body, code) in [
        (
            json!({"commands": ["terminal.open"]}),
            "command_not_advertised",
        ),
        (json!({"commands": "dir.list"}), "bad_json"),
        (json!({"commands": [1]}), "bad_json"),
        (json!({"commands": ["dir.list"], "also": true}), "bad_json"),
        (json!([]), "bad_json"),
    ] {
        app.send(Method::POST, &uri, admin, Some(body.clone()))
            .await
            .assert_error(StatusCode::BAD_REQUEST, code, &body.to_string());
    }
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(&uri)
        .header(header::AUTHORIZATION, format!("Bearer {}", app.ann_admin));
    request = request.header(header::CONTENT_TYPE, "text/plain");
    let response = app
        .router
        .clone()
        .oneshot(request.body(Body::from("{}")).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // None of it approved anything.
    assert_eq!(
        app.site.node(&id).unwrap().state,
        ferry_site::NodeState::Pending
    );
}
