//! Bytes made as the person and handed to the service through a pipe: a folder's zip
//! (spec members M-DAILY "Whole folders").
//!
//! The writer runs on a thread of the process acting as the person (the worker in host
//! mode, the service itself otherwise) and the reply hands back the pipe's read end, so
//! the service never opens the person's files. A pipe's end-of-file cannot tell a
//! finished stream from a writer that died, so the pipe carries frames: a kind byte
//! ([`FRAME_DATA`], [`FRAME_END`], [`FRAME_FAILED`]), a 4-byte big-endian length and that
//! many bytes. Only [`FRAME_END`] means whole; a failure's frame carries its sentence.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// A frame of the stream's bytes.
pub const FRAME_DATA: u8 = b'd';
/// The last frame of a stream that was written whole (no payload).
pub const FRAME_END: u8 = b'e';
/// The last frame of a stream that failed; the payload says why, in UTF-8.
pub const FRAME_FAILED: u8 = b'x';
/// Bytes in a frame's header: its kind and its length.
pub const FRAME_HEADER_BYTES: usize = 5;
/// The most bytes one frame carries.
pub const FRAME_PAYLOAD_MAX_BYTES: usize = 256 * 1024;

/// The streams still being written by this process, so a worker told to end lets them
/// finish first (their reader has closed its end by then, so that is quick).
static WRITERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Starts `write` on a thread of its own with a framed pipe to write into; returns the
/// pipe's read end at once. `write`'s error ends the stream with [`FRAME_FAILED`].
pub fn spawn_framed<E: std::fmt::Display>(
    name: &str,
    write: impl FnOnce(&mut FramedWriter) -> Result<(), E> + Send + 'static,
) -> io::Result<File> {
    let (read, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // A bigger pipe lets the writer run ahead of a reader that takes a frame at a time.
    let _ = rustix::pipe::fcntl_setpipe_size(&write_end, FRAME_PAYLOAD_MAX_BYTES * 4);
    let mut sink = FramedWriter {
        out: File::from(write_end),
        buffer: Vec::with_capacity(FRAME_HEADER_BYTES + FRAME_PAYLOAD_MAX_BYTES),
    };
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let ended = match write(&mut sink) {
                Ok(()) => sink.end(FRAME_END, b""),
                Err(e) => sink.end(FRAME_FAILED, e.to_string().as_bytes()),
            };
            // The reader went away (EPIPE): nobody is left to tell.
            let _ = ended;
        })?;
    let mut writers = WRITERS.lock().unwrap_or_else(|e| e.into_inner());
    writers.retain(|h| !h.is_finished());
    writers.push(handle);
    Ok(File::from(read))
}

/// Waits for every stream this process is still writing.
pub fn wait_for_streams() {
    let writers = std::mem::take(&mut *WRITERS.lock().unwrap_or_else(|e| e.into_inner()));
    for handle in writers {
        let _ = handle.join();
    }
}

/// Where a stream's bytes are written: each full buffer becomes one data frame.
pub struct FramedWriter {
    out: File,
    /// A frame being filled: header room, then payload.
    buffer: Vec<u8>,
}

impl FramedWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES);
        frame.push(FRAME_DATA);
        frame.extend_from_slice(&(self.buffer.len() as u32).to_be_bytes());
        self.out.write_all(&frame)?;
        self.out.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }

    fn end(&mut self, kind: u8, payload: &[u8]) -> io::Result<()> {
        self.send()?;
        let payload = &payload[..payload.len().min(FRAME_PAYLOAD_MAX_BYTES)];
        let mut frame = vec![kind];
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(payload);
        self.out.write_all(&frame)
    }
}

impl Write for FramedWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let room = FRAME_PAYLOAD_MAX_BYTES - self.buffer.len();
        let n = bytes.len().min(room);
        self.buffer.extend_from_slice(&bytes[..n]);
        if self.buffer.len() == FRAME_PAYLOAD_MAX_BYTES {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn frames(mut pipe: File) -> Vec<(u8, Vec<u8>)> {
        let mut all = Vec::new();
        pipe.read_to_end(&mut all).unwrap();
        let mut out = Vec::new();
        let mut at = 0;
        while at < all.len() {
            let kind = all[at];
            let len = u32::from_be_bytes(all[at + 1..at + 5].try_into().unwrap()) as usize;
            out.push((kind, all[at + 5..at + 5 + len].to_vec()));
            at += 5 + len;
        }
        out
    }

    #[test]
    fn a_whole_stream_ends_with_its_end_frame() {
        let pipe = spawn_framed("test", |out| {
            out.write_all(&vec![1u8; FRAME_PAYLOAD_MAX_BYTES + 10])?;
            Ok::<(), io::Error>(())
        })
        .unwrap();
        let got = frames(pipe);
        assert_eq!(got.len(), 3);
        assert_eq!(
            (got[0].0, got[0].1.len()),
            (FRAME_DATA, FRAME_PAYLOAD_MAX_BYTES)
        );
        assert_eq!((got[1].0, got[1].1.len()), (FRAME_DATA, 10));
        assert_eq!(got[2], (FRAME_END, Vec::new()));
    }

    #[test]
    fn a_failed_stream_says_why() {
        let pipe = spawn_framed("test", |out| {
            out.write_all(b"partial")?;
            Err(io::Error::other("over the cap"))
        })
        .unwrap();
        let got = frames(pipe);
        assert_eq!(got[0], (FRAME_DATA, b"partial".to_vec()));
        assert_eq!(got[1], (FRAME_FAILED, b"over the cap".to_vec()));
        wait_for_streams();
    }
}
