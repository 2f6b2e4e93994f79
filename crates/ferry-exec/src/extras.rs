//! What a herd worker's run adds to a command (spec handoffs.md H-WHERE), checked before
//! anything starts: its variables, and the programs outside the person's trees it may run.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::ExecError;

/// What every added variable's name starts with.
pub(crate) const ENV_PREFIX: &str = "FERRY_HERD_";

/// Refuses any variable but `FERRY_HERD_[A-Z0-9_]+` with a value free of NUL: the
/// allowlist stays the allowlist, and nothing of the service's own (`PATH`, `LD_*`)
/// can be set through this door.
pub(crate) fn check_env(env: &[(String, String)]) -> Result<(), ExecError> {
    for (name, value) in env {
        let rest = name.strip_prefix(ENV_PREFIX).unwrap_or_default();
        let named = !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if !named {
            return Err(ExecError::InvalidWorkerRun(format!(
                "the variable name {name:?} is not {ENV_PREFIX} followed by capital letters, \
                 digits and `_`; a worker gets no other variable"
            )));
        }
        if value.contains('\0') {
            return Err(ExecError::InvalidWorkerRun(format!(
                "the value of {name} contains a NUL byte"
            )));
        }
    }
    Ok(())
}

/// One program a command may run: its real path and the file itself, opened (`O_PATH`)
/// when it was checked, so a Landlock rule names that very file.
pub(crate) struct Program {
    pub path: PathBuf,
    pub file: OwnedFd,
}

/// Checks each program: absolute, a regular file, named by its real path (no link on
/// the way, so the path bwrap binds is the file opened here).
pub(crate) fn check_programs(programs: &[PathBuf]) -> Result<Vec<Program>, ExecError> {
    programs.iter().map(|path| check_program(path)).collect()
}

fn check_program(path: &Path) -> Result<Program, ExecError> {
    let refused =
        |why: &str| ExecError::InvalidWorkerRun(format!("the program {} {why}", path.display()));
    if !path.is_absolute() {
        return Err(refused("is not an absolute path"));
    }
    let file = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| refused(&format!("cannot be opened: {}", io::Error::from(e))))?;
    let stat = rustix::fs::fstat(&file).map_err(|e| refused(&io::Error::from(e).to_string()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(refused("is not a regular file"));
    }
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_fd().as_raw_fd()))
        .map_err(|e| refused(&e.to_string()))?;
    if real != path {
        return Err(refused(&format!(
            "is not named by its real path ({}); name the file itself, not a link to it",
            real.display()
        )));
    }
    Ok(Program {
        path: path.to_path_buf(),
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> Vec<(String, String)> {
        vec![(name.to_owned(), value.to_owned())]
    }

    #[test]
    fn only_ferry_herd_names_without_nul_pass() {
        for name in [
            "FERRY_HERD_LABEL",
            "FERRY_HERD_A",
            "FERRY_HERD_9_X",
            "FERRY_HERD__",
        ] {
            check_env(&env(name, "v")).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        for name in [
            "PATH",
            "LD_PRELOAD",
            "FERRY_HERD_",
            "FERRY_HERDX",
            "ferry_herd_x",
            "FERRY_HERD_label",
            "FERRY_HERD_A=B",
            "FERRY_HERD_A B",
            "FERRY_HERD_\u{c9}",
            "",
        ] {
            let err = check_env(&env(name, "v")).unwrap_err();
            assert_eq!(err.code(), ferry_codes::Code::InvalidCommand, "{name}");
        }
        let err = check_env(&env("FERRY_HERD_LABEL", "a\0b")).unwrap_err();
        assert!(matches!(err, ExecError::InvalidWorkerRun(_)), "{err:?}");
        // One bad variable among good ones refuses them all.
        let mut mixed = env("FERRY_HERD_LABEL", "ok");
        mixed.extend(env("PATH", "/tmp"));
        assert!(check_env(&mixed).is_err());
    }

    #[test]
    fn a_program_must_be_a_regular_file_named_by_its_real_path() {
        let dir = tempfile::tempdir().unwrap();
        let real_dir = dir.path().canonicalize().unwrap();
        let program = real_dir.join("prog");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let checked = check_programs(std::slice::from_ref(&program)).unwrap();
        assert_eq!(checked[0].path, program);

        let link = real_dir.join("link");
        std::os::unix::fs::symlink(&program, &link).unwrap();
        let fifo = real_dir.join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::from_raw_mode(0o600)).unwrap();
        let refused = [
            (PathBuf::from("prog"), "absolute"),
            (link, "real path"),
            (real_dir.clone(), "regular file"),
            (fifo, "regular file"),
            (real_dir.join("missing"), "cannot be opened"),
        ];
        for (path, why) in refused {
            let err = check_programs(&[program.clone(), path.clone()])
                .err()
                .unwrap_or_else(|| panic!("{} passed", path.display()));
            assert!(err.to_string().contains(why), "{}: {err}", path.display());
        }
    }
}
