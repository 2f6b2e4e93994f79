//! The node's settings: `node.toml` in its state folder, with `ferry node run`'s flags
//! over it. A flag given replaces that key of the file (a list flag replaces the whole
//! list). Everything is checked before the node dials, so a mistake stops it at once
//! with the place named instead of failing on every reconnect.

use std::ffi::OsString;
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::Identity;
use crate::connect::{CertPin, GatewayUrl};
use crate::handshake::{self, Challenge, Hello, NodeInfo};
use crate::host::{NodeHost, NodePolicy, Shell, TerminalConfig, UploadSweep};
use crate::policy::PathRules;

/// The settings file's name in the state folder.
pub const SETTINGS_FILE_NAME: &str = "node.toml";
/// Most bytes the settings file may have.
pub const SETTINGS_FILE_MAX_BYTES: u64 = 64 * 1024;
/// The state folder's name under `$XDG_STATE_HOME` (or `~/.local/state`).
pub const STATE_DIR_NAME: &str = "ferry-node";

/// What the command line said; `None` leaves the file's value (or the default).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--gateway`.
    pub gateway: Option<String>,
    /// `--name`.
    pub name: Option<String>,
    /// `--state`.
    pub state: Option<PathBuf>,
    /// `--allow-read`, all of them.
    pub allow_read: Option<Vec<String>>,
    /// `--allow-write`, all of them.
    pub allow_write: Option<Vec<String>>,
    /// `--deny`, all of them.
    pub deny: Option<Vec<String>>,
    /// `--follow-symlinks`.
    pub follow_symlinks: Option<bool>,
    /// `--gateway-cert-sha256`.
    pub gateway_cert_sha256: Option<String>,
}

/// `node.toml`: the same keys as the flags, every one optional, no other.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeFile {
    gateway: Option<String>,
    name: Option<String>,
    allow_read: Option<Vec<String>>,
    allow_write: Option<Vec<String>>,
    deny: Option<Vec<String>>,
    follow_symlinks: Option<bool>,
    gateway_cert_sha256: Option<String>,
}

/// Settings a node can run with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The gateway to dial.
    pub gateway: GatewayUrl,
    /// The state folder (identity key, `node.toml`).
    pub state_dir: PathBuf,
    /// What the hello says: name, platform, shell, commands.
    pub info: NodeInfo,
    /// The owner's path policy, which the node host enforces.
    pub policy: NodePolicy,
    /// The gateway certificate's pinned SHA-256, for `wss://`.
    pub pin: Option<CertPin>,
    /// What the node's terminals run, and where their uploads are staged.
    pub terminal: TerminalConfig,
}

/// Settings that cannot work, with the place and the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

impl Settings {
    /// The settings of `flags` over the state folder's `node.toml`; `env` reads the
    /// environment (`XDG_STATE_HOME`, `HOME`, `SHELL`).
    pub fn resolve(
        flags: Flags,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Settings, SettingsError> {
        let state_dir = match flags.state {
            Some(dir) => dir,
            None => default_state_dir(&env)?,
        };
        let file = read_node_file(&state_dir)?;
        let gateway = flags.gateway.or(file.gateway).ok_or_else(|| {
            SettingsError(format!(
                "no gateway: give --gateway ws://HOST:PORT (or wss://…), or set gateway in {}",
                state_dir.join(SETTINGS_FILE_NAME).display()
            ))
        })?;
        let gateway = GatewayUrl::parse(&gateway).map_err(SettingsError)?;
        let pin = flags
            .gateway_cert_sha256
            .or(file.gateway_cert_sha256)
            .map(|text| CertPin::parse(&text))
            .transpose()
            .map_err(SettingsError)?;
        if pin.is_some() && !gateway.is_tls() {
            return Err(SettingsError(
                "--gateway-cert-sha256 pins a TLS certificate: it needs a wss:// gateway".into(),
            ));
        }
        let rules = PathRules::new(
            &flags.allow_read.or(file.allow_read).unwrap_or_default(),
            &flags.allow_write.or(file.allow_write).unwrap_or_default(),
            &flags.deny.or(file.deny).unwrap_or_default(),
        )
        .map_err(|e| SettingsError(format!("the node's path policy: {e}")))?;
        let policy = NodePolicy {
            rules,
            follow_symlinks: flags
                .follow_symlinks
                .or(file.follow_symlinks)
                .unwrap_or(false),
        };
        let name = match flags.name.or(file.name) {
            Some(name) => name,
            None => host_name()?,
        };
        let terminal = TerminalConfig {
            shell: Shell::from_env(env("SHELL")),
            home: env("HOME").map(PathBuf::from),
            state_dir: state_dir.clone(),
            sweep: UploadSweep::default(),
        };
        let info = NodeInfo {
            name,
            platform: std::env::consts::OS.to_owned(),
            // The program the terminals run: the gateway quotes pasted paths for it.
            shell: terminal.shell.name.clone(),
            commands: NodeHost::new(policy.clone())
                .with_terminal(terminal.clone())
                .commands(),
        };
        check_info(&info)?;
        Ok(Settings {
            gateway,
            state_dir,
            info,
            policy,
            pin,
            terminal,
        })
    }

    /// The node host these settings serve: the transfer commands under the owner's
    /// policy, and the terminal commands.
    pub fn host(&self) -> NodeHost {
        NodeHost::new(self.policy.clone())
            .with_terminal(self.terminal.clone())
            .with_push_journal(&self.state_dir)
    }

    /// What the operator should know before the node runs.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.policy.rules.allows_nothing() {
            warnings.push(
                "nothing is allowed (no --allow-read or --allow-write, none in node.toml): the \
                 node will refuse every transfer"
                    .to_owned(),
            );
        }
        warnings
    }
}

/// `$XDG_STATE_HOME/ferry-node`, else `$HOME/.local/state/ferry-node`. A relative
/// `XDG_STATE_HOME` is ignored, as the base directory specification says.
fn default_state_dir(env: &impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, SettingsError> {
    let absolute = |name: &str| {
        env(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    if let Some(base) = absolute("XDG_STATE_HOME") {
        return Ok(base.join(STATE_DIR_NAME));
    }
    if let Some(home) = absolute("HOME") {
        return Ok(home.join(".local/state").join(STATE_DIR_NAME));
    }
    Err(SettingsError(
        "no state folder: give --state DIR, or set XDG_STATE_HOME or HOME".into(),
    ))
}

/// The settings file, or nothing if there is none. It must be the user's own and
/// writable by nobody else: whoever can change it can widen what the node allows.
fn read_node_file(state_dir: &Path) -> Result<NodeFile, SettingsError> {
    let path = state_dir.join(SETTINGS_FILE_NAME);
    let refuse = |why: String| SettingsError(format!("{}: {why}", path.display()));
    // Not blocking on a FIFO planted under the name.
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path);
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(NodeFile::default()),
        Err(e) => return Err(refuse(format!("cannot open it: {e}"))),
    };
    let meta = file
        .metadata()
        .map_err(|e| refuse(format!("cannot read it: {e}")))?;
    if !meta.is_file() {
        return Err(refuse("it is not a regular file".into()));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(refuse(format!(
            "it belongs to uid {}, not to this user (uid {me})",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "others may change it (mode {:04o}); `chmod go-w` it",
            meta.mode() & 0o7777
        )));
    }
    if meta.len() > SETTINGS_FILE_MAX_BYTES {
        return Err(refuse(format!(
            "it is over {SETTINGS_FILE_MAX_BYTES} bytes"
        )));
    }
    let mut text = String::new();
    (&mut file)
        .take(SETTINGS_FILE_MAX_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| refuse(format!("cannot read it as text: {e}")))?;
    toml::from_str(&text).map_err(|e| refuse(e.to_string().trim_end().to_owned()))
}

fn host_name() -> Result<String, SettingsError> {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        return Err(SettingsError(
            "the host has no name: give --name NAME".into(),
        ));
    }
    Ok(name)
}

/// Checks what the hello will say exactly as the gateway will: by verifying a hello and
/// proof made with a throwaway key, so a name the gateway would refuse stops the node now.
fn check_info(info: &NodeInfo) -> Result<(), SettingsError> {
    let identity = Identity::generate();
    let hello = Hello::new(&identity, info.clone());
    let challenge = Challenge::fresh("settings check");
    handshake::prove(&identity, &hello, &challenge)
        .and_then(|proof| handshake::verify(&hello, &challenge, &proof))
        .map(drop)
        .map_err(|e| {
            SettingsError(format!(
                "{e} (the name is --name, or the host name; the shell is the last part of $SHELL, an absolute path)"
            ))
        })
}
