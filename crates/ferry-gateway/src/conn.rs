//! What a client connection costs, bounded: at most `server.max_connections` are held at
//! once (one more is answered `503 too_many_connections` and closed), and a connection
//! must say which protocol it speaks within the header read timeout.
//!
//! hyper's header read timeout starts once the protocol is known, and the protocol is
//! told by the client's first bytes (up to the 24 of the HTTP/2 preface): a client that
//! sends nothing, or part of the preface, would otherwise hold its connection for good.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use ferry_codes::Code;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// What an HTTP/2 client sends first; any other first bytes are HTTP/1.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How often, at most, refused connections are logged (with their count since).
const REFUSALS_LOGGED_EVERY: Duration = Duration::from_secs(60);

/// The connections the gateway holds, and how it turns away one too many.
pub(crate) struct Admission {
    slots: Arc<Semaphore>,
    max: usize,
    /// The whole answer to a connection past the limit.
    refusal: Vec<u8>,
    /// Refusals not yet logged, and when the last were.
    unlogged: u64,
    logged: Option<Instant>,
}

impl Admission {
    pub(crate) fn new(max: usize) -> Admission {
        let body = serde_json::json!({"error": {
            "code": Code::TooManyConnections.as_str(),
            "message": format!(
                "the gateway holds as many connections as it may ({max}, \
                 server.max_connections); try again in a moment"
            ),
        }})
        .to_string();
        let refusal = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nretry-after: 1\r\nx-content-type-options: nosniff\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        Admission {
            slots: Arc::new(Semaphore::new(max)),
            max,
            refusal: refusal.into_bytes(),
            unlogged: 0,
            logged: None,
        }
    }

    /// The accepted `stream` as a connection holding one of the slots until it is
    /// dropped (upgraded or not), or `None` when every slot is taken: then the stream has
    /// been answered `503 too_many_connections` and is closed as it drops.
    pub(crate) fn admit(&mut self, stream: TcpStream, deadline: Duration) -> Option<Connection> {
        match self.slots.clone().try_acquire_owned() {
            Ok(slot) => {
                metrics::gauge!("ferry_http_connections_open").increment(1.0);
                Some(Connection {
                    stream,
                    opening: Some(Opening {
                        seen: 0,
                        deadline: Box::pin(tokio::time::sleep(deadline)),
                    }),
                    _slot: Slot(slot),
                })
            }
            Err(_) => {
                self.refuse(&stream);
                None
            }
        }
    }

    /// Answers `stream` without a word from the accept loop (nothing here waits). What
    /// the client already sent is read first: a socket closed with unread bytes is reset,
    /// and the reset could overtake the answer.
    fn refuse(&mut self, stream: &TcpStream) {
        metrics::counter!("ferry_http_connections_refused_total").increment(1);
        let mut scratch = [0u8; 4096];
        for _ in 0..16 {
            match stream.try_read(&mut scratch) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
        // A fresh socket's send buffer takes the whole answer at once.
        let _ = stream.try_write(&self.refusal);
        self.unlogged += 1;
        if self
            .logged
            .is_none_or(|at| at.elapsed() >= REFUSALS_LOGGED_EVERY)
        {
            tracing::warn!(
                "refused {} connection(s): the gateway holds server.max_connections ({})",
                self.unlogged,
                self.max
            );
            self.unlogged = 0;
            self.logged = Some(Instant::now());
        }
    }
}

/// One of the slots, counted in `ferry_http_connections_open` while held.
struct Slot(#[allow(dead_code)] OwnedSemaphorePermit);

impl Drop for Slot {
    fn drop(&mut self) {
        metrics::gauge!("ferry_http_connections_open").decrement(1.0);
    }
}

/// Until the protocol is known: the bytes of the preface seen so far, and when the
/// client must have said which protocol it speaks.
struct Opening {
    seen: usize,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

/// A client's connection, holding its slot as long as it lives.
pub(crate) struct Connection {
    stream: TcpStream,
    /// `None` once the first bytes told the protocol (hyper's own timeouts then apply).
    opening: Option<Opening>,
    _slot: Slot,
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if let Some(opening) = &mut this.opening {
                    let new = &buf.filled()[before..];
                    let expected = &H2_PREFACE[opening.seen.min(H2_PREFACE.len())..];
                    let told = new.is_empty()
                        || !expected.starts_with(&new[..new.len().min(expected.len())])
                        || opening.seen + new.len() >= H2_PREFACE.len();
                    if told {
                        this.opening = None;
                    } else {
                        opening.seen += new.len();
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if let Some(opening) = &mut this.opening
                    && opening.deadline.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client sent no request within the header read timeout",
                    )));
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A connection admitted on a loopback pair, and the client's end.
    async fn pair(
        admission: &mut Admission,
        deadline: Duration,
    ) -> (Option<Connection>, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        (admission.admit(stream, deadline), client)
    }

    #[tokio::test]
    async fn the_slots_are_held_until_the_connections_drop_and_one_more_is_refused() {
        let mut admission = Admission::new(2);
        let (first, _a) = pair(&mut admission, Duration::from_secs(30)).await;
        let (second, _b) = pair(&mut admission, Duration::from_secs(30)).await;
        assert!(first.is_some() && second.is_some());
        let (third, mut refused) = pair(&mut admission, Duration::from_secs(30)).await;
        assert!(third.is_none());
        let mut answer = String::new();
        refused.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        let body: serde_json::Value =
            serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["error"]["code"], "too_many_connections", "{answer}");
        drop(first);
        let (again, _c) = pair(&mut admission, Duration::from_secs(30)).await;
        assert!(again.is_some());
    }

    #[tokio::test]
    async fn a_client_that_does_not_tell_its_protocol_in_time_is_cut_off() {
        let mut admission = Admission::new(8);
        let wait = Duration::from_millis(200);
        let mut buffer = [0u8; 64];
        // Nothing at all, and part of the HTTP/2 preface: cut off at the deadline.
        for sent in [&b""[..], &H2_PREFACE[..10]] {
            let (connection, mut client) = pair(&mut admission, wait).await;
            client.write_all(sent).await.unwrap();
            let mut connection = connection.unwrap();
            let mut got = 0;
            let error = loop {
                match connection.read(&mut buffer).await {
                    Ok(n) => got += n,
                    Err(e) => break e,
                }
            };
            assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{sent:?}");
            assert_eq!(got, sent.len());
        }
        // HTTP/1's first bytes, and the whole preface: told, and never cut off after.
        for sent in [&b"GET"[..], H2_PREFACE] {
            let (connection, mut client) = pair(&mut admission, wait).await;
            let mut connection = connection.unwrap();
            client.write_all(sent).await.unwrap();
            let mut got = 0;
            while got < sent.len() {
                got += connection.read(&mut buffer).await.unwrap();
            }
            let late = tokio::time::timeout(wait * 3, connection.read(&mut buffer)).await;
            assert!(late.is_err(), "{sent:?}: {late:?}");
        }
    }
}
