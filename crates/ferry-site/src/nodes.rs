//! Pairing records (spec nodes N-PAIR): what a node is to the gateway once it has proven
//! its key, and the admin's decisions about it (N-ADMIN).
//!
//! The link checks a node's proof; this module only remembers what the node said and what
//! the admin allowed. It takes plain fields so the site does not depend on the link's
//! crate, and it checks them again: the record outlives the link that brought it.

use ferry_sql::Row;
use serde::Serialize;
use utoipa::ToSchema;

use crate::db::{Exec, now_secs, params};
use crate::{Site, SiteError};

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    -- The whole key is what recognises the node; the id is only its name in commands.
    public_key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    platform TEXT NOT NULL,
    shell TEXT NOT NULL,
    -- JSON arrays of command names.
    advertised TEXT NOT NULL,
    approved TEXT NOT NULL,
    first_seen INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    -- 1 while the serving gateway holds the node's link, so commands on the data dir see
    -- it; the gateway clears every row when it starts.
    connected INTEGER NOT NULL DEFAULT 0
);
";

const COLUMNS: &str = "id, public_key, name, state, platform, shell, advertised, approved, \
     first_seen, last_seen, connected, gateway";

/// Most bytes of a node's id, name, platform, shell or one command name.
pub const NODE_FIELD_MAX_BYTES: usize = 64;
/// Most commands a node may advertise, or an admin approve, at once.
pub const NODE_COMMANDS_MAX: usize = 32;

/// Where a pairing stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Seen, not yet approved: it serves nothing.
    Pending,
    /// Approved for a set of commands.
    Approved,
    /// Revoked by an admin: it serves nothing, and stays so whatever it says later.
    Revoked,
}

impl NodeState {
    /// The word stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Pending => "pending",
            NodeState::Approved => "approved",
            NodeState::Revoked => "revoked",
        }
    }

    fn parse(text: &str) -> Option<NodeState> {
        match text {
            "pending" => Some(NodeState::Pending),
            "approved" => Some(NodeState::Approved),
            "revoked" => Some(NodeState::Revoked),
            _ => None,
        }
    }
}

/// What a node said about itself in a verified hello, as plain fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeHello {
    /// The id the link derived from the key (lowercase hex).
    pub id: String,
    /// The node's ed25519 public key, 64 lowercase hex digits.
    pub public_key: String,
    /// The name the admin knows it by.
    pub name: String,
    /// Its platform, e.g. `linux`.
    pub platform: String,
    /// Its default shell's program name.
    pub shell: String,
    /// The commands it advertises.
    pub commands: Vec<String>,
}

/// One node's pairing record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    /// Its id.
    pub id: String,
    /// Its public key, 64 lowercase hex digits.
    pub public_key: String,
    /// The name it gave last.
    pub name: String,
    /// Where its pairing stands.
    pub state: NodeState,
    /// The platform it gave last.
    pub platform: String,
    /// The shell it gave last.
    pub shell: String,
    /// The commands it advertised last.
    pub advertised_commands: Vec<String>,
    /// The commands the admin approved (kept when revoked, for the record).
    pub approved_commands: Vec<String>,
    /// Seconds since the epoch of its first hello.
    pub first_seen: i64,
    /// Seconds since the epoch of its last hello.
    pub last_seen: i64,
    /// Whether the serving gateway held the node's link when this was read (the view
    /// shows it beside the record, so it is not serialized twice).
    #[serde(skip)]
    pub connected: bool,
    /// The gateway holding its link when connected (S-GATEWAYS), empty otherwise.
    #[serde(skip)]
    pub gateway: String,
}

/// A node as the admin sees it (over HTTP and in `ferry node list`): its record, and its link.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeView<'a> {
    #[serde(flatten)]
    record: &'a NodeRecord,
    /// Commands it advertises that the admin has not approved: a pairing upgrade to decide.
    pending_commands: Vec<String>,
    /// Whether its link is up, to this gateway or another of the site.
    connected: bool,
}

impl NodeRecord {
    /// This record as the admin sees it; `connected` is the link's to say.
    pub fn view(&self, connected: bool) -> NodeView<'_> {
        NodeView {
            record: self,
            pending_commands: self.pending_commands(),
            connected,
        }
    }

    /// What the node may serve now: approved ∩ advertised, in advertised order; nothing
    /// unless approved. A command advertised after the approval waits for the next one.
    pub fn served_commands(&self) -> Vec<String> {
        if self.state != NodeState::Approved {
            return Vec::new();
        }
        self.advertised_commands
            .iter()
            .filter(|c| self.approved_commands.contains(c))
            .cloned()
            .collect()
    }

    /// Advertised commands the admin has not approved: a pairing upgrade to decide.
    pub fn pending_commands(&self) -> Vec<String> {
        self.advertised_commands
            .iter()
            .filter(|c| !self.approved_commands.contains(c))
            .cloned()
            .collect()
    }
}

impl Site {
    /// Records a verified hello. A key never seen is a new *pending* node, even under a
    /// name another node has; a known key updates what it says and when it was seen; a
    /// revoked node stays revoked. A new key while `[nodes] max_pending` nodes are pending
    /// is refused (`too_many_pending_nodes`) and nothing is recorded: anyone can make a
    /// key, so pending rows are a resource a stranger could otherwise fill the database
    /// with. A known node is never refused by the cap.
    pub fn record_hello(&self, hello: &NodeHello) -> Result<NodeRecord, SiteError> {
        check_hello(hello)?;
        let commands = json_list(&hello.commands);
        let now = now_secs();
        self.db.transaction(|tx| {
            let known: Option<String> = tx.row(
                "SELECT public_key FROM nodes WHERE id = ?1",
                params![&hello.id],
                |r| r.get(0),
            )?;
            match known {
                // Ids are a prefix of the key's hash: another key with the same id is
                // refused, never merged into the node it collides with.
                Some(key) if key != hello.public_key => {
                    Err(SiteError::NodeKeyMismatch(hello.id.clone()))
                }
                Some(_) => {
                    tx.execute(
                        "UPDATE nodes SET name = ?2, platform = ?3, shell = ?4, advertised = ?5,
                         last_seen = ?6 WHERE id = ?1",
                        params![
                            &hello.id,
                            &hello.name,
                            &hello.platform,
                            &hello.shell,
                            &commands,
                            now
                        ],
                    )?;
                    Ok(())
                }
                None => {
                    let max_pending = self.config().nodes.max_pending;
                    let pending: i64 = tx
                        .row(
                            "SELECT COUNT(*) FROM nodes WHERE state = 'pending'",
                            params![],
                            |r| r.get(0),
                        )?
                        .unwrap_or(0);
                    if usize::try_from(pending).unwrap_or(usize::MAX) >= max_pending {
                        return Err(SiteError::TooManyPendingNodes(max_pending));
                    }
                    tx.execute(
                        &format!(
                            "INSERT INTO nodes ({COLUMNS}, seq)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '[]', ?8, ?8, 0, '', {})",
                            crate::db::next_seq("nodes")
                        ),
                        params![
                            &hello.id,
                            &hello.public_key,
                            &hello.name,
                            NodeState::Pending.as_str(),
                            &hello.platform,
                            &hello.shell,
                            &commands,
                            now
                        ],
                    )?;
                    Ok(())
                }
            }
        })?;
        self.node(&hello.id)
    }

    /// Every node, oldest first.
    pub fn nodes(&self) -> Result<Vec<NodeRecord>, SiteError> {
        self.db.rows(
            &format!("SELECT {COLUMNS} FROM nodes ORDER BY first_seen, seq, id"),
            params![],
            record_of,
        )
    }

    /// The node with this id; `unknown_node` when there is none (or the id could not be one).
    pub fn node(&self, id: &str) -> Result<NodeRecord, SiteError> {
        let unknown = || SiteError::UnknownNode(shown(id));
        if !is_node_id(id) {
            return Err(unknown());
        }
        self.db
            .row(
                &format!("SELECT {COLUMNS} FROM nodes WHERE id = ?1"),
                params![id],
                record_of,
            )?
            .ok_or_else(unknown)
    }

    /// Approves the node for `commands`, or with `None` for everything it advertised. The
    /// approval replaces the previous one, which is how a pairing upgrade is approved.
    /// Commands it did not advertise are refused; a revoked node stays revoked.
    pub fn approve(
        &self,
        id: &str,
        commands: Option<Vec<String>>,
    ) -> Result<NodeRecord, SiteError> {
        let node = self.node(id)?;
        if node.state == NodeState::Revoked {
            return Err(SiteError::NodeRevoked(node.id));
        }
        let approved = match commands {
            None => node.advertised_commands.clone(),
            Some(asked) => {
                if asked.len() > NODE_COMMANDS_MAX {
                    return Err(SiteError::BadNodeCommands(format!(
                        "at most {NODE_COMMANDS_MAX} commands may be approved at once"
                    )));
                }
                let mut approved: Vec<String> = Vec::new();
                let mut missing = Vec::new();
                for command in asked {
                    if approved.contains(&command) || missing.contains(&command) {
                        continue;
                    }
                    if node.advertised_commands.contains(&command) {
                        approved.push(command);
                    } else {
                        missing.push(command);
                    }
                }
                if !missing.is_empty() {
                    let names: Vec<String> = missing.iter().map(|c| shown(c)).collect();
                    return Err(SiteError::BadNodeCommands(format!(
                        "node {} does not advertise {}; it advertises [{}]",
                        node.id,
                        names.join(", "),
                        node.advertised_commands.join(", ")
                    )));
                }
                approved
            }
        };
        // The state is checked again in the write: a revoke in between wins.
        let changed = self.db.execute(
            "UPDATE nodes SET state = 'approved', approved = ?2 WHERE id = ?1 AND state != 'revoked'",
            params![&node.id, json_list(&approved)],
        )?;
        if changed == 0 {
            return Err(SiteError::NodeRevoked(node.id));
        }
        self.node(&node.id)
    }

    /// Revokes the node: it serves nothing from now on, whatever it says. Revoking a
    /// revoked node changes nothing.
    pub fn revoke(&self, id: &str) -> Result<NodeRecord, SiteError> {
        let node = self.node(id)?;
        self.db.execute(
            "UPDATE nodes SET state = 'revoked' WHERE id = ?1",
            params![&node.id],
        )?;
        self.node(&node.id)
    }

    /// Records whether gateway `gateway` holds the node's link (`ferry node list` on the
    /// data dir shows it). Cleared only by the gateway that set it (the node may have
    /// linked to another meanwhile), or by [`Site::sweep_gateways`] once that gateway is
    /// gone. An id that names no node changes nothing.
    pub fn set_node_connected(
        &self,
        id: &str,
        connected: bool,
        gateway: &str,
    ) -> Result<(), SiteError> {
        if connected {
            self.db.execute(
                "UPDATE nodes SET connected = 1, gateway = ?2 WHERE id = ?1",
                params![id, gateway],
            )?;
        } else {
            self.db.execute(
                "UPDATE nodes SET connected = 0, gateway = '' WHERE id = ?1 AND gateway = ?2",
                params![id, gateway],
            )?;
        }
        Ok(())
    }

    /// The commands the node may serve now (see [`NodeRecord::served_commands`]).
    pub fn served_commands(&self, id: &str) -> Result<Vec<String>, SiteError> {
        Ok(self.node(id)?.served_commands())
    }
}

/// Whether `id` could name a node: 1 to [`NODE_FIELD_MAX_BYTES`] lowercase hex digits.
fn is_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= NODE_FIELD_MAX_BYTES
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A hostile value as a message may show it: cut short, quoted.
fn shown(value: &str) -> String {
    let cut: String = value.chars().take(NODE_FIELD_MAX_BYTES).collect();
    format!("{cut:?}")
}

fn check_hello(hello: &NodeHello) -> Result<(), SiteError> {
    let bad = |why: String| Err(SiteError::BadNodeHello(why));
    if !is_node_id(&hello.id) {
        return bad(format!(
            "the node id {} is not lowercase hex",
            shown(&hello.id)
        ));
    }
    if hello.public_key.len() != 64
        || !hello
            .public_key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return bad("the public key is not 64 lowercase hex digits".into());
    }
    check_word("name", &hello.name)?;
    check_word("platform", &hello.platform)?;
    check_word("shell", &hello.shell)?;
    if hello.commands.len() > NODE_COMMANDS_MAX {
        return bad(format!(
            "a node may advertise at most {NODE_COMMANDS_MAX} commands"
        ));
    }
    for (i, command) in hello.commands.iter().enumerate() {
        check_word("command", command)?;
        if hello.commands[..i].contains(command) {
            return bad(format!("command {} is advertised twice", shown(command)));
        }
    }
    Ok(())
}

/// 1 to [`NODE_FIELD_MAX_BYTES`] of ASCII letters, digits, `.`, `_` and `-`: the link
/// allows less for each field, and nothing more may reach a list or a log line.
fn check_word(what: &str, value: &str) -> Result<(), SiteError> {
    if value.is_empty() || value.len() > NODE_FIELD_MAX_BYTES {
        return Err(SiteError::BadNodeHello(format!(
            "the {what} must have 1 to {NODE_FIELD_MAX_BYTES} bytes"
        )));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(SiteError::BadNodeHello(format!(
            "the {what} {} has a character it may not",
            shown(value)
        )));
    }
    Ok(())
}

fn json_list(items: &[String]) -> String {
    // A list of strings: serializing it cannot fail.
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

fn record_of(row: &Row) -> Result<NodeRecord, SiteError> {
    let id: String = row.get(0)?;
    let state: String = row.get(3)?;
    let advertised: String = row.get(6)?;
    let approved: String = row.get(7)?;
    // A row this code did not write is reported, not trusted.
    let corrupt = |what: &str| SiteError::CorruptRow(format!("node {id:?} has {what}"));
    let Some(state) = NodeState::parse(&state) else {
        return Err(corrupt("an unknown state"));
    };
    let (Ok(advertised), Ok(approved)) = (
        serde_json::from_str::<Vec<String>>(&advertised),
        serde_json::from_str::<Vec<String>>(&approved),
    ) else {
        return Err(corrupt("a command list that is not a JSON list"));
    };
    Ok(NodeRecord {
        public_key: row.get(1)?,
        name: row.get(2)?,
        state,
        platform: row.get(4)?,
        shell: row.get(5)?,
        advertised_commands: advertised,
        approved_commands: approved,
        first_seen: row.get(8)?,
        last_seen: row.get(9)?,
        connected: row.get(10)?,
        gateway: row.get(11)?,
        id,
    })
}
