//! The node's WebSocket as the link takes it: binary messages are frames, a text message
//! is a breach, pings are answered by the WebSocket itself. On the way in, an error frame
//! on stream 0 (the gateway's last word) is kept, so a refusal after the handshake can be
//! told apart from a lost link.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::ready;
use futures_util::stream::SplitStream;
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use crate::frame::{
    ErrorBody, FRAME_HEADER_BYTES, FRAME_MAX_BYTES, Frame, Kind, LINK_READ_BUFFER_BYTES,
};

/// A byte stream the WebSocket runs over: TCP, or TLS over TCP.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// The WebSocket refuses a message or frame past one link frame before reading it whole,
/// and reads [`LINK_READ_BUFFER_BYTES`] at a time.
pub(crate) fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(FRAME_MAX_BYTES))
        .max_frame_size(Some(FRAME_MAX_BYTES))
        .read_buffer_size(LINK_READ_BUFFER_BYTES)
}

/// The error frame the gateway sent on stream 0, if it sent one.
#[derive(Clone, Default)]
pub(crate) struct LastWord(Arc<Mutex<Option<ErrorBody>>>);

impl LastWord {
    fn record(&self, message: &Bytes) {
        // Only the header is looked at before the frame is decoded: version, kind, flags,
        // reserved, then the stream id.
        let is_link_error = message.len() >= FRAME_HEADER_BYTES
            && message[1] == Kind::Error as u8
            && message[4..8] == [0, 0, 0, 0];
        if !is_link_error {
            return;
        }
        if let Ok(body) = Frame::decode(message.clone()).and_then(|f| f.body::<ErrorBody>()) {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(body);
        }
    }

    /// The gateway's last word, if any.
    pub(crate) fn get(&self) -> Option<ErrorBody> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A sink that says when it is dropped, i.e. when the link's writer has finished (its
/// close frame sent or given up on).
pub(crate) struct Watched<S> {
    inner: S,
    _done: oneshot::Sender<()>,
}

impl<S: Sink<Bytes> + Unpin> Sink<Bytes> for Watched<S> {
    type Error = S::Error;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Pin::new(&mut self.inner).poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Bytes) -> Result<(), S::Error> {
        Pin::new(&mut self.inner).start_send(item)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

/// The receiving half of the WebSocket.
pub(crate) type WsStream = SplitStream<WebSocketStream<Box<dyn Io>>>;

/// A stream that hands its inner stream back when dropped: once the link's reader lets
/// go, the node can still read the gateway's answer to its close.
struct Returned {
    inner: Option<WsStream>,
    back: Option<oneshot::Sender<WsStream>>,
}

impl Stream for Returned {
    type Item = <WsStream as Stream>::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_next(cx),
            None => Poll::Ready(None),
        }
    }
}

impl Drop for Returned {
    fn drop(&mut self) {
        if let (Some(inner), Some(back)) = (self.inner.take(), self.back.take()) {
            let _ = back.send(inner);
        }
    }
}

/// What is left of the WebSocket once the link has let go of it.
pub(crate) struct Remains {
    /// Resolves once the sink is gone (its close frame sent, or given up on).
    pub(crate) sink_done: oneshot::Receiver<()>,
    /// The receiving half, once the link's reader dropped it.
    pub(crate) stream_back: oneshot::Receiver<WsStream>,
}

/// The sink and stream of link messages over `ws`, the gateway's last word, and what
/// is left of the WebSocket when the link lets go of it.
#[allow(clippy::type_complexity)]
pub(crate) fn adapt(
    ws: WebSocketStream<Box<dyn Io>>,
) -> (
    impl Sink<Bytes, Error = WsError> + Send + Unpin + 'static,
    impl Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
    LastWord,
    Remains,
) {
    let (sink, stream) = ws.split();
    let (done_tx, sink_done) = oneshot::channel();
    let sink = Watched {
        inner: sink.with(|bytes: Bytes| ready(Ok::<_, WsError>(Message::Binary(bytes)))),
        _done: done_tx,
    };
    let (back, stream_back) = oneshot::channel();
    let stream = Returned {
        inner: Some(stream),
        back: Some(back),
    };
    let last_word = LastWord::default();
    let seen = last_word.clone();
    let stream = stream.filter_map(move |message| {
        ready(match message {
            Ok(Message::Binary(bytes)) => {
                seen.record(&bytes);
                Some(Ok(bytes))
            }
            Ok(Message::Text(_)) => Some(Err(
                "the gateway sent a text message, which the node link never carries".to_string(),
            )),
            // Pings are answered by the WebSocket; a close ends the stream after it.
            Ok(_) => None,
            Err(e) => Some(Err(e.to_string())),
        })
    });
    let remains = Remains {
        sink_done,
        stream_back,
    };
    (sink, stream, last_word, remains)
}
