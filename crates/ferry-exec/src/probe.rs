//! What [`SandboxKind::Auto`](crate::ops::SandboxKind::Auto) runs commands in: the
//! strongest sandbox that works on this machine, found once per process.
//!
//! Landlock comes first when the kernel confines everything the default promises: the
//! file system, TCP, and signals and abstract unix sockets to processes outside the run
//! ([`AUTO_LANDLOCK_MIN_ABI`]), and takes the seccomp socket filter that goes with it. Then bubblewrap, when it can really build its namespaces
//! here: the probe runs it once with the options of a real command, since an installed
//! binary says nothing about a kernel or a container that forbids user namespaces. With
//! neither, commands are refused ([`ExecError::NoSandbox`]); running them unconfined is
//! an explicit choice of the operator, never a fallback.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use landlock::{ABI, LandlockStatus, RestrictSelf};

use crate::ops::SandboxKind;
use crate::sandbox::Bwrap;
use crate::{DEFAULT_BWRAP, ExecError};

/// The first Landlock ABI that scopes signals and abstract unix sockets (Linux 6.12):
/// below it a confined command could still kill the service, so `auto` passes it over.
pub const AUTO_LANDLOCK_MIN_ABI: ABI = ABI::V6;
/// How long the bubblewrap probe may take before it counts as not working.
const BWRAP_PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the probe looks whether bubblewrap is done.
const BWRAP_PROBE_POLL: Duration = Duration::from_millis(2);
/// Bytes of bubblewrap's complaint kept for the message.
const BWRAP_STDERR_MAX_BYTES: u64 = 512;

/// A sandbox that works here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strongest {
    /// Landlock, with the kernel's ABI version.
    Landlock {
        /// The highest Landlock ABI the kernel offers.
        abi: i32,
    },
    /// bubblewrap at this path.
    Bwrap {
        /// Where the working bwrap binary is.
        bwrap: PathBuf,
    },
}

impl fmt::Display for Strongest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strongest::Landlock { abi } => write!(f, "landlock (ABI {abi})"),
            Strongest::Bwrap { bwrap } => write!(f, "bwrap ({})", bwrap.display()),
        }
    }
}

/// Why neither sandbox works: one sentence for each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// Why Landlock cannot be used here.
    pub landlock: String,
    /// Why bubblewrap cannot be used here.
    pub bwrap: String,
}

impl From<&Unavailable> for ExecError {
    fn from(why: &Unavailable) -> ExecError {
        ExecError::NoSandbox {
            landlock: why.landlock.clone(),
            bwrap: why.bwrap.clone(),
        }
    }
}

/// The strongest sandbox of this machine, with bubblewrap at [`DEFAULT_BWRAP`]; probed
/// on the first call, the answer kept for the life of the process.
pub fn strongest() -> Result<&'static Strongest, ExecError> {
    static FOUND: OnceLock<Result<Strongest, Unavailable>> = OnceLock::new();
    FOUND
        .get_or_init(|| probe(Path::new(DEFAULT_BWRAP)))
        .as_ref()
        .map_err(ExecError::from)
}

/// Probes Landlock, then bubblewrap at `bwrap`, now (no cache).
pub fn probe(bwrap: &Path) -> Result<Strongest, Unavailable> {
    let landlock = match landlock_abi() {
        // Landlock never runs without its socket filter (seccomp.rs), so both must work.
        Some(abi) if ABI::from(abi) >= AUTO_LANDLOCK_MIN_ABI => {
            match crate::seccomp::Filter::sockets(false) {
                Ok(_) => return Ok(Strongest::Landlock { abi }),
                Err(e) => format!("Landlock ABI {abi} is there, but not its socket filter: {e}"),
            }
        }
        Some(abi) => format!(
            "Landlock ABI {abi} cannot keep signals inside a run (ABI {} can, Linux 6.12)",
            AUTO_LANDLOCK_MIN_ABI as i32
        ),
        None => "the kernel offers no Landlock".to_owned(),
    };
    match bwrap_works(bwrap) {
        Ok(()) => Ok(Strongest::Bwrap {
            bwrap: bwrap.to_path_buf(),
        }),
        Err(bwrap) => Err(Unavailable { landlock, bwrap }),
    }
}

/// What a sandbox choice means here, for the log at start: `landlock (ABI 7)`, `bwrap
/// (/usr/bin/bwrap)`, `none`; `Err` says why the chosen sandbox does not work here, and
/// so why commands will be refused.
pub fn in_force(kind: SandboxKind) -> Result<String, String> {
    match kind {
        SandboxKind::None => Ok("none".to_owned()),
        SandboxKind::Auto => strongest()
            .map(|s| s.to_string())
            .map_err(|e| e.to_string()),
        SandboxKind::Landlock => match landlock_abi() {
            Some(abi) => Ok(Strongest::Landlock { abi }.to_string()),
            None => Err("the kernel offers no Landlock".to_owned()),
        },
        SandboxKind::Bwrap => {
            let bwrap = PathBuf::from(DEFAULT_BWRAP);
            bwrap_works(&bwrap)?;
            Ok(Strongest::Bwrap { bwrap }.to_string())
        }
    }
}

/// The kernel's Landlock ABI, asked without restricting anything; `None` without Landlock.
fn landlock_abi() -> Option<i32> {
    let status = RestrictSelf::default().no_new_privs(false).apply().ok()?;
    match status.landlock {
        LandlockStatus::Available {
            effective_abi,
            kernel_abi,
        } => Some(kernel_abi.unwrap_or(effective_abi as i32)),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => None,
    }
}

/// Runs `/bin/true` under bubblewrap with a real command's options (all namespaces, its
/// own `/proc`, no network, no trees); `Err` says why it did not work.
fn bwrap_works(bwrap: &Path) -> Result<(), String> {
    let sandbox = Bwrap::check(bwrap, None, &[], &[], false).map_err(|e| e.to_string())?;
    let mut child = std::process::Command::new(&sandbox.bwrap)
        .args(sandbox.args(Path::new("/")))
        .arg("/bin/true")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("bubblewrap at {} does not start: {e}", bwrap.display()))?;
    let deadline = Instant::now() + BWRAP_PROBE_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(BWRAP_PROBE_POLL),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "bubblewrap at {} did not finish a trial run within {} s",
                    bwrap.display(),
                    BWRAP_PROBE_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for bubblewrap failed: {e}")),
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut said = String::new();
    if let Some(stderr) = child.stderr.take() {
        let _ = stderr
            .take(BWRAP_STDERR_MAX_BYTES)
            .read_to_string(&mut said);
    }
    Err(format!(
        "bubblewrap at {} cannot make its namespaces here ({status}: {})",
        bwrap.display(),
        said.trim()
    ))
}
