//! Whether a POSIX account exists, asked of the user database (NSS) the helper uses.

use std::ffi::CString;
use std::io;

/// Bytes of the buffer `getpwnam_r` fills; grown when an entry needs more.
const PASSWD_BUFFER_BYTES: usize = 1024;
/// The largest buffer tried before giving up.
const PASSWD_BUFFER_MAX_BYTES: usize = 1024 * 1024;

/// Whether the user `name` exists.
pub(crate) fn exists(name: &str) -> io::Result<bool> {
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
            0 => return Ok(!found.is_null()),
            libc::ERANGE if size < PASSWD_BUFFER_MAX_BYTES => size *= 4,
            // "Not found" comes back as one of these from some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(false),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}
