//! The multiplexer: many calls over one link, each on its own stream.
//!
//! - **Streams.** A call opens a stream with a request; the other end answers with a
//!   response, and either side may follow with a body in data frames ending with END. The
//!   gateway numbers its calls odd, the node even, so ids never clash; 0 is the link.
//! - **Flow control.** Each side of each stream has a window of [`STREAM_WINDOW_BYTES`]
//!   (part of the protocol, so both ends agree without saying it): a sender never has more than the window in flight, and the receiver gives
//!   bytes back as its reader takes them. A data frame costs its length plus
//!   [`DATA_FRAME_OVERHEAD_BYTES`]. A peer that sends past its window breaks the protocol
//!   and the link is closed, so what one stream buffers is bounded by its window.
//! - **Fairness.** The writer sends control frames (requests, responses, window updates,
//!   cancels) before data, and data of all streams shares one short queue, so a large
//!   transfer never holds a small call back by more than that queue.
//! - **Cancellation.** A caller that drops its call or its response body sends a cancel;
//!   the serving handler's token fires and its writer's next send fails. Frames that come
//!   later for a stream no longer open are dropped.
//! - **Liveness.** Each side sends a heartbeat every `heartbeat_interval`; a link that
//!   brings nothing for `heartbeat_timeout` is dead. Every call on a dead link fails at
//!   once with `node_offline`.
//! - **Caps.** At most `max_streams` calls of each direction are open at once; a call past
//!   it fails with `link_busy` (ours at once, the peer's with an error frame), or with
//!   [`Link::open_queued`] waits for a slot, first come first served.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, mpsc};
use tokio_util::sync::CancellationToken;

use crate::NodeError;
use crate::body::{Call, Incoming, Response, incoming};
use crate::frame::{
    ErrorBody, FRAME_DATA_MAX_BYTES, Frame, Kind, RequestBody, ResponseBody, WindowBody,
};
pub use crate::shared::DATA_FRAME_OVERHEAD_BYTES;
use crate::shared::{Entry, Event, Shared, Streams, charge};

/// Calls of each direction open at once on a link, by default.
pub const LINK_MAX_STREAMS: usize = 64;
/// Window of each side of each stream: 1 MiB. Both ends assume it from the frame
/// version, so changing it is a change of protocol.
pub const STREAM_WINDOW_BYTES: u32 = 1024 * 1024;
// A full data frame must fit in a window, or its sender would wait for ever.
const _: () =
    assert!(STREAM_WINDOW_BYTES >= FRAME_DATA_MAX_BYTES as u32 + DATA_FRAME_OVERHEAD_BYTES);

/// Most data frames waiting for the writer: what a small call can find ahead of it.
pub const DATA_QUEUE_FRAMES: usize = 4;
/// How often each side says it is alive, by default.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
/// How long a silent link lives, by default.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(45);

/// Which end of the link this is: it decides the parity of the ids of its calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The gateway: odd ids.
    Gateway,
    /// The node: even ids.
    Node,
}

impl Role {
    fn first_id(self) -> u32 {
        match self {
            Role::Gateway => 1,
            Role::Node => 2,
        }
    }

    fn owns(self, id: u32) -> bool {
        (id % 2 == 1) == (self == Role::Gateway)
    }
}

/// A link's settings.
#[derive(Clone, Debug)]
pub struct LinkConfig {
    /// Which end this is.
    pub role: Role,
    /// Calls of each direction open at once.
    pub max_streams: usize,
    /// How often to send a heartbeat.
    pub heartbeat_interval: Duration,
    /// How long a link may bring nothing before it is dead.
    pub heartbeat_timeout: Duration,
}

impl LinkConfig {
    /// The defaults, for `role`.
    pub fn new(role: Role) -> LinkConfig {
        LinkConfig {
            role,
            max_streams: LINK_MAX_STREAMS,
            heartbeat_interval: HEARTBEAT_INTERVAL,
            heartbeat_timeout: HEARTBEAT_TIMEOUT,
        }
    }
}

/// Serves the other end's requests; the future runs in a task of its own.
pub type Handler = Arc<dyn Fn(Incoming) -> BoxFuture<'static, ()> + Send + Sync>;

/// Makes a [`Handler`] of an async function.
pub fn handler<F, Fut>(serve: F) -> Handler
where
    F: Fn(Incoming) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    Arc::new(move |incoming| Box::pin(serve(incoming)))
}

/// One end of a running link; clones share it, and when the last is dropped the link is
/// closed (calls still in flight then fail with `node_offline`).
#[derive(Clone)]
pub struct Link {
    shared: Arc<Shared>,
    _owner: Arc<CloseOnDrop>,
}

/// Closes the link when the last [`Link`] handle goes: the reader and writer tasks would
/// otherwise keep a link nobody uses alive on heartbeats.
struct CloseOnDrop(Arc<Shared>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.die(NodeError::Offline("the link was let go".into()));
    }
}

impl Link {
    /// Starts the link's reader and writer on `sink` and `stream` (after the handshake),
    /// serving the other end's requests with `handler` (none: every request is refused).
    pub fn spawn<Si, St, E>(
        sink: Si,
        stream: St,
        config: LinkConfig,
        handler: Option<Handler>,
    ) -> Link
    where
        Si: Sink<Bytes> + Send + Unpin + 'static,
        Si::Error: std::fmt::Display,
        St: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        let (control, control_rx) = mpsc::unbounded_channel();
        let (data, data_rx) = mpsc::channel(DATA_QUEUE_FRAMES);
        let call_slots = Arc::new(Semaphore::new(config.max_streams));
        let shared = Arc::new(Shared {
            call_slots,
            next_id: AtomicU32::new(config.role.first_id()),
            peer_last_id: AtomicU32::new(0),
            config,
            control,
            control_queued: AtomicUsize::new(0),
            data,
            streams: Mutex::new(Streams::default()),
            closed: CancellationToken::new(),
            cause: OnceLock::new(),
        });
        tokio::spawn(write_loop(shared.clone(), sink, control_rx, data_rx));
        tokio::spawn(read_loop(shared.clone(), stream, handler));
        Link {
            _owner: Arc::new(CloseOnDrop(shared.clone())),
            shared,
        }
    }

    /// Whether the link is up.
    pub fn is_open(&self) -> bool {
        !self.shared.closed.is_cancelled()
    }

    /// Waits until the link is down, and says why.
    pub async fn closed(&self) -> NodeError {
        self.shared.closed.cancelled().await;
        self.shared.offline()
    }

    /// Takes the link down; every open call fails with `node_offline`.
    pub fn close(&self) {
        self.shared
            .die(NodeError::Offline("the link was closed".into()));
    }

    /// Takes the link down and tells the other end why: `error` goes out on stream 0, the
    /// link's last word, before it closes. Every open call fails with `node_offline`.
    pub fn close_with(&self, error: &NodeError) {
        self.shared.send_error(0, error);
        self.shared
            .die(NodeError::Offline(format!("the link was closed: {error}")));
    }

    /// Streams open now (calls made and served).
    pub fn open_streams(&self) -> usize {
        self.shared.streams().map.len()
    }

    /// Opens a call of `command`; with `with_body`, its request body is written through
    /// [`Call::take_body`] before the response comes. Fails at once with `link_busy` when
    /// `max_streams` calls are open.
    pub fn open(
        &self,
        command: &str,
        args: serde_json::Value,
        with_body: bool,
    ) -> Result<Call, NodeError> {
        let shared = &self.shared;
        let slot = match shared.call_slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(TryAcquireError::NoPermits) => {
                return Err(NodeError::Busy(shared.config.max_streams));
            }
            Err(TryAcquireError::Closed) => return Err(shared.offline()),
        };
        self.open_in(slot, command, args, with_body)
    }

    /// Like [`Link::open`], but waits for a call slot when `max_streams` calls are open:
    /// waiters are served first come, first served; dropping the future gives up its
    /// place and takes no slot; a link that dies fails every waiter with `node_offline`.
    pub async fn open_queued(
        &self,
        command: &str,
        args: serde_json::Value,
        with_body: bool,
    ) -> Result<Call, NodeError> {
        let slot = self
            .shared
            .call_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| self.shared.offline())?;
        self.open_in(slot, command, args, with_body)
    }

    /// Opens the stream of a call that holds `slot`; the slot lives in the stream's entry.
    fn open_in(
        &self,
        slot: OwnedSemaphorePermit,
        command: &str,
        args: serde_json::Value,
        with_body: bool,
    ) -> Result<Call, NodeError> {
        let shared = &self.shared;
        if shared.closed.is_cancelled() {
            return Err(shared.offline());
        }
        let (events_tx, events) = mpsc::unbounded_channel();
        let credit = Arc::new(Semaphore::new(STREAM_WINDOW_BYTES as usize));
        let cancel = shared.closed.child_token();
        let id = {
            let mut streams = shared.streams();
            let id = shared.next_id.fetch_add(2, Ordering::Relaxed);
            if id > u32::MAX - 2 {
                drop(streams);
                shared.die(NodeError::Offline(
                    "the link used up its stream ids; it reconnects".into(),
                ));
                return Err(shared.offline());
            }
            // The link may have died since the check above: `die` empties the table under
            // this lock, so an entry added after it would never be failed.
            if shared.closed.is_cancelled() {
                return Err(shared.offline());
            }
            streams.map.insert(
                id,
                Entry {
                    ours: true,
                    local_open: with_body,
                    slot: Some(slot),
                    ..Entry::opened(events_tx, credit.clone(), cancel.clone())
                },
            );
            id
        };
        let request = RequestBody {
            command: command.to_owned(),
            args,
        };
        let call = Call::new(
            shared.clone(),
            id,
            events,
            with_body.then_some((credit, cancel)),
        );
        shared.send_control(Frame::control(Kind::Request, id, !with_body, &request))?;
        Ok(call)
    }

    /// A call without a request body, up to its response's head.
    pub async fn call(
        &self,
        command: &str,
        args: serde_json::Value,
    ) -> Result<Response, NodeError> {
        self.open(command, args, false)?.response().await
    }

    /// Like [`Link::call`], but waits for a call slot (see [`Link::open_queued`]).
    pub async fn call_queued(
        &self,
        command: &str,
        args: serde_json::Value,
    ) -> Result<Response, NodeError> {
        self.open_queued(command, args, false)
            .await?
            .response()
            .await
    }
}

/// Declares the link dead when its reader or writer ends, however it ends (a panic
/// included): calls must never wait on a link nobody reads or writes. When the task ended
/// for a reason, the link is already dead with that reason, which stays.
struct DieOnExit(Arc<Shared>, &'static str);

impl Drop for DieOnExit {
    fn drop(&mut self) {
        let task = self.1;
        self.0
            .die(NodeError::Offline(format!("the link's {task} stopped")));
    }
}

async fn write_loop<Si>(
    shared: Arc<Shared>,
    mut sink: Si,
    mut control: mpsc::UnboundedReceiver<Frame>,
    mut data: mpsc::Receiver<Frame>,
) where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
{
    let _guard = DieOnExit(shared.clone(), "writer");
    let mut heartbeat = tokio::time::interval(shared.config.heartbeat_interval);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let frame = tokio::select! {
            biased;
            () = shared.closed.cancelled() => break,
            Some(frame) = control.recv() => {
                shared.control_queued.fetch_sub(1, Ordering::Relaxed);
                frame
            }
            Some(frame) = data.recv() => {
                // A stream's head is queued as control before its first data, but it may
                // have arrived after `control` was polled empty above: whatever control
                // was queued before this data frame leaves before it.
                while let Ok(head) = control.try_recv() {
                    shared.control_queued.fetch_sub(1, Ordering::Relaxed);
                    if !send(&shared, &mut sink, head).await {
                        return;
                    }
                }
                frame
            }
            _ = heartbeat.tick() => Frame::empty(Kind::Heartbeat, 0),
        };
        if !send(&shared, &mut sink, frame).await {
            return;
        }
    }
    // Say why, if there is a last word queued (an error on stream 0), then close.
    let last_words = async {
        while let Ok(frame) = control.try_recv() {
            if frame.kind == Kind::Error && frame.stream == 0 {
                let _ = sink.send(frame.encode()).await;
            }
        }
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), last_words).await;
}

/// Sends one frame; a failure kills the link (and says so: `false`).
async fn send<Si>(shared: &Shared, sink: &mut Si, frame: Frame) -> bool
where
    Si: Sink<Bytes> + Unpin,
    Si::Error: std::fmt::Display,
{
    match sink.send(frame.encode()).await {
        Ok(()) => true,
        Err(e) => {
            shared.die(NodeError::Offline(format!(
                "the link failed while sending: {e}"
            )));
            false
        }
    }
}

async fn read_loop<St, E>(shared: Arc<Shared>, mut stream: St, handler: Option<Handler>)
where
    St: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    let _guard = DieOnExit(shared.clone(), "reader");
    let silence = shared.config.heartbeat_timeout;
    loop {
        let next = tokio::select! {
            () = shared.closed.cancelled() => return,
            next = tokio::time::timeout(silence, stream.next()) => next,
        };
        let message = match next {
            Err(_) => {
                let secs = silence.as_secs_f64();
                shared.die(NodeError::Offline(format!(
                    "the link brought nothing for {secs} s"
                )));
                return;
            }
            Ok(None) => {
                shared.die(NodeError::Offline("the other end closed the link".into()));
                return;
            }
            Ok(Some(Err(e))) => {
                shared.die(NodeError::Offline(format!("the link failed: {e}")));
                return;
            }
            Ok(Some(Ok(message))) => message,
        };
        if let Err(error) = Frame::decode(message).and_then(|f| dispatch(&shared, f, &handler)) {
            // Tell the other end why before the link closes.
            let body = ErrorBody {
                code: error.code(),
                message: error.to_string(),
            };
            let _ = shared
                .control
                .send(Frame::control(Kind::Error, 0, true, &body));
            shared.die(error);
            return;
        }
    }
}

/// Whether no stream `id` ever existed: of this end's parity, no call of ours has taken
/// it yet; of the other end's, it is past the last call the other end opened (ids only
/// grow, and a call's request comes before anything else on it). The decoder already
/// refuses calls' frames on stream 0. A late frame for a stream given up is dropped, but
/// one for a stream that never existed is a breach.
fn never_opened(shared: &Shared, id: u32) -> bool {
    if shared.config.role.owns(id) {
        id >= shared.next_id.load(Ordering::Relaxed)
    } else {
        id > shared.peer_last_id.load(Ordering::Relaxed)
    }
}

/// Acts on one frame from the other end; an error is a breach that closes the link.
fn dispatch(
    shared: &Arc<Shared>,
    frame: Frame,
    handler: &Option<Handler>,
) -> Result<(), NodeError> {
    let id = frame.stream;
    match frame.kind {
        Kind::Heartbeat => Ok(()),
        Kind::Hello | Kind::Challenge | Kind::Proof | Kind::Welcome => Err(NodeError::frame(
            format!("a {:?} frame after the handshake", frame.kind),
        )),
        Kind::Error if id == 0 => {
            let body: ErrorBody = frame.body()?;
            Err(NodeError::Offline(format!(
                "the other end closed the link: {}",
                body.message
            )))
        }
        Kind::Request => serve(shared, frame, handler),
        Kind::Response => {
            let body: ResponseBody = frame.body()?;
            let mut streams = shared.streams();
            let Some(entry) = streams.map.get_mut(&id) else {
                // Late for a call given up, or an answer to nothing this end asked.
                if !shared.config.role.owns(id) || never_opened(shared, id) {
                    return Err(NodeError::frame(format!(
                        "a response on stream {id}, which this end never opened"
                    )));
                }
                return Ok(());
            };
            if !entry.ours || entry.head_received {
                return Err(NodeError::frame(format!(
                    "an unexpected response on stream {id}"
                )));
            }
            entry.head_received = true;
            entry.remote_open = !frame.end;
            let _ = entry.events.send(Event::Head(body.result, frame.end));
            streams.remove_if_done(id);
            Ok(())
        }
        Kind::Data => {
            let mut streams = shared.streams();
            let Some(entry) = streams.map.get_mut(&id) else {
                if never_opened(shared, id) {
                    return Err(NodeError::frame(format!(
                        "data on stream {id}, which was never opened"
                    )));
                }
                return Ok(()); // late: the stream was given up
            };
            if !entry.remote_open || (entry.ours && !entry.head_received) {
                return Err(NodeError::frame(format!(
                    "data where none may come on stream {id}"
                )));
            }
            let cost = charge(frame.payload.len());
            if cost > entry.recv_credit {
                return Err(NodeError::frame(format!(
                    "{cost} bytes of data on stream {id} with {} left in its window",
                    entry.recv_credit
                )));
            }
            entry.recv_credit -= cost;
            if !frame.payload.is_empty() {
                let _ = entry.events.send(Event::Data(frame.payload));
            }
            if frame.end {
                entry.remote_open = false;
                let _ = entry.events.send(Event::End);
                streams.remove_if_done(id);
            }
            Ok(())
        }
        Kind::Error => {
            let body: ErrorBody = frame.body()?;
            if let Some(entry) = shared.streams().remove(id) {
                let _ = entry.events.send(Event::Failed(NodeError::Remote {
                    code: body.code,
                    message: body.message,
                }));
            }
            Ok(())
        }
        Kind::Cancel => {
            if let Some(entry) = shared.streams().remove(id) {
                let _ = entry.events.send(Event::Failed(NodeError::Cancelled));
            }
            Ok(())
        }
        Kind::Window => {
            let WindowBody { grant } = frame.body()?;
            let mut streams = shared.streams();
            let Some(entry) = streams.map.get_mut(&id) else {
                if never_opened(shared, id) {
                    return Err(NodeError::frame(format!(
                        "a window grant on stream {id}, which was never opened"
                    )));
                }
                return Ok(()); // late: the stream has ended
            };
            if u64::from(grant) > entry.sent_ungranted {
                return Err(NodeError::frame(format!(
                    "a window grant of {grant} bytes on stream {id} for {} bytes sent",
                    entry.sent_ungranted
                )));
            }
            entry.sent_ungranted -= u64::from(grant);
            entry.send_credit.add_permits(grant as usize);
            Ok(())
        }
    }
}

/// Opens a stream for the other end's request and hands it to the handler.
fn serve(shared: &Arc<Shared>, frame: Frame, handler: &Option<Handler>) -> Result<(), NodeError> {
    let id = frame.stream;
    if shared.config.role.owns(id) {
        return Err(NodeError::frame(format!(
            "a request on stream {id}, an id of this end's"
        )));
    }
    shared.peer_last_id.fetch_max(id, Ordering::Relaxed);
    let request: RequestBody = frame.body()?;
    let (events_tx, events) = mpsc::unbounded_channel();
    let credit = Arc::new(Semaphore::new(STREAM_WINDOW_BYTES as usize));
    let cancel = shared.closed.child_token();
    {
        let mut streams = shared.streams();
        if streams.map.contains_key(&id) {
            return Err(NodeError::frame(format!("a second request on stream {id}")));
        }
        if streams.serving >= shared.config.max_streams {
            drop(streams);
            shared.send_error(id, &NodeError::Busy(shared.config.max_streams));
            return Ok(());
        }
        streams.serving += 1;
        streams.map.insert(
            id,
            Entry {
                head_received: true,
                remote_open: !frame.end,
                ..Entry::opened(events_tx, credit.clone(), cancel.clone())
            },
        );
    }
    let incoming = incoming(
        shared.clone(),
        id,
        request,
        events,
        frame.end,
        credit,
        cancel,
    );
    match handler {
        Some(handler) => {
            tokio::spawn(handler(incoming));
        }
        None => incoming.reply.fail(NodeError::Remote {
            code: ferry_codes::Code::NotFound,
            message: "this end of the link serves no commands".into(),
        }),
    }
    Ok(())
}
