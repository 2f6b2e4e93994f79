//! Hostile tars built byte by byte, where the `tar` crate would refuse to write them.
#![allow(dead_code, missing_docs)]

use std::io::Write;

use ferry_archive::{ArchiveError, Plan, PlanOptions};
use ferry_codes::Code;

pub const BLOCK: usize = 512;

/// A header block with a ustar magic and a correct checksum.
pub fn header(name: &[u8], flag: u8, size: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    b[..name.len()].copy_from_slice(name);
    b[100..108].copy_from_slice(b"0000644\0");
    b[108..116].copy_from_slice(b"0000000\0");
    b[116..124].copy_from_slice(b"0000000\0");
    if size <= 0o777_7777_7777 {
        b[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        // GNU base-256: a marker bit, then the number big-endian.
        b[124] = 0x80;
        b[128..136].copy_from_slice(&size.to_be_bytes());
    }
    b[136..148].copy_from_slice(b"14000000000\0");
    b[156] = flag;
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    seal(&mut b);
    b
}

/// Writes the checksum of a header whose other bytes are final.
pub fn seal(b: &mut [u8; BLOCK]) {
    b[148..156].fill(b' ');
    let sum: u64 = b.iter().map(|&x| u64::from(x)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// A tar being built.
#[derive(Default, Clone)]
pub struct Tar {
    pub bytes: Vec<u8>,
}

impl Tar {
    pub fn new() -> Tar {
        Tar::default()
    }

    /// A header and its data, padded.
    pub fn entry(mut self, header: [u8; BLOCK], data: &[u8]) -> Tar {
        self.bytes.extend_from_slice(&header);
        self.bytes.extend_from_slice(data);
        self.pad();
        self
    }

    pub fn file(self, name: &str, data: &[u8]) -> Tar {
        self.raw_file(name.as_bytes(), data)
    }

    pub fn raw_file(self, name: &[u8], data: &[u8]) -> Tar {
        let h = header(name, b'0', data.len() as u64);
        self.entry(h, data)
    }

    pub fn dir(self, name: &str) -> Tar {
        let h = header(name.as_bytes(), b'5', 0);
        self.entry(h, b"")
    }

    /// An entry of any type flag, without data.
    pub fn typed(self, name: &str, flag: u8) -> Tar {
        let h = header(name.as_bytes(), flag, 0);
        self.entry(h, b"")
    }

    /// A PAX header (`x`) holding `records` as given.
    pub fn pax_raw(self, records: &[u8]) -> Tar {
        let h = header(b"././@PaxHeader", b'x', records.len() as u64);
        self.entry(h, records)
    }

    /// A PAX header with well-formed records.
    pub fn pax(self, records: &[(&str, &[u8])]) -> Tar {
        let mut data = Vec::new();
        for (key, value) in records {
            data.extend(record(key, value));
        }
        self.pax_raw(&data)
    }

    /// A global PAX header (`g`).
    pub fn global(self, records: &[(&str, &[u8])]) -> Tar {
        let mut data = Vec::new();
        for (key, value) in records {
            data.extend(record(key, value));
        }
        let h = header(b"pax_global_header", b'g', data.len() as u64);
        self.entry(h, &data)
    }

    /// A GNU long name (`L`) for the next entry, NUL-terminated as GNU tar writes it.
    pub fn long_name(self, name: &[u8]) -> Tar {
        let mut data = name.to_vec();
        data.push(0);
        let h = header(b"././@LongLink", b'L', data.len() as u64);
        self.entry(h, &data)
    }

    pub fn raw(mut self, bytes: &[u8]) -> Tar {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// The end-of-archive marker.
    pub fn end(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0u8; 2 * BLOCK]);
        self.bytes
    }

    fn pad(&mut self) {
        let rest = (BLOCK - self.bytes.len() % BLOCK) % BLOCK;
        self.bytes.extend(std::iter::repeat_n(0u8, rest));
    }
}

/// One PAX record with its length right.
pub fn record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3;
    let mut len = body + 1;
    while len.to_string().len() + body != len {
        len = len.to_string().len() + body;
    }
    let mut out = format!("{len} {key}=").into_bytes();
    out.extend_from_slice(value);
    out.push(b'\n');
    out
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

pub fn plan(bytes: &[u8]) -> Result<Plan, ArchiveError> {
    ferry_archive::plan(bytes, &PlanOptions::default())
}

pub fn plan_with(bytes: &[u8], options: &PlanOptions) -> Result<Plan, ArchiveError> {
    ferry_archive::plan(bytes, options)
}

/// The code an archive is refused with, under the default options.
pub fn refusal(bytes: &[u8]) -> Code {
    refusal_with(bytes, &PlanOptions::default())
}

pub fn refusal_with(bytes: &[u8], options: &PlanOptions) -> Code {
    match ferry_archive::plan(bytes, options) {
        Ok(plan) => panic!("admitted: {:?}", plan.entries),
        Err(e) => {
            // Every refusal says something a person can act on.
            assert!(!e.to_string().is_empty());
            e.code()
        }
    }
}

/// The paths of a plan, in order.
pub fn paths(plan: &Plan) -> Vec<&str> {
    plan.entries.iter().map(|e| e.path.as_str()).collect()
}
