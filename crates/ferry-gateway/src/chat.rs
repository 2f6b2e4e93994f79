//! `POST /v1/chat` and `GET /v1/chat/history`: the relay between a member and the upstream
//! agent of their workspace (spec M-CHAT).
//!
//! The relay speaks OpenAI-compatible streaming chat completions upstream, presenting the
//! workspace's harness token so the agent can deliver files, and streams the reply to the
//! member as `delta` events. Files that appear or change in `public/attachments/` during
//! the turn, however they got there, are announced as `notice` events; notices live only
//! in the stream, while the saved conversation keeps the agent's own words.
//!
//! What one turn costs the gateway is bounded: the conversation sent upstream is the
//! newest saved messages within `agent.max_context_bytes`, and a person runs at most
//! [`CHAT_TURNS_PER_PERSON_MAX`] turns at once.

use std::borrow::Cow;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use ferry_codes::Code;
use ferry_config::limits::{CHAT_PAGE_DEFAULT_MESSAGES, CHAT_PAGE_MAX_MESSAGES};
use ferry_exec::member::MemberAction;
use ferry_site::{ChatMessage, ChatRole, PublicPath, rfc3339};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{OneOfBuilder, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::routes;

use crate::auth::Member;
use crate::events::SseData;
use crate::extract::{JsonBody, OptionalJsonBody, QueryParams};
use crate::openapi::ApiRouter;
use crate::tally::Place;
use crate::{ApiError, AppState, blocking};
use ferry_config::limits::{
    CHAT_ATTACHMENTS_MAX, CHAT_MESSAGE_MAX_BYTES, CHAT_TURNS_PER_PERSON_MAX,
};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new()
        .routes(routes!(chat))
        .routes(routes!(history))
        .routes(routes!(new_conversation))
}

/// Events buffered between the upstream reader and a slow member.
const RELAY_QUEUE_EVENTS: usize = 64;

/// What the member reads when the upstream cannot be reached or fails on its side; what
/// went wrong is in the gateway's log, for whoever runs it.
const AGENT_NOT_ANSWERING: &str = "The agent is not answering. Try again in a moment; if it \
     keeps happening, tell whoever runs this site (the details are in its log).";

/// A message to the agent: text, files of the person's `public/`, or both.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChatRequest {
    /// What the person writes (at most 64 KiB of UTF-8); may be blank when files are attached.
    message: String,
    /// The project whose conversation it joins; the main workspace when absent.
    project: Option<String>,
    /// Paths of files in the person's `public/` to attach, e.g. `public/report.pdf`.
    #[serde(default)]
    #[schema(max_items = 32)]
    attachments: Vec<String>,
}

/// `GET /v1/chat/history`'s query: the workspace and which page.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// The project whose conversation to read; the main workspace when absent.
    project: Option<String>,
    /// The `earlier` of the page shown last: the page of the messages before it.
    #[param(minimum = 1)]
    before: Option<i64>,
    /// How many messages the page holds at most; 50 when absent.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<usize>,
}

/// One page of the saved conversation, oldest message first.
#[derive(Serialize, ToSchema)]
pub struct ChatHistory {
    messages: Vec<ChatHistoryMessage>,
    /// The `before` that reads the next older page; `null` when there is none.
    #[schema(required = true)]
    earlier: Option<i64>,
}

/// A saved message: the person's, or the agent's own words (never a delivery notice).
#[derive(Serialize, ToSchema)]
struct ChatHistoryMessage {
    /// Grows with every message; an `earlier` is one of these.
    id: i64,
    role: ChatRole,
    text: String,
    /// The `public/` paths the person attached.
    attachments: Vec<String>,
    /// When it was saved (RFC 3339, UTC).
    #[schema(format = DateTime)]
    time: String,
}

impl From<ChatMessage> for ChatHistoryMessage {
    fn from(m: ChatMessage) -> ChatHistoryMessage {
        let created = std::time::UNIX_EPOCH + Duration::from_secs(m.created.max(0) as u64);
        ChatHistoryMessage {
            id: m.id,
            role: m.role,
            text: m.text,
            attachments: m.attachments,
            time: rfc3339(created),
        }
    }
}

/// One page of the saved conversation, the newest unless `before` names an older one.
#[utoipa::path(
    get,
    path = "/v1/chat/history",
    operation_id = "chatHistory",
    tag = "chat",
    security(("bearer" = [])),
    params(HistoryQuery),
    responses((status = 200, description = "A page of the workspace's saved conversation.",
               body = ChatHistory))
)]
pub async fn history(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<HistoryQuery>,
) -> Result<Json<ChatHistory>, ApiError> {
    let limit = q.limit.unwrap_or(CHAT_PAGE_DEFAULT_MESSAGES);
    if !(1..=CHAT_PAGE_MAX_MESSAGES).contains(&limit) {
        return Err(ApiError::new(
            Code::BadLimit,
            format!("limit must be between 1 and {CHAT_PAGE_MAX_MESSAGES}"),
        ));
    }
    if q.before.is_some_and(|id| id < 1) {
        return Err(ApiError::new(
            Code::BadCursor,
            "before must be the `earlier` of a page read before",
        ));
    }
    let site = state.site.clone();
    let page = state
        .in_workspace(&who.person, q.project.as_deref(), move |ws| {
            site.chat_page(ws.person(), ws.project(), q.before, limit)
        })
        .await?;
    Ok(Json(ChatHistory {
        messages: page
            .messages
            .into_iter()
            .map(ChatHistoryMessage::from)
            .collect(),
        earlier: page.earlier,
    }))
}

/// `POST /v1/chat/new`'s body: the workspace whose conversation starts afresh.
#[derive(Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewConversation {
    /// The project; the main workspace when absent.
    project: Option<String>,
}

/// The workspace whose conversation was started afresh.
#[derive(Serialize, ToSchema)]
pub struct ConversationStarted {
    /// The project; `null` for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
}

/// Starts the workspace's conversation afresh.
///
/// The messages so far are archived: no longer listed, nor sent upstream as context.
#[utoipa::path(
    post,
    path = "/v1/chat/new",
    operation_id = "newConversation",
    tag = "chat",
    security(("bearer" = [])),
    request_body(content = Option<NewConversation>, content_type = "application/json",
                 description = "The workspace; no body at all means the main workspace."),
    responses((status = 200, description = "The conversation was archived; an empty one starts.",
               body = ConversationStarted))
)]
pub async fn new_conversation(
    State(state): State<AppState>,
    Member(who): Member,
    OptionalJsonBody(body): OptionalJsonBody<NewConversation>,
) -> Result<Json<ConversationStarted>, ApiError> {
    let site = state.site.clone();
    state
        .in_workspace(&who.person, body.project.as_deref(), move |ws| {
            site.new_conversation(ws.person(), ws.project())
        })
        .await?;
    Ok(Json(ConversationStarted {
        project: body.project,
    }))
}

/// One event of a reply's stream, as `POST /v1/chat` sends it.
enum ChatEvent {
    Delta(ChatDelta),
    Notice(ChatNotice),
    Error(ChatFailure),
    Done(ChatDone),
}

impl ChatEvent {
    fn to_sse(&self) -> Event {
        match self {
            ChatEvent::Delta(e) => e.event(),
            ChatEvent::Notice(e) => e.event(),
            ChatEvent::Error(e) => e.event(),
            ChatEvent::Done(e) => e.event(),
        }
    }
}

impl PartialSchema for ChatEvent {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(ChatDelta::described())
            .item(ChatNotice::described())
            .item(ChatFailure::described())
            .item(ChatDone::described())
            .description(Some("One event of a chat reply's stream."))
            .into()
    }
}

impl ToSchema for ChatEvent {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        ChatDelta::add_schemas(schemas);
        ChatNotice::add_schemas(schemas);
        ChatFailure::add_schemas(schemas);
        ChatDone::add_schemas(schemas);
    }
}

/// Reply text as it arrives: `delta`.
#[derive(Serialize, ToSchema)]
struct ChatDelta {
    text: String,
}

impl SseData for ChatDelta {
    const EVENT: &'static str = "delta";
}

/// A file that appeared or changed in `public/attachments/` during the turn: `notice`.
#[derive(Serialize, ToSchema)]
struct ChatNotice {
    /// For people to read, e.g. `📎 report.pdf — public/attachments/report.pdf`.
    text: String,
    /// The file's exact path, for the download.
    path: String,
}

impl SseData for ChatNotice {
    const EVENT: &'static str = "notice";
}

/// Why the turn failed after its stream began: `error`.
#[derive(Serialize, ToSchema)]
struct ChatFailure {
    #[schema(schema_with = crate::openapi::code_schema)]
    code: Code,
    message: String,
}

impl SseData for ChatFailure {
    const EVENT: &'static str = "error";
}

/// The turn is over, the person's place given back; always the last event: `done`.
#[derive(Serialize, ToSchema)]
struct ChatDone {}

impl SseData for ChatDone {
    const EVENT: &'static str = "done";
}

/// Everything a turn needs, checked before the stream starts.
struct Turn {
    upstream: String,
    person: String,
    project: Option<String>,
    /// The harness token presented upstream; none when an API key is sent instead.
    token: Option<String>,
    /// The upstream request's JSON, written once.
    body: Bytes,
    /// The conversation the turn belongs to ([`ferry_site::Site::conversation_mark`]).
    conversation: i64,
    /// The person's place among their running turns, given back when the turn ends.
    _place: Place,
}

/// Sends the person's message to the workspace's agent and streams its reply.
#[utoipa::path(
    post,
    path = "/v1/chat",
    operation_id = "chat",
    tag = "chat",
    security(("bearer" = [])),
    request_body = ChatRequest,
    responses((status = 200, content_type = "text/event-stream", body = ChatEvent,
               description = "Server-Sent Events, each `data` a JSON object: `delta` for reply \
               text as it arrives; `notice` once for each file that appeared or changed in \
               `public/attachments/` during the turn; `error` when the turn failed after the \
               stream began; then `done`, last. Comment lines keep an idle stream open."))
)]
pub async fn chat(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let agent = &state.site.config().agent;
    let Some(upstream) = agent.upstream.clone() else {
        return Err(ApiError::new(
            Code::NoAgent,
            "no agent is connected: set [agent] upstream = \"http://…/v1/chat/completions\" in ferry.toml \
             (or FERRY_AGENT__UPSTREAM) and restart ferry",
        ));
    };
    if request.message.trim().is_empty() && request.attachments.is_empty() {
        return Err(ApiError::new(
            Code::EmptyMessage,
            "write a message or attach a file",
        ));
    }
    if request.message.len() > CHAT_MESSAGE_MAX_BYTES {
        return Err(ApiError::new(
            Code::MessageTooLong,
            format!("a message may have at most {CHAT_MESSAGE_MAX_BYTES} bytes"),
        ));
    }
    if request.attachments.len() > CHAT_ATTACHMENTS_MAX {
        return Err(ApiError::new(
            Code::TooManyAttachments,
            format!("attach at most {CHAT_ATTACHMENTS_MAX} files to one message"),
        ));
    }
    // Taken before anything is read, saved or sent, so a refused turn costs nothing.
    let Some(place) = state.turns.take(&who.person, CHAT_TURNS_PER_PERSON_MAX) else {
        return Err(ApiError::new(
            Code::TooManyTurns,
            format!(
                "you already have {CHAT_TURNS_PER_PERSON_MAX} replies on their way, the most \
                 one person may wait for at once; wait for one to finish or stop it, then \
                 send this message again"
            ),
        ));
    };

    let site = state.site.clone();
    let (model, max_context) = (agent.model.clone(), agent.max_context_bytes);
    let (message, attachments) = (request.message, request.attachments);
    let (acting, person, project) = (state.clone(), who.person.clone(), request.project.clone());
    let (body, before, conversation) = blocking(move || {
        let project = project.as_deref();
        site.workspace(&person, project)?;
        let conversation = site.conversation_mark(&person, project)?;
        // Attachments must name files the member can see: their own public/ only,
        // opened as the person.
        let attachments = attachments
            .iter()
            .map(|path| {
                let parsed = PublicPath::parse(path)?;
                let open = MemberAction::Open {
                    path: parsed.display(),
                };
                acting.member_now(&person, project, open)?;
                Ok(parsed.display())
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        let history = site.chat_context(&person, project, max_context, |m| {
            UpstreamMessage::saved(m).bytes()
        })?;
        let body = upstream_body(&model, &history, &message, &attachments);
        let before = acting.attachments_now(&person, project)?;
        site.append_chat(&person, project, ChatRole::User, &message, &attachments)?;
        Ok::<_, ApiError>((body, before, conversation))
    })
    .await?;

    // A hosted endpoint with an API key gets the key, never a ferry credential.
    let token = match state.agent_key {
        Some(_) => None,
        None => Some(state.relay_token(&who.person).await?),
    };
    let turn = Turn {
        upstream,
        person: who.person.clone(),
        project: request.project.clone(),
        token,
        body,
        conversation,
        _place: place,
    };
    let (tx, rx) = mpsc::channel::<Event>(RELAY_QUEUE_EVENTS);
    let timeout = Duration::from_secs(agent.timeout_secs);
    let mut reply = Reply::new(agent.max_reply_bytes);
    let closing = state.closing.clone();
    tokio::spawn(async move {
        // Whatever ends the turn first drops the relay, which closes the upstream
        // connection, so the agent stops generating: the deadline, the end of the reply,
        // or the member going away (a closed page, Stop, the gateway stopping).
        let failure = tokio::select! {
            relayed = tokio::time::timeout(timeout, relay(&state, &turn, &tx, &mut reply)) => {
                match relayed {
                    Ok(result) => result.err(),
                    // Not a byte by the deadline: as good as not there.
                    Err(_) if !reply.answered => Some(not_answering(
                        &turn,
                        &format!("no reply within {} seconds", timeout.as_secs()),
                    )),
                    Err(_) => Some((
                        Code::UpstreamTimeout,
                        format!(
                            "the agent did not finish its reply within {} seconds",
                            timeout.as_secs()
                        ),
                    )),
                }
            }
            () = tx.closed() => None,
        };
        if let Some((code, message)) = failure {
            send(&tx, ChatEvent::Error(ChatFailure { code, message })).await;
        }
        // Whatever came before the end is saved, as far as it came.
        finish_turn(&state, &turn, reply.text, before, &tx).await;
        // The person's place comes back before `done` says the turn is over.
        drop(turn);
        send(&tx, ChatEvent::Done(ChatDone {})).await;
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
type RelayError = (Code, String);

/// Room in one upstream line for the JSON around the text it carries, in bytes.
const LINE_SLACK_BYTES: usize = 64 * 1024;

/// The reply as it arrives, held to `agent.max_reply_bytes`.
struct Reply {
    text: String,
    max_bytes: u64,
    /// Set once the upstream has answered (its status line and headers came).
    answered: bool,
}

impl Reply {
    fn new(max_bytes: u64) -> Reply {
        Reply {
            text: String::new(),
            max_bytes,
            answered: false,
        }
    }

    /// The longest upstream line (or whole JSON answer) worth reading, in bytes: one
    /// that carries more than a reply may hold is cut before it is read whole.
    fn line_max_bytes(&self) -> usize {
        usize::try_from(self.max_bytes)
            .unwrap_or(usize::MAX)
            .saturating_add(LINE_SLACK_BYTES)
    }

    /// Adds `text` as far as the cap allows and relays what was added; past the cap the
    /// reply ends with the cut note, and the turn with `reply_too_large`.
    async fn say(&mut self, tx: &mpsc::Sender<Event>, text: &str) -> Result<(), RelayError> {
        let start = self.text.len();
        self.text.push_str(text);
        let cut = ferry_site::cut_reply(&mut self.text, self.max_bytes);
        self.relay_from(tx, start).await?;
        if cut {
            return Err(self.too_large());
        }
        Ok(())
    }

    /// Ends the reply as cut: the agent sent more at once than a reply may hold.
    async fn cut(&mut self, tx: &mpsc::Sender<Event>) -> RelayError {
        let start = self.text.len();
        ferry_site::end_as_cut(&mut self.text, self.max_bytes);
        if let Err(gone) = self.relay_from(tx, start).await {
            return gone;
        }
        self.too_large()
    }

    async fn relay_from(&self, tx: &mpsc::Sender<Event>, start: usize) -> Result<(), RelayError> {
        let added = &self.text[start..];
        if added.is_empty() {
            return Ok(());
        }
        let delta = ChatEvent::Delta(ChatDelta {
            text: added.to_owned(),
        });
        if !send(tx, delta).await {
            return Err((Code::Gone, "the member left".to_owned()));
        }
        Ok(())
    }

    fn too_large(&self) -> RelayError {
        (
            Code::ReplyTooLarge,
            format!(
                "the reply was longer than {} bytes: it was cut there and the agent stopped",
                self.max_bytes
            ),
        )
    }
}

/// Splits an upstream body into lines, holding at most `max_bytes` of one line, and
/// looking at every byte once.
struct Lines {
    partial: BytesMut,
    max_bytes: usize,
}

impl Lines {
    /// The lines `chunk` completes, each with its `\n`; `None` once a line is too long.
    fn push(&mut self, mut chunk: Bytes) -> Option<Vec<Bytes>> {
        let mut lines = Vec::new();
        while let Some(end) = chunk.iter().position(|b| *b == b'\n') {
            if self.partial.len() + end > self.max_bytes {
                return None;
            }
            let piece = chunk.split_to(end + 1);
            if self.partial.is_empty() {
                lines.push(piece);
            } else {
                self.partial.extend_from_slice(&piece);
                lines.push(self.partial.split().freeze());
            }
        }
        if self.partial.len() + chunk.len() > self.max_bytes {
            return None;
        }
        self.partial.extend_from_slice(&chunk);
        Some(lines)
    }
}

/// What one line of an upstream event stream says.
enum Line {
    /// `data: [DONE]`: the reply is complete.
    Done,
    /// A chunk with reply text.
    Text(String),
    /// Anything else: comments, other fields, chunks without text.
    Other,
}

fn parse_line(line: &[u8]) -> Line {
    let line = String::from_utf8_lossy(line);
    let Some(data) = line.trim_end().strip_prefix("data:") else {
        return Line::Other;
    };
    let data = data.trim_start();
    if data == "[DONE]" {
        return Line::Done;
    }
    let Ok(value) = serde_json::from_str::<Value>(data) else {
        return Line::Other;
    };
    match value["choices"][0]["delta"]["content"].as_str() {
        Some(text) if !text.is_empty() => Line::Text(text.to_owned()),
        _ => Line::Other,
    }
}

/// Streams the upstream reply to the member, appending its text to `reply`.
async fn relay(
    state: &AppState,
    turn: &Turn,
    tx: &mpsc::Sender<Event>,
    reply: &mut Reply,
) -> Result<(), RelayError> {
    let mut request = state.http.post(&turn.upstream);
    request = match (&state.agent_key, &turn.token) {
        (Some(key), _) => request.bearer_auth(key.expose()),
        (None, Some(token)) => request.bearer_auth(token),
        (None, None) => request,
    };
    let mut request = request
        .header("X-Ferry-Person", &turn.person)
        .header(axum::http::header::CONTENT_TYPE, "application/json")
        .body(turn.body.clone());
    if let Some(project) = &turn.project {
        request = request.header("X-Ferry-Project", project);
    }
    let response = request
        .send()
        .await
        .map_err(|e| not_answering(turn, &format!("could not be reached: {}", describe(&e))))?;
    reply.answered = true;
    if response.status().is_server_error() {
        let detail = format!("answered HTTP {}", response.status().as_u16());
        return Err(not_answering(turn, &detail));
    }
    if !response.status().is_success() {
        // The number only: the reason phrase is the upstream's own words.
        return Err((
            Code::UpstreamError,
            format!("the agent answered HTTP {}", response.status().as_u16()),
        ));
    }
    let streaming = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let mut body = response.bytes_stream();
    let broke_off = |e: reqwest::Error| {
        tracing::warn!(
            person = %turn.person,
            "the chat upstream's reply broke off: {}",
            describe(&e)
        );
        (
            Code::UpstreamDropped,
            "The agent's reply broke off before it was complete.".to_owned(),
        )
    };
    let mut lines = Lines {
        partial: BytesMut::new(),
        max_bytes: reply.line_max_bytes(),
    };
    if !streaming {
        // A server that ignores `stream: true` and answers one JSON completion, read
        // under the bound of one line.
        let mut whole = BytesMut::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(broke_off)?;
            if whole.len() + chunk.len() > lines.max_bytes {
                return Err(reply.cut(tx).await);
            }
            whole.extend_from_slice(&chunk);
        }
        let body: Value = serde_json::from_slice(&whole).map_err(|e| {
            (
                Code::UpstreamError,
                format!("the agent's answer is not a chat completion: {e}"),
            )
        })?;
        if let Some(text) = body["choices"][0]["message"]["content"].as_str() {
            reply.say(tx, text).await?;
        }
        return Ok(());
    }
    while let Some(chunk) = body.next().await {
        let Some(complete) = lines.push(chunk.map_err(broke_off)?) else {
            return Err(reply.cut(tx).await);
        };
        for line in complete {
            match parse_line(&line) {
                Line::Done => return Ok(()),
                Line::Text(text) => reply.say(tx, &text).await?,
                Line::Other => {}
            }
        }
    }
    Ok(())
}

/// The turn's failure when the upstream is not there or fails on its side: the member
/// reads [`AGENT_NOT_ANSWERING`], the operator's log says what happened.
fn not_answering(turn: &Turn, detail: &str) -> RelayError {
    tracing::warn!(person = %turn.person, "the chat upstream is not answering: {detail}");
    (Code::AgentUnreachable, AGENT_NOT_ANSWERING.to_owned())
}

/// Saves the agent's words and announces the files the turn delivered.
async fn finish_turn(
    state: &AppState,
    turn: &Turn,
    reply: String,
    before: ferry_site::AttachmentsState,
    tx: &mpsc::Sender<Event>,
) {
    let (acting, person, project) = (state.clone(), turn.person.clone(), turn.project.clone());
    let conversation = turn.conversation;
    let delivered = blocking(move || {
        // A reply to a conversation archived meanwhile ("New conversation") is not
        // saved: it would open the new one.
        let current = acting.site.conversation_mark(&person, project.as_deref())?;
        if !reply.is_empty() && current == conversation {
            acting.site.append_chat(
                &person,
                project.as_deref(),
                ChatRole::Assistant,
                &reply,
                &[],
            )?;
        }
        let after = acting.attachments_now(&person, project.as_deref())?;
        Ok::<_, ApiError>(ferry_site::attachments_changed(&before, &after))
    })
    .await;
    let delivered = match delivered {
        Ok(paths) => paths,
        Err(e) => {
            let failure = ChatFailure {
                code: e.code,
                message: e.message,
            };
            send(tx, ChatEvent::Error(failure)).await;
            return;
        }
    };
    for path in &delivered {
        // `text` is for people to read; `path` stays exact, for the download.
        let text = ferry_site::delivery_notice(path);
        let notice = ChatNotice {
            text,
            path: path.clone(),
        };
        send(tx, ChatEvent::Notice(notice)).await;
    }
    if !delivered.is_empty() {
        crate::events::announce_attachments(
            state,
            &turn.person,
            turn.project.as_deref(),
            delivered,
        )
        .await;
    }
}

/// One message as the upstream agent gets it.
#[derive(Serialize)]
struct UpstreamMessage<'a> {
    role: &'static str,
    content: Cow<'a, str>,
}

impl<'a> UpstreamMessage<'a> {
    /// A message with its attachments named by their paths after its text.
    fn new(role: &'static str, text: &'a str, attachments: &[String]) -> UpstreamMessage<'a> {
        let content = if attachments.is_empty() {
            Cow::Borrowed(text)
        } else {
            Cow::Owned(format!(
                "{text}\n\nAttached files: {}",
                attachments.join(", ")
            ))
        };
        UpstreamMessage { role, content }
    }

    fn saved(m: &'a ChatMessage) -> UpstreamMessage<'a> {
        let role = match m.role {
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        };
        UpstreamMessage::new(role, &m.text, &m.attachments)
    }

    /// What it takes of the request body: its JSON, and the comma after it.
    fn bytes(&self) -> u64 {
        let mut counted = Counted(0);
        // Writing to a counter cannot fail, nor can serializing two strings.
        let _ = serde_json::to_writer(&mut counted, self);
        counted.0 + 1
    }
}

/// A writer that only counts what it is given.
struct Counted(u64);

impl std::io::Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The upstream request: the delivery rules first, then the saved messages `history`,
/// then the new message with its attachments named by their paths.
fn upstream_body(
    model: &str,
    history: &[ChatMessage],
    message: &str,
    attachments: &[String],
) -> Bytes {
    #[derive(Serialize)]
    struct Request<'a> {
        model: &'a str,
        stream: bool,
        messages: Vec<UpstreamMessage<'a>>,
    }
    let mut messages = Vec::with_capacity(history.len() + 2);
    messages.push(UpstreamMessage::new(
        "system",
        ferry_docs::shipped::FILE_DELIVERY_MD,
        &[],
    ));
    messages.extend(history.iter().map(UpstreamMessage::saved));
    messages.push(UpstreamMessage::new("user", message, attachments));
    // Sized up front: growing a buffer of megabytes by doubling holds it twice over.
    let size = messages.iter().map(UpstreamMessage::bytes).sum::<u64>() + model.len() as u64;
    let mut body = Vec::with_capacity(usize::try_from(size).unwrap_or(0) + REQUEST_SLACK_BYTES);
    let request = Request {
        model,
        stream: true,
        messages,
    };
    // Strings and a bool always serialize, into memory.
    let _ = serde_json::to_writer(&mut body, &request);
    Bytes::from(body)
}

/// Room in the upstream request for what surrounds its messages, in bytes.
const REQUEST_SLACK_BYTES: usize = 64;

/// Sends one event; `false` when the member has gone.
async fn send(tx: &mpsc::Sender<Event>, event: ChatEvent) -> bool {
    tx.send(event.to_sse()).await.is_ok()
}

/// reqwest's message with its causes, without the URL.
fn describe(err: &reqwest::Error) -> String {
    crate::deliveries::without_url(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_described_bounds_are_the_enforced_ones() {
        use utoipa::PartialSchema;
        use utoipa::openapi::path::ParameterIn;
        let params = HistoryQuery::into_params(|| Some(ParameterIn::Query));
        let limit = params.iter().find(|p| p.name == "limit").unwrap();
        let limit = serde_json::to_value(limit).unwrap();
        assert_eq!(limit["schema"]["maximum"], CHAT_PAGE_MAX_MESSAGES);
        let said = format!("{CHAT_PAGE_DEFAULT_MESSAGES} when absent");
        assert!(limit["description"].as_str().unwrap().contains(&said));
        let request = serde_json::to_value(ChatRequest::schema()).unwrap();
        let attachments = &request["properties"]["attachments"];
        assert_eq!(attachments["maxItems"], CHAT_ATTACHMENTS_MAX);
        let said = format!("at most {} KiB", CHAT_MESSAGE_MAX_BYTES / 1024);
        let message = request["properties"]["message"]["description"].as_str();
        assert!(message.unwrap().contains(&said));
    }

    fn lines(max_bytes: usize) -> Lines {
        Lines {
            partial: BytesMut::new(),
            max_bytes,
        }
    }

    #[test]
    fn lines_split_across_chunks_come_out_whole() {
        let mut l = lines(64);
        assert_eq!(l.push(Bytes::from_static(b"data: a")), Some(vec![]));
        let got = l.push(Bytes::from_static(b"bc\n\ndata: d\nda")).unwrap();
        assert_eq!(got, [&b"data: abc\n"[..], b"\n", b"data: d\n"]);
        assert_eq!(
            l.push(Bytes::from_static(b"ta: e\n")).unwrap(),
            [&b"data: e\n"[..]]
        );
    }

    #[test]
    fn a_line_may_be_as_long_as_the_bound_and_not_one_byte_longer() {
        for (len, fits) in [(9, true), (10, true), (11, false)] {
            // Ended in the same chunk, in a later chunk, or never.
            let line = "a".repeat(len);
            let mut l = lines(10);
            assert_eq!(
                l.push(Bytes::from(format!("{line}\n"))).is_some(),
                fits,
                "{len}"
            );
            let mut l = lines(10);
            let first = l.push(Bytes::from(line.clone()));
            assert_eq!(first.is_some(), fits, "{len} unended");
            if fits {
                assert_eq!(l.push(Bytes::from_static(b"\n")).unwrap().len(), 1);
            }
            let mut l = lines(10);
            let (head, tail) = line.split_at(5);
            assert!(l.push(Bytes::from(head.to_owned())).is_some());
            assert_eq!(
                l.push(Bytes::from(format!("{tail}\n"))).is_some(),
                fits,
                "{len} split"
            );
        }
    }

    #[test]
    fn parse_line_takes_text_done_and_ignores_the_rest() {
        let text = br#"data: {"choices":[{"delta":{"content":"hi"}}]}"#;
        assert!(matches!(parse_line(text), Line::Text(t) if t == "hi"));
        assert!(matches!(parse_line(b"data: [DONE]\r\n"), Line::Done));
        for other in [
            &b": ping"[..],
            b"event: x",
            b"data: {not json",
            b"data: {}",
            b"",
        ] {
            assert!(matches!(parse_line(other), Line::Other));
        }
    }
}
