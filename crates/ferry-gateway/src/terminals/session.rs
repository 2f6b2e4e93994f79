//! One terminal's task: it relays between the node's `terminal.open` call and whichever
//! page's socket is attached, and outlives a socket that goes away for
//! [`TERMINAL_REATTACH_SECS`].
//!
//! Three futures run joined in the task, so none is ever cancelled midway:
//! - the output reader decodes the node's answer body into a short queue;
//! - the input writer sends what the page typed, and its resizes, to the node;
//! - the relay moves the queue to the socket, awaiting each send, and the socket's
//!   messages to the writer, one at a time.
//!
//! So a page that reads slowly stops the relay, the queue fills, the reader stops reading,
//! and the node's window holds the shell; a page that types faster than the node reads
//! waits on the node's window. While no page is attached nothing reads the queue, so the
//! same back-pressure holds. Memory per terminal is bounded by the queue, one socket
//! message and the replay ring.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message as Ws, WebSocket, close_code};
use bytes::Bytes;
use ferry_codes::Code;
use ferry_config::limits::{TERMINAL_REATTACH_SECS, TERMINAL_REPLAY_BYTES};
use ferry_node::terminal::{MESSAGE_PAYLOAD_MAX_BYTES, Message, MessageDecoder};
use ferry_node::{DataReader, DataWriter, Link, NodeError};
use ferry_site::{Site, TokenKind};
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::access::node_error;
use super::client::{self, FromPage};
use super::registry::Registered;
use super::replay::Replay;
use crate::node_link::REVOKE_WATCH_INTERVAL;
use crate::{ApiError, blocking};

/// Output messages the reader may have decoded ahead of the socket (64 KiB at most each).
const OUTPUT_QUEUE: usize = 4;
/// Answers to the page (a refused resize) waiting for the socket.
const NOTICES_QUEUE: usize = 4;
/// How long the last words to a page (an exit, an error, the close) may take.
const FAREWELL_TIMEOUT: Duration = Duration::from_secs(5);
/// How often an attached page is pinged, so a network that dropped without a word is
/// noticed (a page answers pings by itself).
pub(super) const PING_INTERVAL: Duration = Duration::from_secs(15);
/// How long a page may send nothing, not even a pong, before it counts as gone.
pub(super) const PAGE_SILENCE: Duration = Duration::from_secs(45);

/// A socket handed to a running terminal (a reattach or a takeover), with the page's size.
pub(crate) struct Attach {
    /// The page's socket, upgraded.
    pub socket: WebSocket,
    /// The page's terminal size, sent to the shell as it attaches.
    pub size: Option<(u16, u16)>,
    /// The token the page came with, checked again while it is attached.
    pub holder: Holder,
}

/// The admin token a page holds a terminal with. It is checked again every
/// [`REVOKE_WATCH_INTERVAL`]: once it no longer authenticates an admin (revoked, or its
/// kind changed), the terminal ends, so a leaked token's shells end with it.
#[derive(Clone)]
pub(crate) struct Holder {
    pub site: Arc<Site>,
    pub token: String,
}

impl Holder {
    /// Resolves once the token is no longer an admin's.
    async fn revoked(&self) {
        let mut ticks = tokio::time::interval(REVOKE_WATCH_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (site, token) = (self.site.clone(), self.token.clone());
            let still = blocking(move || site.authenticate(&token)).await;
            match still {
                Ok(Some(p)) if p.kind == TokenKind::Admin => {}
                // The database failing to answer is not a revoke: asked again next tick.
                Err(e) if e.code == Code::Internal || e.code == Code::IoError => {}
                _ => return,
            }
        }
    }
}

/// A `terminal.open` call the node answered: the shell runs.
pub(crate) struct Opened {
    /// The call's request body: the input and resizes.
    pub input: DataWriter,
    /// The answer's body: the output and, last, the exit.
    pub output: DataReader,
    /// The shell's name, for the `ready` message.
    pub shell: String,
    /// The node's link, watched so a drop ends the terminal even while detached.
    pub link: Link,
}

/// What the node printed, decoded.
enum Output {
    Data(Bytes),
    Exit(i32),
}

/// What the page typed or asked for.
enum Input {
    Bytes(Bytes),
    Resize { cols: u16, rows: u16 },
}

/// Why an attached socket stopped being relayed.
enum Ended {
    /// The shell exited.
    Exit(i32),
    /// The node, its link or the gateway failed.
    Failed(ApiError),
    /// The page sent `{"type":"close"}`.
    PageClosed,
    /// The page broke the protocol.
    PageBroke(String),
    /// The page sent a message over the size limit.
    TooBig,
    /// The socket went (closed, dropped, unreadable): the terminal waits for a reattach.
    SocketGone,
    /// Another socket of the same person took the terminal over.
    TakenOver(Box<Attach>),
}

/// Runs the terminal until it ends; its registry entry goes with it.
pub(crate) async fn run(
    registered: Registered,
    opened: Opened,
    sockets: mpsc::Receiver<Attach>,
    first: WebSocket,
    holder: Holder,
    closing: CancellationToken,
) {
    let ended = CancellationToken::new();
    let (output_tx, output) = mpsc::channel(OUTPUT_QUEUE);
    // One socket message (at most the WebSocket's limit) waits for the writer at a time.
    let (input, input_rx) = mpsc::channel(1);
    let mut relay = Relay {
        id: registered.id.clone(),
        shell: opened.shell,
        replay: Replay::new(TERMINAL_REPLAY_BYTES),
        output,
        input,
        sockets,
        link: opened.link,
        closing,
    };
    let relaying = async {
        relay.run(first, holder).await;
        ended.cancel();
    };
    tokio::join!(
        read_output(opened.output, output_tx, ended.clone()),
        write_input(opened.input, input_rx, ended.clone()),
        relaying,
    );
    drop(relay);
    drop(registered);
}

/// Decodes the node's answer body into `queue`, until the exit, a failure, or the end
/// of the terminal. A body that breaks the message format, or a resize from the node,
/// is a breach of the protocol that ends the terminal.
async fn read_output(
    mut body: DataReader,
    queue: mpsc::Sender<Result<Output, NodeError>>,
    ended: CancellationToken,
) {
    let send = |item| {
        let queue = &queue;
        let ended = &ended;
        async move {
            tokio::select! {
                sent = queue.send(item) => sent.is_ok(),
                () = ended.cancelled() => false,
            }
        }
    };
    let mut decoder = MessageDecoder::new();
    loop {
        let piece = tokio::select! {
            piece = body.next() => piece,
            () = ended.cancelled() => return,
        };
        let bytes = match piece {
            Some(Ok(bytes)) => bytes,
            Some(Err(e)) => {
                send(Err(e)).await;
                return;
            }
            None => {
                let why = if decoder.is_mid_message() {
                    "the node's terminal output ended midway through a message"
                } else {
                    "the node ended the terminal without saying how the shell exited"
                };
                send(Err(NodeError::BadFrame(why.into()))).await;
                return;
            }
        };
        decoder.push(&bytes);
        loop {
            let item = match decoder.next_message() {
                Ok(None) => break,
                Ok(Some(Message::Data(data))) => Ok(Output::Data(data)),
                Ok(Some(Message::Exit(code))) => {
                    send(Ok(Output::Exit(code))).await;
                    return;
                }
                Ok(Some(Message::Resize { .. })) => Err(NodeError::BadFrame(
                    "the node sent a resize, which only the gateway sends".into(),
                )),
                Err(e) => Err(e),
            };
            let failed = item.is_err();
            if !send(item).await || failed {
                return;
            }
        }
    }
}

/// Sends the page's input and resizes to the node as terminal messages, waiting on the
/// node's window.
async fn write_input(
    mut body: DataWriter,
    mut queue: mpsc::Receiver<Input>,
    ended: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            next = queue.recv() => next,
            () = ended.cancelled() => return,
        };
        let messages = match next {
            None => return,
            Some(Input::Resize { cols, rows }) => vec![Message::Resize { cols, rows }],
            Some(Input::Bytes(bytes)) => bytes
                .chunks(MESSAGE_PAYLOAD_MAX_BYTES)
                .map(|piece| Message::Data(bytes.slice_ref(piece)))
                .collect(),
        };
        for message in messages {
            tokio::select! {
                sent = body.send(message.encode()) => if sent.is_err() { return },
                () = ended.cancelled() => return,
            }
        }
    }
}

type Sink = SplitSink<WebSocket, Ws>;
type Source = SplitStream<WebSocket>;

/// The part of a terminal that deals with sockets.
struct Relay {
    id: String,
    shell: String,
    replay: Replay,
    output: mpsc::Receiver<Result<Output, NodeError>>,
    input: mpsc::Sender<Input>,
    sockets: mpsc::Receiver<Attach>,
    link: Link,
    closing: CancellationToken,
}

impl Relay {
    async fn run(&mut self, first: WebSocket, holder: Holder) {
        let mut next = Some(Attach {
            socket: first,
            size: None,
            holder,
        });
        let mut reattach = false;
        loop {
            let attach = match next.take() {
                Some(attach) => attach,
                None => match self.detached().await {
                    Some(attach) => attach,
                    None => return,
                },
            };
            match self.attached(attach, reattach).await {
                Some(Some(other)) => next = Some(other),
                Some(None) => {}
                None => return,
            }
            reattach = true;
        }
    }

    /// Waits for a reattach within the grace; `None`: the terminal ends.
    async fn detached(&mut self) -> Option<Attach> {
        tokio::select! {
            attach = self.sockets.recv() => attach,
            () = tokio::time::sleep(Duration::from_secs(TERMINAL_REATTACH_SECS)) => None,
            _ = self.link.closed() => None,
            () = self.closing.cancelled() => None,
        }
    }

    /// Relays with one socket. `None`: the terminal ends; `Some(None)`: the socket went
    /// and the terminal waits; `Some(Some(other))`: another socket takes over.
    async fn attached(&mut self, attach: Attach, reattach: bool) -> Option<Option<Attach>> {
        let Attach {
            socket,
            size,
            holder,
        } = attach;
        let (mut sink, mut source) = socket.split();
        let ended = tokio::select! {
            ended = self.relay(&mut sink, &mut source, size, reattach) => ended,
            () = holder.revoked() => Ended::Failed(ApiError::new(
                Code::Unauthorized,
                "the token this page opened the terminal with is no longer an admin's; the terminal ended",
            )),
        };
        let (text, code) = match ended {
            Ended::SocketGone => return Some(None),
            Ended::Exit(code) => (Some(client::exit(code)), close_code::NORMAL),
            Ended::Failed(e) => (Some(client::error(e.code, &e.message)), close_code::ERROR),
            Ended::PageClosed => (None, close_code::NORMAL),
            Ended::PageBroke(why) => (
                Some(client::error(Code::InvalidRequest, &why)),
                close_code::POLICY,
            ),
            Ended::TooBig => (None, close_code::SIZE),
            Ended::TakenOver(other) => {
                let text = client::error(
                    Code::TerminalTakenOver,
                    "this terminal was opened in another page",
                );
                // Told on the side, bounded in time: the new page need not wait for an
                // old one whose network may be gone.
                tokio::spawn(async move {
                    farewell(&mut sink, Some(text), close_code::NORMAL).await;
                });
                return Some(Some(*other));
            }
        };
        farewell(&mut sink, text, code).await;
        None
    }

    async fn relay(
        &mut self,
        sink: &mut Sink,
        source: &mut Source,
        size: Option<(u16, u16)>,
        reattach: bool,
    ) -> Ended {
        if sink
            .send(Ws::Text(client::ready(&self.id, &self.shell).into()))
            .await
            .is_err()
        {
            return Ended::SocketGone;
        }
        if reattach {
            for piece in self.replay.pieces() {
                if sink.send(Ws::Binary(piece)).await.is_err() {
                    return Ended::SocketGone;
                }
            }
        }
        let (notices, mut notices_rx) = mpsc::channel(NOTICES_QUEUE);
        let resize = size.filter(|_| reattach);
        tokio::select! {
            ended = forward_output(sink, &mut self.output, &mut self.replay, &mut notices_rx) => ended,
            ended = forward_input(source, &self.input, &notices, resize) => ended,
            other = self.sockets.recv() => match other {
                Some(other) => Ended::TakenOver(Box::new(other)),
                None => Ended::Failed(ApiError::new(Code::Internal, "the terminal's registry let it go")),
            },
            e = self.link.closed() => Ended::Failed(node_error(e)),
            () = self.closing.cancelled() => Ended::Failed(ApiError::new(Code::NodeOffline, "the gateway is stopping")),
        }
    }
}

/// Moves the node's output to the socket, one awaited send at a time, keeping what was
/// forwarded in the replay ring (before the send: a socket that dies midway leaves it
/// there for the reattach); also sends the answers the input side queued, and a ping
/// every [`PING_INTERVAL`].
async fn forward_output(
    sink: &mut Sink,
    output: &mut mpsc::Receiver<Result<Output, NodeError>>,
    replay: &mut Replay,
    notices: &mut mpsc::Receiver<String>,
) -> Ended {
    let mut ping = tokio::time::interval(PING_INTERVAL);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    loop {
        tokio::select! {
            _ = ping.tick() => {
                if sink.send(Ws::Ping(Bytes::new())).await.is_err() {
                    return Ended::SocketGone;
                }
            }
            Some(text) = notices.recv() => {
                if sink.send(Ws::Text(text.into())).await.is_err() {
                    return Ended::SocketGone;
                }
            }
            next = output.recv() => match next {
                Some(Ok(Output::Data(bytes))) => {
                    replay.push(&bytes);
                    if sink.send(Ws::Binary(bytes)).await.is_err() {
                        return Ended::SocketGone;
                    }
                }
                Some(Ok(Output::Exit(code))) => return Ended::Exit(code),
                Some(Err(e)) => return Ended::Failed(node_error(e)),
                None => return Ended::Failed(ApiError::new(
                    Code::NodeOffline,
                    "the node's terminal output stopped",
                )),
            },
        }
    }
}

/// Moves the socket's messages to the input writer, reading the next only once the
/// writer has room for it. A page silent for [`PAGE_SILENCE`] (no pong to the pings) is
/// gone.
async fn forward_input(
    source: &mut Source,
    input: &mpsc::Sender<Input>,
    notices: &mpsc::Sender<String>,
    resize: Option<(u16, u16)>,
) -> Ended {
    let stopped = || {
        Ended::Failed(ApiError::new(
            Code::NodeOffline,
            "the node stopped taking the terminal's input",
        ))
    };
    if let Some((cols, rows)) = resize
        && input.send(Input::Resize { cols, rows }).await.is_err()
    {
        return stopped();
    }
    loop {
        let Ok(place) = input.reserve().await else {
            return stopped();
        };
        let Ok(next) = tokio::time::timeout(PAGE_SILENCE, source.next()).await else {
            return Ended::SocketGone;
        };
        let message = match next {
            None => return Ended::SocketGone,
            Some(Err(e)) => {
                return if is_too_big(e) {
                    Ended::TooBig
                } else {
                    Ended::SocketGone
                };
            }
            Some(Ok(message)) => message,
        };
        match message {
            Ws::Binary(bytes) if bytes.is_empty() => {}
            Ws::Binary(bytes) => place.send(Input::Bytes(bytes)),
            Ws::Text(text) => match client::parse(&text) {
                Ok(FromPage::Resize { cols, rows }) => place.send(Input::Resize { cols, rows }),
                Ok(FromPage::BadResize(why)) => {
                    drop(place);
                    let answer =
                        client::error(Code::InvalidRequest, &format!("resize ignored: {why}"));
                    if notices.send(answer).await.is_err() {
                        return Ended::SocketGone;
                    }
                }
                Ok(FromPage::Close) => return Ended::PageClosed,
                Err(why) => return Ended::PageBroke(why),
            },
            // A close without `{"type":"close"}` is a page that went: a reload comes back.
            Ws::Close(_) => return Ended::SocketGone,
            Ws::Ping(_) | Ws::Pong(_) => {}
        }
    }
}

/// Whether a socket failed on a message over its size limit.
fn is_too_big(e: axum::Error) -> bool {
    e.into_inner()
        .downcast::<tungstenite::Error>()
        .is_ok_and(|e| matches!(*e, tungstenite::Error::Capacity(_)))
}

/// The last words to a page: `text` if any, then the close, bounded in time.
async fn farewell(sink: &mut Sink, text: Option<String>, code: u16) {
    let words = async {
        if let Some(text) = text {
            sink.send(Ws::Text(text.into())).await?;
        }
        let frame = CloseFrame {
            code,
            reason: "".into(),
        };
        sink.send(Ws::Close(Some(frame))).await
    };
    let _ = tokio::time::timeout(FAREWELL_TIMEOUT, words).await;
}
