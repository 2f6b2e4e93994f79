//! `POST /v1/chat` and `GET /v1/chat/history`: the relay between a member and the upstream
//! agent of their workspace (spec M-CHAT).
//!
//! The relay speaks OpenAI-compatible streaming chat completions upstream, presenting the
//! workspace's harness token so the agent can deliver files, and streams the reply to the
//! member as `delta` events. Files that appear or change in `public/attachments/` during
//! the turn, however they got there, are announced as `notice` events; notices live only
//! in the stream, while the saved conversation keeps the agent's own words.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use ferry_site::{ChatMessage, ChatRole, PublicPath, SiteError, rfc3339};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::auth::Member;
use crate::extract::{JsonBody, QueryParams};
use crate::files::ProjectQuery;
use crate::{ApiError, AppState, blocking};

/// The longest message a member may send, in bytes.
pub const CHAT_MESSAGE_MAX_BYTES: usize = 64 * 1024;
/// The most files one message may attach.
pub const CHAT_ATTACHMENTS_MAX: usize = 32;
/// Events buffered between the upstream reader and a slow member.
const RELAY_QUEUE_EVENTS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    message: String,
    project: Option<String>,
    #[serde(default)]
    attachments: Vec<String>,
}

#[derive(Serialize)]
pub struct History {
    messages: Vec<HistoryMessage>,
}

#[derive(Serialize)]
struct HistoryMessage {
    role: ChatRole,
    text: String,
    attachments: Vec<String>,
    time: String,
}

impl From<ChatMessage> for HistoryMessage {
    fn from(m: ChatMessage) -> HistoryMessage {
        let created = std::time::UNIX_EPOCH + Duration::from_secs(m.created.max(0) as u64);
        HistoryMessage {
            role: m.role,
            text: m.text,
            attachments: m.attachments,
            time: rfc3339(created),
        }
    }
}

pub async fn history(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<ProjectQuery>,
) -> Result<Json<History>, ApiError> {
    let site = state.site.clone();
    let messages = state
        .in_workspace(&who.person, q.project.as_deref(), move |ws| {
            site.chat_history(ws.person(), ws.project())
        })
        .await?;
    Ok(Json(History {
        messages: messages.into_iter().map(HistoryMessage::from).collect(),
    }))
}

/// Everything a turn needs, checked before the stream starts.
struct Turn {
    upstream: String,
    person: String,
    project: Option<String>,
    token: String,
    body: Value,
}

pub async fn chat(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let agent = &state.site.config().agent;
    let Some(upstream) = agent.upstream.clone() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "no_agent",
            "no agent is connected: set [agent] upstream = \"http://…/v1/chat/completions\" in ferry.toml \
             (or FERRY_AGENT__UPSTREAM) and restart ferry",
        ));
    };
    if request.message.trim().is_empty() && request.attachments.is_empty() {
        return Err(ApiError::bad_request(
            "empty_message",
            "write a message or attach a file",
        ));
    }
    if request.message.len() > CHAT_MESSAGE_MAX_BYTES {
        return Err(ApiError::bad_request(
            "message_too_long",
            format!("a message may have at most {CHAT_MESSAGE_MAX_BYTES} bytes"),
        ));
    }
    if request.attachments.len() > CHAT_ATTACHMENTS_MAX {
        return Err(ApiError::bad_request(
            "too_many_attachments",
            format!("attach at most {CHAT_ATTACHMENTS_MAX} files to one message"),
        ));
    }

    let site = state.site.clone();
    let (message, attachments) = (request.message.clone(), request.attachments.clone());
    let (history, before, attachments) = state
        .in_workspace(&who.person, request.project.as_deref(), move |workspace| {
            // Attachments must name files the member can see: their own public/ only.
            let attachments = attachments
                .iter()
                .map(|path| {
                    let parsed = PublicPath::parse(path)?;
                    workspace.open_public_file(&parsed.display())?;
                    Ok(parsed.display())
                })
                .collect::<Result<Vec<_>, SiteError>>()?;
            let (person, project) = (workspace.person(), workspace.project());
            let history = site.chat_history(person, project)?;
            let before = workspace.attachments_state()?;
            site.append_chat(person, project, ChatRole::User, &message, &attachments)?;
            Ok((history, before, attachments))
        })
        .await?;

    let token = state.relay_token(&who.person).await?;
    let turn = Turn {
        upstream,
        person: who.person.clone(),
        project: request.project.clone(),
        token,
        body: json!({
            "model": agent.model,
            "stream": true,
            "messages": upstream_messages(&history, &request.message, &attachments),
        }),
    };
    let (tx, rx) = mpsc::channel::<Event>(RELAY_QUEUE_EVENTS);
    let timeout = Duration::from_secs(agent.timeout_secs);
    let closing = state.closing.clone();
    tokio::spawn(async move {
        // The reply is collected here, so that whatever came before a failure is saved.
        let mut reply = String::new();
        let failure =
            match tokio::time::timeout(timeout, relay(&state, &turn, &tx, &mut reply)).await {
                Ok(result) => result.err(),
                Err(_) => Some((
                    "upstream_timeout",
                    format!(
                        "the agent did not finish its reply within {} seconds",
                        timeout.as_secs()
                    ),
                )),
            };
        if let Some((code, message)) = failure {
            send(&tx, "error", json!({ "code": code, "message": message })).await;
        }
        finish_turn(&state, &turn, reply, before, &tx).await;
        send(&tx, "done", json!({})).await;
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), rx))
    })
    .take_until(closing.cancelled_owned());
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// What went wrong upstream: an error code and a message.
type RelayError = (&'static str, String);

/// Streams the upstream reply to the member, appending its text to `reply`.
async fn relay(
    state: &AppState,
    turn: &Turn,
    tx: &mpsc::Sender<Event>,
    reply: &mut String,
) -> Result<(), RelayError> {
    let mut request = state
        .http
        .post(&turn.upstream)
        .bearer_auth(&turn.token)
        .header("X-Ferry-Person", &turn.person)
        .json(&turn.body);
    if let Some(project) = &turn.project {
        request = request.header("X-Ferry-Project", project);
    }
    let response = request.send().await.map_err(|e| {
        (
            "upstream_error",
            format!("the agent could not be reached: {}", describe(&e)),
        )
    })?;
    if !response.status().is_success() {
        return Err((
            "upstream_error",
            format!("the agent answered {}", response.status()),
        ));
    }
    let streaming = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    if !streaming {
        // A server that ignores `stream: true` and answers one JSON completion.
        let body: Value = response.json().await.map_err(|e| {
            (
                "upstream_error",
                format!(
                    "the agent's answer is not a chat completion: {}",
                    describe(&e)
                ),
            )
        })?;
        if let Some(text) = body["choices"][0]["message"]["content"].as_str() {
            reply.push_str(text);
            send(tx, "delta", json!({ "text": text })).await;
        }
        return Ok(());
    }
    let mut body = response.bytes_stream();
    let mut buffer = BytesMut::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| {
            (
                "upstream_dropped",
                format!("the agent's reply broke off: {}", describe(&e)),
            )
        })?;
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            let line = String::from_utf8_lossy(&line);
            let Some(data) = line.trim_end().strip_prefix("data:") else {
                continue;
            };
            let data = data.trim_start();
            if data == "[DONE]" {
                return Ok(());
            }
            let Ok(value) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(text) = value["choices"][0]["delta"]["content"].as_str()
                && !text.is_empty()
            {
                reply.push_str(text);
                // A member who left still gets the whole reply saved in the history.
                send(tx, "delta", json!({ "text": text })).await;
            }
        }
    }
    Ok(())
}

/// Saves the agent's words and announces the files the turn delivered.
async fn finish_turn(
    state: &AppState,
    turn: &Turn,
    reply: String,
    before: ferry_site::AttachmentsState,
    tx: &mpsc::Sender<Event>,
) {
    let (site, person, project) = (
        state.site.clone(),
        turn.person.clone(),
        turn.project.clone(),
    );
    let delivered = blocking(move || {
        if !reply.is_empty() {
            site.append_chat(
                &person,
                project.as_deref(),
                ChatRole::Assistant,
                &reply,
                &[],
            )?;
        }
        let after = site
            .workspace(&person, project.as_deref())?
            .attachments_state()?;
        Ok::<_, SiteError>(ferry_site::attachments_changed(&before, &after))
    })
    .await;
    let delivered = match delivered {
        Ok(paths) => paths,
        Err(e) => {
            send(tx, "error", json!({ "code": e.code, "message": e.message })).await;
            return;
        }
    };
    for path in &delivered {
        // `text` is for people to read; `path` stays exact, for the download.
        let text = ferry_site::delivery_notice(path);
        send(tx, "notice", json!({ "text": text, "path": path })).await;
    }
    if !delivered.is_empty() {
        state
            .events
            .publish(&turn.person, turn.project.as_deref(), delivered);
    }
}

/// The conversation as the upstream agent gets it: the delivery rules first, then every
/// saved turn, then the new message with its attachments named by their paths.
fn upstream_messages(history: &[ChatMessage], message: &str, attachments: &[String]) -> Vec<Value> {
    let mut messages =
        vec![json!({ "role": "system", "content": ferry_site::docs::FILE_DELIVERY_MD })];
    for m in history {
        let role = match m.role {
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        };
        messages
            .push(json!({ "role": role, "content": with_attachments(&m.text, &m.attachments) }));
    }
    messages.push(json!({ "role": "user", "content": with_attachments(message, attachments) }));
    messages
}

fn with_attachments(text: &str, attachments: &[String]) -> String {
    if attachments.is_empty() {
        text.to_owned()
    } else {
        format!("{text}\n\nAttached files: {}", attachments.join(", "))
    }
}

/// Sends one event; `false` when the member has gone.
async fn send(tx: &mpsc::Sender<Event>, name: &str, data: Value) -> bool {
    let event = Event::default().event(name).data(data.to_string());
    tx.send(event).await.is_ok()
}

/// reqwest's message with its causes, without the URL.
fn describe(err: &reqwest::Error) -> String {
    crate::deliveries::without_url(err)
}
