//! `GET /v1/files/content` into a local file, resuming an interrupted download with
//! `Range` and `If-Range` rather than starting over.
//!
//! The bytes land in `<dest>.ferry-part`, beside it `<dest>.ferry-part.etag` remembers
//! which version of the file they belong to; only a complete, fsynced download is renamed
//! to `dest`, so `dest` is never half a file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::header::{CONTENT_RANGE, ETAG, IF_RANGE, RANGE};
use reqwest::{Method, StatusCode};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::{Client, ClientError, ProgressRef, error, with_project};

/// How often a broken download is picked up again from where it stopped.
const DOWNLOAD_RETRIES: u32 = 5;
/// The first pause before a retry; each next one doubles.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// A finished download.
#[derive(Debug, Clone)]
pub struct Downloaded {
    /// Where the file now is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// The bytes an earlier, interrupted download had already brought.
    pub resumed_from: u64,
}

/// The two files a download in progress keeps beside its destination.
struct Partial {
    part: PathBuf,
    etag: PathBuf,
}

impl Partial {
    fn beside(dest: &Path) -> Partial {
        let with = |suffix: &str| {
            let mut name = dest.file_name().unwrap_or_default().to_os_string();
            name.push(suffix);
            dest.with_file_name(name)
        };
        Partial {
            part: with(".ferry-part"),
            etag: with(".ferry-part.etag"),
        }
    }

    /// The bytes already there and the version they belong to, if a resume is possible.
    async fn resumable(&self) -> Option<(u64, String)> {
        let etag = tokio::fs::read_to_string(&self.etag).await.ok()?;
        let len = tokio::fs::metadata(&self.part).await.ok()?.len();
        Some((len, etag.trim().to_owned()))
    }
}

impl Client {
    /// Downloads `path` (under `public/`) to `dest`, resuming a download to the same
    /// `dest` that was interrupted, whether in this call or an earlier run.
    pub async fn get(
        &self,
        path: &str,
        project: Option<&str>,
        dest: &Path,
        progress: &ProgressRef,
    ) -> Result<Downloaded, ClientError> {
        let partial = Partial::beside(dest);
        let mut resumed_from = None;
        let mut retries = 0;
        loop {
            match self.get_once(path, project, &partial, progress).await {
                Ok((size, from)) => {
                    let resumed_from = resumed_from.unwrap_or(from);
                    tokio::fs::rename(&partial.part, dest)
                        .await
                        .map_err(|e| ClientError::local(dest, e))?;
                    let _ = tokio::fs::remove_file(&partial.etag).await;
                    return Ok(Downloaded {
                        path: dest.to_owned(),
                        size,
                        resumed_from,
                    });
                }
                Err((e, from)) if e.is_transient() && retries < DOWNLOAD_RETRIES => {
                    resumed_from.get_or_insert(from);
                    tokio::time::sleep(RETRY_PAUSE * 2u32.pow(retries)).await;
                    retries += 1;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One attempt: the size of the complete file and where this attempt started, or the
    /// error with where it started.
    async fn get_once(
        &self,
        path: &str,
        project: Option<&str>,
        partial: &Partial,
        progress: &ProgressRef,
    ) -> Result<(u64, u64), (ClientError, u64)> {
        let resumable = partial.resumable().await;
        let from = resumable.as_ref().map_or(0, |(len, _)| *len);
        let fail = |e| (e, from);
        let mut url = self.url("v1/files/content").map_err(fail)?;
        url.query_pairs_mut().append_pair("path", path);
        with_project(&mut url, project);
        let mut request = self.request(Method::GET, url);
        if let Some((len, etag)) = &resumable {
            request = request
                .header(RANGE, format!("bytes={len}-"))
                .header(IF_RANGE, etag.as_str());
        }
        let response = request
            .send()
            .await
            .map_err(|e| fail(ClientError::transport(e)))?;
        let total_of_range = content_range_total(response.headers().get(CONTENT_RANGE));
        if response.status() == StatusCode::RANGE_NOT_SATISFIABLE {
            // The part already holds the whole file (the last attempt broke after its
            // last byte), or the file shrank: then start again.
            if total_of_range == Some(from) {
                progress.start(from, from);
                return Ok((from, from));
            }
            let _ = tokio::fs::remove_file(&partial.etag).await;
            let _ = tokio::fs::remove_file(&partial.part).await;
            return Err(fail(ClientError::Transport(
                "the file changed while it was being downloaded; starting again".to_owned(),
            )));
        }
        let response = error::check(response).await.map_err(fail)?;
        let etag = response
            .headers()
            .get(ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (start, total) = match response.status() {
            StatusCode::PARTIAL_CONTENT => match total_of_range {
                Some(total) => (from, total),
                None => {
                    return Err(fail(ClientError::Protocol(
                        "a partial answer without a Content-Range".to_owned(),
                    )));
                }
            },
            // The file changed since the part was written (If-Range did not hold), or
            // there was no part: everything comes again, as long as it says how much.
            _ => match response.content_length() {
                Some(len) => (0, len),
                None => {
                    return Err(fail(ClientError::Protocol(
                        "a download that does not say its length".to_owned(),
                    )));
                }
            },
        };
        let mut file = open_part(&partial.part, start).await.map_err(fail)?;
        // Without a version there is nothing to resume safely against.
        remember_etag(&partial.etag, etag.as_deref())
            .await
            .map_err(fail)?;
        progress.start(total, start);
        let written = copy_body(response, &mut file, progress, &partial.part, total - start)
            .await
            .map_err(|e| (e, start))?;
        file.sync_all()
            .await
            .map_err(|e| (ClientError::local(&partial.part, e), start))?;
        let size = start + written;
        if size != total {
            return Err((
                ClientError::Transport(format!("the download stopped at {size} of {total} bytes")),
                start,
            ));
        }
        Ok((size, start))
    }

    /// Writes `path`'s bytes to `out` (standard output, say): no resume, no part file.
    pub async fn get_to(
        &self,
        path: &str,
        project: Option<&str>,
        out: &mut (dyn AsyncWrite + Unpin + Send),
        progress: &ProgressRef,
    ) -> Result<u64, ClientError> {
        let mut url = self.url("v1/files/content")?;
        url.query_pairs_mut().append_pair("path", path);
        with_project(&mut url, project);
        let response = crate::send(self.request(Method::GET, url)).await?;
        let len = response.content_length().ok_or_else(|| {
            ClientError::Protocol("a download that does not say its length".to_owned())
        })?;
        progress.start(len, 0);
        let written = copy_body(response, out, progress, Path::new("-"), len).await?;
        out.flush()
            .await
            .map_err(|e| ClientError::local(Path::new("-"), e))?;
        Ok(written)
    }
}

/// Opens a file of ours beside the destination for writing, never through a link and
/// never anything but a regular file: in a folder others can write to, a link planted at
/// `<dest>.ferry-part` would otherwise have the download written wherever it points.
async fn open_own(path: &Path) -> Result<tokio::fs::File, ClientError> {
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(path)
        .await
        .map_err(|e| ClientError::local(path, e))?;
    let meta = file
        .metadata()
        .await
        .map_err(|e| ClientError::local(path, e))?;
    if !meta.is_file() {
        return Err(ClientError::Usage(format!(
            "{} is not a regular file; remove it first",
            path.display()
        )));
    }
    Ok(file)
}

/// The part file, truncated to `start` bytes and positioned there.
async fn open_part(part: &Path, start: u64) -> Result<tokio::fs::File, ClientError> {
    use tokio::io::AsyncSeekExt;
    let mut file = open_own(part).await?;
    file.set_len(start)
        .await
        .map_err(|e| ClientError::local(part, e))?;
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| ClientError::local(part, e))?;
    Ok(file)
}

/// Replaces the version remembered beside the part (`None`: no version, no resume).
async fn remember_etag(path: &Path, etag: Option<&str>) -> Result<(), ClientError> {
    match etag {
        Some(etag) => {
            let mut file = open_own(path).await?;
            file.set_len(0)
                .await
                .map_err(|e| ClientError::local(path, e))?;
            file.write_all(etag.as_bytes())
                .await
                .map_err(|e| ClientError::local(path, e))
        }
        None => match tokio::fs::remove_file(path).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ClientError::local(path, e)),
            _ => Ok(()),
        },
    }
}

/// Copies the answer's body to `out` as it arrives; the bytes written.
async fn copy_body(
    mut response: reqwest::Response,
    out: &mut (dyn AsyncWrite + Unpin + Send),
    progress: &ProgressRef,
    shown_as: &Path,
    expected: u64,
) -> Result<u64, ClientError> {
    let mut written = 0;
    while let Some(chunk) = response.chunk().await.map_err(ClientError::transport)? {
        if written + chunk.len() as u64 > expected {
            return Err(ClientError::Protocol(format!(
                "the download ran past the {expected} bytes it announced"
            )));
        }
        out.write_all(&chunk)
            .await
            .map_err(|e| ClientError::local(shown_as, e))?;
        written += chunk.len() as u64;
        progress.advance(chunk.len() as u64);
    }
    Ok(written)
}

/// The complete length named by `Content-Range: bytes a-b/N` or `bytes */N`.
fn content_range_total(value: Option<&reqwest::header::HeaderValue>) -> Option<u64> {
    let text = value?.to_str().ok()?;
    let (_, total) = text.strip_prefix("bytes ")?.rsplit_once('/')?;
    total.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn reads_the_total_of_a_content_range() {
        let total = |s: &str| content_range_total(Some(&HeaderValue::from_str(s).unwrap()));
        assert_eq!(total("bytes 5-9/10"), Some(10));
        assert_eq!(total("bytes */10"), Some(10));
        assert_eq!(total("bytes 5-9/*"), None);
        assert_eq!(total("items 5-9/10"), None);
        assert_eq!(content_range_total(None), None);
    }

    #[test]
    fn the_part_files_sit_beside_the_destination() {
        let p = Partial::beside(Path::new("out/report.pdf"));
        assert_eq!(p.part, Path::new("out/report.pdf.ferry-part"));
        assert_eq!(p.etag, Path::new("out/report.pdf.ferry-part.etag"));
    }
}
