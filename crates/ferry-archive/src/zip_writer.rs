//! A zip written front to back into a sink that cannot seek (a pipe, an HTTP body): the
//! folder downloads of spec members M-DAILY "Whole folders".
//!
//! Entries are stored (not compressed): a download is bounded by the network, not by the
//! disk, and much of what people keep (images, PDFs, office files) is compressed already.
//! Each file's CRC-32 and sizes follow its bytes in a data descriptor (general purpose
//! flag bit 3), so nothing is read twice and nothing is held: memory is the copy buffer
//! and one central-directory record per entry. Names are UTF-8 (flag bit 11). Zip64
//! fields appear only where a value needs them: a file of 4 GiB or more, an offset past
//! 4 GiB, or more than 65,534 entries.

use std::io::{self, Read, Write};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes copied at a time from a file into the zip.
const COPY_CHUNK_BYTES: usize = 64 * 1024;

const LOCAL_HEADER_SIG: u32 = 0x0403_4b50;
const DATA_DESCRIPTOR_SIG: u32 = 0x0807_4b50;
const CENTRAL_HEADER_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;
const ZIP64_END_SIG: u32 = 0x0606_4b50;
const ZIP64_LOCATOR_SIG: u32 = 0x0706_4b50;
/// Sizes follow the data in a descriptor.
const FLAG_DESCRIPTOR: u16 = 1 << 3;
/// Names are UTF-8.
const FLAG_UTF8: u16 = 1 << 11;
/// Version 2.0: folders and stored files.
const VERSION_PLAIN: u16 = 20;
/// Version 4.5: zip64.
const VERSION_ZIP64: u16 = 45;
/// Made by Unix (high byte 3), spec version 4.5: the external attributes hold a mode.
const MADE_BY_UNIX: u16 = (3 << 8) | VERSION_ZIP64;
const ZIP64_EXTRA_ID: u16 = 0x0001;
/// The "extended timestamp" extra field: the modification time in Unix seconds, which
/// the DOS time (two-second steps, no zone) cannot carry.
const TIMESTAMP_EXTRA_ID: u16 = 0x5455;
/// A 32-bit field that does not hold its value, which is then in the zip64 extra field.
const MASK32: u32 = u32::MAX;
const MASK16: u16 = u16::MAX;

/// Why an entry could not be added.
#[derive(Debug, thiserror::Error)]
pub enum ZipError {
    /// Writing to the sink (or reading a file) failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The zip would carry more file bytes than allowed; holds the limit.
    #[error("the folder holds more than {0} bytes of files, the most one download may carry")]
    TooLarge(u64),
    /// A file grew to 4 GiB or more after its entry was begun without zip64 fields.
    #[error("{0} grew past 4 GiB while it was being added")]
    Grew(String),
}

/// One entry as the central directory will describe it.
struct Record {
    name: Vec<u8>,
    crc: u32,
    size: u64,
    offset: u64,
    dos: (u16, u16),
    unix_secs: u32,
    /// Unix mode with file type bits, for the external attributes.
    mode: u32,
    is_dir: bool,
    /// Whether the local header already carried zip64 fields.
    zip64: bool,
}

/// A zip being written to `W`.
pub struct ZipWriter<W: Write> {
    out: W,
    /// Bytes written so far: where the next local header begins.
    offset: u64,
    records: Vec<Record>,
    /// File bytes still allowed.
    budget: u64,
    limit: u64,
    buffer: Vec<u8>,
}

impl<W: Write> ZipWriter<W> {
    /// A zip into `out` that will carry at most `max_file_bytes` of file content.
    pub fn new(out: W, max_file_bytes: u64) -> ZipWriter<W> {
        ZipWriter {
            out,
            offset: 0,
            records: Vec::new(),
            budget: max_file_bytes,
            limit: max_file_bytes,
            buffer: vec![0; COPY_CHUNK_BYTES],
        }
    }

    /// Entries added so far.
    pub fn entries(&self) -> usize {
        self.records.len()
    }

    /// Adds a folder entry (`name` without its trailing `/`, which is added).
    pub fn add_dir(&mut self, name: &str, mtime: SystemTime, mode: u32) -> Result<(), ZipError> {
        let mut name = name.as_bytes().to_vec();
        name.push(b'/');
        let record = Record {
            name,
            crc: 0,
            size: 0,
            offset: self.offset,
            dos: dos_time(mtime),
            unix_secs: unix_secs(mtime),
            mode: 0o040000 | (mode & 0o7777),
            is_dir: true,
            zip64: false,
        };
        let header = local_header(&record, false);
        self.put(&header)?;
        self.records.push(record);
        Ok(())
    }

    /// Adds the file `name` with the bytes `content` yields up to its end. `size_hint` is
    /// the size it had when planned: 4 GiB or more gets zip64 fields from its header on.
    /// Over the byte limit, it fails with [`ZipError::TooLarge`] and the zip must be
    /// abandoned (its sink told the stream failed): what was written is not a zip.
    pub fn add_file(
        &mut self,
        name: &str,
        mtime: SystemTime,
        mode: u32,
        size_hint: u64,
        content: &mut impl Read,
    ) -> Result<(), ZipError> {
        let zip64 = size_hint >= u64::from(MASK32);
        let mut record = Record {
            name: name.as_bytes().to_vec(),
            crc: 0,
            size: 0,
            offset: self.offset,
            dos: dos_time(mtime),
            unix_secs: unix_secs(mtime),
            mode: 0o100000 | (mode & 0o7777),
            is_dir: false,
            zip64,
        };
        let header = local_header(&record, true);
        self.put(&header)?;
        let mut crc = crc32fast::Hasher::new();
        let mut size = 0u64;
        loop {
            let n = match content.read(&mut self.buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if n as u64 > self.budget {
                return Err(ZipError::TooLarge(self.limit));
            }
            self.budget -= n as u64;
            size += n as u64;
            if !zip64 && size >= u64::from(MASK32) {
                return Err(ZipError::Grew(name.to_owned()));
            }
            crc.update(&self.buffer[..n]);
            self.out.write_all(&self.buffer[..n])?;
            self.offset += n as u64;
        }
        record.crc = crc.finalize();
        record.size = size;
        let mut descriptor = Vec::with_capacity(24);
        put32(&mut descriptor, DATA_DESCRIPTOR_SIG);
        put32(&mut descriptor, record.crc);
        if zip64 {
            put64(&mut descriptor, size);
            put64(&mut descriptor, size);
        } else {
            put32(&mut descriptor, size as u32);
            put32(&mut descriptor, size as u32);
        }
        self.put(&descriptor)?;
        self.records.push(record);
        Ok(())
    }

    /// Writes the central directory and its end, and hands back the sink.
    pub fn finish(mut self) -> Result<W, ZipError> {
        let start = self.offset;
        let records = std::mem::take(&mut self.records);
        for record in &records {
            let header = central_header(record);
            self.put(&header)?;
        }
        let size = self.offset - start;
        let count = records.len() as u64;
        let mut end = Vec::with_capacity(98);
        let needs_zip64 =
            count >= u64::from(MASK16) || size >= u64::from(MASK32) || start >= u64::from(MASK32);
        if needs_zip64 {
            let zip64_end = self.offset;
            put32(&mut end, ZIP64_END_SIG);
            put64(&mut end, 44);
            put16(&mut end, MADE_BY_UNIX);
            put16(&mut end, VERSION_ZIP64);
            put32(&mut end, 0);
            put32(&mut end, 0);
            put64(&mut end, count);
            put64(&mut end, count);
            put64(&mut end, size);
            put64(&mut end, start);
            put32(&mut end, ZIP64_LOCATOR_SIG);
            put32(&mut end, 0);
            put64(&mut end, zip64_end);
            put32(&mut end, 1);
        }
        let count16 = u16::try_from(count).unwrap_or(MASK16);
        put32(&mut end, END_SIG);
        put16(&mut end, 0);
        put16(&mut end, 0);
        put16(&mut end, count16);
        put16(&mut end, count16);
        put32(&mut end, clamp32(size));
        put32(&mut end, clamp32(start));
        put16(&mut end, 0);
        self.put(&end)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

fn local_header(record: &Record, descriptor: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(30 + record.name.len() + 29);
    let mut flags = FLAG_UTF8;
    if descriptor {
        flags |= FLAG_DESCRIPTOR;
    }
    put32(&mut out, LOCAL_HEADER_SIG);
    put16(
        &mut out,
        if record.zip64 {
            VERSION_ZIP64
        } else {
            VERSION_PLAIN
        },
    );
    put16(&mut out, flags);
    put16(&mut out, 0); // stored
    put16(&mut out, record.dos.0);
    put16(&mut out, record.dos.1);
    put32(&mut out, 0); // CRC: in the descriptor
    let sizes = if record.zip64 { MASK32 } else { 0 };
    put32(&mut out, sizes);
    put32(&mut out, sizes);
    put16(&mut out, record.name.len() as u16);
    let extra_len = 9 + if record.zip64 { 20 } else { 0 };
    put16(&mut out, extra_len);
    out.extend_from_slice(&record.name);
    timestamp_extra(&mut out, record.unix_secs);
    if record.zip64 {
        put16(&mut out, ZIP64_EXTRA_ID);
        put16(&mut out, 16);
        put64(&mut out, 0);
        put64(&mut out, 0);
    }
    out
}

fn central_header(record: &Record) -> Vec<u8> {
    let big_size = record.size >= u64::from(MASK32);
    let big_offset = record.offset >= u64::from(MASK32);
    let mut zip64 = Vec::new();
    if big_size {
        put64(&mut zip64, record.size);
        put64(&mut zip64, record.size);
    }
    if big_offset {
        put64(&mut zip64, record.offset);
    }
    let mut out = Vec::with_capacity(46 + record.name.len() + 9 + 4 + zip64.len());
    let mut flags = FLAG_UTF8;
    if !record.is_dir {
        flags |= FLAG_DESCRIPTOR;
    }
    let needed = if record.zip64 || !zip64.is_empty() {
        VERSION_ZIP64
    } else {
        VERSION_PLAIN
    };
    put32(&mut out, CENTRAL_HEADER_SIG);
    put16(&mut out, MADE_BY_UNIX);
    put16(&mut out, needed);
    put16(&mut out, flags);
    put16(&mut out, 0);
    put16(&mut out, record.dos.0);
    put16(&mut out, record.dos.1);
    put32(&mut out, record.crc);
    let size32 = if big_size { MASK32 } else { record.size as u32 };
    put32(&mut out, size32);
    put32(&mut out, size32);
    put16(&mut out, record.name.len() as u16);
    let extra_len = 9 + if zip64.is_empty() { 0 } else { 4 + zip64.len() };
    put16(&mut out, extra_len as u16);
    put16(&mut out, 0); // comment
    put16(&mut out, 0); // disk
    put16(&mut out, 0); // internal attributes
    // Unix mode above, the MS-DOS directory bit below.
    let dos_attr = if record.is_dir { 0x10 } else { 0 };
    put32(&mut out, (record.mode << 16) | dos_attr);
    put32(
        &mut out,
        if big_offset {
            MASK32
        } else {
            record.offset as u32
        },
    );
    out.extend_from_slice(&record.name);
    timestamp_extra(&mut out, record.unix_secs);
    if !zip64.is_empty() {
        put16(&mut out, ZIP64_EXTRA_ID);
        put16(&mut out, zip64.len() as u16);
        out.extend_from_slice(&zip64);
    }
    out
}

/// The extended-timestamp extra field with the modification time alone (9 bytes).
fn timestamp_extra(out: &mut Vec<u8>, secs: u32) {
    put16(out, TIMESTAMP_EXTRA_ID);
    put16(out, 5);
    out.push(1);
    put32(out, secs);
}

fn unix_secs(t: SystemTime) -> u32 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or(0)
}

/// The MS-DOS (time, date) of `t` in UTC, clamped to 1980..=2107.
fn dos_time(t: SystemTime) -> (u16, u16) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    if year < 1980 {
        return (0, (1 << 5) | 1);
    }
    if year > 2107 {
        return ((23 << 11) | (59 << 5) | 29, (127 << 9) | (12 << 5) | 31);
    }
    let time = ((rem / 3600) << 11) | (((rem % 3600) / 60) << 5) | ((rem % 60) / 2);
    let date = (((year - 1980) as u64) << 9) | ((month as u64) << 5) | day as u64;
    (time as u16, date as u16)
}

/// The proleptic Gregorian (year, month, day) of a count of days since 1970-01-01: the
/// one calendar both a zip's DOS dates and the site's RFC 3339 times are written with.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn clamp32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(MASK32)
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn dos_times_follow_the_calendar() {
        // 2026-12-06 09:30:58 UTC
        let (time, date) = dos_time(at(1_796_549_458));
        assert_eq!((date >> 9) + 1980, 2026);
        assert_eq!((date >> 5) & 0xF, 12);
        assert_eq!(date & 0x1F, 6);
        assert_eq!(time >> 11, 9);
        assert_eq!((time >> 5) & 0x3F, 30);
        assert_eq!((time & 0x1F) * 2, 58);
        assert_eq!(dos_time(at(0)), (0, (1 << 5) | 1));
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn a_written_zip_reads_back_with_another_reader() {
        let mut zip = ZipWriter::new(Vec::new(), 1 << 20);
        zip.add_dir("top", at(1_700_000_000), 0o755).unwrap();
        zip.add_dir("top/empty", at(1_700_000_000), 0o700).unwrap();
        zip.add_file(
            "top/relatório ü.txt",
            at(1_700_000_000),
            0o644,
            5,
            &mut Cursor::new(b"hello"),
        )
        .unwrap();
        // A hint of 4 GiB gives zip64 fields to a small file: still a valid zip.
        zip.add_file(
            "top/big-hint.bin",
            at(1_700_000_000),
            0o600,
            u64::from(u32::MAX),
            &mut Cursor::new(vec![7u8; 70_000]),
        )
        .unwrap();
        let bytes = zip.finish().unwrap();

        let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
        assert_eq!(archive.len(), 4);
        let names: Vec<String> = archive
            .file_names()
            .map(|n| n.unwrap().into_owned())
            .collect();
        assert!(names.contains(&"top/empty/".to_owned()), "{names:?}");
        let mut text = String::new();
        archive
            .by_name("top/relatório ü.txt")
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "hello");
        let mut big = Vec::new();
        let mut entry = archive.by_name("top/big-hint.bin").unwrap();
        assert_eq!(entry.unix_mode().map(|m| m & 0o7777), Some(0o600));
        entry.read_to_end(&mut big).unwrap();
        assert_eq!(big, vec![7u8; 70_000]);
        drop(entry);
        assert!(archive.by_name("top/empty/").unwrap().is_dir());
    }

    #[test]
    fn the_byte_limit_is_exact() {
        for (limit, ok) in [(9u64, false), (10, true), (11, true)] {
            let mut zip = ZipWriter::new(Vec::new(), limit);
            let added = zip.add_file("a", at(0), 0o644, 10, &mut Cursor::new([1u8; 10]));
            assert_eq!(added.is_ok(), ok, "limit {limit}");
            if !ok {
                assert!(matches!(added, Err(ZipError::TooLarge(l)) if l == limit));
            }
        }
    }
}
