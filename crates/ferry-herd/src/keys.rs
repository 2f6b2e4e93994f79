//! Each worker generation's key: what tells its envelopes and its record from ones
//! another process of the person wrote.
//!
//! Every worker runs as its person, and the herd folder is the person's, so any worker
//! (a read-only one too) can write in it. What it cannot do is sign as another worker:
//! each generation gets 256 random bits, kept where no sandboxed worker can read them
//! (`private/herd-keys/<person>/`, outside every tree a command is shown; the person's
//! in host mode, since their own herd process keeps them) and handed to that worker
//! alone (`FERRY_HERD_KEY`, in its own environment, which other workers' sandboxes do
//! not show). Envelopes to and from the worker, and its
//! record, carry an HMAC-SHA256 under that key; what does not verify is refused.

use ferry_codes::Code;
use ferry_fs::{AtomicWriter, Dir, Follow, FsError};
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::HerdError;
use crate::dirs::PRIVATE_DIR_MODE;

/// Where the keys of one person's herd are kept, beneath the data folder.
pub fn keys_dir(person: &str) -> String {
    ferry_site::layout::herd_keys(person)
}

/// The controller's read mark, beside the keys (no `.key` name, no label's).
const OWNER_READ: &str = "owner-read-through";

/// A MAC as it is written: 64 hex digits.
pub const MAC_HEX_LEN: usize = 64;

/// One worker generation's key.
#[derive(Clone)]
pub struct WorkerKey([u8; 32]);

impl std::fmt::Debug for WorkerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerKey(…)")
    }
}

impl WorkerKey {
    /// A new random key.
    pub fn random() -> WorkerKey {
        WorkerKey(ferry_fs::random_bytes::<32>())
    }

    /// The key written as hex (`FERRY_HERD_KEY`).
    pub fn to_hex(&self) -> String {
        ferry_fs::hex(&self.0)
    }

    /// A key from its hex spelling.
    pub fn from_hex(text: &str) -> Result<WorkerKey, HerdError> {
        let bad = || HerdError::new(Code::NotAWorker, "the worker's key is not 64 hex digits");
        let text = text.trim();
        if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let mut key = [0u8; 32];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(WorkerKey(key))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes a key of any length: this cannot fail.
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length")
    }

    /// The MAC of `bytes`, as hex.
    pub fn sign(&self, bytes: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(bytes);
        ferry_fs::hex(&mac.finalize().into_bytes())
    }

    /// Whether `hex` is the MAC of `bytes` (compared in constant time).
    pub fn verifies(&self, bytes: &[u8], hex: &str) -> bool {
        let Ok(given) = WorkerKey::from_hex(hex) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(bytes);
        mac.verify_slice(&given.0).is_ok()
    }
}

/// The keys of one person's herd.
#[derive(Debug)]
pub struct Keys {
    dir: Dir,
}

impl Keys {
    /// Opens (making it, 0700) the person's key folder beneath the data folder `data`.
    /// In host mode the person cannot make it: `ferry site init --mode host` does.
    pub fn open(data: &Dir, person: &str) -> Result<Keys, HerdError> {
        let dir = data
            .create_dir_all(&keys_dir(person), PRIVATE_DIR_MODE)
            .map_err(|e| {
                HerdError::from(e).context(format!(
                    "the herd's key folder {} cannot be opened (in host mode `ferry site \
                     init --mode host` makes it)",
                    keys_dir(person)
                ))
            })?;
        Ok(Keys { dir })
    }

    fn name(label: &str, generation: u64) -> String {
        format!("{label}.{generation}.key")
    }

    /// Keeps `key` for `label`'s generation `generation` (0600).
    pub fn save(&self, label: &str, generation: u64, key: &WorkerKey) -> Result<(), HerdError> {
        let mut writer = AtomicWriter::create(&self.dir, &Keys::name(label, generation))?;
        writer.write(key.to_hex().as_bytes())?;
        writer.commit()?;
        Ok(())
    }

    /// The key of `label`'s generation `generation`, if it is kept.
    pub fn load(&self, label: &str, generation: u64) -> Result<Option<WorkerKey>, HerdError> {
        let file = match self
            .dir
            .open_file(&Keys::name(label, generation), Follow::Never)
        {
            Ok(file) => file,
            Err(FsError::NotFound) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, 128), &mut text)?;
        WorkerKey::from_hex(&text).map(Some)
    }

    /// The highest number the controller has read from its mailbox: anything numbered
    /// no higher is a replay (a worker moved a read envelope back into `new/`).
    pub fn owner_read_through(&self) -> Result<u64, HerdError> {
        let file = match self.dir.open_file(OWNER_READ, Follow::Never) {
            Ok(file) => file,
            Err(FsError::NotFound) => return Ok(0),
            Err(e) => return Err(e.into()),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, 32), &mut text)?;
        Ok(text.trim().parse().unwrap_or(0))
    }

    /// Records that the controller has read its mailbox up to `seq`.
    pub fn set_owner_read_through(&self, seq: u64) -> Result<(), HerdError> {
        let mut writer = AtomicWriter::create(&self.dir, OWNER_READ)?;
        writer.write(seq.to_string().as_bytes())?;
        writer.commit()?;
        Ok(())
    }

    /// The latest generation of `label` whose key is kept.
    pub fn latest(&self, label: &str) -> Result<Option<u64>, HerdError> {
        let prefix = format!("{label}.");
        Ok(self
            .dir
            .names()?
            .iter()
            .filter_map(|name| {
                name.strip_prefix(&prefix)?
                    .strip_suffix(".key")?
                    .parse()
                    .ok()
            })
            .max())
    }

    /// Forgets the key of `label`'s generation `generation` (absent is fine).
    pub fn remove(&self, label: &str, generation: u64) -> Result<(), HerdError> {
        match self.dir.remove(&Keys::name(label, generation)) {
            Ok(()) | Err(FsError::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
