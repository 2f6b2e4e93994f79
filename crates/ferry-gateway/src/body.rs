//! Request bodies in, file bytes out: a guard that cuts off clients that stall or trickle,
//! and a sink that hands chunks to a blocking writer thread without buffering the body.

use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use ferry_fs::{AtomicWriter, FsError, Written};
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::ApiError;

/// Chunks in flight between the network and the disk: bounds memory per transfer.
const SINK_QUEUE_CHUNKS: usize = 16;

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
}

impl From<BodyError> for ApiError {
    fn from(err: BodyError) -> ApiError {
        match err {
            BodyError::Stalled(_) | BodyError::TooSlow(_) => ApiError::new(
                axum::http::StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                err.to_string(),
            ),
            BodyError::Read(_) => ApiError::bad_request("bad_body", err.to_string()),
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

/// Feeds an [`AtomicWriter`] on a blocking thread; the async side only queues chunks.
pub struct Sink {
    tx: mpsc::Sender<Bytes>,
    task: JoinHandle<Result<AtomicWriter, FsError>>,
}

impl Sink {
    pub fn start(mut writer: AtomicWriter) -> Sink {
        let (tx, mut rx) = mpsc::channel::<Bytes>(SINK_QUEUE_CHUNKS);
        let task = tokio::task::spawn_blocking(move || {
            while let Some(chunk) = rx.blocking_recv() {
                writer.write(&chunk)?;
            }
            Ok(writer)
        });
        Sink { tx, task }
    }

    /// Queues one chunk. `false` means the writer stopped (over the cap, disk full):
    /// [`Sink::finish`] then says why.
    pub async fn send(&self, chunk: Bytes) -> bool {
        self.tx.send(chunk).await.is_ok()
    }

    /// Waits for every queued chunk to be written and returns the writer, uncommitted.
    pub async fn finish(self) -> Result<AtomicWriter, ApiError> {
        drop(self.tx);
        match self.task.await {
            Ok(result) => result.map_err(|e| ferry_site::SiteError::from(e).into()),
            Err(e) => Err(ApiError::internal("sink task", e)),
        }
    }
}

/// Commits a writer on a blocking thread.
pub async fn commit(writer: AtomicWriter) -> Result<Written, ApiError> {
    tokio::task::spawn_blocking(move || writer.commit())
        .await
        .map_err(|e| ApiError::internal("commit task", e))?
        .map_err(|e| ferry_site::SiteError::from(e).into())
}
