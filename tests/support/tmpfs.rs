//! A small file system of a set size, mounted for one test: a disk that fills for real
//! (`ENOSPC` from the kernel) under the folder a write goes to. Mounting needs root, as
//! CI runs; elsewhere the test fails saying so, it never skips.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `size` bytes mounted over a folder, with that folder's owner and mode;
/// unmounted on drop (what was in the folder before shows again).
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts over `path` (made first when missing).
    #[track_caller]
    pub fn mount(path: &Path, size: u64) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap();
        let meta = std::fs::metadata(path).unwrap();
        let options = format!(
            "size={size},mode={:o},uid={},gid={}",
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid()
        );
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(path)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "mounting a {size}-byte tmpfs on {} failed (these tests need root, as CI runs \
             them): {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs {
            path: path.to_owned(),
        }
    }

    /// The bytes a file may still take there.
    pub fn available(&self) -> u64 {
        let stat = rustix::fs::statvfs(&self.path).unwrap();
        stat.f_bavail * stat.f_frsize
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a process of the test may still hold a file there.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
