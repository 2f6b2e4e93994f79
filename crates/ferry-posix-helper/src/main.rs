//! `ferry-posix-helper`: the setuid bridge of host mode (spec tools T-ID).
//!
//! ```text
//! ferry-posix-helper <person-id> <absolute-program> [args...]
//! ```
//!
//! Installed `root:ferry 4750`, so only root and the service group can even start it.
//! It then:
//!
//! 1. authorizes the caller by its *real* uid: root, or the user `ferry`; anyone else is
//!    refused with exit code 126 before anything else happens;
//! 2. checks the person id (`[a-z0-9][a-z0-9_-]{0,21}`) and looks up the user
//!    `fy_person_<id>`, whose uid and primary gid must both be 100000 or above;
//! 3. drops privilege process-wide, in this order: `setgroups` (the groups
//!    `getgrouplist` gives for that user: its own group, its `fy_circle_*` groups,
//!    `fy_shared`), `setresgid`, `setresuid`;
//! 4. verifies the drop cannot be undone: `setuid(0)` and `setgid(0)` must fail, and the
//!    real, effective and saved ids and the supplementary groups must be exactly the
//!    person's; otherwise it stops;
//! 5. builds the environment from nothing (the person's HOME, USER, LOGNAME, a fixed
//!    PATH and LANG; not one variable of the caller's), sets the umask to 077, marks
//!    every descriptor but stdin, stdout and stderr close-on-exec, changes to the
//!    person's home directory and executes the program.
//!
//! Nothing of the caller's environment passes: the caller (the gateway) may hold
//! secrets there, and the program runs as the person, who can read its
//! `/proc/<pid>/environ`. What ferry's own worker needs comes over its socket. The
//! caller's umask is not kept either: one of 000 would make everything the person's
//! programs create writable by all.
//!
//! It does nothing else, and nothing at all as root beyond reading the user and group
//! databases and the drop itself. No async, no threads, one dependency (`nix`).
//!
//! Exit codes of the helper itself (the program's own exit code passes through once it
//! runs): 126 the caller is not authorized; 125 a usage error, an unknown or unsuitable
//! person, or a failed drop; 127 the program could not be executed.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

use nix::sys::signal::{SigHandler, Signal, signal};
use nix::unistd::{self, Gid, Uid, User};

/// The service user whose real uid may call the helper (besides root).
const SERVICE_USER: &str = "ferry";
/// The POSIX user of person `<id>` is `fy_person_<id>`.
const PERSON_PREFIX: &str = "fy_person_";
/// Persons' uids and primary gids start here; anything lower is never a person.
const PERSON_ID_MIN: u32 = 100_000;
/// The longest person id, in bytes.
const ID_MAX_BYTES: usize = 22;
/// The only PATH a program run by the helper sees.
const SAFE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The locale every program run by the helper starts with.
const SAFE_LANG: &str = "C.UTF-8";
/// The umask every program run by the helper starts with: what it creates is the
/// person's alone until it says otherwise.
const PROGRAM_UMASK: u32 = 0o077;

/// The caller is not root or `ferry`.
const EXIT_REFUSED: u8 = 126;
/// Usage error, unknown person, or the drop failed.
const EXIT_FAILED: u8 = 125;
/// `execve` itself failed.
const EXIT_EXEC: u8 = 127;

const USAGE: &str = "usage: ferry-posix-helper <person-id> <absolute-program> [args...]";

/// Why the helper stops; each maps to one exit code.
#[derive(Debug, PartialEq, Eq)]
enum Failure {
    Refused(String),
    Failed(String),
}

/// What was asked, after parsing.
#[derive(Debug, PartialEq, Eq)]
struct Invocation {
    person: String,
    program: CString,
    /// The program's argv, `argv[0]` (the program path) included.
    argv: Vec<CString>,
}

fn main() -> ExitCode {
    match run() {
        // `run` only returns when something stopped it: a successful exec never comes back.
        Ok(never) => match never {},
        Err(Failure::Refused(why)) => {
            eprintln!("ferry-posix-helper: {why}");
            ExitCode::from(EXIT_REFUSED)
        }
        Err(Failure::Failed(why)) => {
            eprintln!("ferry-posix-helper: {why}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn run() -> Result<std::convert::Infallible, Failure> {
    authorize()?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let invocation = parse_args(&args).map_err(Failure::Failed)?;
    let user = person_user(&invocation.person)?;
    let groups = unistd::getgrouplist(&cstring(user.name.as_bytes())?, user.gid)
        .map_err(|e| Failure::Failed(format!("cannot list the groups of {}: {e}", user.name)))?;
    if groups.iter().any(|g| g.as_raw() == 0) {
        return Err(Failure::Failed(format!(
            "{} is in the root group; refusing",
            user.name
        )));
    }

    drop_privilege(&user, &groups).map_err(Failure::Failed)?;
    verify_dropped(&user, &groups).map_err(|why| {
        // Nothing may run after a failed check; the exit below is all that is left.
        Failure::Failed(format!("privilege drop not verified, stopping: {why}"))
    })?;

    // From here on the process is the person and nothing else.
    let env = child_env(&user.name, user.dir.as_os_str())?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(PROGRAM_UMASK));
    close_inherited_descriptors().map_err(Failure::Failed)?;
    unistd::chdir(&user.dir).map_err(|e| {
        Failure::Failed(format!(
            "cannot enter {}'s home {}: {e}",
            user.name,
            user.dir.display()
        ))
    })?;
    // Rust starts every program with SIGPIPE ignored, and an ignored signal survives
    // exec: give the program the default a shell would.
    // SAFETY: installs SIG_DFL, no handler code; the process has a single thread.
    unsafe { signal(Signal::SIGPIPE, SigHandler::SigDfl) }
        .map_err(|e| Failure::Failed(format!("cannot reset SIGPIPE: {e}")))?;

    let errno = match unistd::execve(&invocation.program, &invocation.argv, &env) {
        Ok(never) => match never {},
        Err(errno) => errno,
    };
    eprintln!(
        "ferry-posix-helper: cannot execute {}: {errno}",
        invocation.program.to_string_lossy()
    );
    std::process::exit(EXIT_EXEC.into());
}

/// Admits a real uid of root or of the service user, nothing else.
fn authorize() -> Result<(), Failure> {
    let real = unistd::getuid();
    if real.is_root() {
        return Ok(());
    }
    match User::from_name(SERVICE_USER) {
        Ok(Some(service)) if service.uid == real && !service.uid.is_root() => Ok(()),
        _ => Err(Failure::Refused(format!(
            "refused: only root and the user {SERVICE_USER:?} may run this (real uid {real})"
        ))),
    }
}

/// Parses `<person-id> <absolute-program> [args...]` (the arguments after argv[0]).
fn parse_args(args: &[OsString]) -> Result<Invocation, String> {
    let [person, program, rest @ ..] = args else {
        return Err(USAGE.to_owned());
    };
    let person = person
        .to_str()
        .filter(|p| valid_person_id(p))
        .ok_or_else(|| {
            format!(
                "person id {person:?} is invalid: use 1 to 22 of a-z, 0-9, '_' and '-', \
                 starting with a letter or digit"
            )
        })?
        .to_owned();
    if !program.as_bytes().starts_with(b"/") {
        return Err(format!(
            "the program must be an absolute path, not {program:?}"
        ));
    }
    let program = to_cstring(program)?;
    let mut argv = Vec::with_capacity(rest.len() + 1);
    argv.push(program.clone());
    for arg in rest {
        argv.push(to_cstring(arg)?);
    }
    Ok(Invocation {
        person,
        program,
        argv,
    })
}

/// `[a-z0-9][a-z0-9_-]{0,21}`, as `ferry_site::check_id`.
fn valid_person_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= ID_MAX_BYTES
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

fn to_cstring(arg: &OsStr) -> Result<CString, String> {
    CString::new(arg.as_bytes()).map_err(|_| format!("argument {arg:?} contains a NUL byte"))
}

fn cstring(bytes: &[u8]) -> Result<CString, Failure> {
    CString::new(bytes).map_err(|_| Failure::Failed("a name contains a NUL byte".to_owned()))
}

/// The person's POSIX user, which must exist and have ids in the persons' range.
fn person_user(person: &str) -> Result<User, Failure> {
    let name = format!("{PERSON_PREFIX}{person}");
    let user = User::from_name(&name)
        .map_err(|e| Failure::Failed(format!("cannot look up the user {name}: {e}")))?
        .ok_or_else(|| {
            Failure::Failed(format!(
                "there is no user {name}: run `ferry site init --mode host` as root"
            ))
        })?;
    if user.uid.as_raw() < PERSON_ID_MIN || user.gid.as_raw() < PERSON_ID_MIN {
        return Err(Failure::Failed(format!(
            "{name} has uid {} and gid {}; a person's ids start at {PERSON_ID_MIN}",
            user.uid, user.gid
        )));
    }
    Ok(user)
}

/// setgroups, setresgid, setresuid: in that order, for the whole process.
fn drop_privilege(user: &User, groups: &[Gid]) -> Result<(), String> {
    unistd::setgroups(groups).map_err(|e| format!("setgroups: {e}"))?;
    unistd::setresgid(user.gid, user.gid, user.gid).map_err(|e| format!("setresgid: {e}"))?;
    unistd::setresuid(user.uid, user.uid, user.uid).map_err(|e| format!("setresuid: {e}"))?;
    Ok(())
}

/// Proves the drop holds: root cannot be regained and every id is the person's.
fn verify_dropped(user: &User, groups: &[Gid]) -> Result<(), String> {
    if unistd::setuid(Uid::from_raw(0)).is_ok() {
        return Err("setuid(0) succeeded".to_owned());
    }
    if unistd::setgid(Gid::from_raw(0)).is_ok() {
        return Err("setgid(0) succeeded".to_owned());
    }
    let uids = unistd::getresuid().map_err(|e| format!("getresuid: {e}"))?;
    if [uids.real, uids.effective, uids.saved] != [user.uid; 3] {
        return Err(format!("uids are {uids:?}, not {}", user.uid));
    }
    let gids = unistd::getresgid().map_err(|e| format!("getresgid: {e}"))?;
    if [gids.real, gids.effective, gids.saved] != [user.gid; 3] {
        return Err(format!("gids are {gids:?}, not {}", user.gid));
    }
    let mut have = unistd::getgroups().map_err(|e| format!("getgroups: {e}"))?;
    let mut want = groups.to_vec();
    for list in [&mut have, &mut want] {
        list.sort_by_key(|g| g.as_raw());
        list.dedup();
    }
    if have != want {
        return Err(format!("groups are {have:?}, not {want:?}"));
    }
    Ok(())
}

/// The program's whole environment, made from nothing: the person's HOME, USER and
/// LOGNAME, the fixed PATH and LANG. Sorted by name.
fn child_env(user: &str, home: &OsStr) -> Result<Vec<CString>, Failure> {
    let pairs: [(&OsStr, &OsStr); 5] = [
        (OsStr::new("HOME"), home),
        (OsStr::new("LANG"), OsStr::new(SAFE_LANG)),
        (OsStr::new("LOGNAME"), OsStr::new(user)),
        (OsStr::new("PATH"), OsStr::new(SAFE_PATH)),
        (OsStr::new("USER"), OsStr::new(user)),
    ];
    pairs
        .into_iter()
        .map(|(name, value)| {
            let mut entry = name.as_bytes().to_vec();
            entry.push(b'=');
            entry.extend_from_slice(value.as_bytes());
            cstring(&entry)
        })
        .collect()
}

/// Marks every descriptor above stderr close-on-exec, so nothing the caller left open
/// (the site database, a socket) reaches the person's program.
fn close_inherited_descriptors() -> Result<(), String> {
    use nix::libc::{F_GETFD, F_SETFD, FD_CLOEXEC, fcntl};
    let entries = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("cannot list open descriptors in /proc/self/fd: {e}"))?;
    let fds: Vec<i32> = entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: fcntl on a raw number only reads and sets that descriptor's flags; the
        // listing's own descriptor, closed by now, just answers EBADF.
        let flags = unsafe { fcntl(fd, F_GETFD) };
        if flags < 0 {
            continue;
        }
        // SAFETY: as above.
        if unsafe { fcntl(fd, F_SETFD, flags | FD_CLOEXEC) } < 0 {
            return Err(format!(
                "cannot mark descriptor {fd} close-on-exec: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn parses_person_program_and_arguments() {
        let inv = parse_args(&args(&["alice", "/usr/bin/id", "-u", "--", "x y"])).unwrap();
        assert_eq!(inv.person, "alice");
        assert_eq!(inv.program, c("/usr/bin/id"));
        assert_eq!(
            inv.argv,
            vec![c("/usr/bin/id"), c("-u"), c("--"), c("x y")],
            "argv[0] is the program, the rest pass through untouched"
        );
    }

    #[test]
    fn a_program_alone_gets_argv0() {
        let inv = parse_args(&args(&["p1", "/bin/true"])).unwrap();
        assert_eq!(inv.argv, vec![c("/bin/true")]);
    }

    #[test]
    fn missing_arguments_are_a_usage_error() {
        for list in [&[][..], &["alice"][..]] {
            assert_eq!(parse_args(&args(list)).unwrap_err(), USAGE, "{list:?}");
        }
    }

    #[test]
    fn person_ids_follow_the_site_grammar() {
        for good in ["a", "me", "q2-report", "0_x", &"a".repeat(22)] {
            assert!(parse_args(&args(&[good, "/bin/true"])).is_ok(), "{good}");
        }
        for bad in [
            "",
            "A",
            "-a",
            "_a",
            "a/b",
            "a.b",
            "../a",
            "é",
            " a",
            &"a".repeat(23),
        ] {
            let err = parse_args(&args(&[bad, "/bin/true"])).unwrap_err();
            assert!(err.contains("invalid"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn invalid_utf8_person_is_refused() {
        let person = OsString::from_vec(vec![b'a', 0xff]);
        let err = parse_args(&[person, "/bin/true".into()]).unwrap_err();
        assert!(err.contains("invalid"), "{err}");
    }

    #[test]
    fn the_program_must_be_absolute() {
        for program in ["id", "./id", "bin/id", "", "~/id"] {
            let err = parse_args(&args(&["alice", program])).unwrap_err();
            assert!(err.contains("absolute"), "{program:?}: {err}");
        }
    }

    #[test]
    fn nul_bytes_are_refused() {
        let err = parse_args(&args(&["alice", "/bin/true", "a\0b"])).unwrap_err();
        assert!(err.contains("NUL"), "{err}");
        let err = parse_args(&args(&["alice", "/bin/\0true"])).unwrap_err();
        assert!(err.contains("NUL"), "{err}");
    }

    #[test]
    fn environment_is_made_from_nothing() {
        let env = child_env("fy_person_alice", OsStr::new("/srv/site/home/alice")).unwrap();
        let env: Vec<String> = env.into_iter().map(|c| c.into_string().unwrap()).collect();
        assert_eq!(
            env,
            [
                "HOME=/srv/site/home/alice",
                "LANG=C.UTF-8",
                "LOGNAME=fy_person_alice",
                "PATH=/usr/local/bin:/usr/bin:/bin",
                "USER=fy_person_alice",
            ]
        );
    }

    #[test]
    fn a_home_with_a_nul_byte_is_refused() {
        let home = OsString::from_vec(b"/h\0x".to_vec());
        assert!(child_env("u", &home).is_err());
    }
}
