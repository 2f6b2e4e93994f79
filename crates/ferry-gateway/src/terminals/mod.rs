//! `GET /v1/nodes/{id}/terminal?cols=C&rows=R[&session=S]` (spec nodes N-TERM): an
//! admin's terminal on a node, a WebSocket relayed to the node's `terminal.open` call.
//!
//! Every refusal is a plain HTTP answer before the upgrade: a non-admin gets `404
//! no_route` like on every node route; then the node (`404 unknown_node`), its approval
//! for `terminal.open` (`403`), its link (`503 node_offline`), the size (`400
//! invalid_request`), the cap per node (`429 too_many_terminals`) or the session to
//! reattach (`404 unknown_terminal`), and only then whether the request is a WebSocket at
//! all: a page whose socket was refused asks the same URL over plain HTTP to learn why.
//! The shell is started before the upgrade too, so a node that cannot start it is an HTTP
//! answer as well.
//!
//! The page's token may come as the subprotocol `ferry.token.<token>` beside
//! `ferry.terminal.v1`, since a browser cannot set headers on a WebSocket; the server
//! selects `ferry.terminal.v1` and never echoes the token.

mod access;
mod client;
mod registry;
mod relay;
mod replay;
mod session;

use std::time::Duration;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message as Ws, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use ferry_codes::Code;
use ferry_config::limits::{NODE_STALL_SECS, TERMINAL_WS_MESSAGE_MAX_BYTES};
use ferry_node::frame::LINK_READ_BUFFER_BYTES;
use ferry_node::terminal::{TERMINAL_OPEN, TerminalOpenArgs, TerminalOpenHead, check_size};
use serde::Deserialize;
use utoipa::IntoParams;

pub(crate) use access::{Reached, Route, admin, node_error, reach, same_origin, shown, token_of};
pub(crate) use registry::Sessions;
pub(crate) use relay::upload as relay_upload;

use crate::{ApiError, AppState};
use session::{Attach, Opened};

/// How long a node may take to start a shell.
const OPEN_TIMEOUT: Duration = Duration::from_secs(NODE_STALL_SECS);

/// The query of the terminal route, read as text so that every bad value gets the same
/// clear answer.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct TerminalQuery {
    /// The terminal's width in columns.
    #[param(value_type = u16, required = true, minimum = 1, maximum = 1000)]
    cols: Option<String>,
    /// The terminal's height in rows.
    #[param(value_type = u16, required = true, minimum = 1, maximum = 1000)]
    rows: Option<String>,
    /// The session to attach to again (from its `ready` message), rather than a new shell.
    session: Option<String>,
}

/// The terminal's size from the query: whole numbers within `check_size`.
fn size_of(query: &TerminalQuery) -> Result<(u16, u16), ApiError> {
    let number = |key: &str, value: &Option<String>| {
        value
            .as_deref()
            .and_then(|v| v.parse::<u16>().ok())
            .ok_or_else(|| {
                ApiError::new(
                    Code::InvalidRequest,
                    format!("send ?cols=C&rows=R: {key} is missing or not a number from 1 to 1000"),
                )
            })
    };
    let (cols, rows) = (number("cols", &query.cols)?, number("rows", &query.rows)?);
    check_size(cols, rows).map_err(|why| ApiError::new(Code::InvalidRequest, why))?;
    Ok((cols, rows))
}

/// A terminal on the node: a WebSocket to a new shell, or to one of the admin's own again.
///
/// The subprotocol is `ferry.terminal.v1`: binary messages are the terminal's bytes, text
/// messages JSON (`resize`, `close` from the page; `ready`, `exit`, `error` to it). A
/// browser, which cannot set headers, offers its token as the subprotocol
/// `ferry.token.<token>`. Every refusal is a plain HTTP answer before the upgrade, so a
/// page whose socket was refused asks the same URL over plain HTTP to learn why.
#[utoipa::path(
    get,
    path = "/v1/nodes/{id}/terminal",
    operation_id = "openNodeTerminal",
    tag = "nodes",
    security(("bearer" = [])),
    params(
        ("id" = String, Path, description = "The node's id."),
        TerminalQuery,
    ),
    responses((status = 101, description = "Switched to the terminal's WebSocket; for an \
               admin's token only (anyone else is answered 404 no_route).",
               headers(
                   ("Upgrade" = String, description = "`websocket`."),
                   ("Connection" = String, description = "`upgrade`."),
                   ("Sec-WebSocket-Accept" = String,
                    description = "The digest of the request's `Sec-WebSocket-Key` (RFC 6455)."),
                   ("Sec-WebSocket-Protocol" = String,
                    description = "`ferry.terminal.v1`, when the client offered it; never the token."),
               )))
)]
pub(crate) async fn terminal(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<TerminalQuery>, QueryRejection>,
    uri: Uri,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let who = admin(&state, &headers).await?;
    let holder = session::Holder {
        site: state.site.clone(),
        token: access::token_of(&headers).unwrap_or_default(),
    };
    same_origin(&headers)?;
    let Reached { record, link } = match reach(&state, id, TERMINAL_OPEN, &headers).await? {
        Route::Here(reached) => *reached,
        Route::Elsewhere(elsewhere) => {
            return relay::terminal(&state, &elsewhere, &uri, &holder.token, upgrade).await;
        }
    };
    let Query(query) = query.map_err(|e| ApiError::new(Code::InvalidRequest, e.body_text()))?;
    let (cols, rows) = size_of(&query)?;
    // Checked after the session and the cap, so a page whose socket was refused can ask
    // the same URL over plain HTTP and be told why.
    let upgraded = |upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>| {
        Ok::<_, ApiError>(
            upgrade
                .map_err(|e| {
                    ApiError::new(
                        Code::InvalidRequest,
                        format!(
                            "a terminal is a WebSocket: send GET with 'Upgrade: websocket' ({})",
                            e.body_text()
                        ),
                    )
                })?
                .protocols([access::TERMINAL_PROTOCOL])
                .max_message_size(TERMINAL_WS_MESSAGE_MAX_BYTES)
                .max_frame_size(TERMINAL_WS_MESSAGE_MAX_BYTES)
                // Keystrokes: see LINK_READ_BUFFER_BYTES for why the read is kept small.
                .read_buffer_size(LINK_READ_BUFFER_BYTES),
        )
    };
    let terminals = state.terminals.clone();
    if let Some(session) = &query.session {
        let attach = terminals.find(session, &record.id, &who.person)?;
        let size = Some((cols, rows));
        return Ok(upgraded(upgrade)?.on_upgrade(move |socket| async move {
            if let Err(refused) = attach
                .send(Attach {
                    socket,
                    size,
                    holder,
                })
                .await
            {
                // The terminal ended between the look-up and the upgrade.
                let text = client::error(
                    Code::UnknownTerminal,
                    "the terminal ended just now; open a new one",
                );
                refuse(refused.0.socket, text).await;
            }
        }));
    }
    let max = state.site.config().nodes.terminals_max;
    let (registered, sockets) = terminals.register(&record.id, &who.person, max)?;
    let upgrade = upgraded(upgrade)?;
    let args = serde_json::to_value(TerminalOpenArgs { cols, rows })
        .map_err(|e| ApiError::internal("terminal.open args", e))?;
    let opening = async {
        let mut call = link.open_queued(TERMINAL_OPEN, args, true).await?;
        let input = call.take_body();
        Ok::<_, ferry_node::NodeError>((input, call.response().await?))
    };
    let (input, response) = tokio::time::timeout(OPEN_TIMEOUT, opening)
        .await
        .map_err(|_| node_error(ferry_node::NodeError::Stalled(OPEN_TIMEOUT)))?
        .map_err(node_error)?;
    let input = input.ok_or_else(|| ApiError::internal("terminal.open", "no request body"))?;
    // The head is read strictly; the shell shown is the one the pairing record has (the
    // one uploads are quoted for).
    serde_json::from_value::<TerminalOpenHead>(response.result).map_err(|e| {
        ApiError::new(
            Code::BadFrame,
            format!(
                "the node's answer to terminal.open does not parse: {}",
                shown(&e.to_string())
            ),
        )
    })?;
    let opened = Opened {
        input,
        output: response.body,
        shell: record.shell.clone(),
        link,
    };
    let closing = state.closing.clone();
    Ok(upgrade.on_upgrade(move |socket| {
        session::run(registered, opened, sockets, socket, holder, closing)
    }))
}

/// Tells a socket `text` and closes it.
async fn refuse(mut socket: WebSocket, text: String) {
    let _ = socket.send(Ws::Text(text.into())).await;
    let frame = CloseFrame {
        code: close_code::NORMAL,
        reason: "".into(),
    };
    let _ = socket.send(Ws::Close(Some(frame))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(cols: Option<&str>, rows: Option<&str>) -> TerminalQuery {
        TerminalQuery {
            cols: cols.map(str::to_owned),
            rows: rows.map(str::to_owned),
            session: None,
        }
    }

    /// The description's bounds are the checked ones (an attribute takes no constant).
    #[test]
    fn the_described_size_is_the_checked_one() {
        let params = TerminalQuery::into_params(|| None);
        for name in ["cols", "rows"] {
            let param = params.iter().find(|p| p.name == name).unwrap();
            let schema = serde_json::to_value(&param.schema).unwrap();
            assert_eq!(schema["minimum"], 1, "{name}");
            assert_eq!(
                schema["maximum"],
                ferry_node::terminal::TERMINAL_SIZE_MAX,
                "{name}"
            );
        }
    }

    #[test]
    fn the_size_is_1_to_1000_whole_numbers() {
        assert_eq!(size_of(&query(Some("80"), Some("24"))).unwrap(), (80, 24));
        assert_eq!(size_of(&query(Some("1000"), Some("1"))).unwrap(), (1000, 1));
        for (cols, rows) in [
            (None, Some("24")),
            (Some("80"), None),
            (Some("0"), Some("24")),
            (Some("1001"), Some("24")),
            (Some("100000"), Some("24")),
            (Some("-1"), Some("24")),
            (Some("8a"), Some("24")),
        ] {
            let e = size_of(&query(cols, rows)).unwrap_err();
            assert_eq!(e.code, Code::InvalidRequest, "{cols:?} × {rows:?}");
        }
    }
}
