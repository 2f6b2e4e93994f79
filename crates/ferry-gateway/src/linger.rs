//! An answer given before a small request body has all arrived waits for the rest of it.
//!
//! A route may refuse a request from its head alone (an expired link, a missing token)
//! while the client is still sending the body. Were the connection closed then, the
//! body's late bytes would reach a closed socket, the kernel would answer them with a
//! reset, and a client still sending (a browser, reqwest) reports that reset instead of
//! the refusal it was sent. So when a request declares a small body, its answer waits
//! until the rest has arrived (read and dropped), for a short while at most. That also
//! leaves the connection fit for the client's next request. A large body is not waited
//! for: reading megabytes only to refuse them costs more than a client's retry.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};

use ferry_config::limits::{LINGER_BODY_MAX_BYTES, LINGER_SECS};

/// How long an answer waits, at most, for the rest of a small body.
const WAIT: Duration = Duration::from_secs(LINGER_SECS);

/// Runs the request; then, if its small body was not read to its end, reads the rest
/// (for [`WAIT`] at most) before the answer goes out.
pub(crate) async fn finish_small_bodies(request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // A client that asked to be told before it sends (`Expect: 100-continue`) sends
    // nothing after a refusal, so there is nothing to wait for.
    let expects_continue = request.headers().contains_key(header::EXPECT);
    if !declared.is_some_and(|n| (1..=LINGER_BODY_MAX_BYTES).contains(&n)) || expects_continue {
        return next.run(request).await;
    }
    let slot: Slot = Arc::new(Mutex::new(None));
    let request = request.map(|body| {
        *lock(&slot) = Some(body);
        Body::new(Lent(Arc::clone(&slot)))
    });
    let response = next.run(request).await;
    // Taken out of the slot: whatever of the route still holds its end reads an error
    // from now on, never a body that looks cut short but complete.
    let rest = lock(&slot).take();
    if let Some(rest) = rest.filter(|body| !body.is_end_stream()) {
        let _ = tokio::time::timeout(WAIT, drain(rest)).await;
    }
    response
}

type Slot = Arc<Mutex<Option<Body>>>;

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<Body>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `body` to its end (or its first error), dropping what it reads.
async fn drain(mut body: Body) {
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if frame.is_err() {
            return;
        }
    }
}

/// The body as the route sees it: the real one, lent from the slot the answer takes it
/// back from.
struct Lent(Slot);

impl http_body::Body for Lent {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        match lock(&self.0).as_mut() {
            Some(body) => Pin::new(body).poll_frame(cx),
            None => Poll::Ready(Some(Err(axum::Error::new(
                "the request was already answered",
            )))),
        }
    }

    fn is_end_stream(&self) -> bool {
        lock(&self.0).as_ref().is_some_and(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        lock(&self.0)
            .as_ref()
            .map_or_else(SizeHint::default, Body::size_hint)
    }
}
