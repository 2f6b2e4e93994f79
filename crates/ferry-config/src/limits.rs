//! Every limit of ferry, named once with its unit (core C-LIMIT).
//!
//! Two kinds live here: the defaults of settings an operator may change in `ferry.toml`
//! (the key is named beside each), and the fixed limits the spec sets. Internal pacing
//! (poll cadences, buffer sizes) stays next to the code it paces.

use std::time::Duration;

// ---- the server -------------------------------------------------------------------

/// Address the server listens on when none is configured: loopback only, so a bare start
/// exposes nothing (`server.listen`).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// Seconds a request body may send nothing before it is cut off (`server.body_idle_timeout_secs`).
pub const BODY_IDLE_TIMEOUT_SECS: u64 = 30;
/// Average bytes per second a request body must sustain once the idle grace period is
/// over (`server.body_min_bytes_per_sec`).
pub const BODY_MIN_BYTES_PER_SEC: u64 = 1024;
/// The largest declared request body whose rest an early answer (a refusal from the
/// request's head alone) waits for, so the client still sending reads that answer rather
/// than a reset connection.
pub const LINGER_BODY_MAX_BYTES: u64 = 64 * 1024;
/// Seconds an early answer waits, at most, for the rest of such a body.
pub const LINGER_SECS: u64 = 1;
/// The bytes of small uploads' file parts held in memory at once, across all uploads,
/// until each form has been read (they are then placed in one go); an upload arriving
/// past it streams to a staged file from its start instead.
pub const UPLOADS_HELD_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Uploads and deliveries a gateway places at once (their fsync, rename and audit
/// record), per core: more wait their turn. Past a few per core, placements into one
/// folder spend their time spinning on its lock and switching threads, not writing.
pub const PLACEMENTS_PER_CORE: usize = 4;
/// Requests one HTTP/2 connection may have open at once (its `SETTINGS_MAX_CONCURRENT_STREAMS`):
/// a connection's slot (`server.max_connections`) then holds at most this many uploads,
/// not the protocol's default hundreds.
pub const HTTP2_STREAMS_PER_CONNECTION: u32 = 8;
/// Seconds a client has to send the request headers (`server.header_read_timeout_secs`).
pub const HEADER_READ_TIMEOUT_SECS: u64 = 30;
/// Seconds a stopping gateway lets requests in flight finish (`server.shutdown_grace_secs`).
pub const SHUTDOWN_GRACE_SECS: u64 = 30;
/// The longest grace a stopping gateway may be given: an hour.
pub const SHUTDOWN_GRACE_MAX_SECS: u64 = 3600;
/// Live event streams (`GET /v1/events`) one person may hold open at once (`server.max_event_streams`).
pub const MAX_EVENT_STREAMS: u32 = 16;
/// Client connections the gateway holds open at once, upgraded ones (node links,
/// terminals) included (`server.max_connections`); one more is answered `503
/// too_many_connections` and closed. Each is a descriptor and a few KiB while idle (up
/// to about half a MiB while an upload streams through it), so this, not what clients
/// open, bounds what connections cost; it stays well below the 65,536 open files the
/// gateway asks for, leaving descriptors for the files themselves.
pub const MAX_CONNECTIONS: usize = 10_000;
/// The highest `server.max_connections` may be set to: past the open-files limit of
/// any system the gateway would meet.
pub const MAX_CONNECTIONS_CEILING: usize = 1_000_000;

// ---- per-person rates (`[limits]`) -----------------------------------------------------

/// Uploads one person may start a minute, `POST /v1/media` and resumable creations
/// (`POST /v1/uploads`) together (`limits.uploads_per_minute`; 0 is no limit). Ten a
/// second once the first 600 are spent: a dropped folder of a few hundred files goes at
/// once.
pub const UPLOADS_PER_MINUTE: u32 = 600;
/// Deliveries one person's agents may make a minute, `POST /v1/deliveries` and
/// `file_deliver` calls together (`limits.deliveries_per_minute`; 0 is no limit). Each
/// may fetch 64 MiB from the network, hence fewer than uploads.
pub const DELIVERIES_PER_MINUTE: u32 = 120;
/// MCP tool calls one person's agents may make a minute at `/mcp`, all of them together
/// (`limits.tool_calls_per_minute`; 0 is no limit): far more than a model's turns make.
pub const TOOL_CALLS_PER_MINUTE: u32 = 600;
/// The highest any per-minute rate may be set to (a thousand a second); past that a rate
/// bounds nothing a gateway can serve, and `0` is the way to say "no limit".
pub const RATE_PER_MINUTE_MAX: u32 = 60_000;

// ---- members: uploads, listings, deliveries -----------------------------------------

/// Largest file a member may upload, in bytes (10 MiB; `media.max_upload_bytes`).
pub const MEDIA_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Hours a media record is kept before the sweeper removes it (C-MEDIA; `media.ttl_hours`).
pub const MEDIA_TTL_HOURS: u64 = 168;
/// The most hours `[media] ttl_hours` may keep a record: ten years, far below where an
/// expiry in seconds could overflow.
pub const MEDIA_TTL_MAX_HOURS: u64 = 87_600;
/// Largest blob the media store takes in one put, in bytes (1 GiB); a caller with a
/// smaller cap (file_fetch's 16 MiB) passes its own.
pub const MEDIA_BLOB_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// Seconds a freshly written blob is safe from the sweeper even with no record yet: a
/// put places its blob before it inserts the record that references it.
pub const MEDIA_BLOB_GRACE_SECS: u64 = 60 * 60;
/// Seconds a media put's temporary may go unwritten before the sweeper takes it for
/// the leftover of a put that died (24 hours): a live put writes it as bytes arrive.
pub const MEDIA_TEMPORARY_IDLE_MAX_SECS: u64 = 24 * 60 * 60;
/// Extensions accepted for member uploads unless configured otherwise (M-UP; `media.allowed_extensions`).
pub const DEFAULT_ALLOWED_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "webp", "gif", "pdf", "txt", "md", "csv", "json", "doc", "docx", "odt",
    "xls", "xlsx", "ods", "ppt", "pptx", "odp",
];
/// Largest file a resumable (tus) upload may declare, in bytes (4 GiB;
/// `media.max_resumable_bytes`, spec M-DAILY).
pub const MEDIA_RESUMABLE_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Seconds a resumable upload is kept after its last part (24 h;
/// `media.resumable_expiry_secs`): then its staged bytes are removed and its id answers
/// `410`.
pub const MEDIA_RESUMABLE_EXPIRY_SECS: u64 = 24 * 3600;
/// Seconds an expired resumable upload's id still answers `410` (7 days) before it is
/// forgotten and answers `404`.
pub const RESUMABLE_GONE_KEPT_SECS: i64 = 7 * 24 * 3600;
/// Bytes of a resumable upload's `Upload-Metadata` header at most.
pub const RESUMABLE_METADATA_MAX_BYTES: usize = 4096;
/// Resumable uploads one person may have in progress at once; more are `429`.
pub const RESUMABLE_UPLOADS_PER_PERSON: usize = 64;
/// Days a deleted entry stays in its person's trash before it is removed for good
/// (`files.trash_days`, spec M-DAILY).
pub const TRASH_DAYS: u64 = 7;
/// Bytes one person's trash may hold; a delete that would pass it is refused rather than
/// the oldest entries dropped unasked (1 GiB; `files.trash_max_bytes`).
pub const TRASH_MAX_BYTES: u64 = 1024 * 1024 * 1024;
/// The shortest life a share link may be given, in seconds (spec M-DAILY "Share a file").
pub const SHARE_MIN_EXPIRY_SECS: u64 = 60;
/// The longest life a share link may be given, in seconds (30 days).
pub const SHARE_MAX_EXPIRY_SECS: u64 = 30 * 24 * 60 * 60;
/// Share links one person may have live at once (not expired, not revoked).
pub const SHARES_MAX_LIVE_PER_PERSON: usize = 1000;
/// Seconds a share link's record is kept past its expiry, so that it answers "expired"
/// (or "revoked") rather than "unknown" for a while; then the sweep removes it (1 day).
pub const SHARE_RECORD_KEEP_SECS: u64 = 24 * 60 * 60;
/// Bytes of file content one folder download (zip) may carry (4 GiB; `files.archive_max_bytes`).
pub const FOLDER_ZIP_MAX_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Room for the multipart framing around the file's bytes (boundaries, part headers,
/// the project field) when judging a declared `Content-Length`.
pub const MULTIPART_ALLOWANCE_BYTES: u64 = 64 * 1024;
/// The most bytes the text before a multipart form's first part, or the headers of one
/// part, may hold (besides one read's chunk, which may also hold data): the parser keeps
/// them in memory until they end, which only the whole body's cap would bound otherwise.
pub const MULTIPART_HEAD_MAX_BYTES: u64 = 64 * 1024;
/// The longest value the `project` field of an upload may have, in bytes.
pub const PROJECT_FIELD_MAX_BYTES: usize = 1024;
/// The longest display name of a project, in bytes of UTF-8 (NFC).
pub const PROJECT_NAME_MAX_BYTES: usize = 100;
/// The most ids tried for a new project whose name gives a taken one (`q2-report`,
/// `q2-report-2`, … `q2-report-1000`).
pub const PROJECT_ID_TRIES_MAX: u32 = 1000;
/// The longest value the `folder` field of an upload may have, in bytes: the longest
/// path core C-PATH lets through.
pub const FOLDER_FIELD_MAX_BYTES: usize = 4096;
/// The most entries one listing returns before it says `truncated`.
pub const LIST_MAX_ENTRIES: usize = 10_000;
/// The deepest folder a listing descends into; deeper trees are `truncated`.
pub const LIST_MAX_DEPTH: usize = 64;
/// The longest search query, in bytes (M-DAILY "Find things"): enough for any name or
/// phrase a person types; a longer one is refused rather than cut.
pub const SEARCH_QUERY_MAX_BYTES: usize = 1024;
/// The most matches one search returns before it says `truncated`.
pub const SEARCH_MAX_RESULTS: usize = 200;
/// The most entries one search examines under `public/` (ten times a listing's: a search
/// reads names alone, and the few that match are described); past it the answer is
/// `truncated`. The depth is a listing's, [`LIST_MAX_DEPTH`].
pub const SEARCH_MAX_ENTRIES: usize = 100_000;
/// The largest file whose content a search reads, in bytes (1 MiB); bigger ones are
/// matched by name alone.
pub const SEARCH_CONTENT_FILE_MAX_BYTES: u64 = 1024 * 1024;
/// The most bytes of file content one search reads in all (256 MiB); past it the answer
/// is `truncated`.
pub const SEARCH_CONTENT_MAX_TOTAL_BYTES: u64 = 256 * 1024 * 1024;
/// The longest excerpt of a matching line a search returns, in bytes.
pub const SEARCH_LINE_MAX_BYTES: usize = 240;
/// The most entries (files and folders) one folder download (zip) may hold.
pub const FOLDER_ZIP_MAX_ENTRIES: usize = 100_000;
/// Largest file the harness may deliver, in bytes, counted after decoding (64 MiB;
/// `deliveries.max_bytes`).
pub const DELIVERY_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Longest a whole delivery fetch may take, in seconds (`deliveries.timeout_secs`).
pub const DELIVERY_TIMEOUT_SECS: u64 = 60;
/// Bytes one person may keep in `public/` folders (main and projects) plus saved
/// command output (10 GiB; `limits.person_max_bytes`).
pub const PERSON_MAX_BYTES: u64 = 10 * 1024 * 1024 * 1024;
/// The longest id of a person, circle or project, in bytes (core C-SITE).
pub const ID_MAX_BYTES: usize = 22;

/// Previews (`GET /v1/files/preview`) the gateway works on at once: a preview may decode
/// a 100-megapixel image (M-DAILY). More wait their turn.
pub const PREVIEWS_AT_ONCE: usize = 2;
/// Seconds a preview waits for its turn before it is answered `503 preview_busy`.
pub const PREVIEW_QUEUE_WAIT_SECS: u64 = 20;

// ---- chat ---------------------------------------------------------------------------

/// Seconds one chat turn may take, upstream reply included (`agent.timeout_secs`).
pub const CHAT_TURN_TIMEOUT_SECS: u64 = 300;
/// Bytes of one agent reply the chat relay relays and saves (1 MiB; `agent.max_reply_bytes`).
pub const AGENT_MAX_REPLY_BYTES: u64 = 1024 * 1024;
/// Bytes of saved conversation the chat relay sends upstream with a new message (4 MiB;
/// `agent.max_context_bytes`): the newest messages that fit, as they are written in the request.
pub const AGENT_MAX_CONTEXT_BYTES: u64 = 4 * 1024 * 1024;
/// The longest message a member may send, in bytes.
pub const CHAT_MESSAGE_MAX_BYTES: usize = 64 * 1024;
/// The most files one chat message may attach.
pub const CHAT_ATTACHMENTS_MAX: usize = 32;
/// Turns one person may run at once, over all their workspaces: one page's turn and one
/// of another tab or project. Each holds up to a context and a reply in memory.
pub const CHAT_TURNS_PER_PERSON_MAX: usize = 2;
/// The most messages one page of the conversation holds.
pub const CHAT_PAGE_MAX_MESSAGES: usize = 100;
/// The messages of a page when the caller names no number.
pub const CHAT_PAGE_DEFAULT_MESSAGES: usize = 50;
/// The text a page holds at most, in bytes; a page always holds at least one message.
pub const CHAT_PAGE_MAX_BYTES: usize = 4 * 1024 * 1024;

// ---- the person in the loop: approvals and picks --------------------------------------

/// The longest an approval stays pending, whatever a waiter asks for, so a requester
/// that died leaves no question on the person's screen for longer.
pub const APPROVAL_MAX_WAIT: Duration = Duration::from_secs(10 * 60);
/// How long the web client's approval prompt of `file_delete` waits for the person.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(120);
/// How long `file_pick` waits for the person to pick (the link's own lifetime).
pub const PICK_WAIT: Duration = Duration::from_secs(600);
/// How long a pick's signed upload link is valid.
pub const PICK_LINK_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a picked file is kept before the sweep removes it.
pub const PICK_FILE_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// How long a finished request stays on record: longer than any picked file lives, so a
/// file on disk always has its row.
pub const INTERACTION_RECORD_TTL: Duration = Duration::from_secs(2 * 24 * 60 * 60);
/// The longest text of a request (the tool's name, the subject, the summary, the prompt),
/// in bytes.
pub const INTERACTION_TEXT_MAX_BYTES: usize = 4096;

const _: () = assert!(
    INTERACTION_RECORD_TTL.as_secs()
        > PICK_FILE_TTL.as_secs() + PICK_LINK_TTL.as_secs() + APPROVAL_MAX_WAIT.as_secs()
);

// ---- the agent tools ----------------------------------------------------------------

/// A whole file is read by `file_read` only up to this size, in bytes (256 KiB); larger
/// ones need a line range.
pub const FILE_READ_MAX_BYTES: u64 = 256 * 1024;
/// The largest content `file_write` takes, and the largest file `file_edit` edits, in
/// bytes (16 MiB).
pub const TEXT_FILE_MAX_BYTES: usize = 16 * 1024 * 1024;
/// The most edits one `file_edit` call applies.
pub const FILE_EDIT_MAX_EDITS: usize = 256;
/// The most files one `file_edit` call changes: each is staged, and placed with the
/// others, at once.
pub const FILE_EDIT_MAX_FILES: usize = 32;
/// The most files one `file_deliver` call may deliver.
pub const DELIVER_MAX_FILES: usize = 32;
/// The longest command `terminal_run` accepts, in bytes.
pub const COMMAND_MAX_BYTES: usize = 64 * 1024;
/// The model-visible text of a directory tool, wrapper included, in bytes.
pub const MODEL_TEXT_MAX_BYTES: usize = 8192;
/// Entries `dir_list` shows when the caller names no number.
pub const DIR_LIST_DEFAULT_ENTRIES: u64 = 200;
/// The most entries `dir_list` shows.
pub const DIR_LIST_MAX_ENTRIES: u64 = 5000;
/// Seconds a node call may bring nothing (no answer, no bytes, no window for a push)
/// before the gateway cancels it (`transfer_stalled`): a transfer of any length goes on
/// as long as it moves.
pub const NODE_STALL_SECS: u64 = 60;
/// The largest fetched file whose UTF-8 text is also shown inline (8 KiB).
pub const NODE_FETCH_INLINE_MAX_BYTES: u64 = 8 * 1024;
/// The longest MCP message accepted, on stdio and as a `/mcp` request body, in bytes
/// (64 MiB): room for the largest `file_write` content, JSON-escaped, so a too-large one
/// is answered with a tool error rather than dropped.
pub const MCP_MESSAGE_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Live MCP sessions one harness token may hold at once. An agent harness opens one per
/// agent process it runs for the person; each costs the gateway about 48 KiB until it is
/// closed or has been idle for 300 s.
pub const MCP_SESSIONS_PER_TOKEN_MAX: usize = 32;
/// Seconds an MCP session at `/mcp` may go without a message before it is closed (one
/// hour): a tool call in flight sends nothing until it answers.
pub const MCP_SESSION_IDLE_SECS: u64 = 60 * 60;
/// The largest SKILL.md, in bytes (15 KiB).
pub const SKILL_MAX_BYTES: u64 = 15 * 1024;
/// The most lines a SKILL.md may have.
pub const SKILL_MAX_LINES: usize = 300;

// ---- commands (T-GUARD) ---------------------------------------------------------------

/// How long a command may run when the caller names no timeout.
pub const COMMAND_DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest a command may run; longer requests are cut to this.
pub const COMMAND_MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Bytes of each stream (stdout, stderr) of a command returned as text.
pub const VISIBLE_OUTPUT_BYTES: usize = 64 * 1024;
/// Bytes of each stream saved to the full-output file; the rest is counted, not kept.
pub const FULL_OUTPUT_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Processes the person may have at once while a command runs (`RLIMIT_NPROC`).
/// Generous enough for `make -j`, small enough that a fork bomb stays a nuisance.
pub const PROCESS_MAX_COUNT: u64 = 1024;
/// Hours saved command output (`fullOutputPath`) is kept (`exec.output_ttl_hours`).
pub const EXEC_OUTPUT_TTL_HOURS: u64 = 24;
/// Bytes of saved command output one person may keep at once (1 GiB;
/// `exec.output_max_bytes`); the oldest files go first to make room.
pub const EXEC_OUTPUT_MAX_BYTES: u64 = 1024 * 1024 * 1024;

// ---- archives (core C-ARCHIVE) ----------------------------------------------------------

/// The largest archive the planner reads, in bytes as they arrive (compressed, if the
/// archive is gzip; 16 MiB).
pub const ARCHIVE_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most descendants an archive may hold, every implicit parent folder counted once.
pub const ARCHIVE_MAX_DESCENDANTS: u64 = 5000;
/// The largest file inside an archive, in bytes (16 MiB).
pub const ARCHIVE_ENTRY_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most bytes all files of an archive may hold together, unpacked (64 MiB).
pub const ARCHIVE_UNPACKED_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// The largest PAX extended header record set of one entry, in bytes (64 KiB): room for
/// a path of [`ARCHIVE_LONG_NAME_MAX_BYTES`] and the attributes other writers add.
pub const ARCHIVE_PAX_MAX_BYTES: u64 = 64 * 1024;
/// The largest GNU long name record, in bytes (8 KiB): a name longer than the 4096 bytes
/// a path may have is refused anyway.
pub const ARCHIVE_LONG_NAME_MAX_BYTES: u64 = 8 * 1024;

// ---- nodes (spec nodes N-TOOLS, N-PAIR) -------------------------------------------------

/// What `file_fetch` fetches when the call names no limit, in bytes (8 MiB).
pub const NODE_FETCH_DEFAULT_BYTES: u64 = 8 * 1024 * 1024;
/// The most `file_fetch` fetches in one call, in bytes (16 MiB; `nodes.fetch_max_bytes`).
pub const NODE_FETCH_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most `file_push` sends in one call, in bytes (16 MiB; `nodes.push_max_bytes`).
pub const NODE_PUSH_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The largest compressed archive `dir_fetch` takes, in bytes (16 MiB;
/// `nodes.dir_fetch_max_bytes`).
pub const NODE_DIR_FETCH_MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The highest an operator may raise any of the three transfer caps: what the media
/// store takes in one put ([`MEDIA_BLOB_MAX_BYTES`], 1 GiB), where every transfer lands.
pub const NODE_TRANSFER_CAP_MAX_BYTES: u64 = MEDIA_BLOB_MAX_BYTES;
/// Nodes that may wait for approval at once (`nodes.max_pending`): anyone can make a key
/// and connect, so past this a new key is refused and nothing is recorded.
pub const NODES_MAX_PENDING: usize = 64;
/// The highest `nodes.max_pending` may be set to.
pub const NODES_MAX_PENDING_CEILING: usize = 10_000;
/// Terminals open at once on one node by default (`nodes.terminals_max`).
pub const NODE_TERMINALS_MAX: usize = 32;
/// The highest `nodes.terminals_max` may be set to: a node link carries 64 calls each way
/// (`ferry_node::mux::LINK_MAX_STREAMS`), and the transfer tools need some of them.
pub const NODE_TERMINALS_MAX_CEILING: usize = 48;
/// How long a terminal whose page went away is kept for a reattach, in seconds.
pub const TERMINAL_REATTACH_SECS: u64 = 30;
/// The most output a terminal keeps for a reattach to show again, in bytes (256 KiB).
pub const TERMINAL_REPLAY_BYTES: usize = 256 * 1024;
/// The largest WebSocket message a terminal's page may send, in bytes (1 MiB).
pub const TERMINAL_WS_MESSAGE_MAX_BYTES: usize = 1024 * 1024;
/// Files one terminal upload may carry.
pub const TERMINAL_UPLOAD_FILES_MAX: usize = 64;
/// Hex digits of a node id (80 bits of the SHA-256 of its key), as `[nodes.<id>]` names it.
pub const NODE_ID_HEX_DIGITS: usize = 20;
/// Node handshakes the gateway runs at once; one more is `503 too_many_handshakes`. The
/// link endpoint takes anyone before they prove a key, so what strangers cost is bounded.
pub const NODE_HANDSHAKES_MAX: usize = 32;
/// Of those, the most one source may hold (an IPv4 address, or an IPv6 /64); one more
/// is `503 too_many_handshakes`, so one stranger cannot keep every node out.
pub const NODE_HANDSHAKES_PER_SOURCE_MAX: usize = 8;
/// How long a node has to complete its handshake.
pub const NODE_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

// ---- handoffs (spec handoffs.md) ---------------------------------------------------------

/// The largest serialized envelope a mailbox holds, `files` included (H-MAIL: 1 MiB).
pub const MAILBOX_MAX_BYTES: usize = 1024 * 1024;
/// The longest worker label, in bytes.
pub const HERD_LABEL_MAX_BYTES: usize = 64;
/// The most `files` one message may name (before duplicates are merged).
pub const HERD_FILES_MAX: usize = 4096;
/// The largest `--task` or `--message` argument (H-CLI: one argument is at most 128 KiB;
/// longer text comes through `--task-file`).
pub const HERD_ARG_MAX_BYTES: usize = 128 * 1024;
/// The largest text of one message, however it came (the envelope bounds it anyway).
pub const HERD_TEXT_MAX_BYTES: usize = MAILBOX_MAX_BYTES;
/// The largest agent definition file, in bytes.
pub const HERD_DEFINITION_MAX_BYTES: u64 = 256 * 1024;
/// The largest system prompt a definition may expand to (its body, every `@file` and the
/// shared worker guidance), in bytes.
pub const HERD_PROMPT_MAX_BYTES: usize = 1024 * 1024;
/// How long a new worker has to make its first inbox read before its prompt snapshot is
/// removed anyway (H-SNAP).
pub const HERD_START_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest a worker process may live; then it is ended and marked failed.
pub const HERD_WORKER_MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// Workers one person may have alive (starting, running or waiting) at once.
pub const HERD_WORKERS_MAX: usize = 32;
/// The largest completion output a worker may persist (H-RESULT), in bytes.
pub const HERD_RESULT_MAX_BYTES: u64 = 256 * 1024 * 1024;
/// Bytes of a completion's output shown as text; the whole output is at `resultPath`.
pub const HERD_RESULT_PREVIEW_BYTES: usize = 4 * 1024;
/// Bytes of any other herd answer shown to a model; a longer one is persisted and
/// named by `fullOutputPath` (H-RESULT).
pub const HERD_TOOL_OUTPUT_MAX_BYTES: usize = 64 * 1024;
/// The longest `inbox --wait`, in seconds.
pub const HERD_INBOX_WAIT_MAX_SECS: u64 = 3600;
/// How long a herd operation waits for another one's lock before `herd_busy`.
pub const HERD_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Days an audit record is kept by default (`[audit] retention_days`, spec S-OPS).
pub const AUDIT_RETENTION_DAYS: u64 = 90;
/// The most days `[audit] retention_days` may say (a hundred years).
pub const AUDIT_RETENTION_MAX_DAYS: u64 = 36_500;
