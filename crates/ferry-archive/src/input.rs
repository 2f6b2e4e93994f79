//! The archive's bytes as they arrive: counted against the compressed cap while they are
//! read, and gunzipped when they start with gzip's magic.

use std::cell::Cell;
use std::io::{self, BufReader, Read};
use std::rc::Rc;

use flate2::bufread::MultiGzDecoder;

use crate::ArchiveError;

/// How much of the source is read at once.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The two bytes every gzip member starts with.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What the counting reader saw, shared with the code that reads through the decoder,
/// which only gets an `io::Error` back.
#[derive(Debug, Default)]
struct Seen {
    bytes: Cell<u64>,
    over_cap: Cell<bool>,
    source_failed: Cell<bool>,
}

/// The raw input, never read past one byte beyond the cap.
struct Counted<R> {
    inner: R,
    cap: u64,
    seen: Rc<Seen>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let read_so_far = self.seen.bytes.get();
        // One byte past the cap is enough to know the archive is too large.
        let room = (self.cap + 1).saturating_sub(read_so_far);
        let want = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if want == 0 {
            self.seen.over_cap.set(true);
            return Err(io::Error::other("the archive passes its cap"));
        }
        let n = self.inner.read(&mut buf[..want]).inspect_err(|_| {
            self.seen.source_failed.set(true);
        })?;
        self.seen.bytes.set(read_so_far + n as u64);
        if self.seen.bytes.get() > self.cap {
            self.seen.over_cap.set(true);
            return Err(io::Error::other("the archive passes its cap"));
        }
        Ok(n)
    }
}

/// The tar stream, decompressed if need be, whose read errors say which cause they have.
pub(crate) struct Input<'a> {
    reader: Box<dyn Read + 'a>,
    seen: Rc<Seen>,
    cap: u64,
    gzip: bool,
}

impl<'a> Input<'a> {
    /// Wraps `source`, counting at most `cap` bytes of it, gzip detected by its magic.
    pub(crate) fn new(source: impl Read + 'a, cap: u64) -> Result<Input<'a>, ArchiveError> {
        let seen = Rc::new(Seen::default());
        let mut counted = Counted {
            inner: source,
            cap,
            seen: seen.clone(),
        };
        let mut magic = [0u8; 2];
        let mut have = 0;
        while have < magic.len() {
            match counted.read(&mut magic[have..]) {
                Ok(0) => break,
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(classify(&seen, cap, false, e)),
            }
        }
        let head = io::Cursor::new(magic[..have].to_vec());
        let gzip = have == 2 && magic == GZIP_MAGIC;
        // Blocks are read 512 bytes at a time: the source is read in larger pieces.
        let buffered = BufReader::with_capacity(READ_BUFFER_BYTES, head.chain(counted));
        let reader: Box<dyn Read + 'a> = if gzip {
            Box::new(MultiGzDecoder::new(buffered))
        } else {
            Box::new(buffered)
        };
        Ok(Input {
            reader,
            seen,
            cap,
            gzip,
        })
    }

    /// Fills `buf` whole. `Ok(false)` when the stream ended before its first byte;
    /// an end inside it is a truncated archive.
    pub(crate) fn read_block(&mut self, buf: &mut [u8]) -> Result<bool, ArchiveError> {
        let mut have = 0;
        while have < buf.len() {
            match self.reader.read(&mut buf[have..]) {
                Ok(0) if have == 0 => return Ok(false),
                Ok(0) => {
                    return Err(ArchiveError::malformed(
                        "the stream ends in the middle of a header or a file",
                    ));
                }
                Ok(n) => have += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(e)),
            }
        }
        Ok(true)
    }

    /// Reads up to `buf.len()` bytes; 0 only at the end of the stream.
    pub(crate) fn read_some(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        loop {
            match self.reader.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.error(e)),
            }
        }
    }

    /// The error a failed read stands for: the cap, the source, or a damaged gzip stream.
    fn error(&self, e: io::Error) -> ArchiveError {
        classify(&self.seen, self.cap, self.gzip, e)
    }
}

fn classify(seen: &Seen, cap: u64, gzip: bool, e: io::Error) -> ArchiveError {
    if seen.over_cap.get() {
        ArchiveError::ArchiveTooLarge { limit: cap }
    } else if seen.source_failed.get() || !gzip {
        ArchiveError::Io(e)
    } else {
        ArchiveError::malformed(format!("the gzip stream is damaged ({e})"))
    }
}
