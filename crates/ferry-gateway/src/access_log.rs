//! One line per request at INFO, written when its answer has been sent whole (or cut
//! off): the method, the route, the status, the bytes of the answer's body and how long
//! it all took. The route is the matched pattern (`/v1/nodes/{id}/approve`), else the
//! path; never a query string or a header, so no token reaches the log. A server error
//! is logged at WARN. The same layer counts each request in the metrics (S-OPS).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as _, Frame, SizeHint};

/// Logs the request once its answer's body is done with, and counts it in the metrics:
/// the request body's bytes once it is done with, the rest with the log line.
pub(crate) async fn access_log(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let matched = request.extensions().get::<MatchedPath>();
    let label = matched
        .map_or(crate::ops::OTHER_ROUTE, |m| m.as_str())
        .to_owned();
    let route = match matched {
        Some(matched) => matched.as_str().to_owned(),
        None => request.uri().path().to_owned(),
    };
    let request = request.map(|body| {
        let label = label.clone();
        Tallied::body(body, None, move |bytes, _| {
            if bytes > 0 {
                crate::ops::request_bytes(&label, bytes);
            }
        })
    });
    let response = next.run(request).await;
    let status = response.status();
    let (parts, body) = response.into_parts();
    let length = http_body::Body::size_hint(&body).exact().or_else(|| {
        parts
            .headers
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok())
    });
    let line = Line {
        method,
        route,
        label,
        status,
        started,
    };
    let body = Tallied::body(body, length, move |bytes, finished| {
        line.write(bytes, finished);
    });
    Response::from_parts(parts, body)
}

/// What the line says, less what the body still has to tell.
struct Line {
    method: Method,
    route: String,
    /// The route's label in the metrics: its pattern, or `other`.
    label: String,
    status: StatusCode,
    started: Instant,
}

impl Line {
    fn write(&self, bytes: u64, finished: bool) {
        let took = self.started.elapsed();
        crate::ops::request_done(&self.method, &self.label, self.status, bytes, took);
        let ms = took.as_secs_f64() * 1000.0;
        let (method, route, status) = (&self.method, &self.route, self.status.as_u16());
        let cut = if finished { "" } else { " (cut off)" };
        if self.status.is_server_error() {
            tracing::warn!("{method} {route} {status} {bytes} B {ms:.1} ms{cut}");
        } else {
            tracing::info!("{method} {route} {status} {bytes} B {ms:.1} ms{cut}");
        }
    }
}

/// Told once, when a body ends or is dropped unfinished (a client that went away): the
/// bytes it yielded, and whether it was whole.
type Done = Box<dyn FnOnce(u64, bool) + Send>;

/// A body that counts what it yields and says so when it is done with.
struct Tallied {
    inner: Body,
    /// The body's length when it is known in advance: the server may stop polling once
    /// that much was sent, without waiting for the body to say it ended.
    length: Option<u64>,
    bytes: u64,
    done: Option<Done>,
}

impl Tallied {
    fn body(
        inner: Body,
        length: Option<u64>,
        done: impl FnOnce(u64, bool) + Send + 'static,
    ) -> Body {
        Body::new(Tallied {
            inner,
            length,
            bytes: 0,
            done: Some(Box::new(done)),
        })
    }
}

impl http_body::Body for Tallied {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => {
                if let Some(done) = self.done.take() {
                    done(self.bytes, true);
                }
            }
            Poll::Ready(Some(Err(_))) | Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tallied {
    fn drop(&mut self) {
        if let Some(done) = self.done.take() {
            let finished = self.inner.is_end_stream() || self.length == Some(self.bytes);
            done(self.bytes, finished);
        }
    }
}
