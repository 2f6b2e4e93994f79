//! A client of a ferry gateway's member API (spec members M-LIST, M-GET, M-MANAGE,
//! M-DAILY): what `ferry files` runs, usable by any program that holds a person's token.
//!
//! Every call answers a [`ClientError`] that keeps the gateway's `{"error":{code,message}}`
//! intact, so a caller can tell "not found" from "refused" from "unreachable". Transfers
//! stream: an upload reads the file in bounded parts, a download writes as bytes arrive,
//! and both report progress through [`Progress`] rather than drawing anything themselves.

mod download;
mod error;
mod listing;
mod upload;

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, Url};
use serde::Deserialize;
use serde_json::json;

pub use download::Downloaded;
pub use error::ClientError;
pub use listing::{Entry, EntryKind, Listing};
pub use reqwest::StatusCode;
pub use upload::RESUMABLE_OVER_BYTES;
pub use upload::{PutOptions, Uploaded, resume_state_dir};

/// How long connecting to the gateway may take before the call fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an answer may send nothing before the call fails: a gateway that accepted
/// the connection and went silent must not hold a script forever.
const READ_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Told how far a transfer has come; a progress bar, or nothing.
pub trait Progress: Send + Sync {
    /// The transfer's whole length in bytes, once known, and how much of it is already
    /// there (a resumed transfer starts past zero).
    fn start(&self, total: u64, done: u64);
    /// `bytes` more arrived or left.
    fn advance(&self, bytes: u64);
}

/// How a transfer reports its progress; shared, since an upload's body reports it from
/// the stream that feeds the connection.
pub type ProgressRef = std::sync::Arc<dyn Progress>;

/// Progress nobody watches.
pub struct Quiet;

impl Progress for Quiet {
    fn start(&self, _total: u64, _done: u64) {}
    fn advance(&self, _bytes: u64) {}
}

/// A share link as `POST /v1/shares` answers it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Share {
    /// The share's id, for revoking it.
    pub id: String,
    /// The link that downloads the file without a token.
    pub url: String,
    /// When the link stops working (RFC 3339).
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// One gateway, reached with one person's token.
#[derive(Clone)]
pub struct Client {
    base: Url,
    http: reqwest::Client,
}

impl Client {
    /// A client of the gateway at `base` (e.g. `http://127.0.0.1:8080`) acting with `token`.
    pub fn new(base: &str, token: &str) -> Result<Client, ClientError> {
        let mut base = Url::parse(base).map_err(|e| {
            ClientError::Usage(format!("the gateway URL {base:?} is not a URL: {e}"))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(ClientError::Usage(format!(
                "the gateway URL must start with http:// or https://, not {}://",
                base.scheme()
            )));
        }
        // Paths are joined onto the base, so it must end like a folder.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let token = token.trim();
        if token.is_empty() {
            return Err(ClientError::Usage(
                "no token: pass --token or set FERRY_TOKEN to a person's token".to_owned(),
            ));
        }
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
            ClientError::Usage("the token holds characters a header cannot carry".to_owned())
        })?;
        bearer.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, bearer);
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_IDLE_TIMEOUT)
            // A redirect would carry the token to wherever it points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(ClientError::transport)?;
        Ok(Client { base, http })
    }

    /// The URL of an API path such as `v1/files`.
    fn url(&self, path: &str) -> Result<Url, ClientError> {
        self.base
            .join(path)
            .map_err(|e| ClientError::Usage(format!("cannot form a URL for {path}: {e}")))
    }

    fn request(&self, method: Method, url: Url) -> RequestBuilder {
        self.http.request(method, url)
    }

    /// The tree under `public/` (M-LIST).
    pub async fn list(&self, project: Option<&str>) -> Result<Listing, ClientError> {
        let mut url = self.url("v1/files")?;
        with_project(&mut url, project);
        let response = send(self.request(Method::GET, url)).await?;
        response.json().await.map_err(ClientError::transport)
    }

    /// Deletes `path` (a file or a folder under `public/`): into the person's trash,
    /// whose entry id is answered, or for good with `forever`.
    pub async fn remove(
        &self,
        path: &str,
        project: Option<&str>,
        forever: bool,
    ) -> Result<Option<String>, ClientError> {
        let mut url = self.url("v1/files")?;
        url.query_pairs_mut().append_pair("path", path);
        with_project(&mut url, project);
        if forever {
            url.query_pairs_mut().append_pair("forever", "true");
        }
        let response = send(self.request(Method::DELETE, url)).await?;
        Ok(response
            .headers()
            .get("ferry-trash-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned))
    }

    /// A link that downloads `path` without a token for `expires` (M-DAILY).
    pub async fn share(
        &self,
        path: &str,
        project: Option<&str>,
        expires: Duration,
    ) -> Result<Share, ClientError> {
        let mut body = json!({ "path": path, "expiresInSecs": expires.as_secs() });
        if let Some(project) = project {
            body["project"] = json!(project);
        }
        let response = send(
            self.request(Method::POST, self.url("v1/shares")?)
                .json(&body),
        )
        .await?;
        let mut share: Share = response.json().await.map_err(ClientError::transport)?;
        // The gateway answers the link from its own root (it cannot know the address it
        // is reached by behind a proxy): the address this client used completes it.
        share.url = self
            .base
            .join(&share.url)
            .map_err(|e| ClientError::Protocol(format!("the share's url is not a URL: {e}")))?
            .to_string();
        Ok(share)
    }

    /// Ends the share link `id` before it expires.
    pub async fn unshare(&self, id: &str) -> Result<(), ClientError> {
        let url = self.url(&format!("v1/shares/{}", segment(id)))?;
        send(self.request(Method::DELETE, url)).await?;
        Ok(())
    }
}

/// Adds `project=P` to a query when there is a project.
fn with_project(url: &mut Url, project: Option<&str>) {
    if let Some(project) = project {
        url.query_pairs_mut().append_pair("project", project);
    }
}

/// `text` as one path segment, every reserved character escaped.
fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Sends a request and turns an error answer into [`ClientError::Api`].
async fn send(request: RequestBuilder) -> Result<Response, ClientError> {
    let response = request.send().await.map_err(ClientError::transport)?;
    error::check(response).await
}
