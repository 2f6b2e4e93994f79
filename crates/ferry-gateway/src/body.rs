//! Request bodies in, file bytes out: a guard that cuts off clients that stall or trickle,
//! and a sink that hands chunks to a blocking writer thread without buffering the body.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use ferry_codes::Code;
use ferry_fs::{ByteSink, FsError};
use futures_util::{Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::ApiError;

/// How a body must keep moving.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Longest silence between two chunks.
    pub idle: Duration,
    /// After the first `idle` period, the average rate must stay at least this (0: off).
    pub min_bytes_per_sec: u64,
}

/// Why reading a request body stopped.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the request body stalled for more than {0} seconds")]
    Stalled(u64),
    #[error("the request body arrived slower than {0} bytes per second")]
    TooSlow(u64),
    #[error("the request body could not be read: {0}")]
    Read(String),
    #[error(
        "the multipart form's text before its first part, or a part's headers, are longer \
         than {0} bytes"
    )]
    PartHeadTooLong(u64),
}

impl From<BodyError> for ApiError {
    fn from(err: BodyError) -> ApiError {
        match err {
            BodyError::Stalled(_) | BodyError::TooSlow(_) => {
                ApiError::new(Code::BodyTimeout, err.to_string())
            }
            BodyError::Read(_) => ApiError::new(Code::BadBody, err.to_string()),
            BodyError::PartHeadTooLong(_) => ApiError::new(Code::BadMultipart, err.to_string()),
        }
    }
}

/// The body as a stream that fails with [`BodyError`] when the client stalls or trickles.
pub fn paced(
    body: Body,
    pace: Pace,
) -> impl Stream<Item = Result<Bytes, BodyError>> + Send + 'static {
    struct State {
        inner: axum::body::BodyDataStream,
        started: Instant,
        received: u64,
        done: bool,
    }
    let state = State {
        inner: body.into_data_stream(),
        started: Instant::now(),
        received: 0,
        done: false,
    };
    futures_util::stream::unfold(state, move |mut s| async move {
        if s.done {
            return None;
        }
        let item = match tokio::time::timeout(pace.idle, s.inner.next()).await {
            Err(_) => Err(BodyError::Stalled(pace.idle.as_secs())),
            Ok(None) => return None,
            Ok(Some(Err(e))) => Err(BodyError::Read(e.to_string())),
            Ok(Some(Ok(chunk))) => {
                s.received += chunk.len() as u64;
                let elapsed = s.started.elapsed();
                let floor = pace.min_bytes_per_sec as f64 * elapsed.as_secs_f64();
                if pace.min_bytes_per_sec > 0 && elapsed > pace.idle && (s.received as f64) < floor
                {
                    Err(BodyError::TooSlow(pace.min_bytes_per_sec))
                } else {
                    Ok(chunk)
                }
            }
        };
        s.done = item.is_err();
        Some((item, s))
    })
}

/// Bytes of one transfer held in memory at most: a smaller file is written in one go at
/// the end (one trip to a blocking thread instead of several); a larger one streams to a
/// writer thread through a queue this deep, so memory stays flat whatever the file's size.
pub const SINK_MEMORY_BYTES: usize = 256 * 1024;

/// Takes a body's chunks for a writer's [`ByteSink`] (an atomic writer, or a staged
/// upload) without ever holding more than [`SINK_MEMORY_BYTES`] of them.
pub struct Sink<W> {
    state: SinkState<W>,
}

enum SinkState<W> {
    Buffering {
        writer: Box<W>,
        pending: BytesMut,
    },
    Streaming {
        tx: mpsc::UnboundedSender<(Bytes, OwnedSemaphorePermit)>,
        budget: Arc<Semaphore>,
        task: JoinHandle<Result<W, FsError>>,
    },
    Failed(FsError),
}

/// What a [`Sink`] took, not yet on disk in full: [`Filled::complete`] writes the rest.
pub struct Filled<W> {
    writer: W,
    pending: BytesMut,
}

impl<W: AsMut<ByteSink>> Filled<W> {
    /// `pending`, all of a body held in memory, for `writer`.
    pub fn buffered(writer: W, pending: BytesMut) -> Filled<W> {
        Filled { writer, pending }
    }

    /// Writes what is still in memory (blocking) and hands back the writer, uncommitted.
    pub fn complete(self) -> Result<W, FsError> {
        let mut writer = self.writer;
        writer.as_mut().write(&self.pending)?;
        Ok(writer)
    }
}

impl<W: AsMut<ByteSink> + Send + 'static> Sink<W> {
    pub fn new(writer: W) -> Sink<W> {
        Sink {
            state: SinkState::Buffering {
                writer: Box::new(writer),
                pending: BytesMut::new(),
            },
        }
    }

    /// Takes one chunk. `false` means the writer stopped (over the cap, disk full):
    /// [`Sink::finish`] then says why.
    pub async fn send(&mut self, chunk: Bytes) -> bool {
        if let SinkState::Buffering { writer, pending } = &mut self.state {
            let total = (pending.len() + chunk.len()) as u64;
            if let Err(e) = (**writer).as_mut().check_room(total) {
                self.state = SinkState::Failed(e);
                return false;
            }
            if pending.len() + chunk.len() <= SINK_MEMORY_BYTES {
                pending.extend_from_slice(&chunk);
                return true;
            }
            self.start_streaming();
        }
        match &self.state {
            SinkState::Streaming { tx, budget, .. } => {
                let want = chunk.len().clamp(1, SINK_MEMORY_BYTES) as u32;
                let Ok(permit) = budget.clone().acquire_many_owned(want).await else {
                    return false;
                };
                tx.send((chunk, permit)).is_ok()
            }
            _ => false,
        }
    }

    /// Hands what was buffered to a writer thread and streams from now on.
    fn start_streaming(&mut self) {
        let SinkState::Buffering { writer, pending } =
            std::mem::replace(&mut self.state, SinkState::Failed(FsError::NotFound))
        else {
            return;
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<(Bytes, OwnedSemaphorePermit)>();
        let budget = Arc::new(Semaphore::new(SINK_MEMORY_BYTES));
        let task = tokio::task::spawn_blocking(move || {
            let mut writer = *writer;
            writer.as_mut().write(&pending)?;
            drop(pending);
            while let Some((chunk, _permit)) = rx.blocking_recv() {
                writer.as_mut().write(&chunk)?;
            }
            Ok(writer)
        });
        self.state = SinkState::Streaming { tx, budget, task };
    }

    /// Waits for the writer thread, if one runs, and returns what is left to complete.
    pub async fn finish(self) -> Result<Filled<W>, ApiError> {
        let site_error = |e: FsError| ApiError::from(ferry_site::SiteError::from(e));
        match self.state {
            SinkState::Buffering { writer, pending } => Ok(Filled {
                writer: *writer,
                pending,
            }),
            SinkState::Failed(e) => Err(site_error(e)),
            SinkState::Streaming { tx, task, .. } => {
                drop(tx);
                match task.await {
                    Ok(Ok(writer)) => Ok(Filled {
                        writer,
                        pending: BytesMut::new(),
                    }),
                    Ok(Err(e)) => Err(site_error(e)),
                    Err(e) => Err(ApiError::internal("sink task", e)),
                }
            }
        }
    }
}
