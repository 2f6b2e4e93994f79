//! The state one link's tasks and handles share: the table of open streams and the queues
//! to the writer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::NodeError;
use crate::frame::{ErrorBody, Frame, Kind, WindowBody};
use crate::mux::LinkConfig;

/// Window bytes a data frame costs beyond its payload, so a peer sending tiny frames is
/// held to a bounded count of them, not only a bounded sum of bytes.
pub const DATA_FRAME_OVERHEAD_BYTES: u32 = 64;
/// Most control frames waiting for the writer; past it the other end is not reading and
/// the link is declared dead rather than queueing without end.
pub const CONTROL_QUEUE_MAX_FRAMES: usize = 4096;

/// What the window charges for a data frame of `len` bytes (an empty END frame is free).
pub fn charge(len: usize) -> u32 {
    if len == 0 {
        0
    } else {
        len as u32 + DATA_FRAME_OVERHEAD_BYTES
    }
}

/// What a stream's local reader is told.
#[derive(Debug)]
pub enum Event {
    /// The response's head (callers only), and whether it ends the stream (no body).
    Head(serde_json::Value, bool),
    /// Bytes of the body.
    Data(Bytes),
    /// The body is complete.
    End,
    /// The stream failed.
    Failed(NodeError),
}

/// One open stream.
pub struct Entry {
    /// To the local reader of the stream.
    pub events: mpsc::UnboundedSender<Event>,
    /// Bytes the other end may still send on it.
    pub recv_credit: u32,
    /// Our credit to send on it.
    pub send_credit: Arc<Semaphore>,
    /// Charge sent and not yet granted back (a grant past it is a lie).
    pub sent_ungranted: u64,
    /// Told when the stream is cancelled or the link dies.
    pub cancel: CancellationToken,
    /// We opened it (a call of ours) rather than serve it.
    pub ours: bool,
    /// Whether the response head arrived (calls only).
    pub head_received: bool,
    /// The other end may still send on it.
    pub remote_open: bool,
    /// We may still send on it.
    pub local_open: bool,
    /// The call slot a call of ours holds (see [`Shared::call_slots`]); given back when
    /// the stream is removed, and not before.
    pub slot: Option<OwnedSemaphorePermit>,
}

impl Entry {
    /// A stream just opened: a full window each way, nothing sent yet. The side flags
    /// (`ours`, `head_received`, `remote_open`, `local_open`) are the opener's to set.
    pub fn opened(
        events: mpsc::UnboundedSender<Event>,
        send_credit: Arc<Semaphore>,
        cancel: CancellationToken,
    ) -> Entry {
        Entry {
            events,
            recv_credit: crate::mux::STREAM_WINDOW_BYTES,
            send_credit,
            sent_ungranted: 0,
            cancel,
            ours: false,
            head_received: false,
            remote_open: true,
            local_open: true,
            slot: None,
        }
    }
}

/// The open streams, and how many we serve (our own calls are counted by their slots).
#[derive(Default)]
pub struct Streams {
    /// By stream id.
    pub map: HashMap<u32, Entry>,
    /// Calls we serve.
    pub serving: usize,
}

impl Streams {
    /// Removes the stream if both halves are closed.
    pub fn remove_if_done(&mut self, id: u32) {
        if let Some(entry) = self.map.get(&id)
            && !entry.remote_open
            && !entry.local_open
        {
            self.remove(id);
        }
    }

    /// Removes the stream, whatever its state, and tells whoever waits on it.
    pub fn remove(&mut self, id: u32) -> Option<Entry> {
        let mut entry = self.map.remove(&id)?;
        if !entry.ours {
            self.serving -= 1;
        }
        // The slot goes back now, while the table is locked, so a waiting call never sees
        // more streams open than `max_streams`.
        drop(entry.slot.take());
        entry.cancel.cancel();
        entry.send_credit.close();
        Some(entry)
    }
}

/// Shared by the link's reader, writer and handles.
pub struct Shared {
    /// The link's settings.
    pub config: LinkConfig,
    /// Control frames to the writer, sent before any data.
    pub control: mpsc::UnboundedSender<Frame>,
    /// How many control frames wait.
    pub control_queued: AtomicUsize,
    /// Data frames to the writer (bounded: a sender waits, nothing piles up).
    pub data: mpsc::Sender<Frame>,
    /// The open streams.
    pub streams: Mutex<Streams>,
    /// One permit per call of ours that may be open (`max_streams`); closed when the link
    /// dies, which wakes every call waiting for one.
    pub call_slots: Arc<Semaphore>,
    /// The next id of a call of ours.
    pub next_id: AtomicU32,
    /// The highest id the other end has opened a call on (0: none yet).
    pub peer_last_id: AtomicU32,
    /// Cancelled when the link dies.
    pub closed: CancellationToken,
    /// Why the link died.
    pub cause: OnceLock<NodeError>,
}

impl Shared {
    /// The stream table (a panic while holding it cannot leave it half changed in a way
    /// that matters more than the link itself, so a poisoned lock is taken as is).
    pub fn streams(&self) -> MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The failure a call on this dead link gets.
    pub fn offline(&self) -> NodeError {
        match self.cause.get() {
            Some(NodeError::Offline(reason)) => NodeError::Offline(reason.clone()),
            Some(cause) => NodeError::Offline(format!("the link went down: {cause}")),
            None => NodeError::Offline("the link is down".into()),
        }
    }

    /// Queues a control frame for the writer.
    pub fn send_control(&self, frame: Frame) -> Result<(), NodeError> {
        if self.closed.is_cancelled() {
            return Err(self.offline());
        }
        if self.control_queued.fetch_add(1, Ordering::Relaxed) >= CONTROL_QUEUE_MAX_FRAMES {
            self.die(NodeError::Offline(
                "the other end does not read what the link sends".into(),
            ));
            return Err(self.offline());
        }
        self.control.send(frame).map_err(|_| self.offline())
    }

    /// Sends an error frame on stream `id` (best effort: a dead link has no one to tell).
    pub fn send_error(&self, id: u32, error: &NodeError) {
        let body = ErrorBody {
            code: error.code(),
            message: error.to_string(),
        };
        let _ = self.send_control(Frame::control(Kind::Error, id, true, &body));
    }

    /// Gives `grant` window bytes back to the sender of stream `id`.
    pub fn grant(&self, id: u32, grant: u32) {
        let mut streams = self.streams();
        let Some(entry) = streams.map.get_mut(&id) else {
            return;
        };
        if !entry.remote_open {
            return;
        }
        entry.recv_credit += grant;
        drop(streams);
        let _ = self.send_control(Frame::control(
            Kind::Window,
            id,
            false,
            &WindowBody { grant },
        ));
    }

    /// Our half of stream `id` is done.
    pub fn close_local(&self, id: u32) {
        let mut streams = self.streams();
        if let Some(entry) = streams.map.get_mut(&id) {
            entry.local_open = false;
        }
        streams.remove_if_done(id);
    }

    /// Gives stream `id` up from our side: a caller sends a cancel; a server that has not
    /// finished its answer sends an error, one that has but still receives a body sends a
    /// cancel, so the caller's writer stops waiting for window.
    pub fn abandon(&self, id: u32, server_error: Option<NodeError>) {
        let Some(entry) = self.streams().remove(id) else {
            return;
        };
        if entry.ours || (!entry.local_open && entry.remote_open) {
            let _ = self.send_control(Frame::empty(Kind::Cancel, id));
        } else if entry.local_open {
            self.send_error(
                id,
                &server_error.unwrap_or_else(|| NodeError::Remote {
                    code: ferry_codes::Code::Internal,
                    message: "the command ended without finishing its answer".into(),
                }),
            );
        }
    }

    /// Declares the link dead: every stream fails, every handler is told.
    pub fn die(&self, cause: NodeError) {
        let _ = self.cause.set(cause);
        self.closed.cancel();
        self.call_slots.close();
        let offline = self.offline();
        let mut streams = self.streams();
        let ids: Vec<u32> = streams.map.keys().copied().collect();
        for id in ids {
            if let Some(entry) = streams.remove(id) {
                let _ = entry.events.send(Event::Failed(offline.clone()));
            }
        }
    }
}
