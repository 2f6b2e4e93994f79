//! The terminals a gateway holds, by session id: whose each is, on which node, and how
//! to hand it a new socket. An entry lives exactly as long as its session's task (its
//! [`Registered`] guard removes it), so an ended terminal is never found again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ferry_codes::Code;
use tokio::sync::mpsc;

use super::session::Attach;
use crate::ApiError;

/// Random bytes of a session id (160 bits), shown in base32.
const SESSION_ID_BYTES: usize = 20;

/// One terminal as the registry knows it.
struct Entry {
    node: String,
    person: String,
    attach: mpsc::Sender<Attach>,
}

/// The open terminals of one gateway.
#[derive(Clone, Default)]
pub(crate) struct Sessions {
    map: Arc<Mutex<HashMap<String, Entry>>>,
}

/// A registered terminal: removed from the registry when this is dropped.
pub(crate) struct Registered {
    sessions: Sessions,
    /// The session id.
    pub id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.sessions.lock().remove(&self.id);
    }
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Entries are inserted or removed whole: a panic cannot leave the map torn.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a new terminal of `person` on `node`, unless `max` are open there
    /// already (`429 too_many_terminals`); sockets for it come out of the receiver.
    pub(crate) fn register(
        &self,
        node: &str,
        person: &str,
        max: usize,
    ) -> Result<(Registered, mpsc::Receiver<Attach>), ApiError> {
        let mut map = self.lock();
        let open = map.values().filter(|e| e.node == node).count();
        if open >= max {
            return Err(ApiError::new(
                Code::TooManyTerminals,
                format!(
                    "{open} terminals are open on this node, as many as the gateway keeps \
                     (`[nodes] terminals_max`); close one first"
                ),
            ));
        }
        let id = base32(&ferry_fs::random_bytes::<SESSION_ID_BYTES>());
        // One socket waits at most: a second takeover waits for the first.
        let (attach, sockets) = mpsc::channel(1);
        map.insert(
            id.clone(),
            Entry {
                node: node.to_owned(),
                person: person.to_owned(),
                attach,
            },
        );
        drop(map);
        let registered = Registered {
            sessions: self.clone(),
            id,
        };
        Ok((registered, sockets))
    }

    /// Where to hand a socket for the terminal `id`, if it is `person`'s on `node`;
    /// anything else is `404 unknown_terminal`, the same answer whatever the reason.
    pub(crate) fn find(
        &self,
        id: &str,
        node: &str,
        person: &str,
    ) -> Result<mpsc::Sender<Attach>, ApiError> {
        match self.lock().get(id) {
            Some(e) if e.node == node && e.person == person => Ok(e.attach.clone()),
            _ => Err(ApiError::new(
                Code::UnknownTerminal,
                "there is no such terminal: it ended, or was never open; open a new one",
            )),
        }
    }

    /// Terminals open now, on every node.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// RFC 4648 base32, lowercase, without padding.
fn base32(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for &byte in bytes {
        buffer = (buffer << 8) | u32::from(byte);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((buffer >> bits) & 31) as usize] as char);
        }
    }
    if bits > 0 {
        out.push(ALPHABET[((buffer << (5 - bits)) & 31) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_follows_rfc_4648() {
        assert_eq!(base32(b""), "");
        assert_eq!(base32(b"f"), "my");
        assert_eq!(base32(b"foobar"), "mzxw6ytboi");
        assert_eq!(base32(&[0u8; SESSION_ID_BYTES]).len(), 32);
    }

    #[test]
    fn the_cap_holds_per_node_at_its_bounds_and_a_drop_frees_a_place() {
        let sessions = Sessions::default();
        let max = 3;
        let mut kept = Vec::new();
        for _ in 0..max - 1 {
            kept.push(sessions.register("n1", "ann", max).unwrap());
        }
        // limit - 1 open: one more is taken (the limit), then the next is refused.
        kept.push(sessions.register("n1", "ann", max).unwrap());
        let refused = sessions.register("n1", "ann", max).err().unwrap();
        assert_eq!(refused.code, Code::TooManyTerminals);
        // Another node has its own count.
        kept.push(sessions.register("n2", "ann", max).unwrap());
        assert_eq!(sessions.len(), 4);
        kept.remove(0);
        assert!(sessions.register("n1", "ann", max).is_ok());
        drop(kept);
        assert_eq!(sessions.len(), 0);
    }

    #[test]
    fn a_terminal_is_found_only_by_its_person_on_its_node() {
        let sessions = Sessions::default();
        let (registered, _sockets) = sessions.register("n1", "ann", 8).unwrap();
        let id = registered.id.clone();
        assert_eq!(id.len(), 32);
        assert!(sessions.find(&id, "n1", "ann").is_ok());
        for (node, person) in [("n1", "bob"), ("n2", "ann")] {
            let e = sessions.find(&id, node, person).err().unwrap();
            assert_eq!(e.code, Code::UnknownTerminal);
        }
        assert!(sessions.find("nope", "n1", "ann").is_err());
        drop(registered);
        assert!(sessions.find(&id, "n1", "ann").is_err());
    }
}
