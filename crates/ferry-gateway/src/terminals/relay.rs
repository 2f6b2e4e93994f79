//! A terminal request for a node whose link another gateway of the site holds (spec
//! S-GATEWAYS): it goes on to that gateway as the admin made it (the same token, path
//! and query, and body), which checks it again from the start and answers it. This
//! gateway passes the answer back: an HTTP refusal as it came, or the socket frame by
//! frame. Relaying adds no authority: the admin's own token is what the other gateway
//! checks. A relayed request is never relayed again, so two gateways that each think
//! the other holds the link answer `node_offline` rather than pass it back and forth.

use axum::body::Body;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as Ws, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use ferry_codes::Code;
use ferry_config::limits::TERMINAL_WS_MESSAGE_MAX_BYTES;
use ferry_node::frame::LINK_READ_BUFFER_BYTES;
use ferry_site::NodeRecord;
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message as Tws};

use super::access::TERMINAL_PROTOCOL;
use super::session::{PAGE_SILENCE, PING_INTERVAL};
use crate::forward::RELAYED;
use crate::{ApiError, AppState, blocking};

fn away() -> ApiError {
    ApiError::new(
        Code::NodeOffline,
        "the node's link is held by another gateway of this site, which did not answer",
    )
}

/// The gateway of the site holding a node's link, where a request is relayed.
pub(crate) struct Holder {
    /// Its id, whose mark is watched while a request waits on it.
    id: String,
    /// Where it is reached.
    address: String,
}

/// Where to relay a request for `record`: the live gateway of the site holding its link,
/// when that is not this one and the request was not relayed already.
pub(crate) async fn holder(
    state: &AppState,
    record: &NodeRecord,
    headers: &HeaderMap,
) -> Result<Option<Holder>, ApiError> {
    if headers.contains_key(RELAYED)
        || record.gateway.is_empty()
        || *record.gateway == *state.gateway_id
    {
        return Ok(None);
    }
    let (site, id) = (state.site.clone(), record.gateway.clone());
    let address = blocking(move || site.gateway_address(&id)).await?;
    Ok(address.map(|a| Holder {
        id: record.gateway.clone(),
        address: crate::forward::reachable(&a),
    }))
}

/// Awaits `work`, a request to `holder`, while the holder keeps marking itself seen
/// ([`crate::forward::while_beating`]): a holder that is stopped answers `node_offline`
/// within seconds rather than never.
async fn while_beating<T>(
    state: &AppState,
    holder: &Holder,
    work: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    crate::forward::while_beating(&state.site, &holder.id, work)
        .await
        .unwrap_or_else(|| Err(away()))
}

/// `GET /v1/nodes/{id}/terminal` on `holder`, for the admin with `token`.
pub(crate) async fn terminal(
    state: &AppState,
    holder: &Holder,
    uri: &Uri,
    token: &str,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let address = &holder.address;
    let Ok(upgrade) = upgrade else {
        // A page asking over plain HTTP why its socket was refused: the holder says.
        let asked = state
            .http
            .get(format!("http://{address}{path}"))
            .bearer_auth(token)
            .header(RELAYED, "1")
            .send();
        return while_beating(state, holder, async {
            relayed_answer(asked.await.map_err(|_| away())?).await
        })
        .await;
    };
    let mut request = format!("ws://{address}{path}")
        .into_client_request()
        .map_err(|e| ApiError::internal("relayed terminal request", e))?;
    let set = request.headers_mut();
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|e| ApiError::internal("relayed terminal token", e))?;
    set.insert(header::AUTHORIZATION, bearer);
    set.insert(
        header::SEC_WEBSOCKET_PROTOCOL,
        HeaderValue::from_static(TERMINAL_PROTOCOL),
    );
    set.insert(RELAYED, HeaderValue::from_static("1"));
    let config = WebSocketConfig::default()
        .max_message_size(Some(TERMINAL_WS_MESSAGE_MAX_BYTES))
        .max_frame_size(Some(TERMINAL_WS_MESSAGE_MAX_BYTES))
        .read_buffer_size(LINK_READ_BUFFER_BYTES);
    let opened = while_beating(state, holder, async {
        let tcp = TcpStream::connect(address).await.map_err(|_| away())?;
        Ok(tokio_tungstenite::client_async_with_config(request, tcp, Some(config)).await)
    })
    .await?;
    let socket = match opened {
        Ok((socket, _)) => socket,
        Err(tungstenite::Error::Http(refusal)) => {
            // Refused before the upgrade (a size, the cap, a session that is gone): the
            // page hears the holder's own answer.
            let (parts, body) = refusal.into_parts();
            let mut response = Body::from(body.unwrap_or_default()).into_response();
            *response.status_mut() = parts.status;
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            return Ok(response);
        }
        Err(_) => return Err(away()),
    };
    Ok(upgrade
        .protocols([TERMINAL_PROTOCOL])
        .max_message_size(TERMINAL_WS_MESSAGE_MAX_BYTES)
        .max_frame_size(TERMINAL_WS_MESSAGE_MAX_BYTES)
        .read_buffer_size(LINK_READ_BUFFER_BYTES)
        .on_upgrade(move |page| pump(page, socket)))
}

/// Carries frames both ways until either side ends; then ends the other. Each frame is
/// sent before the next is read, so a slow side holds the other back rather than this
/// gateway buffering for it. The page is pinged and held to the same silence rule as on
/// the holder (whose own pings this gateway answers): a page that dropped off the network
/// ends the relay, and the holder then keeps the terminal for a reload as it would. The
/// holder pings as often, so one silent as long (stopped, or cut off) ends it too.
async fn pump(page: WebSocket, holder: tokio_tungstenite::WebSocketStream<TcpStream>) {
    let (mut to_page, mut from_page) = page.split();
    let (mut to_holder, mut from_holder) = holder.split();
    let upstream = async {
        while let Ok(Some(Ok(message))) = timeout(PAGE_SILENCE, from_page.next()).await {
            let Some(message) = to_holder_message(message) else {
                continue;
            };
            let closing = matches!(message, Tws::Close(_));
            if to_holder.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = to_holder.close().await;
    };
    let downstream = async {
        let mut ping = tokio::time::interval(PING_INTERVAL);
        let mut heard = std::time::Instant::now();
        loop {
            let message = tokio::select! {
                _ = ping.tick() => {
                    if heard.elapsed() > PAGE_SILENCE {
                        break;
                    }
                    Ws::Ping(Bytes::new())
                }
                next = from_holder.next() => {
                    heard = std::time::Instant::now();
                    match next.and_then(Result::ok).map(to_page_message) {
                        Some(Some(message)) => message,
                        Some(None) => continue,
                        None => break,
                    }
                }
            };
            let closing = matches!(message, Ws::Close(_));
            if to_page.send(message).await.is_err() || closing {
                break;
            }
        }
        let _ = to_page.close().await;
    };
    tokio::select! {
        () = upstream => {}
        () = downstream => {}
    }
}

/// A page's frame for the holder; pings and pongs stay on their own hop.
fn to_holder_message(message: Ws) -> Option<Tws> {
    Some(match message {
        Ws::Text(text) => Tws::Text(text.as_str().into()),
        Ws::Binary(bytes) => Tws::Binary(bytes),
        Ws::Close(frame) => Tws::Close(frame.map(|f| tungstenite::protocol::CloseFrame {
            code: f.code.into(),
            reason: f.reason.as_str().into(),
        })),
        Ws::Ping(_) | Ws::Pong(_) => return None,
    })
}

/// The holder's frame for the page.
fn to_page_message(message: Tws) -> Option<Ws> {
    Some(match message {
        Tws::Text(text) => Ws::Text(text.as_str().into()),
        Tws::Binary(bytes) => Ws::Binary(bytes),
        Tws::Close(frame) => Ws::Close(frame.map(|f| CloseFrame {
            code: f.code.into(),
            reason: f.reason.as_str().into(),
        })),
        Tws::Ping(_) | Tws::Pong(_) | Tws::Frame(_) => return None,
    })
}

/// `POST /v1/nodes/{id}/terminal/upload` on `holder`: the body streams through as it
/// comes, and the answer comes back as it was.
pub(crate) async fn upload(
    state: &AppState,
    holder: &Holder,
    uri: &Uri,
    token: &str,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = state
        .http
        .post(format!("http://{}{path}", holder.address))
        .bearer_auth(token)
        .header(RELAYED, "1")
        .body(reqwest::Body::wrap_stream(body.into_data_stream()));
    for name in [header::CONTENT_TYPE, header::CONTENT_LENGTH] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name.as_str(), value.as_bytes());
        }
    }
    while_beating(state, holder, async {
        relayed_answer(request.send().await.map_err(|_| away())?).await
    })
    .await
}

/// The holder's answer, for the page: its status, type and body (a JSON answer or
/// refusal, small).
async fn relayed_answer(answer: reqwest::Response) -> Result<Response, ApiError> {
    let status = StatusCode::from_u16(answer.status().as_u16()).map_err(|_| away())?;
    let content_type = answer.headers().get(reqwest::header::CONTENT_TYPE).cloned();
    let body = answer.bytes().await.map_err(|_| away())?;
    let mut response = Body::from(body).into_response();
    *response.status_mut() = status;
    if let Some(value) = content_type.and_then(|v| HeaderValue::from_bytes(v.as_bytes()).ok()) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    Ok(response)
}
