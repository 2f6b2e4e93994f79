//! `POST /v1/media`: a member uploads one file into a workspace's public/ (spec M-UP).
//!
//! A file part of at most 256 KiB (`SINK_MEMORY_BYTES`) is held in memory until the form
//! has been read, then staged, written, placed and recorded in one trip to the blocking
//! pool (a small upload's cost is mostly such hand-offs). A larger one is staged as soon as
//! it outgrows that and streams from the socket through multer into the staged file on a
//! blocking thread; at no point is more than 256 KiB of it in memory. With `?overwrite=false`
//! a file already at the name is kept and the answer is `409 exists` with its size and
//! time (M-DAILY); the placement decides, in one rename that never replaces.
//!
//! A `folder` field (`public/reports`) places the file in that folder of `public/`
//! instead (M-DAILY): it must exist, be a real folder reached through no link, and not be
//! `public/attachments`, which only the system fills.

use axum::Json;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use ferry_codes::Code;
use ferry_exec::Staging;
use ferry_exec::member::{Existing, MemberAction, MemberReply};
use ferry_fs::ByteSink;
use ferry_site::{Principal, PublicPlace, SiteError};
use futures_util::StreamExt;
use multer::{Constraints, Multipart, SizeLimit};
use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use utoipa::openapi::{RefOr, Schema, schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};
use utoipa_axum::routes;

use crate::auth::Member;
use crate::body::{BodyError, Filled, Pace, SINK_MEMORY_BYTES, Sink, paced};
use crate::openapi::ApiRouter;
use crate::rate::Rate;
use crate::{ApiError, AppState, blocking};
use ferry_config::limits::{
    FOLDER_FIELD_MAX_BYTES, MULTIPART_ALLOWANCE_BYTES, MULTIPART_HEAD_MAX_BYTES,
    PROJECT_FIELD_MAX_BYTES, UPLOADS_HELD_MAX_BYTES,
};
use ferry_site::{AuditAction, AuditEntry};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(upload))
}

/// The file an upload placed.
#[derive(Serialize, ToSchema)]
pub struct Uploaded {
    /// Where it is, from `public/` on: the name the agent is told.
    #[schema(example = "public/report.pdf")]
    path: String,
    /// Its bytes.
    size: u64,
    /// Its SHA-256, lowercase hex.
    sha256: String,
    /// The project; null for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
    /// The name as sent, when it had to be made safe; absent otherwise.
    #[serde(rename = "renamedFrom", skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    renamed_from: Option<String>,
}

/// What `POST /v1/media` takes in its query.
#[derive(Deserialize, Default, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct UploadQuery {
    /// `false`: keep a file already at the name and answer `409 exists`.
    overwrite: Option<bool>,
}

/// The form `POST /v1/media` reads, part by part as it streams (so no struct holds it).
struct UploadForm;

impl PartialSchema for UploadForm {
    fn schema() -> RefOr<Schema> {
        let text = |description: &str| {
            schema::ObjectBuilder::new()
                .schema_type(schema::Type::String)
                .description(Some(description))
        };
        schema::ObjectBuilder::new()
            .property(
                "file",
                schema::ObjectBuilder::new()
                    .schema_type(schema::Type::String)
                    .content_media_type("application/octet-stream")
                    .description(Some(
                        "The file, exactly one, with its name as the part's filename.",
                    )),
            )
            .required("file")
            .property(
                "project",
                text("The project; absent for the person's main workspace."),
            )
            .property(
                "folder",
                text("A folder of `public/` to place the file in (not `public/attachments`)."),
            )
            .additional_properties(Some(schema::AdditionalProperties::FreeForm(false)))
            .description(Some(
                "The file and, optionally, its project and folder, in any order.",
            ))
            .into()
    }
}

impl ToSchema for UploadForm {}

/// The file part as it was read.
enum FilePart {
    /// The whole part, small enough to be held in memory ([`SINK_MEMORY_BYTES`]): staged,
    /// written, placed and recorded in one trip to the blocking pool once the form has
    /// been read, where its project and folder are known.
    Whole(BytesMut, OwnedSemaphorePermit),
    /// A larger part, staged as soon as it outgrew memory and streamed to disk: in its
    /// workspace, or in the main one until the project is known (the commit then moves
    /// it into the project and its folder).
    Staged {
        filled: Box<Filled<Staging>>,
        name: String,
    },
}

struct Incoming {
    part: FilePart,
    /// The name as the client sent it.
    given: String,
}

/// Uploads one file into the workspace's `public/` (or a folder of it), streamed.
#[utoipa::path(
    post,
    path = "/v1/media",
    operation_id = "uploadFile",
    tag = "files",
    security(("bearer" = [])),
    params(UploadQuery),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses((status = 201, description = "The file is in place.", body = Uploaded))
)]
pub async fn upload(
    State(state): State<AppState>,
    Member(who): Member,
    request: Request,
) -> Result<(StatusCode, Json<Uploaded>), ApiError> {
    // First, before the body is read: an upload refused for the person's rate reads,
    // stages and records nothing.
    state.rates.take(&who.person, Rate::Uploads)?;
    let query = match request.uri().query() {
        None => UploadQuery::default(),
        Some(_) => {
            Query::<UploadQuery>::try_from_uri(request.uri())
                .map_err(|_| {
                    ApiError::new(
                        Code::InvalidRequest,
                        "the only query parameter here is overwrite=true|false",
                    )
                })?
                .0
        }
    };
    let existing = match query.overwrite {
        Some(false) => Existing::Keep,
        _ => Existing::Replace,
    };
    let max = state.site.config().media.max_upload_bytes;
    let mut multipart = open_multipart(request, max, state.pace)?;

    let mut project: Option<String> = None;
    let mut folder: Option<PublicPlace> = None;
    let mut incoming: Option<Incoming> = None;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("file") => {
                if incoming.is_some() {
                    return Err(ApiError::new(
                        Code::TooManyFiles,
                        "send exactly one part named 'file'",
                    ));
                }
                let given = field.file_name().unwrap_or_default().to_owned();
                // The name first, as for a part staged at once: its refusal does not wait
                // for the part's bytes, whatever its size.
                state.site.upload_name(&given)?;
                let part = match read_small(&mut field, &state.held_uploads).await? {
                    Small::Whole(whole, held) => FilePart::Whole(whole, held),
                    Small::Outgrown(head, next) => {
                        let (staged_by, person) = (state.clone(), who.person.clone());
                        let (into, at, raw) = (project.clone(), folder.clone(), given.clone());
                        let started = blocking(move || {
                            stage_upload(&staged_by, &person, into, at, raw, existing)
                        })
                        .await;
                        let (staging, name) = match started {
                            Ok(started) => started,
                            Err(e) => {
                                let place = folder.unwrap_or(PublicPlace::Public);
                                return Err(
                                    kept(&state, &who.person, project, &place, &given, e).await
                                );
                            }
                        };
                        let already = [head.freeze(), next]
                            .into_iter()
                            .filter(|chunk| !chunk.is_empty())
                            .collect();
                        let filled = receive_file(&mut field, staging, already).await?;
                        FilePart::Staged {
                            filled: Box::new(filled),
                            name,
                        }
                    }
                };
                incoming = Some(Incoming { part, given });
            }
            Some("project") => {
                if project.is_some() {
                    return Err(ApiError::new(
                        Code::DuplicateField,
                        "send the 'project' field once",
                    ));
                }
                let value = read_text_field(&mut field, "project").await?;
                let (site, person, checked) =
                    (state.site.clone(), who.person.clone(), value.clone());
                blocking(move || site.workspace(&person, Some(&checked)).map(|_| ())).await?;
                project = Some(value);
            }
            Some("folder") => {
                if folder.is_some() {
                    return Err(ApiError::new(
                        Code::DuplicateField,
                        "send the 'folder' field once",
                    ));
                }
                let value = read_text_field(&mut field, "folder").await?;
                folder = Some(PublicPlace::upload_folder(&value)?);
            }
            other => {
                return Err(ApiError::new(
                    Code::UnexpectedField,
                    format!(
                        "unexpected form field {:?}: send only 'file' and, optionally, 'project' \
                         and 'folder'",
                        other.unwrap_or("")
                    ),
                ));
            }
        }
    }
    let Incoming { part, given } = incoming
        .ok_or_else(|| ApiError::new(Code::MissingFile, "send the file in a part named 'file'"))?;
    let place = folder.clone().unwrap_or(PublicPlace::Public);
    let placed = match part {
        FilePart::Whole(bytes, held) => {
            let (acting, who, project, place, given) = (
                state.clone(),
                who.clone(),
                project.clone(),
                place.clone(),
                given.clone(),
            );
            crate::member::placing(&state, move || {
                let (mut staging, name) = stage_upload(
                    &acting,
                    &who.person,
                    project.clone(),
                    folder,
                    given,
                    existing,
                )?;
                // Refused as a streamed part over the cap is, before anything is written
                // (and, like it, not recorded).
                (staging.sink().check_room(bytes.len() as u64))
                    .map_err(|e| ApiError::from(SiteError::from(e)))?;
                let entry = upload_record(&who, project.as_deref(), &place, &name);
                let filled = Filled::buffered(staging, bytes);
                let placed = crate::member::commit_now(
                    &acting.site,
                    filled,
                    project,
                    place,
                    &name,
                    existing,
                    Some(entry),
                );
                drop(held);
                placed.map(|written| (written, name))
            })
            .await
        }
        FilePart::Staged { filled, name } => crate::member::commit_filled(
            &state,
            *filled,
            project.clone(),
            place.clone(),
            name.clone(),
            existing,
            Some(upload_record(&who, project.as_deref(), &place, &name)),
        )
        .await
        .map(|written| (written, name)),
    };
    let (written, name) = match placed {
        Ok(placed) => placed,
        Err(e) => return Err(kept(&state, &who.person, project, &place, &given, e).await),
    };
    let path = place.display(&name);
    state
        .events
        .publish(&who.person, project.as_deref(), vec![path.clone()]);
    Ok((
        StatusCode::CREATED,
        Json(Uploaded {
            path,
            size: written.size,
            sha256: written.sha256_hex(),
            project,
            renamed_from: (given != name).then_some(given),
        }),
    ))
}

/// The audit record of `who`'s upload to `name` in `place`.
fn upload_record(
    who: &Principal,
    project: Option<&str>,
    place: &PublicPlace,
    name: &str,
) -> AuditEntry {
    let path = place.display(name);
    AuditEntry::new(&who.person, who.kind.as_str(), AuditAction::Upload, &path).project(project)
}

/// `e`, and when it is `exists` (an upload with `overwrite=false` found a file at its
/// name), the file kept there: `existing: {"path","size","modified"}`, for the client to
/// ask whether to replace it.
pub(crate) async fn kept(
    state: &AppState,
    person: &str,
    project: Option<String>,
    place: &PublicPlace,
    given: &str,
    e: ApiError,
) -> ApiError {
    if e.code != Code::Exists {
        return e;
    }
    let Ok(name) = state
        .site
        .workspace(person, project.as_deref())
        .and_then(|w| w.upload_name(given))
    else {
        return e;
    };
    let path = place.display(&name);
    let open = MemberAction::Open { path: path.clone() };
    match state.member(person, project.as_deref(), open).await {
        Ok((MemberReply::Opened(file), _)) => ApiError::new(
            Code::Exists,
            format!(
                "{path} exists ({} bytes) and was kept; send the file again without \
                 overwrite=false to replace it",
                file.size
            ),
        )
        .with(
            "existing",
            serde_json::json!({
                "path": path,
                "size": file.size,
                "modified": ferry_site::rfc3339(file.mtime),
            }),
        ),
        _ => e,
    }
}

/// Opens a multipart body whose file may hold `max` bytes: a declared `Content-Length`
/// over that (plus the framing allowance) is refused before anything is read, and the
/// stream is cut off at it while reading.
pub(crate) fn open_multipart(request: Request, max: u64, pace: Pace) -> Result<Form, ApiError> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > max + MULTIPART_ALLOWANCE_BYTES) {
        return Err(ApiError::too_large(max));
    }
    let boundary = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(|| {
            ApiError::new(
                Code::BadMultipart,
                "send multipart/form-data with a boundary, with the file in a part named 'file'",
            )
        })?;
    let heads = Arc::new(AtomicU64::new(u64::MAX));
    let watched = Arc::clone(&heads);
    let stream = paced(request.into_body(), pace).map(move |chunk| {
        let chunk = chunk?;
        let left = watched.load(Ordering::Relaxed);
        if left != u64::MAX {
            let taken = left
                .checked_sub(chunk.len() as u64)
                .ok_or(BodyError::PartHeadTooLong(MULTIPART_HEAD_MAX_BYTES))?;
            watched.store(taken, Ordering::Relaxed);
        }
        Ok::<_, BodyError>(chunk)
    });
    let limits = SizeLimit::new().whole_stream(max + MULTIPART_ALLOWANCE_BYTES);
    let parts =
        Multipart::with_constraints(stream, boundary, Constraints::new().size_limit(limits));
    Ok(Form { parts, heads })
}

/// A multipart form read part by part, whose preamble and part headers are bounded by
/// [`MULTIPART_HEAD_MAX_BYTES`]: while the next part's head is looked for, the body may give
/// that much and one read's chunk (which may also hold the end of the last part and the
/// start of the next one's data) before the form is refused.
pub(crate) struct Form {
    parts: Multipart<'static>,
    /// What the body may still give before the head being read is refused;
    /// `u64::MAX` while a part's data is read.
    heads: Arc<AtomicU64>,
}

impl Form {
    /// The next part, once its head has been read. Each part before it must have been
    /// read to its end: what is left of it would count against the head's bound.
    pub(crate) async fn next_field(
        &mut self,
    ) -> Result<Option<multer::Field<'static>>, multer::Error> {
        let bound = MULTIPART_HEAD_MAX_BYTES + crate::READ_BUFFER_MAX_BYTES as u64;
        self.heads.store(bound, Ordering::Relaxed);
        let next = self.parts.next_field().await;
        self.heads.store(u64::MAX, Ordering::Relaxed);
        next
    }
}

/// Checks an upload's workspace, name, cap and quota, then has the person stage it in
/// `public/` (of `project`, once known; in `folder`, once known); the staging and the
/// safe name come back. Blocks.
fn stage_upload(
    state: &AppState,
    person: &str,
    project: Option<String>,
    folder: Option<PublicPlace>,
    raw_name: String,
    existing: Existing,
) -> Result<(Staging, String), ApiError> {
    let workspace = state.site.workspace(person, project.as_deref())?;
    let name = workspace.upload_name(&raw_name)?;
    // The workspace was just checked: the toolbox alone, not a second check.
    let toolbox = state.toolbox(person).map_err(ApiError::from_tool)?;
    let stage = |place: PublicPlace, check: Option<&str>| {
        Staging::start(
            toolbox.shared_requester(),
            project.as_deref(),
            place,
            check,
            existing,
        )
        .map_err(ApiError::from)
    };
    // Staged in the main workspace's public/ until the project is known: no target
    // to check yet (the commit moves it into the project and its folder). A folder
    // may still follow the file: a target refused in public/ itself is then no
    // answer yet, and the placement decides.
    let mut staging = match (project.is_some(), folder) {
        (false, _) => stage(PublicPlace::Public, None)?,
        (true, Some(folder)) => stage(folder, Some(&name))?,
        (true, None) => match stage(PublicPlace::Public, Some(&name)) {
            Ok(staging) => staging,
            Err(_) => stage(PublicPlace::Public, None)?,
        },
    };
    staging.sink().set_limit(workspace.max_upload_bytes());
    let quota = toolbox.quota_claim().map_err(ApiError::from_tool)?;
    staging.sink().set_budget(Some(Box::new(quota)));
    Ok((staging, name))
}

impl AppState {
    /// The bytes of small uploads' file parts held in memory now.
    pub(crate) fn uploads_held_bytes(&self) -> usize {
        UPLOADS_HELD_MAX_BYTES.saturating_sub(self.held_uploads.available_permits())
    }
}

/// A file part as [`read_small`] left it.
enum Small {
    /// All of it, with the room it takes in memory.
    Whole(BytesMut, OwnedSemaphorePermit),
    /// What was read of a part that outgrew what it may hold, and the chunk that was
    /// not added to it (empty when there was no room at all, or when the chunk was
    /// added but the buffer's growth found no room).
    Outgrown(BytesMut, Bytes),
}

/// Reads a file part into memory while it fits in [`SINK_MEMORY_BYTES`] and in the room
/// `held` has left for all uploads.
async fn read_small(
    field: &mut multer::Field<'_>,
    held: &Arc<Semaphore>,
) -> Result<Small, ApiError> {
    let mut head = BytesMut::new();
    let Ok(mut room) = held.clone().try_acquire_many_owned(0) else {
        return Ok(Small::Outgrown(head, Bytes::new()));
    };
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if head.len() + chunk.len() > SINK_MEMORY_BYTES {
            return Ok(Small::Outgrown(head, chunk));
        }
        // The room counts the memory held (the buffer's capacity), not only the bytes in
        // it: a growing buffer may hold up to twice what it was given.
        let before = head.capacity();
        head.extend_from_slice(&chunk);
        let grown = u32::try_from(head.capacity() - before).unwrap_or(u32::MAX);
        match held.clone().try_acquire_many_owned(grown) {
            Ok(taken) => room.merge(taken),
            Err(_) => return Ok(Small::Outgrown(head, Bytes::new())),
        }
    }
    Ok(Small::Whole(head, room))
}

/// Streams one file part into `writer`, after the chunks of it `already` read; what is
/// left to write and commit comes back.
pub(crate) async fn receive_file<W: AsMut<ByteSink> + Send + 'static>(
    field: &mut multer::Field<'_>,
    writer: W,
    already: Vec<Bytes>,
) -> Result<Filled<W>, ApiError> {
    let mut sink = Sink::new(writer);
    let mut refused = false;
    let streamed = async {
        for chunk in already {
            if !sink.send(chunk).await {
                refused = true;
                return Ok(());
            }
        }
        while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
            if !sink.send(chunk).await {
                refused = true;
                break;
            }
        }
        Ok::<(), ApiError>(())
    }
    .await;
    // Waited for even when the body failed, so that the writer (and with it the
    // temporary) is gone before the answer goes out, not some time after.
    let finished = sink.finish().await;
    if refused {
        // The writer refused (the quota, a full disk): the rest of the part is read and
        // dropped, bounded by the body's own cap and pace, so that the client hears the
        // answer instead of a connection closed while it still sends.
        while let Ok(Some(_)) = field.chunk().await {}
    }
    streamed?;
    finished
}

/// A text field of at most [`PROJECT_FIELD_MAX_BYTES`] (`project`) or
/// [`FOLDER_FIELD_MAX_BYTES`] (`folder`) bytes of UTF-8.
pub(crate) async fn read_text_field(
    field: &mut multer::Field<'_>,
    name: &'static str,
) -> Result<String, ApiError> {
    let max = match name {
        "folder" => FOLDER_FIELD_MAX_BYTES,
        _ => PROJECT_FIELD_MAX_BYTES,
    };
    let mut value = BytesMut::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if value.len() + chunk.len() > max {
            return Err(ApiError::new(
                Code::FieldTooLarge,
                format!("the '{name}' field is longer than {max} bytes"),
            ));
        }
        value.extend_from_slice(&chunk);
    }
    String::from_utf8(value.to_vec()).map_err(|_| {
        ApiError::new(
            Code::BadMultipart,
            format!("the '{name}' field is not UTF-8 text"),
        )
    })
}

pub(crate) fn multipart_error(err: multer::Error) -> ApiError {
    match err {
        multer::Error::StreamReadFailed(inner) => match inner.downcast::<BodyError>() {
            Ok(body) => (*body).into(),
            Err(other) => ApiError::new(Code::BadBody, other.to_string()),
        },
        multer::Error::StreamSizeExceeded { limit } => {
            ApiError::too_large(limit.saturating_sub(MULTIPART_ALLOWANCE_BYTES))
        }
        other => ApiError::new(
            Code::BadMultipart,
            format!("the multipart body is malformed: {other}"),
        ),
    }
}
