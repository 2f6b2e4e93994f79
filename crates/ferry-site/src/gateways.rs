//! The gateways serving one site (spec S-GATEWAYS). Each registers itself at start under
//! an id of its own and marks itself seen while it runs. What a gateway holds for itself
//! (the relay tokens it minted, the `connected` marks of the nodes linked to it) carries
//! its id, so starting, stopping or crashing one gateway never revokes or clears what
//! another holds. What a gateway that is gone left behind is swept by any gateway: at
//! once when it ran on the same machine and its process is no longer there (a crash, a
//! kill), else once it has been silent for [`GATEWAY_SILENT_SECS`].

pub use ferry_sql::Listener as SiteListener;

use crate::db::{Exec, now_secs, params};
use crate::{Site, SiteError};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS gateways (
    id TEXT PRIMARY KEY,
    -- Where the gateway listens, as it was bound.
    address TEXT NOT NULL,
    -- The machine and process it runs as: the process's id and its start time (clock
    -- ticks after boot), which together name one process, never a later one.
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_started INTEGER NOT NULL,
    started INTEGER NOT NULL,
    seen INTEGER NOT NULL
);
";

/// The keys the site's gateways share, made once by the first to ask: the key that signs
/// the calls one gateway makes to another (a node's call forwarded to the gateway holding
/// its link).
pub(crate) const KEYS_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS site_keys (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
";

/// How often a running gateway marks itself seen.
pub const GATEWAY_BEAT_SECS: u64 = 10;
/// How long a gateway's mark may stay unchanged before another gateway waiting on it
/// gives up the request it relayed there (two and a half beats): the gateway is alive
/// but not answering (stopped, or stalled), and what it holds is kept until it is swept.
pub const GATEWAY_STALLED_SECS: u64 = 25;
/// How long a gateway may go unseen before what it held is swept (six beats: a gateway
/// stalled for a moment keeps what it holds).
pub const GATEWAY_SILENT_SECS: i64 = 60;

/// The purpose of the relay tokens of gateway `id`.
pub(crate) fn relay_purpose(id: &str) -> String {
    format!("{RELAY_PREFIX}{id}")
}

/// Relay tokens' purposes start so; the gateway's id follows.
const RELAY_PREFIX: &str = "relay:";

/// What a sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GatewaysSwept {
    /// Gateways silent for too long, forgotten.
    pub gateways: usize,
    /// Relay tokens of gateways that are gone, revoked.
    pub relay_tokens: usize,
    /// Nodes marked connected to a gateway that is gone, cleared.
    pub node_marks: usize,
}

impl Site {
    /// Records gateway `id` (listening on `address`) as running, and sweeps what gateways
    /// that stopped left behind.
    pub fn register_gateway(&self, id: &str, address: &str) -> Result<GatewaysSwept, SiteError> {
        self.gateway_seen(id, address)?;
        self.sweep_gateways()
    }

    /// Marks gateway `id` seen now; a row swept meanwhile (the gateway stalled past
    /// [`GATEWAY_SILENT_SECS`]) is made again.
    pub fn gateway_seen(&self, id: &str, address: &str) -> Result<(), SiteError> {
        let me = Process::this();
        self.db.execute(
            "INSERT INTO gateways (id, address, host, machine, pid, pid_started, started, seen)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
             ON CONFLICT (id) DO UPDATE SET seen = excluded.seen",
            params![
                id,
                address,
                &me.host,
                &me.machine,
                me.pid,
                me.started,
                now_secs()
            ],
        )?;
        Ok(())
    }

    /// Gateway `id` stops: its row goes, and with it its relay tokens and node marks.
    pub fn gateway_stopped(&self, id: &str) -> Result<(), SiteError> {
        self.stop_keeping_facts();
        self.db
            .execute("DELETE FROM gateways WHERE id = ?1", params![id])?;
        self.sweep_gateways()?;
        Ok(())
    }

    /// Forgets the gateways that are gone: of this machine (the same boot and the same
    /// process namespace, where a process id names one process), those whose process is
    /// no longer there; of others, those unseen for [`GATEWAY_SILENT_SECS`]. Then revokes
    /// the relay tokens and clears the node marks of every gateway that is not registered.
    pub fn sweep_gateways(&self) -> Result<GatewaysSwept, SiteError> {
        let me = Process::this();
        let mut gateways = self.db.execute(
            "DELETE FROM gateways WHERE seen < ?1 AND (machine = '' OR machine != ?2)",
            params![now_secs().saturating_sub(GATEWAY_SILENT_SECS), &me.machine],
        )?;
        let local: Vec<(String, u32, u64)> = if me.machine.is_empty() {
            Vec::new()
        } else {
            self.db.rows(
                "SELECT id, pid, pid_started FROM gateways WHERE machine = ?1",
                params![&me.machine],
                |r| Ok::<_, SiteError>((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?
        };
        for (id, pid, started) in local {
            if process_started(pid) != Some(started) {
                gateways += self
                    .db
                    .execute("DELETE FROM gateways WHERE id = ?1", params![&id])?;
            }
        }
        crate::facts::sweep_stale_leases(&self.db)?;
        // `relay` alone: a token of a gateway from before ids were kept.
        let relay_tokens = self.change_facts(|tx| {
            Ok(tx.execute(
                "DELETE FROM tokens WHERE purpose = 'relay' OR (substr(purpose, 1, ?1) = ?2
                     AND substr(purpose, ?1 + 1) NOT IN (SELECT id FROM gateways))",
                params![RELAY_PREFIX.len(), RELAY_PREFIX],
            )?)
        })?;
        let node_marks = self.db.execute(
            "UPDATE nodes SET connected = 0, gateway = '' WHERE connected != 0
                 AND gateway NOT IN (SELECT id FROM gateways)",
            params![],
        )?;
        Ok(GatewaysSwept {
            gateways,
            relay_tokens,
            node_marks,
        })
    }

    /// Sends `payload` to the site's other gateways on `channel` (PostgreSQL `NOTIFY`;
    /// nothing on SQLite, whose site has one gateway).
    pub fn notify_gateways(&self, channel: &str, payload: &str) -> Result<(), SiteError> {
        Ok(self.db.notify(channel, payload)?)
    }

    /// Calls `deliver` with every payload any gateway of the site sends on `channel`, and
    /// `resumed` after the listening connection was made again (payloads were missed).
    /// `None` on SQLite. Listening stops when the returned value is dropped.
    pub fn listen_gateways(
        &self,
        channel: &str,
        deliver: impl FnMut(String) + Send + 'static,
        resumed: impl FnMut() + Send + 'static,
    ) -> Option<SiteListener> {
        self.db.listen(channel, deliver, resumed)
    }

    /// The key that signs calls between the site's gateways: 32 random bytes, made by
    /// the first gateway to ask and the same for every gateway of the site since.
    pub fn gateway_key(&self) -> Result<[u8; 32], SiteError> {
        self.site_key("gateways")
    }

    /// The site's own name in a shared store: 8 random bytes as hex, made once, kept in
    /// the metadata (so it moves with `migrate-metadata`). Two sites that share a bucket
    /// keep their blobs under their own names, and neither's sweep sees the other's.
    pub fn store_name(&self) -> Result<String, SiteError> {
        let key: [u8; 32] = self.site_key("store")?;
        Ok(ferry_fs::hex(&key[..8]))
    }

    /// The 32 random bytes named `name` in `site_keys`: made by the first process to
    /// ask, the same for every process of the site since.
    fn site_key(&self, name: &str) -> Result<[u8; 32], SiteError> {
        let mut fresh = [0u8; 32];
        getrandom::fill(&mut fresh)
            .map_err(|e| SiteError::Io(std::io::Error::other(format!("no randomness: {e}"))))?;
        self.db.execute(
            "INSERT INTO site_keys (name, value) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
            params![name, &fresh[..]],
        )?;
        let key: Option<Vec<u8>> = self.db.row(
            "SELECT value FROM site_keys WHERE name = ?1",
            params![name],
            |r| r.get(0),
        )?;
        key.and_then(|k| <[u8; 32]>::try_from(k.as_slice()).ok())
            .ok_or_else(|| SiteError::CorruptRow(format!("the site key {name:?} is not 32 bytes")))
    }

    /// The address gateway `id` registered, if it is registered.
    pub fn gateway_address(&self, id: &str) -> Result<Option<String>, SiteError> {
        Ok(self.db.row(
            "SELECT address FROM gateways WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )?)
    }

    /// When gateway `id` last marked itself seen, by its own clock (compare two readings,
    /// never one with this machine's clock); `None` when it is not registered.
    pub fn gateway_seen_at(&self, id: &str) -> Result<Option<i64>, SiteError> {
        Ok(self.db.row(
            "SELECT seen FROM gateways WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )?)
    }

    /// The gateways registered now, with their addresses: `(id, address)`.
    pub fn gateways(&self) -> Result<Vec<(String, String)>, SiteError> {
        self.db.rows(
            "SELECT id, address FROM gateways ORDER BY started, id",
            params![],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }
}

/// A process, as the gateways table names it.
struct Process {
    /// The machine's name, for people to read.
    host: String,
    /// Where the process's id names one process: the boot and the process namespace
    /// (two containers keeping the host's name, or two machines of one name, differ
    /// here); empty when either cannot be read, and then no process is judged by its id.
    machine: String,
    pid: u32,
    started: u64,
}

impl Process {
    fn this() -> Process {
        let pid = std::process::id();
        let read = |path: &str| std::fs::read_to_string(path).map(|s| s.trim().to_owned());
        let machine = match (
            read("/proc/sys/kernel/random/boot_id"),
            std::fs::read_link("/proc/self/ns/pid"),
        ) {
            (Ok(boot), Ok(namespace)) if !boot.is_empty() => {
                format!("{boot} {}", namespace.display())
            }
            _ => String::new(),
        };
        Process {
            host: read("/proc/sys/kernel/hostname").unwrap_or_default(),
            machine,
            pid,
            started: process_started(pid).unwrap_or(0),
        }
    }
}

/// When process `pid` started (clock ticks after boot, field 22 of its `stat`); `None`
/// when there is no such process.
fn process_started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count from
    // after its closing one, where field 3 begins.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(22 - 3)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TokenKind;

    #[test]
    fn relay_tokens_last_while_their_gateway_runs_and_no_longer() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        site.add_person("ann").unwrap();
        site.register_gateway("gwA", "127.0.0.1:1").unwrap();
        site.register_gateway("gwB", "127.0.0.1:2").unwrap();
        let a = site.create_relay_token("ann", "gwA").unwrap();
        let b = site.create_relay_token("ann", "gwB").unwrap();
        let person = site.create_token("ann", TokenKind::Person).unwrap();
        let works = |t: &str| site.authenticate(t).unwrap().is_some();
        // Another gateway starting, beating, sweeping or stopping revokes nothing of A's.
        site.register_gateway("gwC", "127.0.0.1:3").unwrap();
        site.gateway_seen("gwC", "127.0.0.1:3").unwrap();
        site.sweep_gateways().unwrap();
        site.gateway_stopped("gwC").unwrap();
        assert!(works(&a) && works(&b) && works(&person));
        // B stops: its relay token goes with it.
        site.gateway_stopped("gwB").unwrap();
        assert!(works(&a) && !works(&b) && works(&person));
        // A, as seen from another machine, crashes: once it has been silent long enough,
        // a sweep revokes its token.
        site.db
            .execute(
                "UPDATE gateways SET seen = ?1, machine = 'another-boot pid:[1]' WHERE id = 'gwA'",
                params![now_secs() - GATEWAY_SILENT_SECS + 5],
            )
            .unwrap();
        assert_eq!(site.sweep_gateways().unwrap().relay_tokens, 0);
        assert!(works(&a));
        site.db
            .execute(
                "UPDATE gateways SET seen = ?1 WHERE id = 'gwA'",
                params![now_secs() - GATEWAY_SILENT_SECS - 1],
            )
            .unwrap();
        let swept = site.sweep_gateways().unwrap();
        assert_eq!((swept.gateways, swept.relay_tokens), (1, 1));
        assert!(!works(&a) && works(&person));
        assert!(site.gateways().unwrap().is_empty());
    }

    #[test]
    fn a_gateway_of_this_machine_whose_process_is_gone_is_swept_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::config(tmp.path())).unwrap();
        site.add_person("ann").unwrap();
        site.register_gateway("alive", "127.0.0.1:1").unwrap();
        let alive = site.create_relay_token("ann", "alive").unwrap();
        // A process that has exited: its id names nothing now.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let me = Process::this();
        site.db
            .execute(
                "INSERT INTO gateways (id, address, host, machine, pid, pid_started, started, seen)
                 VALUES ('crashed', '127.0.0.1:2', ?1, ?2, ?3, 12345, ?4, ?4)",
                params![&me.host, &me.machine, gone, now_secs()],
            )
            .unwrap();
        let crashed = site.create_relay_token("ann", "crashed").unwrap();
        // This process, but not started when the row says: a reused id is not the gateway.
        site.db
            .execute(
                "INSERT INTO gateways (id, address, host, machine, pid, pid_started, started, seen)
                 VALUES ('reused', '127.0.0.1:3', ?1, ?2, ?3, ?4, ?5, ?5)",
                params![&me.host, &me.machine, me.pid, me.started + 1, now_secs()],
            )
            .unwrap();
        // Another machine's gateway that beats is left alone, and so is one of the same
        // name but another boot or process namespace (a container keeping the host's
        // name), whose process ids say nothing here.
        site.db
            .execute(
                "INSERT INTO gateways (id, address, host, machine, pid, pid_started, started, seen)
                 VALUES ('elsewhere', '10.0.0.2:8080', 'other-host', 'b pid:[2]', 1, 1, ?1, ?1),
                        ('twin', '127.0.0.1:4', ?2, 'another-boot pid:[1]', ?3, 12345, ?1, ?1)",
                params![now_secs(), &me.host, gone],
            )
            .unwrap();
        // A gateway of this machine whose process is there but silent (stopped, say) stays.
        site.db
            .execute(
                "INSERT INTO gateways (id, address, host, machine, pid, pid_started, started, seen)
                 VALUES ('stalled', '127.0.0.1:5', ?1, ?2, ?3, ?4, ?5, ?5)",
                params![
                    &me.host,
                    &me.machine,
                    me.pid,
                    me.started,
                    now_secs() - GATEWAY_SILENT_SECS - 1
                ],
            )
            .unwrap();
        let swept = site.sweep_gateways().unwrap();
        assert_eq!((swept.gateways, swept.relay_tokens), (2, 1));
        assert!(site.authenticate(&alive).unwrap().is_some());
        assert!(site.authenticate(&crashed).unwrap().is_none());
        let mut ids: Vec<String> = site.gateways().unwrap().into_iter().map(|g| g.0).collect();
        ids.sort();
        assert_eq!(ids, ["alive", "elsewhere", "stalled", "twin"]);
        assert!(!me.machine.is_empty());
        assert!(process_started(std::process::id()).is_some());
    }
}
