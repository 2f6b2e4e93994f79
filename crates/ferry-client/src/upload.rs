//! Uploads: a small file in one `POST /v1/media`, a large one through tus 1.0 at
//! `/v1/uploads` (M-DAILY), in parts that each carry their sha256, so a broken connection
//! or a stopped program costs at most one part.
//!
//! A tus upload's URL is remembered in a small file under [`resume_state_dir`], keyed by
//! the gateway, the local file (path, size, mtime) and where it goes; running the same
//! `put` again finds it, asks the gateway how far it came, and goes on from there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use data_encoding::{BASE64, HEXLOWER};
use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap, LOCATION};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use crate::{Client, ClientError, ProgressRef, error};

/// Files above this many bytes go through tus: the web client's threshold too.
pub const RESUMABLE_OVER_BYTES: u64 = 8 * 1024 * 1024;
/// The bytes of one tus PATCH: held in memory once, to be hashed before it is sent.
const TUS_PART_BYTES: usize = 8 * 1024 * 1024;
/// How often a broken upload is picked up again within one call.
const UPLOAD_RETRIES: u32 = 5;
/// The first pause before a retry; each next one doubles.
const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// The tus protocol version spoken.
const TUS_VERSION: &str = "1.0.0";

/// Where and how a file is uploaded.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    /// The project whose workspace receives it.
    pub project: Option<String>,
    /// An existing folder under `public/` to place it in; `public/` itself when unset.
    pub folder: Option<String>,
    /// The name it gets; the local file's name when unset.
    pub name: Option<String>,
    /// Keep a file already at that name and fail with `exists`, rather than replace it.
    pub keep_existing: bool,
}

/// The gateway's answer to a finished upload (M-UP).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Uploaded {
    /// Where the file now is, `public/…`.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its sha256, in hex.
    #[serde(default)]
    pub sha256: Option<String>,
    /// The name as sent, when the gateway had to make it safe.
    #[serde(default)]
    pub renamed_from: Option<String>,
    /// Bytes an earlier, interrupted upload had already sent (tus only).
    #[serde(skip)]
    pub resumed_from: u64,
}

/// The folder remembering unfinished resumable uploads: `$XDG_STATE_HOME/ferry/resumable-uploads`,
/// else `~/.local/state/ferry/resumable-uploads`.
pub fn resume_state_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".local/state"))
        })?;
    Some(base.join("ferry").join("resumable-uploads"))
}

impl Client {
    /// Uploads the local file `local`; through tus when it is larger than
    /// [`RESUMABLE_OVER_BYTES`].
    pub async fn put(
        &self,
        local: &Path,
        options: &PutOptions,
        progress: &ProgressRef,
    ) -> Result<Uploaded, ClientError> {
        let meta = tokio::fs::metadata(local)
            .await
            .map_err(|e| ClientError::local(local, e))?;
        if !meta.is_file() {
            return Err(ClientError::Usage(format!(
                "{} is not a file",
                local.display()
            )));
        }
        let name = match &options.name {
            Some(name) => name.clone(),
            None => local
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| {
                    ClientError::Usage(format!(
                        "{} has no name in UTF-8: pass --name",
                        local.display()
                    ))
                })?
                .to_owned(),
        };
        if meta.len() > RESUMABLE_OVER_BYTES {
            self.put_resumable(local, &meta, &name, options, progress)
                .await
        } else {
            self.put_whole(local, meta.len(), &name, options, progress)
                .await
        }
    }

    /// One multipart `POST /v1/media`, the file streamed from disk.
    async fn put_whole(
        &self,
        local: &Path,
        len: u64,
        name: &str,
        options: &PutOptions,
        progress: &ProgressRef,
    ) -> Result<Uploaded, ClientError> {
        let file = tokio::fs::File::open(local)
            .await
            .map_err(|e| ClientError::local(local, e))?;
        progress.start(len, 0);
        let told = progress.clone();
        let stream = tokio_util::io::ReaderStream::new(file).map(move |chunk| {
            if let Ok(bytes) = &chunk {
                told.advance(bytes.len() as u64);
            }
            chunk
        });
        let part =
            reqwest::multipart::Part::stream_with_length(reqwest::Body::wrap_stream(stream), len)
                .file_name(name.to_owned());
        let mut form = reqwest::multipart::Form::new();
        if let Some(project) = &options.project {
            form = form.text("project", project.clone());
        }
        if let Some(folder) = &options.folder {
            form = form.text("folder", folder.clone());
        }
        form = form.part("file", part);
        let mut url = self.url("v1/media")?;
        if options.keep_existing {
            url.query_pairs_mut().append_pair("overwrite", "false");
        }
        let response = crate::send(self.request(Method::POST, url).multipart(form)).await?;
        response.json().await.map_err(ClientError::transport)
    }

    /// A tus upload, resumed when an earlier one of the same file is still open.
    async fn put_resumable(
        &self,
        local: &Path,
        meta: &std::fs::Metadata,
        name: &str,
        options: &PutOptions,
        progress: &ProgressRef,
    ) -> Result<Uploaded, ClientError> {
        let len = meta.len();
        let remembered = Remembered::for_upload(self, local, meta, name, options);
        let mut resumed_from = 0;
        let mut at = None;
        if let Some(url) = remembered.as_ref().and_then(Remembered::url) {
            match self.tus_offset(&url, len).await {
                Ok(offset) => {
                    resumed_from = offset;
                    at = Some((url, offset));
                }
                // Expired, finished or unknown: start a new one.
                Err(e) if !e.is_transient() => {}
                Err(e) => return Err(e),
            }
        }
        let (url, mut offset) = match at {
            Some(found) => found,
            None => {
                let url = self.tus_create(len, name, options).await?;
                if let Some(r) = &remembered {
                    r.remember(&url);
                }
                (url, 0)
            }
        };
        let mut file = tokio::fs::File::open(local)
            .await
            .map_err(|e| ClientError::local(local, e))?;
        progress.start(len, offset);
        let mut buf = vec![0u8; TUS_PART_BYTES];
        let mut retries = 0;
        let mut last = None;
        while offset < len || last.is_none() {
            let want = (len - offset).min(TUS_PART_BYTES as u64) as usize;
            file.seek(std::io::SeekFrom::Start(offset))
                .await
                .map_err(|e| ClientError::local(local, e))?;
            file.read_exact(&mut buf[..want])
                .await
                .map_err(|e| ClientError::local(local, e))?;
            match self.tus_patch(&url, offset, &buf[..want]).await {
                // A gateway that takes a part without moving on would have it sent forever.
                Ok((next, _)) if next == offset && want > 0 => {
                    retries += 1;
                    if retries > UPLOAD_RETRIES {
                        return Err(ClientError::Protocol(format!(
                            "the upload stays at {offset} bytes however often a part is sent"
                        )));
                    }
                }
                Ok((next, headers)) => {
                    progress.advance(next - offset);
                    offset = next;
                    retries = 0;
                    if offset == len {
                        last = Some(headers);
                    }
                }
                Err(e) if e.is_transient() && retries < UPLOAD_RETRIES => {
                    tokio::time::sleep(RETRY_PAUSE * 2u32.pow(retries)).await;
                    retries += 1;
                    offset = self.tus_offset(&url, len).await?;
                }
                Err(
                    e @ ClientError::Api {
                        status: StatusCode::CONFLICT,
                        ..
                    },
                ) if retries < UPLOAD_RETRIES => {
                    // Another attempt moved the offset (a PATCH that landed although its
                    // answer was lost): ask where it is and go on from there.
                    retries += 1;
                    let now = self.tus_offset(&url, len).await?;
                    if now == offset {
                        return Err(e);
                    }
                    offset = now;
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(r) = &remembered {
            r.forget();
        }
        let headers = last.unwrap_or_default();
        let mut uploaded = finished(&headers)?;
        uploaded.resumed_from = resumed_from;
        Ok(uploaded)
    }

    /// `POST /v1/uploads`: a new upload of `len` bytes; its URL.
    async fn tus_create(
        &self,
        len: u64,
        name: &str,
        options: &PutOptions,
    ) -> Result<Url, ClientError> {
        let mut metadata = vec![format!("filename {}", BASE64.encode(name.as_bytes()))];
        if let Some(project) = &options.project {
            metadata.push(format!("project {}", BASE64.encode(project.as_bytes())));
        }
        if let Some(folder) = &options.folder {
            metadata.push(format!("folder {}", BASE64.encode(folder.as_bytes())));
        }
        if options.keep_existing {
            metadata.push(format!("overwrite {}", BASE64.encode(b"false")));
        }
        let create = self.url("v1/uploads")?;
        let response = crate::send(
            self.request(Method::POST, create.clone())
                .header("Tus-Resumable", TUS_VERSION)
                .header("Upload-Length", len)
                .header("Upload-Metadata", metadata.join(",")),
        )
        .await?;
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ClientError::Protocol("a created upload without a Location".to_owned())
            })?;
        let url = create.join(location).map_err(|e| {
            ClientError::Protocol(format!("the upload's Location is not a URL: {e}"))
        })?;
        // The token goes wherever this URL points: only to the gateway itself.
        if url.origin() != self.base.origin() {
            return Err(ClientError::Protocol(format!(
                "the upload's Location points at another server ({})",
                url.origin().ascii_serialization()
            )));
        }
        Ok(url)
    }

    /// `HEAD` of an upload: its offset, checked against the file's length.
    async fn tus_offset(&self, url: &Url, len: u64) -> Result<u64, ClientError> {
        let response = crate::send(
            self.request(Method::HEAD, url.clone())
                .header("Tus-Resumable", TUS_VERSION),
        )
        .await?;
        let headers = response.headers();
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let offset = number("Upload-Offset").ok_or_else(|| {
            ClientError::Protocol("an upload without an Upload-Offset".to_owned())
        })?;
        match number("Upload-Length") {
            Some(declared) if declared != len => Err(ClientError::Api {
                status: StatusCode::GONE,
                code: "upload_changed".to_owned(),
                message: "the remembered upload is of another length".to_owned(),
            }),
            _ if offset > len => Err(ClientError::Protocol(
                "the upload is further than the file is long".to_owned(),
            )),
            _ => Ok(offset),
        }
    }

    /// One `PATCH` of `part` at `offset`: the new offset, and the answer's headers and body.
    async fn tus_patch(
        &self,
        url: &Url,
        offset: u64,
        part: &[u8],
    ) -> Result<(u64, HeaderMap), ClientError> {
        let checksum = BASE64.encode(&Sha256::digest(part));
        let response = self
            .request(Method::PATCH, url.clone())
            .header("Tus-Resumable", TUS_VERSION)
            .header("Upload-Offset", offset)
            .header("Upload-Checksum", format!("sha256 {checksum}"))
            .header(CONTENT_TYPE, "application/offset+octet-stream")
            .body(part.to_vec())
            .send()
            .await
            .map_err(ClientError::transport)?;
        let response = error::check(response).await?;
        let headers = response.headers().clone();
        let next = headers
            .get("Upload-Offset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| {
                ClientError::Protocol("a PATCH answer without an Upload-Offset".to_owned())
            })?;
        if next < offset || next > offset + part.len() as u64 {
            return Err(ClientError::Protocol(format!(
                "the upload's offset moved from {offset} to {next} for a part of {} bytes",
                part.len()
            )));
        }
        Ok((next, headers))
    }
}

/// The finished file as the last PATCH answered it: the gateway's `Ferry-Path`
/// (percent-encoded), `Ferry-Size`, `Ferry-Sha256` and `Ferry-Renamed-From` headers.
fn finished(headers: &HeaderMap) -> Result<Uploaded, ClientError> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let decoded = |name: &str| {
        text(name).map(|v| {
            percent_encoding::percent_decode_str(v)
                .decode_utf8_lossy()
                .into_owned()
        })
    };
    let missing =
        |name: &str| ClientError::Protocol(format!("the finished upload's answer has no {name}"));
    Ok(Uploaded {
        path: decoded("Ferry-Path").ok_or_else(|| missing("Ferry-Path"))?,
        size: text("Ferry-Size")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| missing("Ferry-Size"))?,
        sha256: text("Ferry-Sha256").map(str::to_owned),
        renamed_from: decoded("Ferry-Renamed-From"),
        resumed_from: 0,
    })
}

/// The remembered URL of one unfinished upload.
struct Remembered {
    file: PathBuf,
}

impl Remembered {
    /// Where an upload of this file, to this place, would be remembered.
    fn for_upload(
        client: &Client,
        local: &Path,
        meta: &std::fs::Metadata,
        name: &str,
        options: &PutOptions,
    ) -> Option<Remembered> {
        use std::os::unix::fs::MetadataExt;
        let dir = resume_state_dir()?;
        let local = std::path::absolute(local).ok()?;
        let mut key = Sha256::new();
        for part in [
            client.base.as_str(),
            &local.to_string_lossy(),
            &meta.len().to_string(),
            &meta.mtime().to_string(),
            &meta.mtime_nsec().to_string(),
            &meta.ino().to_string(),
            name,
            options.project.as_deref().unwrap_or(""),
            options.folder.as_deref().unwrap_or(""),
        ] {
            key.update(part.as_bytes());
            key.update([0]);
        }
        Some(Remembered {
            file: dir.join(HEXLOWER.encode(&key.finalize())),
        })
    }

    fn url(&self) -> Option<Url> {
        let text = std::fs::read_to_string(&self.file).ok()?;
        Url::parse(text.trim()).ok()
    }

    /// Best effort: an upload not remembered is only an upload that cannot resume.
    fn remember(&self, url: &Url) {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let Some(dir) = self.file.parent() else {
            return;
        };
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&self.file)
        {
            let _ = f.write_all(url.as_str().as_bytes());
        }
    }

    fn forget(&self) {
        let _ = std::fs::remove_file(&self.file);
    }
}
