//! The person's POSIX account as the worker pool sees it: whether it exists and its uid,
//! asked of the user database (NSS) the helper uses, and noticed when it goes away.

use std::ffi::CString;
use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a lookup of the account holds before an idle worker is handed a request:
/// after `userdel`, a person's workers would otherwise keep serving as a uid that no
/// longer names anyone. A lookup reads the user database (a few system calls and a parse
/// of `/etc/passwd`); once a second per person costs nothing measurable even in a burst,
/// and bounds how long a removed account is still served.
pub(crate) const ACCOUNT_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What a look at the account found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The account exists; workers started in this era still run as it.
    Present {
        /// Counts the times the account went away or changed uid: a worker started in an
        /// older era runs as a uid that is no longer the person's.
        era: u64,
    },
    /// The account is gone.
    Missing,
}

/// The last look at one account, redone once it is older than the interval.
#[derive(Debug)]
pub(crate) struct AccountWatch {
    name: String,
    interval: Duration,
    last: Mutex<Last>,
}

#[derive(Debug, Default)]
struct Last {
    /// The uid last found; `None` before the first look or while the account is gone.
    uid: Option<u32>,
    /// When the account was last looked up.
    at: Option<Instant>,
    era: u64,
}

impl AccountWatch {
    /// Watches the account `name`, looked up again at most once per `interval`.
    pub(crate) fn new(name: String, interval: Duration) -> AccountWatch {
        AccountWatch {
            name,
            interval,
            last: Mutex::default(),
        }
    }

    /// The account's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The account now: looked up if `fresh` (a worker is about to start as it) or the
    /// last look is older than the interval, else as last seen.
    pub(crate) fn look(&self, fresh: bool) -> io::Result<Seen> {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let due = fresh || last.at.is_none_or(|at| at.elapsed() >= self.interval);
        if due {
            let uid = uid_of(&self.name)?;
            if last.uid.is_some() && last.uid != uid {
                last.era += 1;
            }
            last.uid = uid;
            last.at = Some(Instant::now());
        }
        Ok(match last.uid {
            Some(_) => Seen::Present { era: last.era },
            None => Seen::Missing,
        })
    }
}

/// Bytes of the buffer `getpwnam_r` fills; grown when an entry needs more.
const PASSWD_BUFFER_BYTES: usize = 1024;
/// The largest buffer tried before giving up.
const PASSWD_BUFFER_MAX_BYTES: usize = 1024 * 1024;

/// The uid of the user `name`, or `None` when there is no such user.
fn uid_of(name: &str) -> io::Result<Option<u32>> {
    let name = CString::new(name).map_err(io::Error::other)?;
    let mut size = PASSWD_BUFFER_BYTES;
    loop {
        let mut buffer = vec![0 as libc::c_char; size];
        // SAFETY: zeroed is a valid passwd (pointers null); getpwnam_r only writes into
        // `entry` and `buffer`, both live and of the sizes given.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe {
            libc::getpwnam_r(
                name.as_ptr(),
                &mut entry,
                buffer.as_mut_ptr(),
                buffer.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(entry.pw_uid)),
            libc::ERANGE if size < PASSWD_BUFFER_MAX_BYTES => size *= 4,
            // "Not found" comes back as one of these from some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}
