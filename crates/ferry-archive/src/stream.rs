//! The entries of a tar stream, one at a time, with their metadata records applied.
//!
//! Every byte cap but the compressed one is enforced here, before what it counts is read:
//! a file's size against the per-file cap, files and metadata records together against
//! the unpacked cap. A PAX header (`x`), a GNU long name (`L`) and a global PAX header
//! (`g`) may each come at most once before an entry; each is read into memory only after
//! its size is checked against its own cap. Entry data is never held: it is read in small
//! pieces or skipped.

use crate::header::{self, BLOCK_BYTES, Header, Kind};
use crate::input::Input;
use crate::{ArchiveError, Limits, pax};

/// Bytes an archive may carry after its end marker: the zero padding writers add to fill
/// their last record (GNU tar's is 10 KiB). Anything else there is refused.
const TRAILING_MAX_BYTES: u64 = 1024 * 1024;

/// What a member of the archive is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemberKind {
    /// A regular file.
    File,
    /// A folder.
    Dir,
}

/// One entry of the archive, metadata records applied.
#[derive(Debug)]
pub(crate) struct Member {
    /// Its name as exact bytes (PAX `path`, GNU long name, or ustar prefix and name).
    pub(crate) name: Vec<u8>,
    /// File or folder.
    pub(crate) kind: MemberKind,
    /// Data bytes (0 for a folder).
    pub(crate) size: u64,
}

/// Reads members one after another from a tar stream.
pub(crate) struct Stream<'a> {
    input: Input<'a>,
    limits: Limits,
    /// Data bytes of the current member not yet read.
    data_left: u64,
    /// Padding after the current member's data.
    padding_left: u64,
    /// Bytes of files and metadata records met so far, against the unpacked cap.
    unpacked: u64,
    ended: bool,
}

/// Metadata records met since the last entry.
#[derive(Default)]
struct Pending {
    pax: Option<pax::Pax>,
    long_name: Option<Vec<u8>>,
    global_seen: bool,
}

impl<'a> Stream<'a> {
    /// Starts reading the tar in `input`.
    pub(crate) fn new(input: Input<'a>, limits: Limits) -> Stream<'a> {
        Stream {
            input,
            limits,
            data_left: 0,
            padding_left: 0,
            unpacked: 0,
            ended: false,
        }
    }

    /// The next member, the current one's unread data skipped; `None` after the end marker
    /// (whose trailing bytes are checked then).
    pub(crate) fn next_member(&mut self) -> Result<Option<Member>, ArchiveError> {
        if self.ended {
            return Ok(None);
        }
        self.skip_rest()?;
        let mut pending = Pending::default();
        loop {
            let mut block = [0u8; BLOCK_BYTES];
            if !self.input.read_block(&mut block)? {
                return Err(ArchiveError::malformed(
                    "the stream ends without the end-of-archive marker",
                ));
            }
            if header::is_zero_block(&block) {
                if pending.pax.is_some() || pending.long_name.is_some() {
                    return Err(ArchiveError::malformed(
                        "a PAX header or long name is not followed by an entry",
                    ));
                }
                self.finish_after_zero_block()?;
                self.ended = true;
                return Ok(None);
            }
            let header = header::parse(&block)?;
            self.start_data(header.size);
            match header.kind {
                Kind::File => return self.member(header, MemberKind::File, pending).map(Some),
                Kind::Dir => return self.member(header, MemberKind::Dir, pending).map(Some),
                Kind::PaxNext => {
                    if pending.pax.is_some() {
                        return Err(ArchiveError::malformed("two PAX headers for one entry"));
                    }
                    let data =
                        self.read_record(header.size, "PAX header", self.limits.pax_max_bytes)?;
                    pending.pax = Some(pax::parse(&data)?);
                }
                Kind::PaxGlobal => {
                    if pending.global_seen {
                        return Err(ArchiveError::malformed("two global PAX headers in a row"));
                    }
                    pending.global_seen = true;
                    let data = self.read_record(
                        header.size,
                        "global PAX header",
                        self.limits.pax_max_bytes,
                    )?;
                    let global = pax::parse(&data)?;
                    // A global name, size or link would change every later entry: refused
                    // rather than guessed at.
                    if global.path.is_some()
                        || global.size.is_some()
                        || global.link
                        || global.sparse
                    {
                        return Err(ArchiveError::UnsupportedEntry {
                            path: String::from_utf8_lossy(&header.name).into_owned(),
                            what: "a global PAX header that sets names, sizes or links".into(),
                        });
                    }
                }
                Kind::GnuLongName => {
                    if pending.long_name.is_some() {
                        return Err(ArchiveError::malformed("two GNU long names for one entry"));
                    }
                    let data = self.read_record(
                        header.size,
                        "GNU long name",
                        self.limits.long_name_max_bytes,
                    )?;
                    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                    pending.long_name = Some(data[..end].to_vec());
                }
                Kind::Unsupported(what) => {
                    return Err(ArchiveError::UnsupportedEntry {
                        path: name_of(&header, &pending),
                        what: what.into(),
                    });
                }
            }
        }
    }

    /// Reads the current member's data; 0 at its end. A stream ending early is
    /// `malformed_archive` (the size passes the end).
    pub(crate) fn read_data(&mut self, buf: &mut [u8]) -> Result<usize, ArchiveError> {
        if self.data_left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.data_left).unwrap_or(usize::MAX));
        let n = self.input.read_some(&mut buf[..want])?;
        if n == 0 {
            return Err(ArchiveError::malformed(
                "an entry's size passes the end of the stream",
            ));
        }
        self.data_left -= n as u64;
        Ok(n)
    }

    fn member(
        &mut self,
        header: Header,
        kind: MemberKind,
        pending: Pending,
    ) -> Result<Member, ArchiveError> {
        let mut size = header.size;
        let mut name = header.name;
        if let Some(long) = pending.long_name {
            name = long;
        }
        if let Some(pax) = pending.pax {
            if pax.link || pax.sparse {
                let what = if pax.link { "a link" } else { "a sparse file" };
                return Err(ArchiveError::UnsupportedEntry {
                    path: String::from_utf8_lossy(pax.path.as_deref().unwrap_or(&name)).into(),
                    what: what.into(),
                });
            }
            if let Some(path) = pax.path {
                name = path;
            }
            if let Some(pax_size) = pax.size {
                size = pax_size;
                self.start_data(size);
            }
        }
        match kind {
            MemberKind::Dir if size != 0 => {
                return Err(ArchiveError::malformed(format!(
                    "the folder {:?} has {size} bytes of content",
                    String::from_utf8_lossy(&name)
                )));
            }
            MemberKind::Dir => {}
            MemberKind::File => {
                if size > self.limits.entry_max_bytes {
                    return Err(ArchiveError::EntryTooLarge {
                        path: String::from_utf8_lossy(&name).into_owned(),
                        size,
                        limit: self.limits.entry_max_bytes,
                    });
                }
                self.count_unpacked(size)?;
            }
        }
        Ok(Member { name, kind, size })
    }

    /// Counts `size` more unpacked bytes, refusing them past the cap before they are read.
    fn count_unpacked(&mut self, size: u64) -> Result<(), ArchiveError> {
        self.unpacked = self.unpacked.saturating_add(size);
        if self.unpacked > self.limits.unpacked_max_bytes {
            return Err(ArchiveError::UnpackedTooLarge {
                limit: self.limits.unpacked_max_bytes,
            });
        }
        Ok(())
    }

    fn start_data(&mut self, size: u64) {
        self.data_left = size;
        self.padding_left = (BLOCK_BYTES as u64 - size % BLOCK_BYTES as u64) % BLOCK_BYTES as u64;
    }

    /// Reads a metadata record whole, after checking its size against `cap`.
    fn read_record(
        &mut self,
        size: u64,
        what: &'static str,
        cap: u64,
    ) -> Result<Vec<u8>, ArchiveError> {
        if size > cap {
            return Err(ArchiveError::HeaderTooLarge {
                what,
                size,
                limit: cap,
            });
        }
        // Records count as unpacked bytes too, so their number is bounded as well.
        self.count_unpacked(size)?;
        // The size is at most the cap, so this allocation is bounded.
        let mut data = vec![0u8; size as usize];
        let mut have = 0;
        while have < data.len() {
            let n = self.read_data(&mut data[have..])?;
            have += n;
        }
        self.skip_rest()?;
        Ok(data)
    }

    /// Skips what is left of the current member: data, then padding.
    fn skip_rest(&mut self) -> Result<(), ArchiveError> {
        let mut scratch = [0u8; 8192];
        while self.data_left > 0 {
            self.read_data(&mut scratch)?;
        }
        while self.padding_left > 0 {
            let want = scratch.len().min(self.padding_left as usize);
            let n = self.input.read_some(&mut scratch[..want])?;
            if n == 0 {
                return Err(ArchiveError::malformed(
                    "the stream ends inside an entry's padding",
                ));
            }
            self.padding_left -= n as u64;
        }
        Ok(())
    }

    /// After the first zero block: a second one (or the stream's end) ends the archive,
    /// and what follows may only be a bounded run of zeros.
    fn finish_after_zero_block(&mut self) -> Result<(), ArchiveError> {
        let mut scratch = [0u8; 8192];
        let mut trailing: u64 = 0;
        loop {
            let n = self.input.read_some(&mut scratch)?;
            if n == 0 {
                return Ok(());
            }
            if scratch[..n].iter().any(|&b| b != 0) {
                return Err(ArchiveError::malformed(
                    "bytes other than zeros follow the end-of-archive marker",
                ));
            }
            trailing += n as u64;
            if trailing > TRAILING_MAX_BYTES {
                return Err(ArchiveError::malformed(format!(
                    "more than {TRAILING_MAX_BYTES} bytes follow the end-of-archive marker"
                )));
            }
        }
    }
}

/// The name an entry would have had, for a message about it.
fn name_of(header: &Header, pending: &Pending) -> String {
    let name = pending
        .pax
        .as_ref()
        .and_then(|p| p.path.as_deref())
        .or(pending.long_name.as_deref())
        .unwrap_or(&header.name);
    String::from_utf8_lossy(name).into_owned()
}
