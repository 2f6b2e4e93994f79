//! `GET /v1/events`: a person's live stream of changes to their `public/` folders, so the
//! Files panel shows new deliveries without a reload (spec M-WEB).
//!
//! Changes made through the API are published by the handler that made them. Files the
//! agent writes into `public/attachments/` itself are noticed by polling, only for people
//! with a page open, at [`ATTACHMENTS_POLL_INTERVAL`], against a first state taken when the
//! page's stream opens (so a file written right after that is not taken for the baseline).
//! A handler that writes into `public/attachments/` does not publish its file itself: it
//! asks for the same comparison the poller makes ([`announce_attachments`]), and the
//! comparisons take turns, so each change is published once, by whichever looks first.
//!
//! A poll reads a folder's files only when the folder's own mtime or inode moved since
//! the last reading (a name in it was added, removed or renamed), or when its full
//! reading is due all the same (a write into a file already there leaves the folder's
//! mtime alone): every [`ATTACHMENTS_FULL_INTERVAL`] for each
//! [`ATTACHMENTS_QUICK_MAX_FILES`] files it holds, begun. A folder holding more than
//! that is read only when its full reading is due, moved or not. So a folder costs about
//! one file's look per [`ATTACHMENTS_FULL_INTERVAL`] / [`ATTACHMENTS_QUICK_MAX_FILES`],
//! however many files an agent piles up, and little while nothing changes. A workspace whose folder cannot be read (its `public/`
//! replaced by a link, say) is left out on its own, logged when it starts failing; the
//! person's other workspaces are still compared.
//!
//! A person holds at most `server.max_event_streams` streams; one more is `429`.
//!
//! `?project=P` scopes a stream to that project's files: the project is checked like on
//! every other project route (`404 unknown_project` for one the person does not have),
//! and only its `files` events are sent (with the person's `interaction` events, which
//! belong to no workspace).
//!
//! An admin's streams also carry `nodes` events (data `{"id":"<node id>"}`, or
//! `{"id":null}` when changes were missed): a node's link came or went, it said hello,
//! or it was approved or revoked through the routes. The Nodes panel then reads `GET
//! /v1/nodes` again. Nobody else's stream hears of nodes.
//!
//! The same watcher keeps the web presence of those people fresh and tells their pages
//! when their pending approvals and picks change (`interaction` events; see
//! `interactions.rs`), since the agent tool asking may run in another process.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use ferry_codes::Code;
use ferry_config::limits::LIST_MAX_ENTRIES;
use ferry_exec::member::{MemberAction, MemberReply};
use ferry_site::AttachmentsState;
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};

use crate::auth::Member;
use crate::extract::QueryParams;
use crate::files::ProjectQuery;
use crate::interactions::InteractionsEvent;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};
use utoipa_axum::routes;

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(stream))
}

/// How often watched `public/attachments/` folders are compared with their last state.
pub const ATTACHMENTS_POLL_INTERVAL: Duration = Duration::from_millis(400);
/// How often a watched folder's files are read, whether or not the folder moved, for
/// each [`ATTACHMENTS_QUICK_MAX_FILES`] files it holds: just under two polls, so a file
/// rewritten in place in a folder of up to that many is noticed within a second.
pub const ATTACHMENTS_FULL_INTERVAL: Duration = Duration::from_millis(700);
/// Above this many files (the listing's cap), a folder is read only when its full
/// reading is due, even when it moved.
pub const ATTACHMENTS_QUICK_MAX_FILES: usize = LIST_MAX_ENTRIES;
/// Events a slow subscriber may fall behind before it is told to reload everything.
const EVENT_BACKLOG: usize = 256;
/// How often an open stream's token is looked at again (one query per stream each time:
/// a revoked token's streams end within this).
const STREAM_TOKEN_CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// Comment lines that keep idle streams (and the proxies on their way) open.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(15);

/// The data of one kind of event of a Server-Sent Events stream: the event is named
/// [`SseData::EVENT`] and its `data` is the JSON of the value.
pub(crate) trait SseData: Serialize + ToSchema {
    /// The event's name (its `event:` line).
    const EVENT: &'static str;

    /// The event carrying `self`.
    fn event(&self) -> Event {
        let data = serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned());
        Event::default().event(Self::EVENT).data(data)
    }

    /// The description of that event as a stream reader parses it: an object whose
    /// `event` is [`SseData::EVENT`] and whose `data` is a string holding the JSON of a
    /// `Self` (schemathesis and OpenAPI 3.2 read an event stream's schema as one event's).
    fn described() -> RefOr<Schema> {
        let data = ObjectBuilder::new()
            .schema_type(Type::String)
            .content_media_type("application/json")
            .content_schema(Some(Ref::from_schema_name(Self::name())));
        ObjectBuilder::new()
            .property(
                "event",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some([Self::EVENT])),
            )
            .property("data", data)
            .required("event")
            .required("data")
            .into()
    }

    /// Adds the description of `Self` and of what it refers to, for a stream's
    /// [`ToSchema::schemas`].
    fn add_schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((Self::name().into_owned(), Self::schema()));
        Self::schemas(schemas);
    }
}

/// Something under one workspace's `public/` changed: `files`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct FileEvent {
    #[serde(skip)]
    pub(crate) person: String,
    /// The workspace's project; `null` for the main workspace.
    #[schema(required = true)]
    pub(crate) project: Option<String>,
    /// The paths that changed; none when the page should reload everything.
    pub(crate) paths: Vec<String>,
}

impl SseData for FileEvent {
    const EVENT: &'static str = "files";
}

/// One watched workspace: a person and a project (`None`: the main workspace).
type WorkspaceKey = (String, Option<String>);

/// A folder's own mtime and inode: they move when a name in it comes or goes, or when
/// the folder itself is replaced.
use ferry_exec::member::FolderMark;

/// The last reading of one workspace's `public/attachments/`.
struct Known {
    files: AttachmentsState,
    /// `None`: there was no real folder to mark.
    mark: Option<FolderMark>,
    read: Instant,
}

impl Known {
    /// Whether the folder is due to be read whether or not it moved.
    fn due(&self) -> bool {
        let share = self
            .files
            .len()
            .div_ceil(ATTACHMENTS_QUICK_MAX_FILES)
            .max(1);
        self.read.elapsed() >= ATTACHMENTS_FULL_INTERVAL * share as u32
    }
}

/// One reading of a workspace's `public/attachments/`.
struct Reading {
    project: Option<String>,
    mark: Option<FolderMark>,
    /// `None`: the folder had not moved, so its files were not read.
    files: Option<AttachmentsState>,
}

/// What could not be read for a person, remembered so it is logged once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Refused {
    Projects(String),
    Workspace(WorkspaceKey),
}

/// A node changed, on an admin's stream: `nodes`.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct NodesEvent {
    /// The node; `null` when some changed that were not all heard of.
    #[schema(required = true)]
    pub(crate) id: Option<String>,
}

impl SseData for NodesEvent {
    const EVENT: &'static str = "nodes";
}

/// What one person's pages are told.
#[derive(Clone, Debug)]
pub(crate) enum PageEvent {
    Files(FileEvent),
    Interactions(InteractionsEvent),
    /// For every admin's pages.
    Nodes(NodesEvent),
}

impl PageEvent {
    /// Whether a stream of `person` (an admin's when `admin`), scoped to `project` when
    /// one is given, sends it.
    fn is_for(&self, person: &str, admin: bool, project: Option<&str>) -> bool {
        match self {
            PageEvent::Files(e) => {
                e.person == person && project.is_none_or(|p| e.project.as_deref() == Some(p))
            }
            PageEvent::Interactions(e) => e.person == person,
            PageEvent::Nodes(_) => admin,
        }
    }

    fn to_sse(&self) -> Event {
        match self {
            PageEvent::Files(e) => e.event(),
            PageEvent::Interactions(e) => e.event(),
            PageEvent::Nodes(e) => e.event(),
        }
    }
}

/// One event of `GET /v1/events`.
impl PartialSchema for PageEvent {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .item(FileEvent::described())
            .item(InteractionsEvent::described())
            .item(NodesEvent::described())
            .description(Some("One event of a person's live stream."))
            .into()
    }
}

impl ToSchema for PageEvent {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        FileEvent::add_schemas(schemas);
        InteractionsEvent::add_schemas(schemas);
        NodesEvent::add_schemas(schemas);
    }
}

/// The broadcast of page events, and who is listening.
pub struct Events {
    tx: broadcast::Sender<PageEvent>,
    listeners: Mutex<HashMap<String, usize>>,
    /// The last known `public/attachments/` of every watched workspace.
    known: Mutex<HashMap<WorkspaceKey, Known>>,
    /// What failed to be read at the last try, so a lasting failure is logged once.
    refused: Mutex<HashSet<Refused>>,
    /// The pending requests each watched person's pages last heard of.
    pub(crate) interactions: crate::interactions::Watch,
    /// Held from reading a person's `public/attachments/` to comparing it with `known`, so
    /// every reading is compared with the one before it and a change is published once.
    comparing: tokio::sync::Mutex<()>,
    /// Where events are shared with the site's other gateways, when it has a shared
    /// metadata database (set at start).
    pub(crate) shared: std::sync::OnceLock<crate::events_shared::Outbox>,
    /// What hears the other gateways' events, on such a site (set at start).
    pub(crate) listener: std::sync::OnceLock<ferry_site::SiteListener>,
}

impl Default for Events {
    fn default() -> Self {
        Events {
            tx: broadcast::channel(EVENT_BACKLOG).0,
            listeners: Mutex::new(HashMap::new()),
            known: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashSet::new()),
            interactions: Default::default(),
            comparing: tokio::sync::Mutex::new(()),
            shared: std::sync::OnceLock::new(),
            listener: std::sync::OnceLock::new(),
        }
    }
}

impl Events {
    /// Tells `person`'s open pages that `paths` changed in a workspace.
    pub fn publish(&self, person: &str, project: Option<&str>, paths: Vec<String>) {
        self.send(PageEvent::Files(FileEvent {
            person: person.to_owned(),
            project: project.map(str::to_owned),
            paths,
        }));
    }

    /// Tells the admins' open pages that the node `id` changed.
    pub(crate) fn publish_nodes(&self, id: &str) {
        self.send(PageEvent::Nodes(NodesEvent {
            id: Some(id.to_owned()),
        }));
    }

    /// Sends an event to this gateway's pages and shares it with the other gateways'.
    fn send(&self, event: PageEvent) {
        if let Some(outbox) = self.shared.get() {
            outbox.share(&event);
        }
        self.deliver(event);
    }

    /// Sends an event to this gateway's pages only (one another gateway shared).
    pub(crate) fn deliver(&self, event: PageEvent) {
        // No receiver is not an error: nobody has a page open.
        let _ = self.tx.send(event);
    }

    /// Tells a person's open pages which of their requests are pending now.
    pub(crate) fn publish_interactions(&self, event: InteractionsEvent) {
        let _ = self.tx.send(PageEvent::Interactions(event));
    }

    /// The people with at least one page open.
    pub(crate) fn watched(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<WorkspaceKey, Known>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes whether reading `what` failed; logs a failure only when it starts.
    fn note(&self, what: Refused, failure: Option<&ApiError>) {
        let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
        match failure {
            Some(error) => {
                if refused.insert(what.clone()) {
                    tracing::warn!(?what, error = %error.message, "live events leave out a folder that cannot be read");
                }
            }
            None => {
                refused.remove(&what);
            }
        }
    }

    /// What a poll needs of the last reading of a workspace: its mark, whether its full
    /// reading is due, and whether it is too big to read before that.
    fn last(&self, key: &WorkspaceKey) -> Option<(Option<FolderMark>, bool, bool)> {
        self.known().get(key).map(|k| {
            let big = k.files.len() > ATTACHMENTS_QUICK_MAX_FILES;
            (k.mark, k.due(), big)
        })
    }

    /// Publishes what changed in the `public/attachments/` of `person`'s workspaces from
    /// their last known state to `readings`, and keeps those as the known ones. Call with
    /// [`Events::comparing`] held.
    fn compare(&self, person: &str, readings: Vec<Reading>) {
        let mut known = self.known();
        // A workspace unknown while others of the person are known is a project made
        // since the page opened: everything in it is new.
        let watching = known.keys().any(|(p, _)| p == person);
        let empty = AttachmentsState::new();
        for Reading {
            project,
            mark,
            files,
        } in readings
        {
            let Some(now) = files else { continue };
            let key = (person.to_owned(), project.clone());
            let before = match known.get(&key) {
                Some(before) => Some(&before.files),
                None if watching => Some(&empty),
                None => None,
            };
            if let Some(before) = before {
                let changed = ferry_site::attachments_changed(before, &now);
                // For this gateway's pages only: every gateway compares for its own.
                if !changed.is_empty() {
                    self.deliver(PageEvent::Files(FileEvent {
                        person: person.to_owned(),
                        project: project.clone(),
                        paths: changed,
                    }));
                }
            }
            let read = Instant::now();
            known.insert(
                key,
                Known {
                    files: now,
                    mark,
                    read,
                },
            );
        }
    }
}

/// Announces files a handler wrote into one workspace's `public/attachments/`: through
/// the poller's comparison when `person` has a page open, so the poller does not announce
/// them again; as `paths` otherwise (to a stream that is only just opening, if any).
pub(crate) async fn announce_attachments(
    state: &AppState,
    person: &str,
    project: Option<&str>,
    paths: Vec<String>,
) {
    let events = &state.events;
    let _turn = events.comparing.lock().await;
    let compared = events.known().keys().any(|(p, _)| p == person);
    if !compared {
        events.publish(person, project, paths);
        return;
    }
    let (reading, who, workspace) = (state.clone(), person.to_owned(), project.map(str::to_owned));
    let read = blocking(move || {
        read_workspace(&reading, &who, workspace, None).map(|reading| vec![reading])
    })
    .await;
    match read {
        Ok(readings) => events.compare(person, readings),
        // Unreadable just now: the paths are news all the same.
        Err(_) => events.publish(person, project, paths),
    }
}

/// Reads one workspace's `public/attachments/`: its mark, and its files unless the mark
/// equals `unchanged` (the last reading's, when this poll may skip a folder that did not
/// move). The mark is taken before the files, so a file added while they are read moves
/// it and is read again at the next poll.
fn read_workspace(
    state: &AppState,
    person: &str,
    project: Option<String>,
    unchanged: Option<FolderMark>,
) -> Result<Reading, ApiError> {
    let action = MemberAction::Attachments { unchanged };
    match state.member_now(person, project.as_deref(), action)? {
        (MemberReply::Attachments { mark, files }, _) => Ok(Reading {
            project,
            mark,
            files,
        }),
        _ => Err(crate::member::out_of_turn()),
    }
}

/// Reads the `public/attachments/` of each of `person`'s workspaces; all of them in full
/// when `full`, otherwise those due and those that moved (but not the big ones). A
/// workspace that cannot be read is left out on its own.
fn read_person(state: &AppState, person: &str, full: bool) -> Vec<Reading> {
    let (events, site) = (&state.events, &state.site);
    let mut workspaces = vec![None];
    let projects = site.projects(person).map_err(ApiError::from);
    events.note(
        Refused::Projects(person.to_owned()),
        projects.as_ref().err(),
    );
    workspaces.extend(projects.into_iter().flatten().map(|p| Some(p.id)));
    let mut readings = Vec::new();
    for project in workspaces {
        let key = (person.to_owned(), project.clone());
        let unchanged = match events.last(&key) {
            _ if full => None,
            None | Some((_, true, _)) => None,
            // A big folder waits for its full reading even when it moved.
            Some((_, false, true)) => continue,
            Some((mark, false, false)) => mark,
        };
        let read = read_workspace(state, person, project, unchanged);
        events.note(Refused::Workspace(key), read.as_ref().err());
        readings.extend(read.ok());
    }
    readings
}

/// Counts a listener for as long as its stream lives.
struct Listening {
    events: Arc<Events>,
    person: String,
}

impl Listening {
    /// Counts one more stream of `person`; `None` when they already hold `max`.
    fn new(events: Arc<Events>, person: String, max: u32) -> Option<Listening> {
        {
            let mut listeners = events.lock();
            let count = listeners.entry(person.clone()).or_default();
            if *count >= max as usize {
                // Nothing was added, but the entry may just have been made.
                if *count == 0 {
                    listeners.remove(&person);
                }
                return None;
            }
            *count += 1;
        }
        Some(Listening { events, person })
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        let mut listeners = self.events.lock();
        if let Some(n) = listeners.get_mut(&self.person) {
            *n -= 1;
            if *n == 0 {
                listeners.remove(&self.person);
            }
        }
    }
}

/// The person's live stream of changes.
///
/// Files in their `public/` folders, their pending requests, and (for an admin) nodes.
#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "events",
    tag = "events",
    security(("bearer" = [])),
    params(("project" = Option<String>, Query, nullable = false,
            description = "Only this project's `files` events (the `interaction` events still come).")),
    responses((status = 200, content_type = "text/event-stream", body = PageEvent,
               description = "Server-Sent Events, each `data` a JSON object: `files` when files \
               under a workspace's `public/` changed; `interaction` when the person's pending \
               approvals and picks changed; `nodes`, on an admin's stream only, when a node \
               changed. Comment lines keep an idle stream open; the stream ends when the \
               token is revoked or the gateway stops."))
)]
pub async fn stream(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<ProjectQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let project = q.project;
    if let Some(project) = &project {
        let (site, person, project) = (state.site.clone(), who.person.clone(), project.clone());
        blocking(move || site.workspace(&person, Some(&project)).map(|_| ())).await?;
    }
    // Subscribed before counted, so nothing published once the stream counts is missed.
    let rx = state.events.tx.subscribe();
    let max = state.site.config().server.max_event_streams;
    let Some(listening) = Listening::new(state.events.clone(), who.person.clone(), max) else {
        return Err(ApiError::new(
            Code::TooManyStreams,
            format!(
                "one person may keep at most {max} live event streams open; \
                 close a page or tab of ferry and try again"
            ),
        ));
    };
    // The poller's first state of this person's folders, taken before the stream answers:
    // a file written from now on is a change. A page already open keeps the older state.
    {
        let _turn = state.events.comparing.lock().await;
        let (reading, person) = (state.clone(), who.person.clone());
        let read = blocking(move || Ok::<_, ApiError>(read_person(&reading, &person, true))).await;
        if let Ok(readings) = read {
            let mut known = state.events.known();
            for reading in readings {
                let Some(files) = reading.files else { continue };
                known
                    .entry((who.person.clone(), reading.project))
                    .or_insert(Known {
                        files,
                        mark: reading.mark,
                        read: Instant::now(),
                    });
            }
        }
    }
    crate::interactions::page_opened(&state, &who.person).await;
    let admin = who.kind == ferry_site::TokenKind::Admin;
    // The stream's state holds the count of open streams up while it lives.
    let scope = (rx, listening, project, crate::ops::OpenStream::open());
    let events = futures_util::stream::unfold(
        scope,
        move |(mut rx, listening, project, open)| async move {
            loop {
                let event = match rx.recv().await {
                    Ok(event) if event.is_for(&listening.person, admin, project.as_deref()) => {
                        event
                    }
                    Ok(_) => continue,
                    // Fell behind: a files event without paths makes the page reload everything,
                    // its pending requests included.
                    Err(broadcast::error::RecvError::Lagged(_)) => PageEvent::Files(FileEvent {
                        person: listening.person.clone(),
                        project: project.clone(),
                        paths: Vec::new(),
                    }),
                    Err(broadcast::error::RecvError::Closed) => return None,
                };
                return Some((Ok(event.to_sse()), (rx, listening, project, open)));
            }
        },
    );
    let events = events
        .take_until(state.closing.clone().cancelled_owned())
        .take_until(revoked(state.clone(), who));
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE_INTERVAL).text("ping")))
}

/// Resolves once the token a stream was opened with no longer stands (revoked, or its
/// person or kind changed): the stream ends with it, as a new request would be refused.
/// A database that does not answer is no revoke; it is asked again at the next tick.
async fn revoked(state: AppState, who: ferry_site::Principal) {
    let mut ticks = tokio::time::interval(STREAM_TOKEN_CHECK_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let (site, asked) = (state.site.clone(), who.clone());
        if let Ok(false) = blocking(move || site.still_valid(&asked)).await {
            return;
        }
    }
}

/// Publishes a `nodes` event for each node whose link the hub attached or detached, for
/// the life of the gateway; changes missed by falling behind are one `{"id":null}`.
pub async fn announce_node_changes(state: AppState) {
    let mut changes = state.nodes.hub.changes();
    loop {
        let id = match changes.recv().await {
            Ok(id) => Some(id),
            Err(broadcast::error::RecvError::Lagged(_)) => None,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        state.events.send(PageEvent::Nodes(NodesEvent { id }));
    }
}

/// Publishes the files that appear or change in the `public/attachments/` folders of
/// people with a page open, however they got there, and the changes of their pending
/// requests; keeps their web presence fresh. Runs for the life of the gateway.
pub async fn watch_attachments(state: AppState) {
    let mut ticks = tokio::time::interval(ATTACHMENTS_POLL_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_touch = tokio::time::Instant::now();
    loop {
        ticks.tick().await;
        {
            // Checked against the listeners of this moment, not of the tick's start, so the
            // first state of a page that opened meanwhile is kept.
            let listeners = state.events.lock();
            state
                .events
                .known()
                .retain(|(person, _), _| listeners.contains_key(person));
            state
                .events
                .interactions
                .retain(|person| listeners.contains_key(person));
        }
        // A page that opened since the last touch was touched as it opened.
        let touch = last_touch.elapsed() >= ferry_site::WEB_PRESENCE_TOUCH_INTERVAL;
        if touch {
            last_touch = tokio::time::Instant::now();
        }
        for person in state.events.watched() {
            crate::interactions::notice(&state, &person, touch).await;
            let _turn = state.events.comparing.lock().await;
            let (reading, who) = (state.clone(), person.clone());
            let read =
                blocking(move || Ok::<_, ApiError>(read_person(&reading, &who, false))).await;
            if let Ok(readings) = read {
                state.events.compare(&person, readings);
            }
        }
    }
}
