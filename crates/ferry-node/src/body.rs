//! The handles of one stream: the body's reader and writer, a call and its response, and
//! a served request with its reply.

use std::sync::Arc;

use bytes::Bytes;
use ferry_codes::Code;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::NodeError;
use crate::frame::{FRAME_DATA_MAX_BYTES, Frame, Kind, RequestBody, ResponseBody};
use crate::shared::{DATA_FRAME_OVERHEAD_BYTES, Event, Shared, charge};

/// Window a reader takes before it gives it back in one grant.
const GRANT_BATCH_BYTES: u32 = crate::mux::STREAM_WINDOW_BYTES / 4;
/// The most window one data frame costs.
const FRAME_COST_MAX: u32 = FRAME_DATA_MAX_BYTES as u32 + DATA_FRAME_OVERHEAD_BYTES;
// A sender stalls with more than the window less one frame outstanding; that must be a
// whole batch, or a grant might never come.
const _: () = assert!(crate::mux::STREAM_WINDOW_BYTES - FRAME_COST_MAX >= GRANT_BATCH_BYTES);

/// One stream of one link, as a handle sees it.
struct StreamRef {
    shared: Arc<Shared>,
    id: u32,
}

/// Reads a stream's body: the bytes the other end sends, in order, giving window back as
/// they are taken so the sender never has more than the window in flight.
pub struct DataReader {
    stream: StreamRef,
    events: mpsc::UnboundedReceiver<Event>,
    ungranted: u32,
    done: bool,
}

impl DataReader {
    fn new(stream: StreamRef, events: mpsc::UnboundedReceiver<Event>, done: bool) -> DataReader {
        DataReader {
            stream,
            events,
            ungranted: 0,
            done,
        }
    }

    /// The next piece of the body; `None` once it is complete.
    pub async fn next(&mut self) -> Option<Result<Bytes, NodeError>> {
        if self.done {
            return None;
        }
        let event = self.events.recv().await;
        match event {
            Some(Event::Data(bytes)) => {
                self.ungranted += charge(bytes.len());
                // Given back in batches only: a sender waiting for window has more than
                // `STREAM_WINDOW_BYTES - FRAME_COST_MAX` outstanding, at least a batch, so
                // a reader that takes what came always gives it some. A trickle of small
                // frames (keystrokes, their echoes) then costs no window frame each way.
                if self.ungranted >= GRANT_BATCH_BYTES {
                    self.stream.shared.grant(self.stream.id, self.ungranted);
                    self.ungranted = 0;
                }
                Some(Ok(bytes))
            }
            Some(Event::End) => {
                self.done = true;
                None
            }
            Some(Event::Failed(error)) => {
                self.done = true;
                Some(Err(error))
            }
            Some(Event::Head(..)) => {
                self.done = true;
                Some(Err(NodeError::frame("a second response head")))
            }
            None => {
                self.done = true;
                Some(Err(self.stream.shared.offline()))
            }
        }
    }
}

impl Drop for DataReader {
    fn drop(&mut self) {
        if !self.done {
            // Nobody reads the rest: the stream is given up, so the other end stops.
            self.stream.shared.abandon(self.stream.id, None);
        }
    }
}

/// Writes a stream's body in data frames, waiting for window before each.
pub struct DataWriter {
    stream: StreamRef,
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
    finished: bool,
}

impl DataWriter {
    /// Sends `bytes` (split into frames of at most [`FRAME_DATA_MAX_BYTES`]); fails with
    /// `call_cancelled` once the other end gave the stream up, `node_offline` once the
    /// link is down.
    pub async fn send(&mut self, mut bytes: Bytes) -> Result<(), NodeError> {
        while !bytes.is_empty() {
            let piece = bytes.split_to(bytes.len().min(FRAME_DATA_MAX_BYTES));
            self.send_frame(piece, false).await?;
        }
        Ok(())
    }

    /// Ends the body.
    pub async fn finish(mut self) -> Result<(), NodeError> {
        let shared = self.stream.shared.clone();
        let place = tokio::select! {
            place = shared.data.reserve() => place.map_err(|_| shared.offline())?,
            () = self.cancel.cancelled() => return Err(self.stopped()),
        };
        // Our half is closed before the END can leave: the other end may open its next
        // stream as soon as it sees this one end, and must find it counted closed here.
        self.finished = true;
        shared.close_local(self.stream.id);
        place.send(Frame::data(self.stream.id, Bytes::new(), true));
        Ok(())
    }

    /// Ends the stream with an error instead (a server whose work failed midway).
    pub fn fail(mut self, error: NodeError) {
        self.finished = true;
        self.stream.shared.abandon(self.stream.id, Some(error));
    }

    /// Resolves when the other end gives the stream up or the link dies.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    async fn send_frame(&mut self, piece: Bytes, end: bool) -> Result<(), NodeError> {
        let shared = &self.stream.shared;
        let cost = charge(piece.len());
        if cost > 0 {
            match self.credit.acquire_many(cost).await {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(self.stopped()),
            }
            let mut streams = shared.streams();
            match streams.map.get_mut(&self.stream.id) {
                Some(entry) => entry.sent_ungranted += u64::from(cost),
                None => return Err(self.stopped()),
            }
        }
        let frame = Frame::data(self.stream.id, piece, end);
        tokio::select! {
            sent = shared.data.send(frame) => sent.map_err(|_| shared.offline()),
            () = self.cancel.cancelled() => Err(self.stopped()),
        }
    }

    fn stopped(&self) -> NodeError {
        if self.stream.shared.closed.is_cancelled() {
            self.stream.shared.offline()
        } else {
            NodeError::Cancelled
        }
    }
}

impl Drop for DataWriter {
    fn drop(&mut self) {
        if !self.finished {
            self.stream.shared.abandon(self.stream.id, None);
        }
    }
}

/// A call in flight: its request body (if it has one) and, later, its response.
pub struct Call {
    id: u32,
    body: Option<DataWriter>,
    events: Option<mpsc::UnboundedReceiver<Event>>,
    shared: Arc<Shared>,
}

impl Call {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: u32,
        events: mpsc::UnboundedReceiver<Event>,
        body: Option<(Arc<Semaphore>, CancellationToken)>,
    ) -> Call {
        let body = body.map(|(credit, cancel)| DataWriter {
            stream: StreamRef {
                shared: shared.clone(),
                id,
            },
            credit,
            cancel,
            finished: false,
        });
        Call {
            id,
            body,
            events: Some(events),
            shared,
        }
    }

    /// The stream id of the call.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The request body's writer, once (calls opened with a body only).
    pub fn take_body(&mut self) -> Option<DataWriter> {
        self.body.take()
    }

    /// Waits for the response's head; its body follows in [`Response::body`].
    pub async fn response(mut self) -> Result<Response, NodeError> {
        let mut events = self.events.take().expect("a call's response is taken once");
        let stream = StreamRef {
            shared: self.shared.clone(),
            id: self.id,
        };
        match events.recv().await {
            Some(Event::Head(result, end)) => Ok(Response {
                result,
                body: DataReader::new(stream, events, end),
            }),
            Some(Event::Failed(error)) => Err(error),
            // The reader never queues anything else first; if it ever did, give up.
            Some(_) | None => {
                self.shared.abandon(self.id, None);
                Err(self.shared.offline())
            }
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.events.is_some() {
            // Dropped before its response: the call is cancelled.
            self.shared.abandon(self.id, None);
        }
    }
}

/// A call's answer: its result and the body that follows.
pub struct Response {
    /// The command's result.
    pub result: serde_json::Value,
    /// The body (empty if the response had none).
    pub body: DataReader,
}

/// A request this end serves.
pub struct Incoming {
    /// The command asked for.
    pub command: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// The request's body (empty if it has none).
    pub body: DataReader,
    /// How to answer.
    pub reply: Reply,
}

/// The answer to a served request; dropping it unanswered answers `internal`.
pub struct Reply {
    shared: Arc<Shared>,
    id: u32,
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
    answered: bool,
}

impl Reply {
    /// The token cancelled when the caller gives the call up or the link dies: long work
    /// watches it and stops.
    pub fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Answers `result` with no body.
    pub fn ok(mut self, result: serde_json::Value) -> Result<(), NodeError> {
        self.head(result, true)
    }

    /// Answers `result`, followed by a body the returned writer sends.
    pub fn stream(mut self, result: serde_json::Value) -> Result<DataWriter, NodeError> {
        self.head(result, false)?;
        Ok(DataWriter {
            stream: StreamRef {
                shared: self.shared.clone(),
                id: self.id,
            },
            credit: self.credit.clone(),
            cancel: self.cancel.clone(),
            finished: false,
        })
    }

    /// Answers with a failure.
    pub fn fail(mut self, error: NodeError) {
        self.answered = true;
        self.shared.abandon(self.id, Some(error));
    }

    fn head(&mut self, result: serde_json::Value, end: bool) -> Result<(), NodeError> {
        self.answered = true;
        if self.cancel.is_cancelled() {
            return Err(if self.shared.closed.is_cancelled() {
                self.shared.offline()
            } else {
                NodeError::Cancelled
            });
        }
        let frame = Frame::control(Kind::Response, self.id, end, &ResponseBody { result });
        if end {
            // Closed before the frame is queued: the caller may open its next call as
            // soon as it has this answer, and must find this stream no longer counted.
            self.shared.close_local(self.id);
        }
        self.shared.send_control(frame)
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.answered {
            self.shared.abandon(
                self.id,
                Some(NodeError::Remote {
                    code: Code::Internal,
                    message: "the command ended without an answer".into(),
                }),
            );
        }
    }
}

/// Builds the handles of a served request.
pub(crate) fn incoming(
    shared: Arc<Shared>,
    id: u32,
    request: RequestBody,
    events: mpsc::UnboundedReceiver<Event>,
    body_done: bool,
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
) -> Incoming {
    Incoming {
        command: request.command,
        args: request.args,
        body: DataReader::new(
            StreamRef {
                shared: shared.clone(),
                id,
            },
            events,
            body_done,
        ),
        reply: Reply {
            shared,
            id,
            credit,
            cancel,
            answered: false,
        },
    }
}
