//! The helper install: `ferry-posix-helper` copied into place as `root:ferry 4750`.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::HostReport;
use crate::error::{HostError, fs_error, io_error};
use crate::names::SERVICE_USER;

/// The helper's file name, also beside the `ferry` binary it ships with.
pub const HELPER_NAME: &str = "ferry-posix-helper";
/// The installed helper's mode: setuid root, run by root and the service group only.
pub const HELPER_MODE: u32 = 0o4750;

/// The helper shipped beside the running program (`ferry` and `ferry-posix-helper` are
/// built and packaged together).
pub fn default_helper_source() -> std::io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .ok_or_else(|| std::io::Error::other(format!("{} has no parent folder", exe.display())))?;
    Ok(dir.join(HELPER_NAME))
}

/// Copies the helper to `target` as `root:<service gid> 4750`, replacing an older copy in
/// one rename. The folder holding it must be root's and writable by no one else.
pub(crate) fn install_helper(
    source: &Path,
    bytes: &[u8],
    target: &Path,
    service_gid: u32,
    report: &mut HostReport,
) -> Result<(), HostError> {
    check_helper_path(target)?;
    let folder = target.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(folder)
        .map_err(io_error(format!("creating {}", folder.display())))?;
    let meta = std::fs::metadata(folder).map_err(io_error(folder.display().to_string()))?;
    if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return Err(HostError::Conflict(format!(
            "{} must be owned by root and writable by no one else to hold a setuid helper \
             (owner uid {}, mode {:04o})",
            folder.display(),
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }

    if let Ok(existing) = std::fs::symlink_metadata(target)
        && existing.is_file()
        && existing.uid() == 0
        && existing.gid() == service_gid
        && existing.mode() & 0o7777 == HELPER_MODE
        && std::fs::read(target).is_ok_and(|current| current == bytes)
    {
        return Ok(());
    }

    let temp = folder.join(format!(".{HELPER_NAME}.ferry-tmp-{}", std::process::id()));
    let written = write_helper(&temp, bytes, service_gid).and_then(|()| {
        std::fs::rename(&temp, target).map_err(io_error(format!(
            "moving the helper into place at {}",
            target.display()
        )))
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    report.note(format!(
        "installed {} from {} (root:{SERVICE_USER} {HELPER_MODE:04o})",
        target.display(),
        source.display()
    ));
    Ok(())
}

pub(crate) fn check_helper_path(target: &Path) -> Result<(), HostError> {
    if target.is_absolute() && target.file_name().is_some() {
        Ok(())
    } else {
        Err(HostError::Conflict(format!(
            "the helper path {} must be an absolute file path (site.helper_path)",
            target.display()
        )))
    }
}

pub(crate) fn read_helper(source: &Path) -> Result<Vec<u8>, HostError> {
    let context = || {
        format!(
            "reading the helper {} (build it with `cargo build -p ferry-posix-helper`, \
             or name it with --helper-source)",
            source.display()
        )
    };
    let mut file = std::fs::File::open(source).map_err(io_error(context()))?;
    let meta = file.metadata().map_err(io_error(context()))?;
    if !meta.is_file() || meta.len() == 0 {
        return Err(HostError::Conflict(format!(
            "{} is not a helper binary",
            source.display()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(io_error(context()))?;
    Ok(bytes)
}

fn write_helper(temp: &Path, bytes: &[u8], service_gid: u32) -> Result<(), HostError> {
    let context = || format!("writing {}", temp.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(temp)
        .map_err(io_error(context()))?;
    file.write_all(bytes).map_err(io_error(context()))?;
    // Owner before mode: a chown clears the setuid bit.
    rustix::fs::fchown(
        file.as_fd(),
        Some(rustix::fs::Uid::from_raw(0)),
        Some(rustix::fs::Gid::from_raw(service_gid)),
    )
    .map_err(|e| fs_error(&temp.display().to_string(), e))?;
    rustix::fs::fchmod(file.as_fd(), Mode::from_raw_mode(HELPER_MODE))
        .map_err(|e| fs_error(&temp.display().to_string(), e))?;
    file.sync_all().map_err(io_error(context()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_ships_beside_ferry() {
        assert!(
            default_helper_source()
                .unwrap()
                .ends_with("ferry-posix-helper")
        );
    }

    #[test]
    fn a_relative_helper_path_is_refused() {
        for bad in ["lib/helper", "", "/"] {
            let err = check_helper_path(Path::new(bad)).unwrap_err();
            assert!(err.to_string().contains("absolute"), "{bad:?}: {err}");
        }
        check_helper_path(Path::new(ferry_config::DEFAULT_HELPER_PATH)).unwrap();
    }

    #[test]
    fn a_missing_or_empty_helper_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_helper(&dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("--helper-source"), "{err}");
        std::fs::write(dir.path().join("empty"), "").unwrap();
        let err = read_helper(&dir.path().join("empty")).unwrap_err();
        assert!(err.to_string().contains("not a helper"), "{err}");
        let err = read_helper(dir.path()).unwrap_err();
        assert!(err.to_string().contains("not a helper"), "{err}");
    }
}
