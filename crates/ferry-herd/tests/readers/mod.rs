//! What the file and definition tests share: readers that watch what is read, FIFOs,
//! reading as someone other than root, and calls that must not block.

#![allow(dead_code)] // each test binary uses its own share of the helpers

use std::fs::File;
use std::io::Seek;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use ferry_herd::HerdError;
use ferry_herd::reader::{Direct, Reader};

/// The uid and gid reads are made as by [`as_nobody`].
pub const NOBODY: u32 = 65534;

/// A fresh folder, by its canonical path (the temporary folder may be reached by a link).
pub fn folder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// Writes `bytes` at `path`, making its folder.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Makes a FIFO at `path`: opening it for reading blocks unless done without blocking.
pub fn fifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
}

/// Runs `f` on a thread of its own and fails if it has not returned within 10 s (a
/// FIFO opened for reading with no writer blocks for ever).
pub fn within_time<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the call blocked")
}

/// Runs `f` on a thread whose file-system identity is `nobody`: root's permission to
/// read anything is gone for that thread alone (the kernel drops the file capabilities
/// with a non-zero fsuid), so a 0600 file of root's is unreadable there, as for a person.
pub fn as_nobody<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    within_time(move || {
        unsafe {
            libc::setfsgid(NOBODY);
            libc::setfsuid(NOBODY);
            // setfsuid answers the previous value; asking again shows it took.
            assert_eq!(libc::setfsuid(u32::MAX) as u32, NOBODY);
        }
        f()
    })
}

/// Opens as [`Direct`] does, and keeps a duplicate of every descriptor it hands out:
/// duplicates share the file offset, so a test sees how far each file was read.
#[derive(Default)]
pub struct Watching {
    pub opened: Mutex<Vec<(PathBuf, File)>>,
}

impl Reader for Watching {
    fn open(&self, path: &Path) -> Result<File, HerdError> {
        let file = Direct.open(path)?;
        let twin = file.try_clone().unwrap();
        self.opened.lock().unwrap().push((path.to_path_buf(), twin));
        Ok(file)
    }
}

impl Watching {
    /// The paths asked for, in order.
    pub fn asked(&self) -> Vec<PathBuf> {
        self.opened
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// How far the file opened for `path` has been read.
    pub fn offset(&self, path: &Path) -> u64 {
        let mut opened = self.opened.lock().unwrap();
        let (_, file) = opened
            .iter_mut()
            .find(|(p, _)| p == path)
            .expect("that path was not opened");
        file.stream_position().unwrap()
    }
}
