//! The page's side of a node terminal for the end-to-end tests: a real WebSocket client
//! (tokio-tungstenite) on `GET /v1/nodes/{id}/terminal`, and the gateway's memory.

use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

/// How long a test waits for one message.
pub const WAIT: Duration = Duration::from_secs(20);

/// A page's terminal socket.
pub type Page = WebSocketStream<TcpStream>;

/// How the page authenticates.
#[derive(Clone, Copy)]
pub enum Auth<'a> {
    /// `Authorization: Bearer`.
    Bearer(&'a str),
    /// The subprotocols `ferry.terminal.v1` and `ferry.token.<token>`, as a browser does.
    Protocol(&'a str),
    /// No token at all.
    None,
}

/// Opens `path_and_query` on `addr` with `auth` and extra `headers`: the socket and the
/// subprotocol the server selected, or the HTTP refusal (status, JSON body).
pub async fn open(
    addr: &str,
    path_and_query: &str,
    auth: Auth<'_>,
    headers: &[(&str, &str)],
) -> Result<(Page, Option<String>), (u16, Value)> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut request = format!("ws://{addr}{path_and_query}")
        .into_client_request()
        .unwrap();
    let set = request.headers_mut();
    match auth {
        Auth::Bearer(token) => {
            set.insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {token}")).unwrap(),
            );
        }
        Auth::Protocol(token) => {
            set.insert(
                "sec-websocket-protocol",
                HeaderValue::from_str(&format!("ferry.terminal.v1, ferry.token.{token}")).unwrap(),
            );
        }
        Auth::None => {}
    }
    for (name, value) in headers {
        set.insert(
            tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    let config = WebSocketConfig::default()
        .max_message_size(None)
        .max_frame_size(None);
    match tokio_tungstenite::client_async_with_config(request, tcp, Some(config)).await {
        Ok((ws, response)) => {
            let protocol = response
                .headers()
                .get("sec-websocket-protocol")
                .map(|v| v.to_str().unwrap().to_owned());
            Ok((ws, protocol))
        }
        Err(WsError::Http(response)) => Err(super::node::refused_upgrade(*response)),
        Err(e) => panic!("the upgrade failed: {e}"),
    }
}

/// What came from the server.
#[derive(Debug)]
pub enum Got {
    Text(Value),
    Binary(Vec<u8>),
    /// A close frame, with its code.
    Close(Option<u16>),
    /// The socket ended without a close frame.
    Gone,
}

/// The next message (pings and pongs skipped).
pub async fn recv(page: &mut Page) -> Got {
    loop {
        let next = tokio::time::timeout(WAIT, page.next())
            .await
            .expect("the server said something in time");
        return match next {
            Some(Ok(Message::Text(text))) => Got::Text(serde_json::from_str(&text).unwrap()),
            Some(Ok(Message::Binary(bytes))) => Got::Binary(bytes.to_vec()),
            Some(Ok(Message::Close(frame))) => Got::Close(frame.map(|f| u16::from(f.code))),
            Some(Ok(_)) => continue,
            Some(Err(_)) | None => Got::Gone,
        };
    }
}

/// The next message, which must be a text one.
pub async fn text(page: &mut Page) -> Value {
    match recv(page).await {
        Got::Text(value) => value,
        other => panic!("a text message, not {other:?}"),
    }
}

/// The next text message, letting shell output that is still arriving (a prompt after
/// the last command) go by.
pub async fn text_after_output(page: &mut Page) -> Value {
    loop {
        match recv(page).await {
            Got::Text(value) => return value,
            Got::Binary(_) => continue,
            other => panic!("a text message, not {other:?}"),
        }
    }
}

/// The `ready` message's session id.
pub async fn ready(page: &mut Page) -> String {
    let ready = text(page).await;
    assert_eq!(ready["type"], "ready", "{ready}");
    ready["session"].as_str().unwrap().to_owned()
}

/// Output until it holds `needle`; what came, all of it.
pub async fn output_until(page: &mut Page, needle: &[u8]) -> Vec<u8> {
    let mut seen = Vec::new();
    while !seen.windows(needle.len()).any(|w| w == needle) {
        match recv(page).await {
            Got::Binary(bytes) => seen.extend(bytes),
            other => panic!(
                "output with {:?}, not {other:?} after {:?}",
                String::from_utf8_lossy(needle),
                String::from_utf8_lossy(&seen)
            ),
        }
    }
    seen
}

/// The close after everything else: the texts that came before it and its code.
pub async fn closing(page: &mut Page) -> (Vec<Value>, Option<u16>) {
    let mut texts = Vec::new();
    loop {
        match recv(page).await {
            Got::Text(value) => texts.push(value),
            Got::Binary(_) => {}
            Got::Close(code) => return (texts, code),
            Got::Gone => return (texts, None),
        }
    }
}

/// Sends input bytes.
pub async fn type_in(page: &mut Page, bytes: &[u8]) {
    page.send(Message::Binary(Bytes::copy_from_slice(bytes)))
        .await
        .unwrap();
}

/// Sends a text message.
pub async fn say(page: &mut Page, text: &str) {
    page.send(Message::Text(text.into())).await.unwrap();
}

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
