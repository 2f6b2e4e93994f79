//! The first page of a PDF as a picture, drawn by `hayro` in a process of its own.
//!
//! `hayro` bounds the nesting of objects and the length of reference chains, but not
//! what a compressed stream inflates to nor the pixels an embedded image declares, and
//! it cannot be stopped halfway. So the page is never drawn in the caller's process:
//! [`PdfRenderer`] starts a short-lived child (the same program, with the arguments it
//! was given), which first confines itself ([`render_in_this_process`]: its address
//! space, CPU time, files it may write, no new privileges, and no longer root), reads
//! the PDF on its standard input and writes a PNG on its standard output. The parent
//! kills it after `PDF_RENDER_WALL_MAX_MILLIS`, and caps what it reads back. A bomb
//! costs the child its memory limit, never the caller.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use hayro::hayro_interpret::InterpreterSettings;
use hayro::hayro_syntax::{LoadPdfError, Pdf};
use hayro::vello_cpu::color::palette::css::WHITE;
use hayro::{PixmapSettings, RenderCache, RenderSettings};

use crate::error::PreviewError;
use crate::limits::{
    PANEL_IMAGE_MAX_BYTES, PANEL_IMAGE_MAX_SIDE_PIXELS, PDF_INPUT_MAX_BYTES,
    PDF_PARSER_STACK_BYTES, PDF_RENDER_CPU_MAX_SECS, PDF_RENDER_MAX_SCALE,
    PDF_RENDER_MEMORY_MAX_BYTES, PDF_RENDER_STDERR_MAX_BYTES, PDF_RENDER_WALL_MAX_MILLIS,
};
use crate::raster::ModelImage;

/// How often the parent looks whether the child has ended.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The user and group a child started as root continues as: `nobody`, who owns nothing.
const UNPRIVILEGED_ID: u32 = 65_534;

/// Starts the process that draws a PDF page: `program` with `args`, which must end up
/// calling [`render_in_this_process`].
#[derive(Debug, Clone)]
pub struct PdfRenderer {
    program: PathBuf,
    args: Vec<OsString>,
}

impl PdfRenderer {
    /// A renderer that runs `program args…`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }

    /// The first page of the PDF `bytes` as a PNG at most
    /// `PANEL_IMAGE_MAX_SIDE_PIXELS` on its longer side.
    pub(crate) fn render(&self, bytes: Vec<u8>) -> Result<ModelImage, PreviewError> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            // The child needs nothing of the caller's environment (its secrets least).
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|error| PreviewError::RenderUnavailable {
                reason: error.to_string(),
            })?;
        let outcome = drive(&mut child, bytes);
        if outcome.is_err() {
            // Whatever went wrong, the child does not outlive the request.
            let _ = child.kill();
            let _ = child.wait();
        }
        outcome
    }
}

/// Feeds the child, collects its answer and waits for it within the wall-clock bound.
fn drive(child: &mut Child, bytes: Vec<u8>) -> Result<ModelImage, PreviewError> {
    let pipe_missing = || PreviewError::RenderUnavailable {
        reason: "the rendering process has no pipes".to_owned(),
    };
    let mut stdin = child.stdin.take().ok_or_else(pipe_missing)?;
    let stdout = child.stdout.take().ok_or_else(pipe_missing)?;
    let stderr = child.stderr.take().ok_or_else(pipe_missing)?;
    // A child that dies early closes its end: the write fails, and the status says why.
    let feeder = thread::spawn(move || {
        let _ = stdin.write_all(&bytes);
    });
    let reader = thread::spawn(move || read_capped(stdout, PANEL_IMAGE_MAX_BYTES as u64 + 1));
    let complainer = thread::spawn(move || read_capped(stderr, PDF_RENDER_STDERR_MAX_BYTES));

    let deadline = Instant::now() + Duration::from_millis(PDF_RENDER_WALL_MAX_MILLIS);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            child.kill()?;
            child.wait()?;
            break None;
        }
        thread::sleep(POLL_INTERVAL);
    };
    // The child is gone, so its pipes are closed and every helper ends.
    let _ = feeder.join();
    let png = reader.join().unwrap_or_else(|_| Ok(Vec::new()))?;
    let complaint = complainer.join().unwrap_or_else(|_| Ok(Vec::new()))?;
    let Some(status) = status else {
        return Err(PreviewError::RenderFailed {
            reason: format!(
                "it took longer than {} seconds",
                PDF_RENDER_WALL_MAX_MILLIS / 1000
            ),
        });
    };
    if !status.success() {
        return Err(PreviewError::RenderFailed {
            reason: failure_reason(status, &complaint),
        });
    }
    if png.len() > PANEL_IMAGE_MAX_BYTES {
        return Err(PreviewError::CannotFit {
            limit_bytes: PANEL_IMAGE_MAX_BYTES,
        });
    }
    png_image(png)
}

fn read_capped(pipe: impl Read, max_bytes: u64) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut limited = pipe.take(max_bytes);
    limited.read_to_end(&mut out)?;
    // Drain the rest so a chatty child is not blocked on a full pipe.
    io::copy(&mut limited.into_inner(), &mut io::sink())?;
    Ok(out)
}

/// Why the child ended badly, in words a person can take: its own sentence when it
/// gave one, else what ended it.
fn failure_reason(status: ExitStatus, complaint: &[u8]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let said = String::from_utf8_lossy(complaint);
    let said = said.lines().next().unwrap_or_default().trim();
    if status.code().is_some() && !said.is_empty() {
        return said.chars().take(300).collect();
    }
    match status.signal() {
        Some(libc::SIGXCPU) => {
            format!("it needed more than {PDF_RENDER_CPU_MAX_SECS} seconds of processor time")
        }
        // An allocation over the address-space limit aborts the child.
        Some(_) => format!(
            "it needed more than {} MiB of memory, or the renderer failed on it",
            PDF_RENDER_MEMORY_MAX_BYTES / (1024 * 1024)
        ),
        None => "the renderer failed on it".to_owned(),
    }
}

/// The encoded PNG with its dimensions, read back from its header.
fn png_image(png: Vec<u8>) -> Result<ModelImage, PreviewError> {
    let header = image::ImageReader::with_format(io::Cursor::new(&png), image::ImageFormat::Png)
        .into_dimensions()
        .map_err(|error| PreviewError::RenderFailed {
            reason: format!("the renderer's output is not a PNG: {error}"),
        })?;
    let (width, height) = header;
    Ok(ModelImage {
        mime: "image/png",
        bytes: png,
        width,
        height,
        source_width: width,
        source_height: height,
    })
}

/// The child's side: confines this process, reads a PDF on standard input, writes the
/// first page as a PNG on standard output. Returns the exit status to end with: 0 when
/// the PNG was written, 1 with a sentence on standard error otherwise.
pub fn render_in_this_process() -> i32 {
    if let Err(error) = confine() {
        eprintln!("the rendering process could not confine itself: {error}");
        return 1;
    }
    let result = read_input().and_then(render_isolated);
    match result {
        Ok(png) => {
            let mut stdout = io::stdout().lock();
            match stdout.write_all(&png).and_then(|()| stdout.flush()) {
                Ok(()) => 0,
                Err(_) => 1,
            }
        }
        Err(error) => {
            eprintln!("{error}");
            1
        }
    }
}

/// Limits this process before it reads anything hostile.
fn confine() -> io::Result<()> {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let limit = |resource, value: u64| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
    };
    rustix::thread::set_no_new_privs(true)?;
    // Root (the gateway of a host-mode site) draws pages as nobody.
    if rustix::process::geteuid().is_root() {
        let id = UNPRIVILEGED_ID;
        rustix::thread::set_thread_groups(&[])?;
        let gid = rustix::process::Gid::from_raw(id);
        rustix::thread::set_thread_res_gid(gid, gid, gid)?;
        let uid = rustix::process::Uid::from_raw(id);
        rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    }
    limit(Resource::As, PDF_RENDER_MEMORY_MAX_BYTES)?;
    limit(Resource::Cpu, PDF_RENDER_CPU_MAX_SECS)?;
    limit(Resource::Fsize, 0)?;
    limit(Resource::Core, 0)?;
    Ok(())
}

fn read_input() -> Result<Vec<u8>, PreviewError> {
    let mut bytes = Vec::new();
    io::stdin()
        .lock()
        .take(PDF_INPUT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > PDF_INPUT_MAX_BYTES {
        return Err(PreviewError::TooLarge {
            purpose: "opening a PDF",
            size: bytes.len() as u64,
            limit: PDF_INPUT_MAX_BYTES,
        });
    }
    Ok(bytes)
}

/// Draws on a thread with a large stack, so a deep document meets the thread's
/// bound rather than the main stack's, and a panic becomes an answer.
fn render_isolated(bytes: Vec<u8>) -> Result<Vec<u8>, PreviewError> {
    thread::scope(|scope| {
        let painter = thread::Builder::new()
            .name("pdf-render".to_owned())
            .stack_size(PDF_PARSER_STACK_BYTES)
            .spawn_scoped(scope, || first_page_png(bytes))?;
        painter.join().unwrap_or_else(|_| {
            Err(PreviewError::damaged(
                "PDF",
                "the PDF renderer failed on it",
            ))
        })
    })
}

/// The first page of `bytes`, white behind it, scaled so its longer side is
/// `PANEL_IMAGE_MAX_SIDE_PIXELS` (never enlarged more than `PDF_RENDER_MAX_SCALE`).
pub(crate) fn first_page_png(bytes: Vec<u8>) -> Result<Vec<u8>, PreviewError> {
    let pdf = Pdf::new(bytes).map_err(|error| match error {
        LoadPdfError::Decryption(_) => PreviewError::RenderFailed {
            reason: "the PDF is encrypted".to_owned(),
        },
        LoadPdfError::Invalid => PreviewError::damaged("PDF", "its structure cannot be read"),
    })?;
    let pages = pdf.pages();
    let page = pages
        .first()
        .ok_or_else(|| PreviewError::damaged("PDF", "it has no page"))?;
    let (width, height) = page.render_dimensions();
    let longer = width.max(height);
    if !(width.is_finite() && height.is_finite() && width >= 1.0 && height >= 1.0) {
        return Err(PreviewError::damaged(
            "PDF",
            format!("its first page measures {width} × {height} points"),
        ));
    }
    let scale = (PANEL_IMAGE_MAX_SIDE_PIXELS as f32 / longer).min(PDF_RENDER_MAX_SCALE);
    let cache = RenderCache::new();
    let pixmap = hayro::render(
        page,
        &cache,
        &InterpreterSettings::default(),
        &RenderSettings::default(),
        &PixmapSettings {
            x_scale: scale,
            y_scale: scale,
            bg_color: WHITE,
        },
    );
    pixmap
        .into_png()
        .map_err(|error| PreviewError::Encode(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_damaged_not_a_panic() {
        for bytes in [
            b"".to_vec(),
            b"%PDF-1.4\n".to_vec(),
            b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF".to_vec(),
        ] {
            assert!(first_page_png(bytes).is_err());
        }
    }
}
