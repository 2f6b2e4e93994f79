//! One code per failure: every variant of every error enum is answered with the same code
//! over HTTP (the JSON body, with the status that code names) and as an MCP tool error.
//!
//! Each enum has a `variant` function, a `match` without a wildcard, so a new variant
//! does not compile until it is listed here, and a list of samples that must cover every
//! variant it names.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;

use axum::response::IntoResponse;
use ferry_archive::ArchiveError;
use ferry_codes::Code;
use ferry_exec::{ExecError, RequestError};
use ferry_fs::FsError;
use ferry_gateway::ApiError;
use ferry_media::MediaError;
use ferry_site::{InteractionError, ShareError, SiteError, TrashError};
use ferry_tools::{ToolError, ToolOutput};
use serde_json::Value;

/// What a client sees of an [`ApiError`]: the status and the JSON body's code.
async fn over_http(err: ApiError) -> (u16, String, Value) {
    let response = err.into_response();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    let code = body["error"]["code"].as_str().unwrap().to_owned();
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    (status, code, body)
}

/// What an MCP client sees of a [`ToolError`]: the code of the tool error result.
fn over_mcp(err: &ToolError) -> String {
    let result = ferry_tools::mcp::to_result(ToolOutput::error(err)).unwrap();
    let result = serde_json::to_value(result).unwrap();
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["error"]["message"], err.message,
        "{result}"
    );
    result["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Checks that `http` and `mcp`, the same failure seen from each edge, agree with `code`.
async fn assert_agree(what: &str, code: Code, http: ApiError, mcp: &ToolError) {
    let (status, http_code, body) = over_http(http).await;
    assert_eq!(status, code.status(), "{what}: HTTP status ({body})");
    assert_eq!(http_code, code.as_str(), "{what}: HTTP code");
    assert_eq!(over_mcp(mcp), code.as_str(), "{what}: MCP code");
    assert_eq!(mcp.code, code, "{what}: tool error");
}

/// Asserts `seen` covers every variant index below `count`.
fn assert_covers(kind: &str, seen: impl IntoIterator<Item = usize>, count: usize) {
    let seen: BTreeSet<usize> = seen.into_iter().collect();
    let missing: Vec<usize> = (0..count).filter(|i| !seen.contains(i)).collect();
    assert!(
        missing.is_empty(),
        "{kind}: no sample of variants {missing:?}"
    );
}

// ------------------------------------------------------------------------------- FsError

const FS_VARIANTS: usize = 18;

fn fs_variant(e: &FsError) -> usize {
    match e {
        FsError::PathEscapes => 0,
        FsError::EmptyPath => 1,
        FsError::PathTooLong => 2,
        FsError::NulByte => 3,
        FsError::UnsafeName(_) => 4,
        FsError::NotFound => 5,
        FsError::Exists => 6,
        FsError::IsDirectory => 7,
        FsError::NotADirectory => 8,
        FsError::NotRegular => 9,
        FsError::NotEmpty => 10,
        FsError::TooLarge(_) => 11,
        FsError::QuotaExceeded { .. } => 12,
        FsError::PermissionDenied => 13,
        FsError::Io(_) => 14,
        FsError::Relayed { .. } => 15,
        FsError::UnusableName { .. } => 16,
        FsError::NoSpace => 17,
    }
}

fn fs_samples() -> Vec<FsError> {
    vec![
        FsError::PathEscapes,
        FsError::EmptyPath,
        FsError::PathTooLong,
        FsError::NulByte,
        FsError::UnsafeName(".ferry-tmp-x".into()),
        FsError::NotFound,
        FsError::Exists,
        FsError::IsDirectory,
        FsError::NotADirectory,
        FsError::NotRegular,
        FsError::NotEmpty,
        FsError::TooLarge(1000),
        FsError::QuotaExceeded { limit: 10, used: 9 },
        FsError::PermissionDenied,
        FsError::Io(io::Error::other("disk on fire")),
        FsError::Relayed {
            code: ferry_codes::Code::WorkerFailed,
            message: "the worker went away".into(),
        },
        FsError::UnusableName {
            name: "a/b".into(),
            why: "a name cannot hold `/`",
        },
        FsError::NoSpace,
    ]
}

#[tokio::test]
async fn every_file_system_failure_has_one_code() {
    let samples = fs_samples();
    assert_covers("FsError", samples.iter().map(fs_variant), FS_VARIANTS);
    // FsError is not `Clone`: each edge gets its own, equal, sample.
    for (http, mcp) in fs_samples().into_iter().zip(fs_samples()) {
        let what = format!("{http:?}");
        let code = http.code();
        // The member routes see it through the site, the tools through the requester.
        let http = ApiError::from(SiteError::Fs(http));
        let mcp = ToolError::from(RequestError::from(mcp));
        assert_agree(&what, code, http, &mcp).await;
    }
}

/// A failure of a person's own system call (host mode) is coded as a confined one.
#[tokio::test]
async fn an_errno_is_coded_as_the_confined_operations_code_it() {
    for (errno, code) in [
        (libc::EXDEV, Code::PathEscapes),
        (libc::ELOOP, Code::PathEscapes),
        (libc::ENOENT, Code::NotFound),
        (libc::EEXIST, Code::Exists),
        (libc::EISDIR, Code::IsDirectory),
        (libc::ENOTDIR, Code::NotADirectory),
        (libc::ENOTEMPTY, Code::NotEmpty),
        (libc::EACCES, Code::PermissionDenied),
        (libc::EPERM, Code::PermissionDenied),
        (libc::ENAMETOOLONG, Code::BadPath),
        (libc::EIO, Code::IoError),
    ] {
        let mcp = ToolError::from(RequestError::from(io::Error::from_raw_os_error(errno)));
        let http = ApiError::from(SiteError::Fs(FsError::from_raw_os_error(errno)));
        assert_agree(&format!("errno {errno}"), code, http, &mcp).await;
    }
}

// ----------------------------------------------------------------------------- SiteError

const SITE_VARIANTS: usize = 30;

fn site_variant(e: &SiteError) -> usize {
    match e {
        SiteError::InvalidId { .. } => 0,
        SiteError::UnknownPerson(_) => 1,
        SiteError::UnknownProject(_) => 2,
        SiteError::AlreadyExists(_) => 3,
        SiteError::ExtensionNotAllowed(_) => 4,
        SiteError::ManagedBySystem => 5,
        SiteError::Reserved(_) => 6,
        SiteError::OutsidePublic => 7,
        SiteError::MoveIntoItself => 8,
        SiteError::Unsafe { .. } => 9,
        SiteError::UnknownToken(_) => 10,
        SiteError::Interaction(_) => 11,
        SiteError::Fs(_) => 12,
        SiteError::Db(_) => 13,
        SiteError::Io(_) => 14,
        SiteError::UnknownNode(_) => 15,
        SiteError::BadNodeHello(_) => 16,
        SiteError::NodeKeyMismatch(_) => 17,
        SiteError::BadNodeCommands(_) => 18,
        SiteError::NodeRevoked(_) => 19,
        SiteError::CorruptRow(_) => 20,
        SiteError::TooManyPendingNodes(_) => 21,
        SiteError::NoSuchFolder(_) => 22,
        SiteError::BadProjectName(_) => 23,
        SiteError::NameGivesNoId(_) => 24,
        SiteError::Trash(_) => 25,
        SiteError::Share(_) => 26,
        SiteError::BadQuery(_) => 27,
        SiteError::TooBig(_) => 28,
        SiteError::BadTokenPrefix(_) => 29,
    }
}

const INTERACTION_VARIANTS: usize = 9;

fn interaction_variant(e: &InteractionError) -> usize {
    match e {
        InteractionError::Unknown(_) => 0,
        InteractionError::AlreadyAnswered => 1,
        InteractionError::Expired => 2,
        InteractionError::LinkUsed => 3,
        InteractionError::LinkExpired => 4,
        InteractionError::LinkCancelled => 5,
        InteractionError::BadSignature => 6,
        InteractionError::UploadInProgress => 7,
        InteractionError::InvalidText { .. } => 8,
    }
}

fn interaction_samples() -> Vec<InteractionError> {
    vec![
        InteractionError::Unknown("abc".into()),
        InteractionError::AlreadyAnswered,
        InteractionError::Expired,
        InteractionError::LinkUsed,
        InteractionError::LinkExpired,
        InteractionError::LinkCancelled,
        InteractionError::BadSignature,
        InteractionError::UploadInProgress,
        InteractionError::InvalidText {
            field: "title",
            problem: "is empty".into(),
        },
    ]
}

/// One sample of each site failure; `n` picks which interaction or file system failure
/// the wrapping variants carry.
fn site_samples() -> Vec<SiteError> {
    let mut samples = vec![
        SiteError::InvalidId {
            kind: "person",
            id: "Bad Id".into(),
        },
        SiteError::UnknownPerson("ghost".into()),
        SiteError::UnknownProject("nope".into()),
        SiteError::AlreadyExists("project q2".into()),
        SiteError::ExtensionNotAllowed("x.exe".into()),
        SiteError::ManagedBySystem,
        SiteError::Reserved("public"),
        SiteError::OutsidePublic,
        SiteError::MoveIntoItself,
        SiteError::Unsafe {
            path: "public/x".into(),
            why: "is a symbolic link".into(),
        },
        SiteError::UnknownToken("fy_abc".into()),
        SiteError::BadTokenPrefix("\"fy_ab\" cannot name a token".into()),
        SiteError::Db(ferry_sql::Error::Unreachable("down".into())),
        SiteError::Io(io::Error::other("layout")),
        SiteError::UnknownNode("\"0123\"".into()),
        SiteError::BadNodeHello("the name must have 1 to 64 bytes".into()),
        SiteError::NodeKeyMismatch("0123".into()),
        SiteError::BadNodeCommands("node 0123 does not advertise \"x\"".into()),
        SiteError::NodeRevoked("0123".into()),
        SiteError::CorruptRow("node \"0123\" has an unknown state".into()),
        SiteError::TooManyPendingNodes(64),
        SiteError::NoSuchFolder("public/reports".into()),
        SiteError::BadProjectName("is empty".into()),
        SiteError::NameGivesNoId("!!!".into()),
        SiteError::BadQuery("the search query is empty".into()),
        SiteError::TooBig("the folder holds more than 10 bytes".into()),
    ];
    samples.extend(
        interaction_samples()
            .into_iter()
            .map(SiteError::Interaction),
    );
    samples.extend(fs_samples().into_iter().map(SiteError::Fs));
    samples.extend(
        [
            TrashError::Full {
                path: "public/a".into(),
                size: 2,
                held: 1,
                max: 2,
            },
            TrashError::Unknown,
            TrashError::Changed("public/a".into()),
        ]
        .into_iter()
        .map(SiteError::Trash),
    );
    samples.extend(
        [
            ShareError::Unknown,
            ShareError::Expired,
            ShareError::Revoked,
            ShareError::BadExpiry(-1),
            ShareError::TooMany,
        ]
        .into_iter()
        .map(SiteError::Share),
    );
    samples
}

#[tokio::test]
async fn every_site_failure_has_one_code() {
    let samples = site_samples();
    assert_covers("SiteError", samples.iter().map(site_variant), SITE_VARIANTS);
    assert_covers(
        "InteractionError",
        samples.iter().filter_map(|e| match e {
            SiteError::Interaction(i) => Some(interaction_variant(i)),
            _ => None,
        }),
        INTERACTION_VARIANTS,
    );
    // SiteError is not `Clone`: each edge gets its own, equal, sample.
    for (http, mcp) in site_samples().into_iter().zip(site_samples()) {
        let what = format!("{http:?}");
        let code = http.code();
        assert_eq!(mcp.code(), code, "{what}");
        assert_agree(&what, code, ApiError::from(http), &ToolError::from(mcp)).await;
    }
}

// ----------------------------------------------------------------- MediaError, ArchiveError

const MEDIA_VARIANTS: usize = 9;

fn media_variant(e: &MediaError) -> usize {
    match e {
        MediaError::UnknownMediaId(_) => 0,
        MediaError::NameTooLong { .. } => 1,
        MediaError::TooLarge { .. } => 2,
        MediaError::Source(_) => 3,
        MediaError::Store(_) => 4,
        MediaError::BlobMissing(_) => 5,
        MediaError::Records(_) => 6,
        MediaError::Io(_) => 7,
        MediaError::Fs(_) => 8,
    }
}

fn media_samples() -> Vec<MediaError> {
    vec![
        MediaError::UnknownMediaId("../etc/passwd".into()),
        MediaError::NameTooLong { max_bytes: 4096 },
        MediaError::TooLarge { max_bytes: 16 },
        MediaError::Source(io::Error::other("the body stopped")),
        MediaError::Store(object_store::Error::NotImplemented {
            operation: "put".into(),
            implementer: "test".into(),
        }),
        MediaError::BlobMissing("abc".into()),
        MediaError::Records("the table is locked".into()),
        MediaError::Io(io::Error::other("disk on fire")),
        MediaError::Fs(FsError::PathEscapes),
    ]
}

#[tokio::test]
async fn every_media_failure_has_one_code() {
    let samples = media_samples();
    assert_covers(
        "MediaError",
        samples.iter().map(media_variant),
        MEDIA_VARIANTS,
    );
    for (http, mcp) in media_samples().into_iter().zip(media_samples()) {
        let what = format!("{http:?}");
        let code = http.code();
        let tool = ToolError::new(mcp.code(), mcp.to_string());
        assert_agree(&what, code, ApiError::from(http), &tool).await;
    }
}

const ARCHIVE_VARIANTS: usize = 17;

fn archive_variant(e: &ArchiveError) -> usize {
    match e {
        ArchiveError::UnsupportedEntry { .. } => 0,
        ArchiveError::PathEscapes { .. } => 1,
        ArchiveError::InvalidUnicode { .. } => 2,
        ArchiveError::NameCollision { .. } => 3,
        ArchiveError::PlatformName { .. } => 4,
        ArchiveError::PathDenied { .. } => 5,
        ArchiveError::Malformed(_) => 6,
        ArchiveError::ArchiveTooLarge { .. } => 7,
        ArchiveError::EntryTooLarge { .. } => 8,
        ArchiveError::UnpackedTooLarge { .. } => 9,
        ArchiveError::HeaderTooLarge { .. } => 10,
        ArchiveError::TooManyEntries { .. } => 11,
        ArchiveError::ChangedMeanwhile { .. } => 12,
        ArchiveError::BadGlob { .. } => 13,
        ArchiveError::BadName { .. } => 14,
        ArchiveError::Fs(_) => 15,
        ArchiveError::Io(_) => 16,
    }
}

fn archive_samples() -> Vec<ArchiveError> {
    let path = || "a/b".to_string();
    vec![
        ArchiveError::UnsupportedEntry {
            path: path(),
            what: "a symbolic link".into(),
        },
        ArchiveError::PathEscapes {
            path: "../x".into(),
            why: "it has a .. component",
        },
        ArchiveError::InvalidUnicode { path: path() },
        ArchiveError::NameCollision {
            path: "A".into(),
            other: "a".into(),
            why: "they differ in case only",
        },
        ArchiveError::PlatformName {
            path: "con".into(),
            platform: "windows",
            why: "a reserved name".into(),
        },
        ArchiveError::PathDenied { path: path() },
        ArchiveError::Malformed("a bad checksum".into()),
        ArchiveError::ArchiveTooLarge { limit: 16 },
        ArchiveError::EntryTooLarge {
            path: path(),
            size: 17,
            limit: 16,
        },
        ArchiveError::UnpackedTooLarge { limit: 64 },
        ArchiveError::HeaderTooLarge {
            what: "PAX header",
            size: 70_000,
            limit: 65_536,
        },
        ArchiveError::TooManyEntries { limit: 5000 },
        ArchiveError::ChangedMeanwhile {
            path: path(),
            declared: 10,
            found: "only 5 were read".into(),
        },
        ArchiveError::BadGlob {
            glob: "[".into(),
            why: "unclosed class".into(),
        },
        ArchiveError::BadName {
            path: "/abs".into(),
            why: "it is absolute",
        },
        ArchiveError::Fs(FsError::Exists),
        ArchiveError::Io(io::Error::other("the pipe broke")),
    ]
}

#[tokio::test]
async fn every_archive_failure_has_one_code() {
    let samples = archive_samples();
    assert_covers(
        "ArchiveError",
        samples.iter().map(archive_variant),
        ARCHIVE_VARIANTS,
    );
    for (http, mcp) in archive_samples().into_iter().zip(archive_samples()) {
        let what = format!("{http:?}");
        let code = http.code();
        let tool = ToolError::new(mcp.code(), mcp.to_string());
        assert_agree(&what, code, ApiError::from(http), &tool).await;
    }
}

/// The spec's codes for the member routes' failures (members.md), kept as they were.
#[test]
fn the_member_routes_keep_the_spec_codes() {
    for (e, code) in [
        (SiteError::UnknownProject("x".into()), "unknown_project"),
        (SiteError::AlreadyExists("x".into()), "exists"),
        (
            SiteError::ExtensionNotAllowed("x".into()),
            "extension_not_allowed",
        ),
        (SiteError::ManagedBySystem, "managed_by_system"),
        (SiteError::Reserved("public"), "managed_by_system"),
        (SiteError::OutsidePublic, "not_found"),
        (SiteError::Fs(FsError::PathEscapes), "path_escapes"),
        (
            SiteError::Fs(FsError::UnsafeName("x".into())),
            "unsafe_name",
        ),
        (SiteError::Fs(FsError::IsDirectory), "is_directory"),
        (SiteError::Fs(FsError::TooLarge(1)), "too_large"),
    ] {
        assert_eq!(e.code(), code, "{e:?}");
    }
}

// ----------------------------------------------------------------------------- ExecError

const EXEC_VARIANTS: usize = 18;

fn exec_variant(e: &ExecError) -> usize {
    match e {
        ExecError::RefusedAsRoot => 0,
        ExecError::InvalidTimeout => 1,
        ExecError::InvalidCommand => 2,
        ExecError::RootUnavailable { .. } => 3,
        ExecError::RootIsLink { .. } => 4,
        ExecError::CwdOutside { .. } => 5,
        ExecError::CwdNotFound { .. } => 6,
        ExecError::CwdUnusable { .. } => 7,
        ExecError::CwdNotInSandbox { .. } => 8,
        ExecError::SandboxUnavailable { .. } => 9,
        ExecError::NoSandbox { .. } => 10,
        ExecError::SandboxBind { .. } => 11,
        ExecError::OutputDir { .. } => 12,
        ExecError::Spawn(_) => 13,
        ExecError::Io(_) => 14,
        ExecError::Unwatched => 15,
        ExecError::InvalidLifetime => 16,
        ExecError::InvalidWorkerRun(_) => 17,
    }
}

fn exec_samples() -> Vec<ExecError> {
    let path = || PathBuf::from("/srv/w");
    vec![
        ExecError::RefusedAsRoot,
        ExecError::InvalidTimeout,
        ExecError::InvalidCommand,
        ExecError::RootUnavailable {
            path: path(),
            source: FsError::NotFound,
        },
        ExecError::RootIsLink { path: path() },
        ExecError::CwdOutside { path: path() },
        ExecError::CwdNotFound { path: path() },
        ExecError::CwdUnusable {
            path: path(),
            source: FsError::PermissionDenied,
        },
        ExecError::CwdNotInSandbox { path: path() },
        ExecError::SandboxUnavailable {
            what: "bwrap is missing",
            path: path(),
        },
        ExecError::NoSandbox {
            landlock: "ABI 3".into(),
            bwrap: "missing".into(),
        },
        ExecError::SandboxBind {
            path: path(),
            source: io::Error::other("bind"),
        },
        ExecError::OutputDir {
            path: path(),
            source: io::Error::other("full"),
        },
        ExecError::Spawn(io::Error::other("fork")),
        ExecError::Io(io::Error::other("poll")),
        ExecError::Unwatched,
        ExecError::InvalidLifetime,
        ExecError::InvalidWorkerRun("the variable name \"PATH\" is refused".into()),
    ]
}

#[tokio::test]
async fn every_command_failure_has_one_code() {
    let samples = exec_samples();
    assert_covers("ExecError", samples.iter().map(exec_variant), EXEC_VARIANTS);
    for e in samples {
        let what = format!("{e:?}");
        let code = e.code();
        let tool = ToolError::from(RequestError::from(e));
        assert_agree(&what, code, ApiError::from_tool(tool.clone()), &tool).await;
    }
}

// ---------------------------------------------------------------------------- every code

/// A tool failure the API answers (a toolbox that cannot open, a pick) keeps its code and
/// gets that code's status, whatever the code; an internal failure's sentence goes to
/// the operator's log only.
#[tokio::test]
async fn every_code_is_answered_alike_on_both_edges() {
    for &code in Code::ALL {
        let tool = ToolError::new(code, "a sentence naming /srv/private");
        let (status, http_code, body) = over_http(ApiError::from_tool(tool.clone())).await;
        assert_eq!(status, code.status(), "{code}");
        assert_eq!(http_code, code.as_str());
        assert_eq!(over_mcp(&tool), code.as_str());
        let message = body["error"]["message"].as_str().unwrap();
        assert_eq!(
            message.contains("/srv/private"),
            !code.is_internal(),
            "{code}: {message}"
        );
        // The worker's answers cross a socket as JSON: the code survives the trip.
        let request = RequestError::new(code, "x");
        let back: RequestError =
            serde_json::from_str(&serde_json::to_string(&request).unwrap()).unwrap();
        assert_eq!(back, request);
    }
}

/// A worker answering a code this build does not know is refused, not guessed at.
#[test]
fn an_unknown_code_from_a_worker_is_refused() {
    for frame in [
        r#"{"code":"no_such_code","message":"x"}"#,
        r#"{"code":"","message":"x"}"#,
        r#"{"code":7,"message":"x"}"#,
    ] {
        assert!(
            serde_json::from_str::<RequestError>(frame).is_err(),
            "{frame}"
        );
    }
}
