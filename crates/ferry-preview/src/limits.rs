//! Every bound this crate applies, in one place so they can be reviewed together.
//!
//! Files arrive from people and from the internet: each limit keeps one hostile
//! input from costing unbounded time or memory.

/// Longest model-facing preview text.
pub const PREVIEW_TEXT_MAX_BYTES: usize = 8192;

/// Head of a text file read for display; twice the text budget because
/// turning CRLF into LF can halve what is shown.
pub(crate) const TEXT_HEAD_READ_MAX_BYTES: u64 = 2 * PREVIEW_TEXT_MAX_BYTES as u64;

/// Bytes scanned to count lines and rows and to check UTF-8.
pub const TEXT_SCAN_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Head bytes inspected next to the content sniffer (zip magic, NUL bytes).
pub(crate) const DETECT_HEAD_MAX_BYTES: u64 = 8192;

/// Rows shown after a CSV header row.
pub const CSV_ROWS_SHOWN_MAX: usize = 20;

/// Column names listed for a CSV header row.
pub const CSV_COLUMNS_SHOWN_MAX: usize = 50;

/// Largest JSON document parsed for its top-level shape.
pub const JSON_PARSE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Top-level keys listed for a JSON object.
pub const JSON_KEYS_SHOWN_MAX: usize = 50;

/// Longest name (of a column, key or archive member) shown before it is cut;
/// a hostile archive can carry 64 KiB names.
pub const NAME_SHOWN_MAX_CHARS: usize = 160;

/// Largest image file decoded, for `model_image` and the preview rendering.
pub const IMAGE_INPUT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Most pixels an image may declare; checked from its header before decoding.
pub const IMAGE_PIXELS_MAX: u64 = 100_000_000;

/// Memory the image decoders may allocate; 100 megapixels of 16-bit RGBA fit.
pub const IMAGE_DECODE_MAX_ALLOC_BYTES: u64 = 1024 * 1024 * 1024;

/// Longest side of the image `model_image` returns.
pub const MODEL_IMAGE_MAX_SIDE_PIXELS: u32 = 2000;

/// Largest encoded image `model_image` returns.
pub const MODEL_IMAGE_MAX_BYTES: usize = 5 * 1024 * 1024;

/// Longest side of the rendering attached to an image preview.
pub const THUMBNAIL_MAX_SIDE_PIXELS: u32 = 512;

/// Largest encoded rendering attached to an image preview.
pub const THUMBNAIL_MAX_BYTES: usize = 256 * 1024;

/// Opaque images up to this many pixels are sent as PNG: lossless costs little there.
pub(crate) const PNG_PREFERRED_MAX_PIXELS: u64 = 256 * 256;

/// JPEG qualities tried in turn until the encoding fits its byte budget.
pub(crate) const JPEG_QUALITY_STEPS: [u8; 4] = [85, 70, 55, 40];

/// Each shrink step keeps this share of the previous side length, in percent.
pub(crate) const SHRINK_STEP_KEEP_PERCENT: u32 = 75;

/// Shrink steps tried before giving up on fitting an image into its byte budget.
pub(crate) const SHRINK_STEPS_MAX: usize = 12;

/// Largest PDF opened; lopdf holds the whole file in memory.
pub const PDF_INPUT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Most bytes any one PDF stream may inflate to while loading or extracting text.
pub const PDF_STREAM_DECOMPRESSED_MAX_BYTES: usize = 32 * 1024 * 1024;

/// Stack of the thread that parses a PDF; its recursive parser must never
/// overflow the caller's (possibly small) stack.
pub(crate) const PDF_PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Archive members listed before "and N more".
pub const ARCHIVE_MEMBERS_SHOWN_MAX: usize = 50;

/// Bytes of a tar stream (after decompression) read while listing it.
pub const TAR_SCAN_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Characters of a DOCX first paragraph shown, so the member list still fits.
pub const PARAGRAPH_SHOWN_MAX_CHARS: usize = 600;

/// Bytes of `word/document.xml` inflated while looking for the first paragraph.
pub const DOCX_XML_READ_MAX_BYTES: u64 = 4 * 1024 * 1024;

// ------------------------------------------------------------ the Files panel's preview

/// Head of a text, JSON or CSV file shown in the Files panel.
pub const PANEL_TEXT_MAX_BYTES: usize = 64 * 1024;

/// Rows of a table shown in the Files panel, the header row included.
pub const PANEL_TABLE_ROWS_MAX: usize = 100;

/// Columns of a table shown in the Files panel; the rest of each row is dropped.
pub const PANEL_TABLE_COLUMNS_MAX: usize = 50;

/// Characters of one table cell shown in the Files panel before it is cut.
pub const PANEL_CELL_MAX_CHARS: usize = 200;

/// Archive members listed in the Files panel before the list is cut.
pub const PANEL_MEMBERS_MAX: usize = 1000;

/// Bytes of a PDF's first-page text shown in the Files panel.
pub const PANEL_PDF_TEXT_MAX_BYTES: usize = 16 * 1024;

/// Largest file whose SHA-256 the Files panel computes; a larger one shows none, so a
/// click on a 4 GiB upload does not read 4 GiB.
pub const PANEL_HASH_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// Longest side of the image the Files panel shows (an image scaled, a PDF page).
pub const PANEL_IMAGE_MAX_SIDE_PIXELS: u32 = 1024;

/// Largest PNG the Files panel is sent; 1024×1024 RGBA is 4 MiB raw, and PNG's worst
/// case is barely above raw.
pub const PANEL_IMAGE_MAX_BYTES: usize = 8 * 1024 * 1024;

/// Most a PDF page is enlarged to reach the panel's size, so a page of one point does
/// not become a huge bitmap of nothing.
pub const PDF_RENDER_MAX_SCALE: f32 = 4.0;

/// Address space of the process that renders a PDF page (`RLIMIT_AS`): a stream that
/// inflates without end makes that process fail, not the gateway.
pub const PDF_RENDER_MEMORY_MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// CPU seconds the PDF rendering process may use (`RLIMIT_CPU`).
pub const PDF_RENDER_CPU_MAX_SECS: u64 = 10;

/// Wall-clock milliseconds a PDF rendering may take before its process is killed.
pub const PDF_RENDER_WALL_MAX_MILLIS: u64 = 15_000;

/// Bytes of the rendering process's error output kept for the log.
pub(crate) const PDF_RENDER_STDERR_MAX_BYTES: u64 = 4096;
