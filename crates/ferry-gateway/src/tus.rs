//! `/v1/uploads`: resumable uploads by the tus 1.0 protocol (spec members M-DAILY), with
//! its creation, termination and checksum (`sha256`) extensions.
//!
//! `POST` declares an upload (`Upload-Length`, `Upload-Metadata` with `filename` and,
//! optionally, `project`, `folder`, `overwrite`); the person makes a hidden temporary in
//! the workspace's `public/` and the upload's row goes into the site database. `PATCH`es
//! append parts at `Upload-Offset`; the last byte has the person place the file, by
//! M-UP's rules, in `public/` or the folder named. `HEAD` says where an upload stands,
//! `DELETE` ends it. One `PATCH` at a time writes to an upload: a second one meanwhile is
//! `423`. The bytes stream from the socket to the file on one blocking thread per part,
//! through a short queue: memory stays flat whatever the size.
//!
//! The row and the temporary outlive the gateway: after a restart the temporary is opened
//! again by its identity (device and inode), cut back to the bytes last acknowledged and
//! hashed again. Expired uploads lose their bytes at their next request or sweep (at
//! start and every [`SWEEP_INTERVAL`]), whichever comes first, and answer `410` until
//! their row is dropped [`RESUMABLE_GONE_KEPT_SECS`] later (then `404`).
//!
//! The completed file is told on the last `PATCH`'s answer and on `HEAD` as
//! `Ferry-Path` (percent-encoded), `Ferry-Size`, `Ferry-Sha256` and, when C-NAME changed
//! the name, `Ferry-Renamed-From`; `GET /v1/uploads/{id}` answers it as JSON.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use ferry_codes::Code;
use ferry_config::limits::{
    RESUMABLE_GONE_KEPT_SECS, RESUMABLE_METADATA_MAX_BYTES, RESUMABLE_UPLOADS_PER_PERSON,
};
use ferry_exec::member::{Existing, StagedFile};
use ferry_exec::resumable::{self, ResumableFile};
use ferry_fs::Budget;
use ferry_site::{PublicPlace, ResumableRecord};
use futures_util::StreamExt;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedMutexGuard, mpsc};
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::{Required, schema};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::auth::Member;
use crate::body::paced;
use crate::openapi::ApiRouter;
use crate::rate::Rate;
use crate::{ApiError, AppState, blocking};
use ferry_site::{AuditAction, AuditEntry};

/// The protocol version spoken, the only one.
pub const TUS_VERSION: &str = "1.0.0";
/// The extensions implemented.
const TUS_EXTENSIONS: &str = "creation,termination,checksum";
/// The checksum algorithms computed.
const TUS_CHECKSUMS: &str = "sha256";
/// The content type every `PATCH` carries.
const OFFSET_OCTET_STREAM: &str = "application/offset+octet-stream";
/// Time between two sweeps of expired uploads (the first is at start).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(10 * 60);
/// Chunks of a part queued between the socket and the file at most.
const PART_QUEUE_CHUNKS: usize = 8;

const TUS_RESUMABLE: HeaderName = HeaderName::from_static("tus-resumable");
const TUS_VERSION_H: HeaderName = HeaderName::from_static("tus-version");
const TUS_EXTENSION: HeaderName = HeaderName::from_static("tus-extension");
const TUS_MAX_SIZE: HeaderName = HeaderName::from_static("tus-max-size");
const TUS_CHECKSUM_ALGORITHM: HeaderName = HeaderName::from_static("tus-checksum-algorithm");
const UPLOAD_LENGTH: HeaderName = HeaderName::from_static("upload-length");
const UPLOAD_OFFSET: HeaderName = HeaderName::from_static("upload-offset");
const UPLOAD_METADATA: HeaderName = HeaderName::from_static("upload-metadata");
const UPLOAD_CHECKSUM: HeaderName = HeaderName::from_static("upload-checksum");
const UPLOAD_EXPIRES: HeaderName = HeaderName::from_static("upload-expires");
const UPLOAD_DEFER_LENGTH: HeaderName = HeaderName::from_static("upload-defer-length");
const FERRY_PATH: HeaderName = HeaderName::from_static("ferry-path");
const FERRY_SIZE: HeaderName = HeaderName::from_static("ferry-size");
const FERRY_SHA256: HeaderName = HeaderName::from_static("ferry-sha256");
const FERRY_RENAMED_FROM: HeaderName = HeaderName::from_static("ferry-renamed-from");

/// What a header value's percent-encoding leaves as it is: letters, digits, `/ . - _ ~`.
const HEADER_UNSAFE: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'%')
    .add(b'#')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b',')
    .add(b';')
    .add(b'=')
    .add(b'+')
    .add(b'&')
    .add(b'\'')
    .add(b'(')
    .add(b')')
    .add(b'[')
    .add(b']')
    .add(b'@')
    .add(b'!')
    .add(b'$')
    .add(b'*')
    .add(b':');

/// The routes, each answer carrying `Tus-Resumable` (and `Tus-Version` on a `412`).
pub(crate) fn routes() -> ApiRouter {
    let mut router = ApiRouter::new()
        .routes(routes!(discover, create))
        .routes(routes!(status, head, patch, terminate, discover_upload))
        .layer(axum::middleware::map_response(stamp));
    describe_common_headers(router.get_openapi_mut());
    router
}

/// The headers several tus answers carry, each described once: `Tus-Resumable` on
/// every answer ([`stamp`] adds it), what the server speaks on both discoveries, and a
/// completed upload's `Ferry-*` on each answer that may be the one completing it.
fn describe_common_headers(openapi: &mut utoipa::openapi::OpenApi) {
    // (header, a count rather than text, what it says)
    let every = [(TUS_RESUMABLE, false, "`1.0.0`.")];
    let discovery = [
        (TUS_VERSION_H, false, "`1.0.0`, the one version spoken."),
        (TUS_EXTENSION, false, "`creation,termination,checksum`."),
        (TUS_MAX_SIZE, true, "The largest upload, in bytes."),
        (TUS_CHECKSUM_ALGORITHM, false, "`sha256`."),
    ];
    let completed = [
        (
            FERRY_PATH,
            false,
            "Once complete: where the file is, from `public/` on, percent-encoded.",
        ),
        (FERRY_SIZE, true, "Once complete: the file's bytes."),
        (
            FERRY_SHA256,
            false,
            "Once complete: the file's SHA-256, lowercase hex.",
        ),
        (
            FERRY_RENAMED_FROM,
            false,
            "Once complete, when the name had to be made safe: the name as sent, \
             percent-encoded.",
        ),
    ];
    for operation in crate::openapi::operations_mut(openapi) {
        let more: &[_] = match operation.operation_id.as_deref() {
            Some("tusOptions" | "tusOptionsUpload") => &discovery,
            Some("createUpload" | "headUpload" | "patchUpload") => &completed,
            _ => &[],
        };
        for response in operation.responses.responses.values_mut() {
            let utoipa::openapi::RefOr::T(response) = response else {
                continue;
            };
            for (name, count, description) in every.iter().chain(more) {
                let kind = match count {
                    true => schema::Type::Integer,
                    false => schema::Type::String,
                };
                let header = utoipa::openapi::HeaderBuilder::new()
                    .schema(Some(schema::ObjectBuilder::new().schema_type(kind)))
                    .description(Some(*description))
                    .build();
                response
                    .headers
                    .insert(header_name(name.as_str()), header.into());
            }
        }
    }
}

/// A header's name as the description spells it (`Tus-Resumable`), from the lower case
/// the code sends it in.
fn header_name(lower: &str) -> String {
    lower
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

/// A header parameter of a tus request.
fn header_param(
    name: &str,
    required: bool,
    schema: schema::ObjectBuilder,
    description: &str,
) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Header)
        .required(if required {
            Required::True
        } else {
            Required::False
        })
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

/// `Tus-Resumable`, which every tus request but `OPTIONS` must send.
fn version_param() -> Parameter {
    header_param(
        "Tus-Resumable",
        true,
        schema::ObjectBuilder::new()
            .schema_type(schema::Type::String)
            .enum_values(Some([TUS_VERSION])),
        "The tus version the client speaks; another, or none, is answered `412`.",
    )
}

/// A byte count or offset, as the tus headers carry it: a `u64` in decimal (not `int64`,
/// whose maximum is half of it).
fn count_schema() -> schema::ObjectBuilder {
    schema::ObjectBuilder::new()
        .schema_type(schema::Type::Integer)
        .minimum(Some(0))
        .maximum(Some(u64::MAX))
}

/// The headers of every tus request but `OPTIONS`: the version spoken.
struct TusHeaders;

impl IntoParams for TusHeaders {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![version_param()]
    }
}

/// The headers that declare an upload (`POST /v1/uploads`).
struct CreationHeaders;

impl IntoParams for CreationHeaders {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![
            version_param(),
            header_param(
                "Upload-Length",
                true,
                count_schema(),
                "The file's size in bytes, at most `media.max_resumable_bytes` (`Tus-Max-Size`).",
            ),
            header_param(
                "Upload-Metadata",
                false,
                schema::ObjectBuilder::new().schema_type(schema::Type::String),
                "Comma-separated `key base64(value)` pairs: `filename` (needed), and optionally \
                 `project`, `folder` (`public/…`) and `overwrite` (`true` or `false`).",
            ),
        ]
    }
}

/// The headers of a part (`PATCH /v1/uploads/{id}`).
struct PartHeaders;

impl IntoParams for PartHeaders {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![
            version_param(),
            header_param(
                "Upload-Offset",
                true,
                count_schema(),
                "Where the part starts: the upload's offset now, else `409 offset_mismatch`.",
            ),
            header_param(
                "Upload-Checksum",
                false,
                schema::ObjectBuilder::new().schema_type(schema::Type::String),
                "`sha256 <the part's digest in base64>`: a part that does not match is dropped \
                 (`460 checksum_mismatch`).",
            ),
        ]
    }
}

async fn stamp(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(TUS_RESUMABLE, HeaderValue::from_static(TUS_VERSION));
    if response.status() == StatusCode::PRECONDITION_FAILED {
        response
            .headers_mut()
            .insert(TUS_VERSION_H, HeaderValue::from_static(TUS_VERSION));
    }
    response
}

// ------------------------------------------------------------------------ the registry

/// The uploads this gateway has touched since it started, by id; the others are in the
/// site database and come in on first use.
#[derive(Default)]
pub struct Uploads {
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

/// One upload in progress.
struct Slot {
    record: ResumableRecord,
    /// Bytes in the staged file, as the last chunk left it (read without the lock).
    offset: AtomicU64,
    /// Held by the one request writing a part (or ending the upload).
    state: Arc<tokio::sync::Mutex<SlotState>>,
}

struct SlotState {
    /// The staged file, once opened by this gateway.
    file: Option<ResumableFile>,
    /// When the upload expires (Unix seconds).
    expires: i64,
    /// The upload was completed, terminated or swept while this request waited.
    ended: bool,
}

impl Uploads {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// An upload as a request finds it.
enum Found {
    /// In progress.
    Active(Arc<Slot>),
    /// Complete: the placed file, as JSON.
    Done(Box<(ResumableRecord, Completed)>),
}

/// The file a complete upload placed.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[schema(as = CompletedUpload)]
struct Completed {
    /// Where it is, from `public/` on.
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

fn unknown_upload() -> ApiError {
    ApiError::new(
        Code::UnknownUpload,
        "no upload of yours has this id; start a new one with POST /v1/uploads",
    )
}

fn expired_upload() -> ApiError {
    ApiError::new(
        Code::UploadExpired,
        "this upload expired and its bytes were removed; start a new one with POST /v1/uploads",
    )
}

fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl AppState {
    fn expiry_secs(&self) -> i64 {
        i64::try_from(self.site.config().media.resumable_expiry_secs).unwrap_or(i64::MAX)
    }

    /// The upload `id` of `person`: another person's is unknown, as is one never made.
    async fn find_upload(&self, person: &str, id: &str) -> Result<Found, ApiError> {
        let known = self.uploads.lock().get(id).cloned();
        if let Some(slot) = known {
            if slot.record.person != person {
                return Err(unknown_upload());
            }
            // One being written to now is not expired (its part moves the expiry on).
            if let Ok(mut held) = slot.state.clone().try_lock_owned()
                && !held.ended
                && held.expires <= now_secs()
            {
                held.ended = true;
                held.file = None;
                self.uploads.lock().remove(id);
                self.expire(slot.record.clone()).await;
                return Err(expired_upload());
            }
            return Ok(Found::Active(slot));
        }
        let (site, key) = (self.site.clone(), id.to_owned());
        let record = blocking(move || site.resumable_get(&key))
            .await?
            .filter(|r| r.person == person)
            .ok_or_else(unknown_upload)?;
        if let Some(done) = &record.done {
            let completed: Completed = serde_json::from_str(done)
                .map_err(|e| ApiError::internal("resumable upload record", e))?;
            return Ok(Found::Done(Box::new((record, completed))));
        }
        if record.gone {
            return Err(expired_upload());
        }
        if record.expires <= now_secs() {
            self.expire(record).await;
            return Err(expired_upload());
        }
        let mut slots = self.uploads.lock();
        // Another request may have brought it in meanwhile: theirs is the one.
        let slot = slots
            .entry(record.id.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    offset: AtomicU64::new(record.received),
                    state: Arc::new(tokio::sync::Mutex::new(SlotState {
                        file: None,
                        expires: record.expires,
                        ended: false,
                    })),
                    record,
                })
            })
            .clone();
        Ok(Found::Active(slot))
    }

    /// Removes an expired upload's bytes and marks it gone.
    async fn expire(&self, record: ResumableRecord) {
        let state = self.clone();
        let result = blocking(move || {
            let staged = staged_of(&record);
            if let Ok(toolbox) = state.toolbox(&record.person) {
                resumable::discard(&toolbox.shared_requester(), &staged).map_err(ApiError::from)?;
            }
            state.site.resumable_mark_gone(&record.id)?;
            Ok::<_, ApiError>(())
        })
        .await;
        if let Err(e) = result {
            tracing::warn!("removing an expired upload: {}", e.message);
        }
    }
}

fn staged_of(record: &ResumableRecord) -> StagedFile {
    StagedFile {
        project: record.project.clone(),
        place: PublicPlace::Public,
        temp: record.temp.clone(),
        dev: record.dev,
        ino: record.ino,
    }
}

/// Removes the bytes of expired uploads at start and then every [`SWEEP_INTERVAL`], and
/// drops their rows [`RESUMABLE_GONE_KEPT_SECS`] later (until then their id answers
/// `410`); a complete upload's row goes at its expiry.
pub(crate) async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(e) = sweep_once(&state).await {
            tracing::warn!("sweeping expired uploads: {}", e.message);
        }
    }
}

async fn sweep_once(state: &AppState) -> Result<(), ApiError> {
    let now = now_secs();
    let site = state.site.clone();
    let expired = blocking(move || site.resumable_expired(now)).await?;
    for record in expired {
        let forget = record.done.is_some()
            || (record.gone && record.expires.saturating_add(RESUMABLE_GONE_KEPT_SECS) <= now);
        if forget {
            let (site, id) = (state.site.clone(), record.id.clone());
            blocking(move || site.resumable_remove(&id)).await?;
            continue;
        }
        if record.gone {
            continue;
        }
        // One being written to now has moved its expiry on; it is left alone.
        {
            let mut slots = state.uploads.lock();
            if let Some(slot) = slots.get(&record.id) {
                match slot.state.clone().try_lock_owned() {
                    Ok(mut held) if held.expires <= now => {
                        held.ended = true;
                        held.file = None;
                        slots.remove(&record.id);
                    }
                    _ => continue,
                }
            }
        }
        state.expire(record).await;
    }
    Ok(())
}

// ---------------------------------------------------------------------------- headers

fn require_version(headers: &HeaderMap) -> Result<(), ApiError> {
    match headers.get(&TUS_RESUMABLE).and_then(|v| v.to_str().ok()) {
        Some(TUS_VERSION) => Ok(()),
        Some(other) => Err(ApiError::new(
            Code::TusVersion,
            format!("this server speaks tus {TUS_VERSION}, not {other:?}"),
        )),
        None => Err(ApiError::new(
            Code::TusVersion,
            format!("send 'Tus-Resumable: {TUS_VERSION}' with every tus request"),
        )),
    }
}

/// A header holding a non-negative integer; `None` when absent.
fn number(headers: &HeaderMap, name: &HeaderName) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get(name) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .filter(|v| !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                format!("{name} must be a non-negative integer"),
            )
        })
}

/// The pairs of an `Upload-Metadata` header: `key base64value` separated by commas.
fn parse_metadata(raw: &str) -> Result<HashMap<String, String>, ApiError> {
    let bad = |why: &str| {
        ApiError::new(
            Code::InvalidRequest,
            format!("Upload-Metadata is malformed: {why}"),
        )
    };
    if raw.len() > RESUMABLE_METADATA_MAX_BYTES {
        return Err(bad(&format!(
            "longer than {RESUMABLE_METADATA_MAX_BYTES} bytes"
        )));
    }
    let mut pairs = HashMap::new();
    for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let mut parts = pair.split(' ');
        let key = parts.next().unwrap_or_default();
        let value = parts.next().unwrap_or_default();
        if parts.next().is_some() || key.is_empty() || !key.is_ascii() {
            return Err(bad("each pair is a key, a space and a base64 value"));
        }
        let decoded = data_encoding_base64(value).ok_or_else(|| bad("a value is not base64"))?;
        let text = String::from_utf8(decoded).map_err(|_| bad("a value is not UTF-8 text"))?;
        if pairs.insert(key.to_owned(), text).is_some() {
            return Err(bad(&format!("the key {key:?} is given twice")));
        }
    }
    Ok(pairs)
}

/// Standard base64, padded or not.
fn data_encoding_base64(value: &str) -> Option<Vec<u8>> {
    data_encoding::BASE64_NOPAD
        .decode(value.trim_end_matches('=').as_bytes())
        .ok()
}

/// The `Upload-Checksum` of a part: its sha256.
fn part_checksum(headers: &HeaderMap) -> Result<Option<[u8; 32]>, ApiError> {
    let Some(value) = headers.get(&UPLOAD_CHECKSUM) else {
        return Ok(None);
    };
    let value = value.to_str().unwrap_or_default();
    let (algorithm, digest) = value.split_once(' ').unwrap_or((value, ""));
    if !algorithm.eq_ignore_ascii_case("sha256") {
        return Err(ApiError::new(
            Code::ChecksumAlgorithm,
            format!("Upload-Checksum: this server computes {TUS_CHECKSUMS} only"),
        ));
    }
    data_encoding_base64(digest.trim())
        .and_then(|d| <[u8; 32]>::try_from(d).ok())
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                "Upload-Checksum: send 'sha256 <the part's 32-byte digest in base64>'",
            )
        })
}

fn header_value(v: impl ToString) -> HeaderValue {
    HeaderValue::from_str(&v.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn expires_value(expires: i64) -> HeaderValue {
    let at = UNIX_EPOCH + Duration::from_secs(u64::try_from(expires).unwrap_or(0));
    header_value(httpdate::fmt_http_date(at))
}

fn completed_headers(headers: &mut HeaderMap, done: &Completed) {
    headers.insert(
        FERRY_PATH,
        header_value(utf8_percent_encode(&done.path, HEADER_UNSAFE)),
    );
    headers.insert(FERRY_SIZE, header_value(done.size));
    headers.insert(FERRY_SHA256, header_value(&done.sha256));
    if let Some(given) = &done.renamed_from {
        headers.insert(
            FERRY_RENAMED_FROM,
            header_value(utf8_percent_encode(given, HEADER_UNSAFE)),
        );
    }
}

fn no_store(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

// ----------------------------------------------------------------------------- routes

/// What this server speaks of tus; no token needed, as for any discovery.
#[utoipa::path(
    options,
    path = "/v1/uploads",
    operation_id = "tusOptions",
    tag = "resumable",
    responses((status = 204, description = "What this server speaks of tus."))
)]
async fn discover(State(state): State<AppState>) -> Response {
    let max = state.site.config().media.max_resumable_bytes;
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(TUS_VERSION_H, HeaderValue::from_static(TUS_VERSION));
    headers.insert(TUS_EXTENSION, HeaderValue::from_static(TUS_EXTENSIONS));
    headers.insert(TUS_MAX_SIZE, header_value(max));
    headers.insert(
        TUS_CHECKSUM_ALGORITHM,
        HeaderValue::from_static(TUS_CHECKSUMS),
    );
    response
}

/// What this server speaks of tus, as `OPTIONS /v1/uploads` says it.
#[utoipa::path(
    options,
    path = "/v1/uploads/{id}",
    operation_id = "tusOptionsUpload",
    tag = "resumable",
    params(("id" = String, Path, description = "The upload's id (any: it is not looked up).")),
    responses((status = 204, description = "What this server speaks of tus."))
)]
async fn discover_upload(state: State<AppState>) -> Response {
    discover(state).await
}

/// What a new upload is, from its headers.
struct Declared {
    length: u64,
    raw_metadata: String,
    given: String,
    project: Option<String>,
    folder: Option<String>,
    existing: Existing,
}

fn declared(headers: &HeaderMap, max: u64) -> Result<Declared, ApiError> {
    if headers.contains_key(&UPLOAD_DEFER_LENGTH) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "this server needs Upload-Length at creation (creation-defer-length is not offered)",
        ));
    }
    let length = number(headers, &UPLOAD_LENGTH)?.ok_or_else(|| {
        ApiError::new(
            Code::InvalidRequest,
            "send the file's size in bytes as Upload-Length",
        )
    })?;
    if length > max {
        return Err(ApiError::too_large(max));
    }
    let raw_metadata = match headers.get(&UPLOAD_METADATA) {
        Some(v) => v
            .to_str()
            .map_err(|_| ApiError::new(Code::InvalidRequest, "Upload-Metadata is not ASCII"))?
            .to_owned(),
        None => String::new(),
    };
    let mut metadata = parse_metadata(&raw_metadata)?;
    let given = metadata
        .remove("filename")
        .or_else(|| metadata.remove("name"))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                Code::MissingFile,
                "send the file's name as 'filename' in Upload-Metadata",
            )
        })?;
    let existing = match metadata.get("overwrite").map(String::as_str) {
        None | Some("true") => Existing::Replace,
        Some("false") => Existing::Keep,
        Some(_) => {
            return Err(ApiError::new(
                Code::InvalidRequest,
                "the 'overwrite' metadata is true or false",
            ));
        }
    };
    Ok(Declared {
        length,
        raw_metadata,
        given,
        project: metadata.remove("project").filter(|p| !p.is_empty()),
        folder: metadata
            .remove("folder")
            .filter(|f| !f.is_empty())
            .map(|f| ferry_site::PublicPath::parse(&f).map(|p| p.display()))
            .transpose()?
            .filter(|f| f != ferry_site::layout::PUBLIC_DIR_NAME),
        existing,
    })
}

/// Declares a resumable upload (tus creation); its parts follow by `PATCH`.
///
/// It counts as one upload of `[limits] uploads_per_minute`; its parts, `HEAD`s and end do not.
// So a resumed upload is never refused half way for the rate.
#[utoipa::path(
    post,
    path = "/v1/uploads",
    operation_id = "createUpload",
    tag = "resumable",
    security(("bearer" = [])),
    params(CreationHeaders),
    responses((status = 201,
               description = "The upload is made, at offset 0; one of `Upload-Length: 0` is complete at once (the `Ferry-*` headers).",
               headers(("Location" = String, description = "The upload's URL, `/v1/uploads/{id}`."),
                       ("Upload-Offset" = u64, description = "`0`."),
                       ("Upload-Expires" = String, description = "When the upload expires unless a part comes (an HTTP date)."))))
)]
async fn create(
    State(state): State<AppState>,
    Member(who): Member,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // First: a creation refused for the rate makes no temporary and no record.
    state.rates.take(&who.person, Rate::Uploads)?;
    require_version(&headers)?;
    let max = state.site.config().media.max_resumable_bytes;
    let declared = declared(&headers, max)?;
    let person = who.person.clone();
    let made = state.clone();
    // For a `409 exists`: the file kept there, as `POST /v1/media` tells it.
    let asked = (
        declared.project.clone(),
        declared.folder.clone(),
        declared.given.clone(),
    );
    let created = blocking(move || {
        let state = made;
        let site = &state.site;
        let workspace = site.workspace(&person, declared.project.as_deref())?;
        let name = workspace.upload_name(&declared.given)?;
        if site.resumable_in_progress(&person)? >= RESUMABLE_UPLOADS_PER_PERSON {
            return Err(ApiError::new(
                Code::TooManyUploads,
                format!(
                    "you have {RESUMABLE_UPLOADS_PER_PERSON} uploads in progress; finish or \
                     terminate one first"
                ),
            ));
        }
        let toolbox = state.toolbox(&person).map_err(ApiError::from_tool)?;
        // The declared size must fit the quota now; each part takes its room as it comes.
        let claim = toolbox.quota_claim().map_err(ApiError::from_tool)?;
        claim
            .take(declared.length)
            .map_err(|e| ApiError::from(ferry_site::SiteError::from(e)))?;
        claim.release();
        let file = ResumableFile::start(
            &toolbox.shared_requester(),
            declared.project.as_deref(),
            declared.folder.as_deref(),
            &name,
            declared.existing,
        )?;
        let now = now_secs();
        let staged = file.staged().clone();
        let record = ResumableRecord {
            id: ferry_fs::random_hex::<16>(),
            person: person.clone(),
            project: declared.project,
            folder: declared.folder,
            name,
            given: declared.given,
            replace: declared.existing == Existing::Replace,
            length: declared.length,
            received: 0,
            temp: staged.temp.clone(),
            dev: staged.dev,
            ino: staged.ino,
            created: now,
            expires: now.saturating_add(state.expiry_secs()),
            done: None,
            gone: false,
            metadata: declared.raw_metadata,
        };
        if let Err(e) = site.resumable_insert(&record) {
            let _ = resumable::discard(&toolbox.shared_requester(), &staged);
            return Err(e.into());
        }
        Ok::<_, ApiError>((record, file))
    })
    .await;
    let (record, file) = match (created, asked) {
        (Ok(made), _) => made,
        (Err(e), (project, folder, given)) if e.code == Code::Exists => {
            let place = match folder.as_deref() {
                Some(folder) => ferry_site::PublicPlace::upload_folder(folder),
                None => Ok(ferry_site::PublicPlace::Public),
            };
            return Err(match place {
                Ok(place) => {
                    crate::upload::kept(&state, &who.person, project, &place, &given, e).await
                }
                Err(_) => e,
            });
        }
        (Err(e), _) => return Err(e),
    };
    let id = record.id.clone();
    let expires = record.expires;
    let length = record.length;
    let slot = Arc::new(Slot {
        record,
        offset: AtomicU64::new(0),
        state: Arc::new(tokio::sync::Mutex::new(SlotState {
            file: Some(file),
            expires,
            ended: false,
        })),
    });
    state.uploads.lock().insert(id.clone(), slot.clone());
    let mut response = StatusCode::CREATED.into_response();
    if length == 0 {
        // Nothing to send: the empty file is placed now.
        let held = slot.state.clone().lock_owned().await;
        let done = finish(state.clone(), slot, held, who.kind.as_str()).await?;
        completed_headers(response.headers_mut(), &done);
    }
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, header_value(format!("/v1/uploads/{id}")));
    headers.insert(UPLOAD_OFFSET, header_value(0));
    headers.insert(UPLOAD_EXPIRES, expires_value(expires));
    Ok(response)
}

/// Where an upload stands, in tus's headers.
#[utoipa::path(
    head,
    path = "/v1/uploads/{id}",
    operation_id = "headUpload",
    tag = "resumable",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The upload's id."), TusHeaders),
    responses((status = 200, description = "Where the upload stands, in the headers; no body.",
               headers(("Upload-Offset" = u64, description = "The bytes received."),
                       ("Upload-Length" = u64, description = "The bytes declared."),
                       ("Upload-Expires" = String, description = "While in progress and no part is being written: when it expires (an HTTP date)."),
                       ("Upload-Metadata" = String, description = "The metadata the upload was declared with, when any."),
                       ("Cache-Control" = String, description = "`no-store`."))))
)]
async fn head(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_version(&headers)?;
    let mut response = StatusCode::OK.into_response();
    let out = response.headers_mut();
    no_store(out);
    match state.find_upload(&who.person, &id).await? {
        Found::Active(slot) => {
            out.insert(
                UPLOAD_OFFSET,
                header_value(slot.offset.load(Ordering::Acquire)),
            );
            out.insert(UPLOAD_LENGTH, header_value(slot.record.length));
            if let Ok(held) = slot.state.try_lock() {
                out.insert(UPLOAD_EXPIRES, expires_value(held.expires));
            }
            metadata_header(out, &slot.record);
        }
        Found::Done(found) => {
            let (record, done) = *found;
            out.insert(UPLOAD_OFFSET, header_value(record.length));
            out.insert(UPLOAD_LENGTH, header_value(record.length));
            metadata_header(out, &record);
            completed_headers(out, &done);
        }
    }
    Ok(response)
}

fn metadata_header(out: &mut HeaderMap, record: &ResumableRecord) {
    if !record.metadata.is_empty()
        && let Ok(value) = HeaderValue::from_str(&record.metadata)
    {
        out.insert(UPLOAD_METADATA, value);
    }
}

/// Where an upload stands.
#[derive(Serialize, ToSchema)]
struct UploadStatus {
    /// The upload's id.
    id: String,
    /// The bytes received.
    offset: u64,
    /// The bytes declared.
    length: u64,
    /// Whether the file is placed.
    complete: bool,
    /// The project; null for the main workspace.
    #[schema(required = true)]
    project: Option<String>,
    /// The placed file, once complete; absent before.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    file: Option<Completed>,
}

/// Where an upload stands, as JSON (not part of tus).
#[utoipa::path(
    get,
    path = "/v1/uploads/{id}",
    operation_id = "getUpload",
    tag = "resumable",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The upload's id.")),
    responses((status = 200, description = "Where the upload stands.", body = UploadStatus,
               headers(("Cache-Control" = String, description = "`no-store`."))))
)]
async fn status(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let status = match state.find_upload(&who.person, &id).await? {
        Found::Active(slot) => UploadStatus {
            id,
            offset: slot.offset.load(Ordering::Acquire),
            length: slot.record.length,
            complete: false,
            project: slot.record.project.clone(),
            file: None,
        },
        Found::Done(found) => {
            let (record, done) = *found;
            UploadStatus {
                id,
                offset: record.length,
                length: record.length,
                complete: true,
                project: record.project,
                file: Some(done),
            }
        }
    };
    let mut response = axum::Json(status).into_response();
    no_store(response.headers_mut());
    Ok(response)
}

/// Ends an upload and removes its bytes; a complete upload's file stays where it was placed.
#[utoipa::path(
    delete,
    path = "/v1/uploads/{id}",
    operation_id = "deleteUpload",
    tag = "resumable",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The upload's id."), TusHeaders),
    responses((status = 204, description = "The upload is ended (a placed file stays)."))
)]
async fn terminate(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    require_version(&headers)?;
    match state.find_upload(&who.person, &id).await? {
        Found::Done(_) => {
            let site = state.site.clone();
            blocking(move || site.resumable_remove(&id)).await?;
        }
        Found::Active(slot) => {
            let Ok(mut held) = slot.state.clone().try_lock_owned() else {
                return Err(locked());
            };
            if held.ended {
                return Err(unknown_upload());
            }
            // Another gateway writing it now: not ended under its feet.
            let _hold = match SiteHold::take(&state, &slot).await? {
                Ok(hold) => hold,
                Err(_) => return Err(locked()),
            };
            held.ended = true;
            held.file = None;
            state.uploads.lock().remove(&id);
            let state2 = state.clone();
            blocking(move || {
                let toolbox = state2
                    .toolbox(&slot.record.person)
                    .map_err(ApiError::from_tool)?;
                resumable::discard(&toolbox.shared_requester(), &staged_of(&slot.record))?;
                state2.site.resumable_remove(&slot.record.id)?;
                drop(held);
                Ok::<_, ApiError>(())
            })
            .await?;
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// How long one request holds an upload in the site's records; renewed while it runs,
/// so a gateway that died lets the upload go after at most this long.
const LEASE_SECS: i64 = 120;

/// Why the site would not let this gateway write an upload now.
enum Refused {
    /// The upload moved on through another gateway: it stands at this offset now.
    Moved(u64),
    /// Another gateway writes it now, or it ended there.
    Elsewhere,
}

/// An upload held in the site's records by this gateway (spec S-GATEWAYS: the local
/// lock keeps one request of this gateway at a time, this one every other gateway's).
/// Renewed while held; let go when dropped.
struct SiteHold {
    state: AppState,
    id: String,
    renewing: tokio::task::JoinHandle<()>,
}

impl SiteHold {
    async fn take(
        state: &AppState,
        slot: &Arc<Slot>,
    ) -> Result<Result<SiteHold, Refused>, ApiError> {
        let (site, id, me) = (
            state.site.clone(),
            slot.record.id.clone(),
            state.gateway_id.clone(),
        );
        let claimed = blocking(move || site.resumable_claim(&id, &me, LEASE_SECS)).await?;
        let Some(received) = claimed else {
            // Complete, gone or written elsewhere: this gateway's picture is stale.
            state.uploads.lock().remove(&slot.record.id);
            return Ok(Err(Refused::Elsewhere));
        };
        let hold = SiteHold {
            state: state.clone(),
            id: slot.record.id.clone(),
            renewing: tokio::spawn(renew(state.clone(), slot.record.id.clone())),
        };
        if received != slot.offset.load(Ordering::Acquire) {
            // Parts came through another gateway: the staged file is read afresh next time.
            state.uploads.lock().remove(&slot.record.id);
            return Ok(Err(Refused::Moved(received)));
        }
        Ok(Ok(hold))
    }
}

/// Renews the hold every quarter of its lease, for as long as it is held.
async fn renew(state: AppState, id: String) {
    let mut ticks = tokio::time::interval(Duration::from_secs(LEASE_SECS as u64 / 4));
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let (site, id, me) = (state.site.clone(), id.clone(), state.gateway_id.clone());
        if let Err(e) = blocking(move || site.resumable_renew(&id, &me, LEASE_SECS)).await {
            tracing::warn!("renewing the hold on a resumable upload: {}", e.message);
        }
    }
}

impl SiteHold {
    /// Lets the upload go before the answer is sent, so a client that heard it may send
    /// its next part at once, through any gateway (dropped, the hold goes a moment after
    /// the answer, which such a part could overtake).
    async fn release(mut self) {
        self.renewing.abort();
        let (site, id, me) = (
            self.state.site.clone(),
            std::mem::take(&mut self.id),
            self.state.gateway_id.clone(),
        );
        if let Err(e) = blocking(move || site.resumable_release(&id, &me)).await {
            tracing::warn!("letting a resumable upload go: {}", e.message);
        }
    }
}

impl Drop for SiteHold {
    fn drop(&mut self) {
        self.renewing.abort();
        if self.id.is_empty() {
            return; // Let go already.
        }
        let (site, id, me) = (
            self.state.site.clone(),
            std::mem::take(&mut self.id),
            self.state.gateway_id.clone(),
        );
        let release = move || {
            if let Err(e) = site.resumable_release(&id, &me) {
                tracing::warn!("letting a resumable upload go: {e}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(release)),
            Err(_) => release(),
        }
    }
}

fn locked() -> ApiError {
    ApiError::new(
        Code::UploadLocked,
        "another request is writing to this upload; try again when it has ended",
    )
}

/// One message from the socket to the writer of a part.
enum Piece {
    Chunk(Bytes),
    /// The body ended cleanly.
    End,
    /// The body failed (a dropped connection, a stall).
    Failed(ApiError),
}

/// What a part did.
struct PartOutcome {
    offset: u64,
    expires: i64,
    done: Option<Completed>,
}

/// Appends a part at `Upload-Offset`; the last byte places the file.
#[utoipa::path(
    patch,
    path = "/v1/uploads/{id}",
    operation_id = "patchUpload",
    tag = "resumable",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "The upload's id."), PartHeaders),
    request_body(content(("application/offset+octet-stream")),
                 description = "The part's bytes, from `Upload-Offset` on."),
    responses((status = 204,
               description = "The part is kept; the last one places the file (the `Ferry-*` headers).",
               headers(("Upload-Offset" = u64, description = "The bytes received now."),
                       ("Upload-Expires" = String, description = "While incomplete: when it expires unless another part comes (an HTTP date)."))))
)]
async fn patch(
    State(state): State<AppState>,
    Member(who): Member,
    Path(id): Path<String>,
    request: Request,
) -> Result<Response, ApiError> {
    let headers = request.headers().clone();
    require_version(&headers)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != OFFSET_OCTET_STREAM {
        return Err(ApiError::new(
            Code::BadContentType,
            format!("send each part as Content-Type: {OFFSET_OCTET_STREAM}"),
        ));
    }
    let offset = number(&headers, &UPLOAD_OFFSET)?.ok_or_else(|| {
        ApiError::new(
            Code::InvalidRequest,
            "send where the part starts as Upload-Offset",
        )
    })?;
    let checksum = part_checksum(&headers)?;
    let declared_len = number(&headers, &header::CONTENT_LENGTH)?;
    let slot = match state.find_upload(&who.person, &id).await? {
        Found::Active(slot) => slot,
        Found::Done(found) => return patch_done(*found, offset, declared_len),
    };
    let Ok(held) = slot.state.clone().try_lock_owned() else {
        return Err(locked());
    };
    if held.ended {
        // Completed (or ended) by the request before: the record says how.
        drop(held);
        return match state.find_upload(&who.person, &id).await? {
            Found::Done(found) => patch_done(*found, offset, declared_len),
            Found::Active(_) => Err(locked()),
        };
    }
    // Held on the site too, so no other gateway writes it meanwhile.
    let hold = match SiteHold::take(&state, &slot).await? {
        Ok(hold) => hold,
        Err(refused) => {
            drop(held);
            return match refused {
                Refused::Moved(offset) => Err(mismatch(offset)),
                Refused::Elsewhere => match state.find_upload(&who.person, &id).await? {
                    Found::Done(found) => patch_done(*found, offset, declared_len),
                    Found::Active(_) => Err(locked()),
                },
            };
        }
    };
    let length = slot.record.length;
    let max = state.site.config().media.max_resumable_bytes;
    if length > max {
        return Err(ApiError::too_large(max));
    }
    let now = slot.offset.load(Ordering::Acquire);
    if offset != now {
        return Err(mismatch(now));
    }
    if declared_len.is_some_and(|n| offset.saturating_add(n) > length) {
        return Err(past_length(length));
    }

    let (tx, rx) = mpsc::channel::<Piece>(PART_QUEUE_CHUNKS);
    let writer = tokio::task::spawn_blocking({
        let (state, slot) = (state.clone(), slot.clone());
        move || write_part(state, slot, held, rx, checksum)
    });
    let mut body = std::pin::pin!(paced(request.into_body(), state.pace));
    loop {
        let piece = match body.next().await {
            Some(Ok(chunk)) => Piece::Chunk(chunk),
            Some(Err(e)) => Piece::Failed(e.into()),
            None => Piece::End,
        };
        let last = !matches!(piece, Piece::Chunk(_));
        // The writer stopped early (past the length, the quota): it says why.
        if tx.send(piece).await.is_err() || last {
            break;
        }
    }
    drop(tx);
    let outcome = writer
        .await
        .map_err(|e| ApiError::internal("part writer", e))??;
    let mut outcome = outcome;
    if let Some(done) = outcome.done.take() {
        let done = finish_placed(&state, &slot, done, outcome.offset, who.kind.as_str()).await?;
        let mut response = StatusCode::NO_CONTENT.into_response();
        let out = response.headers_mut();
        out.insert(UPLOAD_OFFSET, header_value(outcome.offset));
        completed_headers(out, &done);
        hold.release().await;
        return Ok(response);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    let out = response.headers_mut();
    out.insert(UPLOAD_OFFSET, header_value(outcome.offset));
    out.insert(UPLOAD_EXPIRES, expires_value(outcome.expires));
    hold.release().await;
    Ok(response)
}

/// A `PATCH` to a complete upload: at its end it changes nothing (and tells the file),
/// elsewhere it is an offset mismatch.
fn patch_done(
    (record, done): (ResumableRecord, Completed),
    offset: u64,
    declared_len: Option<u64>,
) -> Result<Response, ApiError> {
    if offset != record.length {
        return Err(mismatch(record.length));
    }
    if declared_len.unwrap_or(0) > 0 {
        return Err(past_length(record.length));
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(UPLOAD_OFFSET, header_value(record.length));
    completed_headers(response.headers_mut(), &done);
    Ok(response)
}

fn mismatch(offset: u64) -> ApiError {
    ApiError::new(
        Code::OffsetMismatch,
        format!("the upload stands at byte {offset}; send the part from there"),
    )
    .with("offset", serde_json::json!(offset))
}

fn past_length(length: u64) -> ApiError {
    ApiError::new(
        Code::TooLarge,
        format!("the part goes past the upload's declared length of {length} bytes"),
    )
}

/// Writes one part on this blocking thread, which holds the upload's lock throughout:
/// the part is kept or cut off whole before another request may write. With a
/// checksum, a part that does not match it, or that did not arrive whole, is cut off;
/// without one, what arrived before a dropped connection is kept (the client resumes
/// after it).
fn write_part(
    state: AppState,
    slot: Arc<Slot>,
    mut held: OwnedMutexGuard<SlotState>,
    mut rx: mpsc::Receiver<Piece>,
    checksum: Option<[u8; 32]>,
) -> Result<PartOutcome, ApiError> {
    let record = &slot.record;
    let toolbox = state.toolbox(&record.person).map_err(ApiError::from_tool)?;
    if held.file.is_none() {
        let requester = toolbox.shared_requester();
        let file = ResumableFile::reopen(&requester, staged_of(record), record.received)?;
        slot.offset.store(file.size(), Ordering::Release);
        held.file = Some(file);
    }
    let claim = toolbox.quota_claim().map_err(ApiError::from_tool)?;
    let length = record.length;
    let file = held.file.as_mut().ok_or_else(unknown_upload)?;
    let mark = file.part().mark();
    let mut hasher = checksum.map(|_| Sha256::new());
    let mut failure: Option<ApiError> = None;
    let mut whole = false;
    while let Some(piece) = rx.blocking_recv() {
        match piece {
            Piece::Chunk(chunk) => {
                if file.size().saturating_add(chunk.len() as u64) > length {
                    failure = Some(past_length(length));
                    break;
                }
                if let Err(e) = claim.take(chunk.len() as u64) {
                    failure = Some(ferry_site::SiteError::from(e).into());
                    break;
                }
                if let Err(e) = file.part().append(chunk.clone()) {
                    failure = Some(ferry_site::SiteError::from(e).into());
                    break;
                }
                if let Some(h) = hasher.as_mut() {
                    h.update(&chunk);
                }
                slot.offset.store(file.size(), Ordering::Release);
            }
            Piece::End => {
                whole = true;
                break;
            }
            Piece::Failed(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    drop(rx);
    let refused = match (&failure, checksum) {
        // Past the length, over the quota, a failed write: the part is not kept.
        (Some(e), _) if e.code != Code::BodyTimeout && e.code != Code::BadBody => true,
        // A part under a checksum is kept only whole and matching.
        (_, Some(_)) if !whole => true,
        _ => false,
    };
    let mismatched = whole
        && failure.is_none()
        && match (checksum, hasher) {
            (Some(expect), Some(h)) => <[u8; 32]>::from(h.finalize()) != expect,
            _ => false,
        };
    if refused || mismatched {
        file.part()
            .rewind(mark)
            .map_err(ferry_site::SiteError::from)?;
        slot.offset.store(file.size(), Ordering::Release);
        claim.release();
    } else {
        // The bytes lie in the staged file, which the quota counts.
        claim.commit();
    }
    let offset = file.size();
    let expires = now_secs().saturating_add(state.expiry_secs());
    held.expires = expires;
    state.site.resumable_progress(&record.id, offset, expires)?;
    if mismatched {
        return Err(ApiError::new(
            Code::ChecksumMismatch,
            "the part's bytes do not have the sha256 sent as Upload-Checksum; they were \
             dropped: send the part again",
        ));
    }
    if let Some(e) = failure {
        return Err(e);
    }
    if offset < length {
        return Ok(PartOutcome {
            offset,
            expires,
            done: None,
        });
    }
    let done = place(&state, record, &mut held)?;
    Ok(PartOutcome {
        offset,
        expires,
        done: Some(done),
    })
}

/// Places a complete upload's file, under the lock `held`; the upload ends either way
/// (a placement refused, such as `409 exists`, removes the staged bytes).
fn place(
    state: &AppState,
    record: &ResumableRecord,
    held: &mut SlotState,
) -> Result<Completed, ApiError> {
    let toolbox = state.toolbox(&record.person).map_err(ApiError::from_tool)?;
    let requester = toolbox.shared_requester();
    let existing = match record.replace {
        true => Existing::Replace,
        false => Existing::Keep,
    };
    let mut file = held.file.take().ok_or_else(unknown_upload)?;
    held.ended = true;
    let placed = file.place(&requester, record.folder.as_deref(), &record.name, existing);
    let sha256 = match placed {
        Ok(sha256) => sha256,
        Err(e) => {
            let _ = resumable::discard(&requester, file.staged());
            let _ = state.site.resumable_remove(&record.id);
            state.uploads.lock().remove(&record.id);
            return Err(e.into());
        }
    };
    let path = match record.folder.as_deref() {
        Some(folder) => format!("{folder}/{}", record.name),
        None => ferry_site::layout::in_public(&record.name),
    };
    Ok(Completed {
        path,
        size: file.size(),
        sha256: ferry_fs::hex(&sha256),
        project: record.project.clone(),
        renamed_from: (record.given != record.name).then(|| record.given.clone()),
    })
}

/// After the placement: the record keeps the file for `HEAD`, the Files panel hears of
/// it, and the registry lets the upload go.
async fn finish_placed(
    state: &AppState,
    slot: &Slot,
    done: Completed,
    offset: u64,
    token_kind: &str,
) -> Result<Completed, ApiError> {
    let record = &slot.record;
    state.uploads.lock().remove(&record.id);
    // Recorded with the kind of the token whose request completed the upload.
    let entry = AuditEntry::new(&record.person, token_kind, AuditAction::Upload, &done.path)
        .project(record.project.as_deref())
        .bytes(done.size, Some(&done.sha256));
    crate::audit::record(state, entry).await;
    state.events.publish(
        &record.person,
        record.project.as_deref(),
        vec![done.path.clone()],
    );
    let json = serde_json::to_string(&done).map_err(|e| ApiError::internal("upload", e))?;
    let (site, id) = (state.site.clone(), record.id.clone());
    let expires = now_secs().saturating_add(state.expiry_secs());
    blocking(move || site.resumable_complete(&id, offset, &json, expires)).await?;
    Ok(done)
}

/// Completes an upload with nothing more to receive (a declared length of 0).
async fn finish(
    state: AppState,
    slot: Arc<Slot>,
    mut held: OwnedMutexGuard<SlotState>,
    token_kind: &str,
) -> Result<Completed, ApiError> {
    let (placing, record) = (state.clone(), slot.record.clone());
    let done = blocking(move || place(&placing, &record, &mut held)).await?;
    finish_placed(&state, &slot, done, 0, token_kind).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_pairs_decode_and_refuse_junk() {
        let m = parse_metadata("filename cmVwb3J0LnBkZg==,project cTI,overwrite ZmFsc2U,empty")
            .unwrap();
        assert_eq!(m["filename"], "report.pdf");
        assert_eq!(m["project"], "q2");
        assert_eq!(m["overwrite"], "false");
        assert_eq!(m["empty"], "");
        for bad in [
            "filename !!!",
            "filename a b",
            "a YQ,a YQ",
            "filename /w==",
            &"k ".repeat(RESUMABLE_METADATA_MAX_BYTES),
        ] {
            assert!(parse_metadata(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base64_is_taken_padded_or_not() {
        for input in ["", "f", "fo", "foo", "foob", "fooba", "foobar"] {
            let encoded = data_encoding::BASE64.encode(input.as_bytes());
            assert_eq!(
                data_encoding_base64(&encoded).as_deref(),
                Some(input.as_bytes())
            );
            let bare = data_encoding::BASE64_NOPAD.encode(input.as_bytes());
            assert_eq!(
                data_encoding_base64(&bare).as_deref(),
                Some(input.as_bytes())
            );
        }
    }
}

#[doc(hidden)]
pub mod fuzzing {
    //! The header readers above, for the `tus_headers` fuzz target.

    use axum::http::HeaderMap;

    use super::{UPLOAD_OFFSET, declared, number, part_checksum, require_version};
    use crate::ApiError;

    /// The headers the readers read, by name.
    pub const TUS_HEADERS: [&str; 6] = [
        "tus-resumable",
        "upload-length",
        "upload-metadata",
        "upload-offset",
        "upload-checksum",
        "upload-defer-length",
    ];

    /// What the headers declare, each reader's answer as it gave it.
    #[derive(Debug)]
    pub struct TusHeaders {
        /// `Tus-Resumable`.
        pub version: Result<(), ApiError>,
        /// A creation's length, name, project, folder and overwrite.
        pub creation: Result<(u64, String, Option<String>, Option<String>), ApiError>,
        /// A part's `Upload-Offset`.
        pub offset: Result<Option<u64>, ApiError>,
        /// A part's `Upload-Checksum`.
        pub checksum: Result<Option<[u8; 32]>, ApiError>,
    }

    /// Reads `headers` as every tus request's, a creation's and a part's.
    pub fn tus_headers(headers: &HeaderMap, max: u64) -> TusHeaders {
        TusHeaders {
            version: require_version(headers),
            creation: declared(headers, max).map(|d| (d.length, d.given, d.project, d.folder)),
            offset: number(headers, &UPLOAD_OFFSET),
            checksum: part_checksum(headers),
        }
    }
}
