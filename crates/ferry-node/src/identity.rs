//! The node's ed25519 identity, kept in its state folder.
//!
//! The key file is `identity.key` in the state folder: one line,
//! `ferry-node-key-v1 <64 lowercase hex digits of the 32-byte secret seed>`. The folder
//! is the node owner's alone (0700) and the file too (0600); anything else (a link, a
//! folder or file others can read, another owner, other contents) is refused with the
//! place and the fix, never repaired silently: a key others could read may have leaked.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::NodeError;

/// The key file's name in the state folder.
pub const KEY_FILE_NAME: &str = "identity.key";
/// How a key file starts; the version lets a later format be told apart.
const KEY_FILE_TAG: &str = "ferry-node-key-v1 ";
/// Most bytes a key file may have (the tag, 64 digits and a newline fit well within).
const KEY_FILE_MAX_BYTES: u64 = 128;
/// Hex digits of the public key's SHA-256 that make the node id (named once, in the
/// limits, where the configuration's `[nodes.<id>]` check reads it too).
pub use ferry_config::limits::NODE_ID_HEX_DIGITS;

/// A node's signing key.
pub struct Identity {
    key: SigningKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Identity")
            .field("node_id", &self.node_id())
            .finish()
    }
}

impl Identity {
    /// A fresh identity held in memory only.
    pub fn generate() -> Identity {
        Identity {
            key: SigningKey::from_bytes(&ferry_fs::random_bytes::<32>()),
        }
    }

    /// The identity kept in `state_dir`, made there (folder 0700, file 0600) on first use.
    pub fn load_or_create(state_dir: &Path) -> Result<Identity, NodeError> {
        prepare_state_dir(state_dir)?;
        let path = state_dir.join(KEY_FILE_NAME);
        match read_key_file(&path)? {
            Some(identity) => Ok(identity),
            None => create_key_file(state_dir, &path),
        }
    }

    /// The public half, which the gateway keeps to recognise the node.
    pub fn public_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The node's id, derived from its public key (see [`node_id`]).
    pub fn node_id(&self) -> String {
        node_id(&self.public_key())
    }

    /// Signs `message` (the handshake builds it; see `handshake::signed_message`).
    pub(crate) fn sign(&self, message: &[u8]) -> Signature {
        self.key.sign(message)
    }
}

/// The id of the node whose public key is `key`: the first [`NODE_ID_HEX_DIGITS`]
/// lowercase hex digits (80 bits) of SHA-256 over the 32 bytes of the key. It names the
/// node in commands and configuration; the gateway still recognises the node by its whole
/// key, so the id is a name, not a secret, and two keys sharing an id cannot pass for each
/// other.
pub fn node_id(key: &VerifyingKey) -> String {
    let mut id = ferry_fs::sha256_hex(key.as_bytes());
    id.truncate(NODE_ID_HEX_DIGITS);
    id
}

fn prepare_state_dir(dir: &Path) -> Result<(), NodeError> {
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| NodeError::state(dir, format!("cannot make the state folder: {e}")))?;
        }
        Err(e) => {
            return Err(NodeError::state(
                dir,
                format!("cannot read the state folder: {e}"),
            ));
        }
        Ok(_) => {}
    }
    let meta = fs::symlink_metadata(dir)
        .map_err(|e| NodeError::state(dir, format!("cannot read the state folder: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(NodeError::state(
            dir,
            "the state folder is a symbolic link; give the real folder",
        ));
    }
    if !meta.is_dir() {
        return Err(NodeError::state(dir, "the state folder is not a folder"));
    }
    check_owner_and_mode(dir, &meta, "folder", "chmod 700")
}

fn check_owner_and_mode(
    path: &Path,
    meta: &fs::Metadata,
    what: &str,
    fix: &str,
) -> Result<(), NodeError> {
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(NodeError::state(
            path,
            format!(
                "the {what} belongs to uid {}, not to this user (uid {me})",
                meta.uid()
            ),
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(NodeError::state(
            path,
            format!(
                "the {what} has mode {mode:04o}: others may read it; `{fix}` it (and make a new \
                 identity if the key may have leaked)"
            ),
        ));
    }
    Ok(())
}

/// The identity in `path`, `None` if there is no file yet.
fn read_key_file(path: &Path) -> Result<Option<Identity>, NodeError> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(NodeError::state(
                path,
                "the key file is a symbolic link; it must be a regular file",
            ));
        }
        Err(e) => {
            return Err(NodeError::state(
                path,
                format!("cannot open the key file: {e}"),
            ));
        }
    };
    let meta = file
        .metadata()
        .map_err(|e| NodeError::state(path, format!("cannot read the key file: {e}")))?;
    if !meta.is_file() {
        return Err(NodeError::state(path, "the key file is not a regular file"));
    }
    check_owner_and_mode(path, &meta, "key file", "chmod 600")?;
    if meta.len() > KEY_FILE_MAX_BYTES {
        return Err(NodeError::state(
            path,
            "the key file is too long to be a node key",
        ));
    }
    let mut text = String::new();
    (&mut file)
        .take(KEY_FILE_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| NodeError::state(path, "the key file is not a node key (not text)"))?;
    let seed = parse_key_text(&text).ok_or_else(|| {
        NodeError::state(
            path,
            format!(
                "the key file is not a node key (expected one line `{KEY_FILE_TAG}<64 hex digits>`)"
            ),
        )
    })?;
    Ok(Some(Identity {
        key: SigningKey::from_bytes(&seed),
    }))
}

fn parse_key_text(text: &str) -> Option<[u8; 32]> {
    let digits = text.strip_prefix(KEY_FILE_TAG)?.strip_suffix('\n')?;
    let bytes = data_encoding::HEXLOWER.decode(digits.as_bytes()).ok()?;
    bytes.try_into().ok()
}

/// Makes the key file atomically: written and synced under a temporary name, then linked
/// to its name (a link never replaces, so two nodes starting at once keep one key).
fn create_key_file(dir: &Path, path: &Path) -> Result<Identity, NodeError> {
    let identity = Identity::generate();
    let temp = dir.join(format!(
        ".{KEY_FILE_NAME}.tmp-{}",
        ferry_fs::random_hex::<8>()
    ));
    let result = write_temp_key(&temp, &identity).and_then(|()| link_into_place(&temp, path));
    let _ = fs::remove_file(&temp);
    match result? {
        Placed::Ours => {
            sync_dir(dir)?;
            Ok(identity)
        }
        Placed::SomeoneElses => read_key_file(path)?
            .ok_or_else(|| NodeError::state(path, "the key file vanished while it was made")),
    }
}

enum Placed {
    Ours,
    SomeoneElses,
}

fn write_temp_key(temp: &Path, identity: &Identity) -> Result<(), NodeError> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(temp)
        .map_err(|e| NodeError::state(temp, format!("cannot make the key file: {e}")))?;
    let seed = ferry_fs::hex(identity.key.as_bytes());
    let text = format!("{KEY_FILE_TAG}{seed}\n");
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| NodeError::state(temp, format!("cannot write the key file: {e}")))
}

fn link_into_place(temp: &Path, path: &Path) -> Result<Placed, NodeError> {
    match fs::hard_link(temp, path) {
        Ok(()) => Ok(Placed::Ours),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(Placed::SomeoneElses),
        Err(e) => Err(NodeError::state(
            path,
            format!("cannot place the key file: {e}"),
        )),
    }
}

fn sync_dir(dir: &Path) -> Result<(), NodeError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| NodeError::state(dir, format!("cannot sync the state folder: {e}")))
}

/// The key file's place in `state_dir`.
pub fn key_file_path(state_dir: &Path) -> PathBuf {
    state_dir.join(KEY_FILE_NAME)
}
