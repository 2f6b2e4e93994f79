//! Node calls forwarded between the gateways of one site (spec S-GATEWAYS): an agent on
//! gateway B uses a node whose link gateway A holds. B's toolbox sees the node's record
//! say "connected to A", and posts the call to A's internal route; A makes it on its own
//! link, with its own checks, and answers with the tool's output.
//!
//! The route exists only for the site's gateways: a call must carry the HMAC-SHA256 of
//! its body under the key the site's gateways share (kept in the metadata database),
//! be stamped within [`SKEW`] of now, and not be a replay of one seen within that time.
//! Anything else is answered as a route that does not exist. A forwarded call is made
//! on the receiving gateway's links only, never forwarded again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use ferry_codes::Code;
use ferry_site::Site;
use ferry_tools::{Content, ToolError, ToolOutput};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(node_call))
}

/// The internal route.
pub(crate) const ROUTE: &str = "/internal/v1/node-call";
/// Marks a request one gateway relayed to another as the client made it (a terminal's,
/// an MCP session's): it is never relayed again, so two gateways that each think the
/// other holds something answer rather than pass the request back and forth.
pub(crate) const RELAYED: &str = "ferry-relayed";
/// The header carrying the body's signature, in lowercase hex.
const SIGNATURE: &str = "x-ferry-gateway-signature";
/// How far a call's stamp may be from the receiver's clock.
const SKEW: Duration = Duration::from_secs(60);
/// The largest forwarded call: a `file_push` of 16 MiB in base64, and its other fields.
const CALL_MAX_BYTES: usize = 24 * 1024 * 1024;
/// The node tools; nothing else is forwarded.
const NODE_TOOLS: &[&str] = &["dir_list", "file_fetch", "file_push", "dir_fetch"];

type HmacSha256 = Hmac<Sha256>;

/// A node tool's call, as one gateway of the site forwards it to another.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ForwardedCall)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Call {
    /// The gateway the call is for (ids are made anew at each start): a call captured on
    /// its way is refused by any other gateway, and by the same one after a restart,
    /// whose memory of the nonces it took is gone.
    to: String,
    /// The person whose agent calls.
    person: String,
    /// The node tool: `dir_list`, `file_fetch`, `file_push` or `dir_fetch`.
    tool: String,
    /// The tool's arguments, as the agent gave them.
    args: Value,
    /// Seconds since the epoch when it was sent.
    at: u64,
    /// Random, so that two equal calls sign differently and a replay is recognised.
    nonce: String,
}

/// A tool's output as it crosses back.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ForwardedAnswer)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Answer {
    /// Whether the tool failed (its content then says why).
    is_error: bool,
    /// The tool's structured output; `null` when it has none.
    #[schema(required = true)]
    structured: Option<Value>,
    content: Vec<Part>,
}

/// One piece of a tool's output.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ForwardedPart)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
enum Part {
    Text {
        text: String,
    },
    Image {
        mime: String,
        /// The image's bytes in base64.
        #[schema(content_encoding = "base64")]
        data: String,
    },
}

impl From<&ToolOutput> for Answer {
    fn from(output: &ToolOutput) -> Answer {
        Answer {
            is_error: output.is_error,
            structured: output.structured.clone(),
            content: output
                .content
                .iter()
                .map(|c| match c {
                    Content::Text(text) => Part::Text { text: text.clone() },
                    Content::Image { mime, data } => Part::Image {
                        mime: mime.clone(),
                        data: data_encoding::BASE64.encode(data),
                    },
                })
                .collect(),
        }
    }
}

impl Answer {
    fn into_output(self) -> Result<ToolOutput, ToolError> {
        let mut content = Vec::with_capacity(self.content.len());
        for part in self.content {
            content.push(match part {
                Part::Text { text } => Content::Text(text),
                Part::Image { mime, data } => Content::Image {
                    mime,
                    data: data_encoding::BASE64
                        .decode(data.as_bytes())
                        .map_err(|_| gone("answered an image that is not base64"))?,
                },
            });
        }
        Ok(ToolOutput {
            content,
            structured: self.structured,
            is_error: self.is_error,
        })
    }
}

fn gone(why: &str) -> ToolError {
    ToolError::new(
        Code::NodeOffline,
        format!("the gateway holding the node's link {why}; try again"),
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn sign(key: &[u8; 32], body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(b"ferry gateway call\n");
    mac.update(body);
    mac
}

/// The site's shared key, read once.
fn key_of(site: &Site, cache: &OnceLock<[u8; 32]>) -> Result<[u8; 32], ApiError> {
    if let Some(key) = cache.get() {
        return Ok(*key);
    }
    let key = site.gateway_key()?;
    Ok(*cache.get_or_init(|| key))
}

/// Carries calls from this gateway to the others.
pub(crate) struct Forwarder {
    site: Arc<Site>,
    http: reqwest::Client,
    key: Arc<OnceLock<[u8; 32]>>,
}

impl Forwarder {
    pub(crate) fn new(state: &AppState) -> Forwarder {
        Forwarder {
            site: state.site.clone(),
            http: state.http.clone(),
            key: state.gateway_key.clone(),
        }
    }
}

impl ferry_tools::Forward for Forwarder {
    fn forward(
        &self,
        gateway: String,
        person: String,
        tool: String,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolError>> {
        let (site, http, key) = (self.site.clone(), self.http.clone(), self.key.clone());
        async move {
            let (looking, id) = (site.clone(), gateway.clone());
            let found = blocking(move || {
                let key = key_of(&looking, &key)?;
                Ok::<_, ApiError>((looking.gateway_address(&id)?, key))
            })
            .await
            .map_err(|e| ToolError::new(e.code, e.message))?;
            let (Some(address), key) = found else {
                return Err(gone("is gone"));
            };
            let call = Call {
                to: gateway.clone(),
                person,
                tool,
                args,
                at: now_secs(),
                nonce: ferry_fs::random_hex::<16>(),
            };
            let body = serde_json::to_vec(&call)
                .map_err(|e| ToolError::new(Code::Internal, format!("a forwarded call: {e}")))?;
            let signature =
                data_encoding::HEXLOWER.encode(&sign(&key, &body).finalize().into_bytes());
            let call = async {
                let answer = http
                    .post(format!("http://{}{ROUTE}", reachable(&address)))
                    .header(SIGNATURE, signature)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body)
                    .send()
                    .await
                    .map_err(|_| gone("did not answer"))?;
                if !answer.status().is_success() {
                    return Err(gone(&format!(
                        "refused the call (HTTP {})",
                        answer.status().as_u16()
                    )));
                }
                let answer: Answer = answer
                    .json()
                    .await
                    .map_err(|_| gone("answered something that is not a tool's output"))?;
                answer.into_output()
            };
            while_beating(&site, &gateway, call)
                .await
                .unwrap_or_else(|| Err(gone("stopped answering")))
        }
        .boxed()
    }
}

/// Awaits `work`, a request made to gateway `id`, for as long as that gateway keeps
/// marking itself seen; `None` once its mark has not moved for
/// [`ferry_site::GATEWAY_STALLED_SECS`] (or it left the site). A gateway that is stopped
/// or stalled still accepts connections (the kernel does), so without this a request to
/// it would wait as long as it stays so. Only the mark's movement is compared, on this
/// machine's clock, so the two machines' clocks need not agree.
pub(crate) async fn while_beating<T>(
    site: &Arc<Site>,
    id: &str,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        done = work => Some(done),
        () = stalled(site.clone(), id.to_owned()) => None,
    }
}

/// Resolves once gateway `id`'s mark has not moved for
/// [`ferry_site::GATEWAY_STALLED_SECS`], or it left the site: [`while_beating`]'s watch,
/// also for what streams from that gateway for long.
pub(crate) async fn stalled(site: Arc<Site>, id: String) {
    let stalled = Duration::from_secs(ferry_site::GATEWAY_STALLED_SECS);
    let mut ticks = tokio::time::interval(stalled / 5);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut last, mut moved) = (None, Instant::now());
    loop {
        ticks.tick().await;
        let (site, id) = (site.clone(), id.clone());
        match blocking(move || Ok::<_, ApiError>(site.gateway_seen_at(&id)?)).await {
            Ok(None) => return,
            Ok(seen) if seen != last => (last, moved) = (seen, Instant::now()),
            // The metadata did not answer: no news either way, so keep waiting.
            Ok(_) | Err(_) => {}
        }
        if moved.elapsed() >= stalled {
            return;
        }
    }
}

/// Where to reach a gateway that registered `address`: a gateway bound to every
/// interface (`0.0.0.0`, `[::]`) is reached on loopback, on the same machine; one bound
/// to an address, there.
pub(crate) fn reachable(address: &str) -> String {
    if let Some(port) = address.strip_prefix("0.0.0.0:") {
        return format!("127.0.0.1:{port}");
    }
    if let Some(port) = address.strip_prefix("[::]:") {
        return format!("[::1]:{port}");
    }
    address.to_owned()
}

/// The nonces of calls received within [`SKEW`]: a call seen once is not taken again.
#[derive(Default)]
pub(crate) struct Seen(Mutex<HashMap<String, Instant>>);

impl Seen {
    /// Whether `nonce` is new (and remembers it).
    fn first(&self, nonce: &str) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        seen.retain(|_, at| now.duration_since(*at) <= SKEW * 2);
        seen.insert(nonce.to_owned(), now).is_none()
    }
}

/// Internal: a node tool's call, forwarded by another gateway of the site.
#[utoipa::path(
    post,
    path = ROUTE,
    operation_id = "forwardNodeCall",
    tag = "internal",
    description = "Internal, between the gateways of one site, not for clients: a node tool's \
                   call that another gateway of the site forwards to the one holding the node's \
                   link, which makes it on that link and answers with the tool's output. The \
                   call is signed with the key the site's gateways share (HMAC-SHA256 of the \
                   body, in `X-Ferry-Gateway-Signature`), addressed to this gateway, stamped \
                   within a minute of its clock, and taken once; anything else is answered \
                   `404 no_route`, as a route that does not exist.",
    params(("X-Ferry-Gateway-Signature" = String, Header,
            description = "HMAC-SHA256 of the body under the site's gateway key, in lowercase hex.")),
    request_body = Call,
    responses((status = 200, description = "The tool's output, failed or not.", body = Answer))
)]
pub(crate) async fn node_call(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    // To anyone but the site's gateways, there is no such route.
    let hidden = || ApiError::new(Code::NoRoute, "no such route");
    let signature = headers
        .get(SIGNATURE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| data_encoding::HEXLOWER.decode(v.as_bytes()).ok())
        .ok_or_else(hidden)?;
    let body: Bytes = axum::body::to_bytes(body, CALL_MAX_BYTES)
        .await
        .map_err(|_| hidden())?;
    let site = state.site.clone();
    let cache = state.gateway_key.clone();
    let key = blocking(move || key_of(&site, &cache)).await?;
    sign(&key, &body)
        .verify_slice(&signature)
        .map_err(|_| hidden())?;
    let call: Call = serde_json::from_slice(&body).map_err(|_| hidden())?;
    if call.to != *state.gateway_id
        || now_secs().abs_diff(call.at) > SKEW.as_secs()
        || !state.forwarded.first(&call.nonce)
    {
        return Err(hidden());
    }
    if !NODE_TOOLS.contains(&call.tool.as_str()) {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "only the node tools are forwarded",
        ));
    }
    let output = match state.toolbox(&call.person) {
        Ok(toolbox) => toolbox.call_on_node_here(&call.tool, call.args).await,
        Err(e) => ToolOutput::error(&e),
    };
    Ok(Json(Answer::from(&output)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_cross_whole() {
        let output = ToolOutput {
            content: vec![
                Content::Text("a\nb".into()),
                Content::Image {
                    mime: "image/png".into(),
                    data: vec![0, 1, 255],
                },
            ],
            structured: Some(serde_json::json!({"size": 3})),
            is_error: false,
        };
        let text = serde_json::to_string(&Answer::from(&output)).unwrap();
        let back: Answer = serde_json::from_str(&text).unwrap();
        assert_eq!(back.into_output().unwrap(), output);
    }

    #[test]
    fn a_signature_binds_key_and_body() {
        let (key, other) = ([7u8; 32], [8u8; 32]);
        let tag = sign(&key, b"body").finalize().into_bytes();
        assert!(sign(&key, b"body").verify_slice(&tag).is_ok());
        assert!(sign(&key, b"bodY").verify_slice(&tag).is_err());
        assert!(sign(&other, b"body").verify_slice(&tag).is_err());
    }

    #[test]
    fn a_nonce_is_taken_once() {
        let seen = Seen::default();
        assert!(seen.first("a"));
        assert!(!seen.first("a"));
        assert!(seen.first("b"));
    }

    #[test]
    fn gateways_bound_everywhere_are_reached_on_loopback() {
        assert_eq!(reachable("0.0.0.0:8080"), "127.0.0.1:8080");
        assert_eq!(reachable("[::]:8080"), "[::1]:8080");
        assert_eq!(reachable("10.0.0.2:8080"), "10.0.0.2:8080");
    }
}
