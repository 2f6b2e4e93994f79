//! The error codes ferry answers, on every edge.
//!
//! A failure has one code, whether it is answered over HTTP
//! (`{"error":{"code":…,"message":…}}`) or as an MCP tool error result, and each code has
//! one HTTP status. Clients match on the spelling, so a spelling never changes.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares [`Code`], its spellings and statuses, and [`Code::ALL`] from one list, so a
/// code cannot be added without its spelling and status.
macro_rules! codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $text:literal => $status:literal,)+) => {
        /// Why a request failed, as clients see it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Code {
            $($(#[doc = $doc])* $variant,)+
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)+];

            /// The snake_case spelling on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $text,)+
                }
            }

            /// The HTTP status this code is answered with.
            pub const fn status(self) -> u16 {
                match self {
                    $(Code::$variant => $status,)+
                }
            }

            /// The code spelled `text`, if there is one.
            pub fn parse(text: &str) -> Option<Code> {
                match text {
                    $($text => Some(Code::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

codes! {
    // ------------------------------------------------------------------ paths and names
    /// The path leads outside its folder or through a symbolic link.
    PathEscapes = "path_escapes" => 400,
    /// The path is empty, too long, has a NUL byte or is otherwise not a path.
    BadPath = "bad_path" => 400,
    /// The name cannot be made into a safe file name.
    UnsafeName = "unsafe_name" => 400,
    /// No such file, folder or route.
    NotFound = "not_found" => 404,
    /// The folder an upload was to go into does not exist.
    FolderNotFound = "folder_not_found" => 404,
    /// Something already exists at that path.
    Exists = "exists" => 409,
    /// The path is a folder where a file was wanted.
    IsDirectory = "is_directory" => 400,
    /// A folder was wanted and the path is something else.
    NotADirectory = "not_a_directory" => 400,
    /// A regular file was wanted and the path is something else.
    NotAFile = "not_a_file" => 400,
    /// The folder is not empty.
    NotEmpty = "not_empty" => 409,
    /// A file or request is over its size limit.
    TooLarge = "too_large" => 413,
    /// The write would pass the person's storage quota.
    QuotaExceeded = "quota_exceeded" => 507,
    /// The deleted entry would pass what the person's trash may hold; nothing was deleted.
    TrashFull = "trash_full" => 507,
    /// The disk that holds the files is full (or its own quota is reached); nothing was
    /// written, and what was there before is as it was.
    InsufficientStorage = "insufficient_storage" => 507,
    /// The share link's time is over.
    ShareExpired = "share_expired" => 410,
    /// The share link was revoked by the person who made it.
    ShareRevoked = "share_revoked" => 410,
    /// The person has as many live share links as one may; revoke some first.
    TooManyShares = "too_many_shares" => 429,
    /// The person may not do that there.
    PermissionDenied = "permission_denied" => 403,
    /// The folder is read-only for this workspace.
    ReadOnly = "read_only" => 403,
    /// The folder is managed by the system and cannot be changed.
    ManagedBySystem = "managed_by_system" => 403,
    /// The extension is not allowed for uploads.
    ExtensionNotAllowed = "extension_not_allowed" => 400,
    /// A folder cannot be moved into itself.
    InvalidMove = "invalid_move" => 400,
    /// The file changed since it was read.
    ChangedMeanwhile = "changed_meanwhile" => 409,
    /// A legacy folder stands where a new one is wanted.
    LegacyFolder = "legacy_folder" => 409,
    /// The file system failed.
    IoError = "io_error" => 500,

    // ------------------------------------------------------------- people and the site
    /// A project's display name is empty, too long, or gives no id.
    InvalidProjectName = "invalid_project_name" => 400,
    /// The id is not a valid person, project or token id.
    InvalidId = "invalid_id" => 400,
    /// There is no such person.
    UnknownPerson = "unknown_person" => 404,
    /// There is no such project.
    UnknownProject = "unknown_project" => 404,
    /// The media id is not one this store issued (a path, a foreign id, or expired).
    UnknownMediaId = "unknown_media_id" => 404,
    /// No token starts with that prefix.
    UnknownToken = "unknown_token" => 404,
    /// No valid token was sent.
    Unauthorized = "unauthorized" => 401,
    /// A request to `/mcp` comes from a page of an origin the gateway does not answer to,
    /// or, without an `Origin`, names it by a host it does not answer to (DNS rebinding).
    HostNotAllowed = "host_not_allowed" => 403,
    /// The site cannot be opened.
    SiteUnavailable = "site_unavailable" => 503,
    /// Host mode cannot be used here.
    HostModeUnavailable = "host_mode_unavailable" => 503,
    /// The server failed; the operator's log has the details.
    Internal = "internal" => 500,

    // --------------------------------------------------------------- the request itself
    /// The request is malformed.
    BadRequest = "bad_request" => 400,
    /// The request body could not be read.
    BadBody = "bad_body" => 400,
    /// The request body stalled or trickled.
    BodyTimeout = "body_timeout" => 408,
    /// The body's content type is not the one the route takes.
    BadContentType = "bad_content_type" => 415,
    /// The JSON body is malformed.
    BadJson = "bad_json" => 400,
    /// The query string is malformed.
    BadQuery = "bad_query" => 400,
    /// The multipart body is malformed.
    BadMultipart = "bad_multipart" => 400,
    /// The listing cursor is malformed.
    BadCursor = "bad_cursor" => 400,
    /// The page size is out of range.
    BadLimit = "bad_limit" => 400,
    /// The page token is malformed or for another listing.
    BadPageToken = "bad_page_token" => 400,
    /// A form field came twice.
    DuplicateField = "duplicate_field" => 400,
    /// A form field the route does not take.
    UnexpectedField = "unexpected_field" => 400,
    /// A form field is over its size limit.
    FieldTooLarge = "field_too_large" => 400,
    /// The upload has no `file` part.
    MissingFile = "missing_file" => 400,
    /// The upload has more than one `file` part.
    TooManyFiles = "too_many_files" => 400,
    /// The request's fields are invalid.
    InvalidRequest = "invalid_request" => 400,
    /// A tool's arguments are invalid.
    InvalidArguments = "invalid_arguments" => 400,
    /// The text is not valid Unicode.
    InvalidUnicode = "invalid_unicode" => 400,
    /// The URL is not an absolute http(s) URL.
    BadUrl = "bad_url" => 400,
    /// No route answers that path.
    NoRoute = "no_route" => 404,
    /// The route does not take that method.
    MethodNotAllowed = "method_not_allowed" => 405,
    /// No tool has that name.
    UnknownTool = "unknown_tool" => 404,

    // ------------------------------------------------------------------ reading files
    /// The file is not text.
    NotText = "not_text" => 400,
    /// The line asked for is past the end of the file.
    PastEnd = "past_end" => 400,
    /// The text to replace is not in the file.
    NoMatch = "no_match" => 400,
    /// The text to replace is in the file more than once.
    AmbiguousMatch = "ambiguous_match" => 400,
    /// The file is larger than a preview reads.
    FileTooLarge = "file_too_large" => 413,
    /// The file is not an image.
    NotAnImage = "not_an_image" => 400,
    /// The image format is not supported.
    UnsupportedImageFormat = "unsupported_image_format" => 400,
    /// The image is larger than a preview decodes.
    ImageTooLarge = "image_too_large" => 413,
    /// The file is damaged.
    DamagedFile = "damaged_file" => 400,
    /// The image could not be encoded.
    ImageEncodeFailed = "image_encode_failed" => 500,
    /// The image cannot be made to fit the byte budget.
    ImageCannotFit = "image_cannot_fit" => 413,
    /// The file has no image to preview (text, an archive…); its JSON preview says what
    /// it holds.
    NoPreviewImage = "no_preview_image" => 400,
    /// The PDF page could not be rendered within its bounds (memory, time) or at all.
    RenderFailed = "render_failed" => 422,
    /// PDF pages cannot be rendered on this server (the rendering process cannot start).
    RenderUnavailable = "render_unavailable" => 503,
    /// As many previews are being rendered as the gateway runs at once; try again.
    PreviewBusy = "preview_busy" => 503,
    /// No skill has that name.
    NoSkill = "no_skill" => 404,
    /// The skills cannot be read.
    SkillsUnavailable = "skills_unavailable" => 503,

    // ---------------------------------------------------------------------- archives
    /// The archive holds an entry that is not a regular file or a folder (a link, a
    /// device, a FIFO, a sparse file or an unknown type).
    UnsupportedEntry = "unsupported_entry" => 400,
    /// Two names of the archive would be one on the destination.
    NameCollision = "name_collision" => 400,
    /// A name of the archive cannot exist on the destination platform.
    PlatformName = "platform_name" => 400,
    /// A name of the archive is denied by the path policy.
    PathDenied = "path_denied" => 403,
    /// The archive is damaged or is not a tar.
    MalformedArchive = "malformed_archive" => 400,
    /// The archive has more entries than it may.
    TooManyEntries = "too_many_entries" => 413,

    // ---------------------------------------------------------------------- commands
    /// Commands are never run while the service is effectively root.
    RefusedAsRoot = "refused_as_root" => 503,
    /// The timeout is out of range.
    InvalidTimeout = "invalid_timeout" => 400,
    /// The command is not a valid command.
    InvalidCommand = "invalid_command" => 400,
    /// A workspace folder cannot be opened.
    RootUnavailable = "root_unavailable" => 503,
    /// The working folder is outside the workspace.
    CwdOutside = "cwd_outside" => 400,
    /// The working folder does not exist.
    CwdNotFound = "cwd_not_found" => 404,
    /// The working folder cannot be used.
    CwdUnusable = "cwd_unusable" => 400,
    /// The working folder is not visible inside the sandbox.
    CwdNotInSandbox = "cwd_not_in_sandbox" => 400,
    /// No sandbox works, or the one required does not.
    SandboxUnavailable = "sandbox_unavailable" => 503,
    /// A sandbox path cannot be bound.
    SandboxBindFailed = "sandbox_bind_failed" => 500,
    /// The output folder cannot be prepared.
    OutputDirUnavailable = "output_dir_unavailable" => 500,
    /// The command could not be started.
    SpawnFailed = "spawn_failed" => 500,
    /// Watching the command failed.
    ExecIo = "exec_io" => 500,
    /// The process watching the command was stopped or killed.
    Unwatched = "unwatched" => 500,
    /// The process acting as the person failed or ended (the client is not at fault, and
    /// the sentence names no file of the server).
    WorkerFailed = "worker_failed" => 502,
    /// The person's POSIX account is missing (host mode); `ferry site init` makes it.
    AccountMissing = "account_missing" => 503,
    /// The person's POSIX account no longer owns their folders (its uid was changed by
    /// hand, host mode); `ferry site init` gives them to it.
    AccountChanged = "account_changed" => 503,

    // ---------------------------------------------------- approvals, picks, interactions
    /// The owner denied the request.
    Denied = "denied" => 403,
    /// Asking for the approval failed.
    ApprovalFailed = "approval_failed" => 500,
    /// No page is open to ask for an approval.
    NoApprovalChannel = "no_approval_channel" => 503,
    /// No page is open to pick a file.
    NoPickChannel = "no_pick_channel" => 503,
    /// The person cancelled the pick.
    PickCancelled = "pick_cancelled" => 410,
    /// Nobody picked a file in time.
    PickExpired = "pick_expired" => 410,
    /// There is no such request waiting.
    UnknownInteraction = "unknown_interaction" => 404,
    /// The request was already answered.
    AlreadyAnswered = "already_answered" => 409,
    /// A file is being uploaded through the link right now.
    UploadInProgress = "upload_in_progress" => 409,
    /// The request has expired.
    Expired = "expired" => 410,
    /// The upload link was already used.
    LinkUsed = "link_used" => 410,
    /// The upload link has expired.
    LinkExpired = "link_expired" => 410,
    /// The request was cancelled, so its upload link no longer works.
    LinkCancelled = "link_cancelled" => 410,
    /// The upload link's signature is not valid.
    BadSignature = "bad_signature" => 403,

    // ------------------------------------------------------------- operations
    /// The metadata database or the media store does not answer (`GET /readyz`).
    NotReady = "not_ready" => 503,

    // ------------------------------------------------------------- chat and upstreams
    /// No agent is configured.
    NoAgent = "no_agent" => 503,
    /// The chat message is empty.
    EmptyMessage = "empty_message" => 400,
    /// The chat message is over its length limit.
    MessageTooLong = "message_too_long" => 400,
    /// The chat message has too many attachments.
    TooManyAttachments = "too_many_attachments" => 400,
    /// The member left before the reply was done.
    Gone = "gone" => 410,
    /// The upstream did not answer in time.
    UpstreamTimeout = "upstream_timeout" => 504,
    /// The upstream answered with an error.
    UpstreamError = "upstream_error" => 502,
    /// The chat's upstream agent cannot be reached or answers with a server error
    /// (refused, DNS, TLS, nothing before the deadline, 5xx): "The agent is not answering".
    AgentUnreachable = "agent_unreachable" => 502,
    /// The upstream closed the connection mid-reply.
    UpstreamDropped = "upstream_dropped" => 502,
    /// The upstream's reply is over its size limit.
    ReplyTooLarge = "reply_too_large" => 502,

    // -------------------------------------------------------------------------- nodes
    /// The node is not connected, or its link has just gone down; the call was not made.
    NodeOffline = "node_offline" => 503,
    /// The other end of a node link sent a frame that breaks the protocol; the link is
    /// closed.
    BadFrame = "bad_frame" => 502,
    /// A node's hello is malformed (name, platform, shell or commands).
    BadHello = "bad_hello" => 400,
    /// A node's proof of identity does not verify.
    BadProof = "bad_proof" => 401,
    /// The node's state folder or identity key cannot be used as it is.
    NodeStateUnusable = "node_state_unusable" => 500,
    /// The link to the node carries as many calls as it may at once.
    LinkBusy = "link_busy" => 429,
    /// The call was cancelled before it finished.
    CallCancelled = "call_cancelled" => 410,
    /// No node has this id.
    UnknownNode = "unknown_node" => 404,
    /// An approval names a command the node does not advertise (or too many).
    CommandNotAdvertised = "command_not_advertised" => 400,
    /// The node was revoked, and a revoked node is never approved again.
    NodeRevoked = "node_revoked" => 409,
    /// The node is not approved for this command, or the gateway's `[nodes.<id>]`
    /// policy does not let it serve it.
    CommandNotAllowed = "command_not_allowed" => 403,
    /// Two nodes go by this name; call it by its id.
    AmbiguousNode = "ambiguous_node" => 409,
    /// What the node sent does not match the size or sha256 it stated.
    TransferMismatch = "transfer_mismatch" => 502,
    /// The folder being fetched was replaced by another during the transfer.
    CanonicalPathChanged = "canonical_path_changed" => 409,
    /// The node sent nothing on a call for longer than a transfer may pause; the call was
    /// cancelled.
    TransferStalled = "transfer_stalled" => 504,
    /// The node does not serve this command (it did not advertise it).
    UnknownCommand = "unknown_command" => 404,
    /// As many nodes are pending as the gateway keeps (`[nodes] max_pending`): a new key
    /// is refused, nothing is recorded, until an admin approves or revokes some.
    TooManyPendingNodes = "too_many_pending_nodes" => 429,
    /// As many node handshakes are in progress as the gateway runs at once; try again.
    TooManyHandshakes = "too_many_handshakes" => 503,
    /// The node's shell is not one whose quoting ferry knows (spec N-TERM): a path cannot
    /// be pasted into it safely.
    UnsupportedShell = "unsupported_shell" => 422,
    /// The path cannot be quoted for the node's shell (`cmd.exe` and `%`, `!` or `"`; a
    /// control character for every shell).
    UnquotablePath = "unquotable_path" => 422,
    /// No terminal of yours has this session id (it ended, or was never opened).
    UnknownTerminal = "unknown_terminal" => 404,
    /// As many terminals are open on the node as the gateway keeps (`[nodes]
    /// terminals_max`); close one first.
    TooManyTerminals = "too_many_terminals" => 429,
    /// Another page of the same person attached to this terminal; this one was let go.
    TerminalTakenOver = "terminal_taken_over" => 409,

    // ------------------------------------------------------------------------ limits
    /// The person runs as many chat turns as they may.
    TooManyTurns = "too_many_turns" => 429,
    /// The token has as many MCP sessions open as it may.
    TooManySessions = "too_many_sessions" => 429,
    /// The person has as many event streams open as they may.
    TooManyStreams = "too_many_streams" => 429,
    /// The gateway holds as many client connections as it may (`[server]
    /// max_connections`); the connection was answered and closed. Try again in a moment.
    TooManyConnections = "too_many_connections" => 503,
    /// The person has as many worker processes busy as they may (host mode).
    TooManyWorkers = "too_many_workers" => 429,
    /// The person made as many requests of this kind this minute as they may
    /// (`[limits] uploads_per_minute`, `deliveries_per_minute`, `tool_calls_per_minute`);
    /// nothing was done. The answer says when to try again (`Retry-After`).
    RateLimited = "rate_limited" => 429,

    // ------------------------------------------------------------------ handoffs (herd)
    /// No agent definition of that name is found in the project, the home or the site.
    UnknownAgent = "unknown_agent" => 404,
    /// The definition is not Markdown with front matter naming `name`, `description` and
    /// `command`.
    BadDefinition = "bad_definition" => 400,
    /// No worker has that label in this person's herd.
    UnknownWorker = "unknown_worker" => 404,
    /// The worker has ended (completed, failed or stopped): it reads no more messages.
    WorkerEnded = "worker_ended" => 409,
    /// The command is for a worker, and this process is none (no `FERRY_HERD_LABEL`).
    NotAWorker = "not_a_worker" => 400,
    /// Another process holds the herd's lock for longer than a request may wait.
    HerdBusy = "herd_busy" => 503,

    // ------------------------------------------------------- resumable uploads (tus 1.0)
    /// The request names a tus version this server does not speak (`Tus-Resumable`).
    TusVersion = "tus_version" => 412,
    /// No upload of yours has this id (it never existed, was terminated, or was removed
    /// after it expired).
    UnknownUpload = "unknown_upload" => 404,
    /// The upload expired; its bytes were removed. Start a new upload.
    UploadExpired = "upload_expired" => 410,
    /// `Upload-Offset` is not where the upload stands; ask with `HEAD` and resume there.
    OffsetMismatch = "offset_mismatch" => 409,
    /// Another request is writing to this upload now; try again when it has ended.
    UploadLocked = "upload_locked" => 423,
    /// The part's bytes do not have the `Upload-Checksum` sent with them; they were dropped.
    ChecksumMismatch = "checksum_mismatch" => 460,
    /// The `Upload-Checksum` names an algorithm this server does not compute.
    ChecksumAlgorithm = "checksum_algorithm" => 400,
    /// The upload is complete: no more bytes are taken.
    UploadComplete = "upload_complete" => 409,
    /// The person has as many resumable uploads in progress as they may; finish or
    /// terminate one first.
    TooManyUploads = "too_many_uploads" => 429,
}

impl Code {
    /// Whether the failure is the server's own fault (500): its sentence can name the
    /// server's files, so it belongs in the operator's log, not in an HTTP answer. The
    /// other 5xx codes (a full quota, no agent, an upstream's failure) say what to do.
    pub const fn is_internal(self) -> bool {
        self.status() == 500
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Code> for &str {
    fn eq(&self, other: &Code) -> bool {
        *self == other.as_str()
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Code, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Code::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::Code;
    use std::collections::HashSet;

    #[test]
    fn every_spelling_is_snake_case_unique_and_round_trips() {
        let mut seen = HashSet::new();
        for &code in Code::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} is spelled twice");
            assert!(
                !text.is_empty()
                    && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    && !text.starts_with('_')
                    && !text.ends_with('_'),
                "{text} is not snake_case"
            );
            assert_eq!(Code::parse(text), Some(code));
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Code>(&json).unwrap(), code);
        }
    }

    #[test]
    fn every_status_is_an_error_status() {
        for &code in Code::ALL {
            assert!((400..600).contains(&code.status()), "{code}");
            assert_eq!(code.is_internal(), code.status() == 500, "{code}");
        }
    }

    #[test]
    fn unknown_spellings_are_refused() {
        for text in ["", "Not_Found", "not_found ", "invalid_path", "site_error"] {
            assert_eq!(Code::parse(text), None, "{text:?}");
            assert!(serde_json::from_str::<Code>(&format!("{text:?}")).is_err());
        }
    }

    #[test]
    fn compares_with_its_spelling() {
        assert_eq!(Code::PathEscapes, "path_escapes");
        assert_eq!("too_large", Code::TooLarge);
        assert_ne!(Code::NotFound, "not_a_file");
        assert_eq!(Code::QuotaExceeded.to_string(), "quota_exceeded");
    }

    /// The spellings clients and the spec rely on, each with its status.
    #[test]
    fn the_specified_codes_keep_their_spelling_and_status() {
        for (text, status) in [
            ("path_escapes", 400),
            ("unsafe_name", 400),
            ("extension_not_allowed", 400),
            ("managed_by_system", 403),
            ("exists", 409),
            ("is_directory", 400),
            ("unknown_project", 404),
            ("unknown_media_id", 404),
            ("missing_file", 400),
            ("too_many_files", 400),
            ("too_large", 413),
            ("bad_url", 400),
            ("upstream_timeout", 504),
            ("upstream_error", 502),
            ("no_agent", 503),
            ("not_ready", 503),
            ("quota_exceeded", 507),
            ("insufficient_storage", 507),
            ("too_many_turns", 429),
            ("too_many_sessions", 429),
            ("rate_limited", 429),
            ("permission_denied", 403),
            ("not_found", 404),
            ("unauthorized", 401),
            ("host_not_allowed", 403),
            ("bad_path", 400),
            ("sandbox_unavailable", 503),
            ("refused_as_root", 503),
            ("bad_page_token", 400),
            ("invalid_request", 400),
            ("unsupported_entry", 400),
            ("name_collision", 400),
            ("platform_name", 400),
            ("path_denied", 403),
            ("malformed_archive", 400),
            ("too_many_entries", 413),
            ("node_offline", 503),
        ] {
            let code = Code::parse(text).unwrap_or_else(|| panic!("{text} is missing"));
            assert_eq!(code.status(), status, "{text}");
        }
    }
}
