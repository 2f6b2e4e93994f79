//! The person's POSIX account as the worker pool sees it: whether it exists, its uid and
//! its groups, asked of the user database (NSS) the helper uses, and noticed when it goes
//! away or changes.

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
        /// Counts the times the account went away or changed its uid or its groups: a
        /// worker started in an older era runs as a uid, or with groups, that are no
        /// longer the person's.
        era: u64,
        /// The account's uid now.
        uid: u32,
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
    /// The account last found; `None` before the first look or while the account is gone.
    account: Option<Account>,
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
            let account = account_of(&self.name)?;
            if last.account.is_some() && last.account != account {
                last.era += 1;
            }
            last.account = account;
            last.at = Some(Instant::now());
        }
        Ok(match &last.account {
            Some(account) => Seen::Present {
                era: last.era,
                uid: account.uid,
            },
            None => Seen::Missing,
        })
    }
}

/// What a worker started now would run as: the helper drops to the account's uid and
/// gid with the groups `getgrouplist` gives (its own, its circles', `fy_shared`). A
/// worker keeps the groups it started with, so a person taken out of a circle's group
/// must not be served by one started before.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Account {
    uid: u32,
    gid: u32,
    /// Sorted, without repeats.
    groups: Vec<u32>,
}

/// The account `name` with its groups, or `None` when there is no such user.
fn account_of(name: &str) -> io::Result<Option<Account>> {
    let name = CString::new(name).map_err(io::Error::other)?;
    let Some((uid, gid)) = ids_of(&name)? else {
        return Ok(None);
    };
    let mut groups = groups_of(&name, gid)?;
    groups.sort_unstable();
    groups.dedup();
    Ok(Some(Account { uid, gid, groups }))
}

/// Groups `getgrouplist` is asked for at first; asked again with the size it names.
const GROUPS_FIRST_COUNT: usize = 64;
/// The most groups accepted (the kernel's own limit, `NGROUPS_MAX`).
const GROUPS_MAX_COUNT: usize = 65_536;

/// The groups of the user `name` whose primary group is `gid`, as the helper sets them.
fn groups_of(name: &CString, gid: u32) -> io::Result<Vec<u32>> {
    let mut count = GROUPS_FIRST_COUNT;
    loop {
        let mut groups = vec![0 as libc::gid_t; count];
        let mut found = count as libc::c_int;
        // SAFETY: `groups` holds `found` entries; getgrouplist writes at most that many
        // and sets `found` to how many there are.
        let rc = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut found) };
        let found = usize::try_from(found).unwrap_or(0);
        if rc >= 0 {
            groups.truncate(found.min(count));
            return Ok(groups);
        }
        // -1 with `found` past `count`: the list did not fit; anything else is a failure.
        if found <= count || found > GROUPS_MAX_COUNT {
            return Err(io::Error::other(format!(
                "the groups of {} cannot be listed",
                name.to_string_lossy()
            )));
        }
        count = found;
    }
}

/// Bytes of the buffer `getpwnam_r` fills; grown when an entry needs more.
const PASSWD_BUFFER_BYTES: usize = 1024;
/// The largest buffer tried before giving up.
const PASSWD_BUFFER_MAX_BYTES: usize = 1024 * 1024;

/// The uid and primary gid of the user `name`, or `None` when there is no such user.
fn ids_of(name: &CString) -> io::Result<Option<(u32, u32)>> {
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
            0 => return Ok(Some((entry.pw_uid, entry.pw_gid))),
            libc::ERANGE if size < PASSWD_BUFFER_MAX_BYTES => size *= 4,
            // "Not found" comes back as one of these from some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_comes_with_its_groups_as_the_helper_would_set_them() {
        let root = account_of("root").unwrap().expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0), "{:?}", root.groups);
        assert!(
            root.groups.windows(2).all(|w| w[0] < w[1]),
            "sorted, no repeats"
        );
        assert_eq!(account_of("fy_no_such_person_here").unwrap(), None);
        assert!(account_of("nul\0inside").is_err());
    }

    #[test]
    fn the_era_stays_while_the_account_does() {
        let watch = AccountWatch::new("root".into(), Duration::ZERO);
        let first = watch.look(true).unwrap();
        assert!(matches!(first, Seen::Present { uid: 0, .. }), "{first:?}");
        assert_eq!(watch.look(false).unwrap(), first);
        let missing = AccountWatch::new("fy_no_such_person_here".into(), Duration::ZERO);
        assert_eq!(missing.look(true).unwrap(), Seen::Missing);
    }
}
