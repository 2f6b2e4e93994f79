//! A node host over a link, and real folders for it to serve.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferry_codes::Code;
use ferry_node::checked::{CheckedReader, CheckedWriter};
use ferry_node::host::{NodeHost, NodePolicy};
use ferry_node::policy::PathRules;
use ferry_node::{Link, NodeError, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A folder of the test, its path canonical and UTF-8.
pub struct Tree {
    _dir: tempfile::TempDir,
    /// Its canonical path.
    pub root: PathBuf,
}

impl Tree {
    /// A fresh, empty folder.
    pub fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        Tree { _dir: dir, root }
    }

    /// The absolute path of `rel` in it, as text.
    pub fn path(&self, rel: &str) -> String {
        let path = if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        path.to_str().unwrap().to_owned()
    }

    /// The glob of everything in it.
    pub fn glob(&self) -> String {
        format!("{}/**", self.path(""))
    }

    /// Writes `bytes` at `rel`, making its folders.
    pub fn file(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// Makes the folder `rel`.
    pub fn dir(&self, rel: &str) {
        std::fs::create_dir_all(self.root.join(rel)).unwrap();
    }

    /// Makes a symbolic link at `rel` pointing to `to`.
    pub fn link(&self, rel: &str, to: impl AsRef<Path>) {
        std::os::unix::fs::symlink(to, self.root.join(rel)).unwrap();
    }

    /// Names in the folder `rel` that are ferry temporaries.
    pub fn temporaries(&self, rel: &str) -> Vec<String> {
        std::fs::read_dir(self.root.join(rel))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(ferry_fs::TEMP_PREFIX))
            .collect()
    }
}

/// Rules from globs.
pub fn rules(read: &[String], write: &[String], deny: &[String]) -> PathRules {
    PathRules::new(read, write, deny).unwrap()
}

/// A gateway link to a node host serving under `policy` (the node link kept alive).
pub fn host(policy: NodePolicy) -> (Link, Link) {
    super::linked(NodeHost::new(policy).handler())
}

/// A host that may read and write everything in `tree`, links never followed.
pub fn host_of(tree: &Tree) -> (Link, Link) {
    host(NodePolicy {
        rules: rules(&[tree.glob()], &[tree.glob()], &[]),
        follow_symlinks: false,
    })
}

/// Calls `command` and gives its answer, or the code it failed with.
pub async fn call(link: &Link, command: &str, args: Value) -> Result<Response, NodeError> {
    link.call(command, args).await
}

/// The code a call fails with (at its head).
pub async fn refused(link: &Link, command: &str, args: Value) -> Code {
    match link.call(command, args).await {
        Ok(r) => panic!("{command} was answered {}", r.result),
        Err(e) => e.code(),
    }
}

/// A checked body read whole (tests only use small ones here).
pub async fn checked_bytes(response: Response, max: u64) -> Result<Vec<u8>, NodeError> {
    let mut reader = CheckedReader::new(response.body, max);
    let mut got = Vec::new();
    while let Some(piece) = reader.next().await {
        got.extend_from_slice(&piece?);
    }
    Ok(got)
}

/// Pushes `bytes` to `path` with the extra `args` (overwrite, createParents, …).
pub async fn push(link: &Link, path: &str, bytes: &[u8], args: Value) -> Result<Value, NodeError> {
    let mut all = serde_json::json!({
        "path": path,
        "size": bytes.len(),
        "sha256": sha256(bytes),
    });
    all.as_object_mut()
        .unwrap()
        .extend(args.as_object().unwrap().clone());
    call_with_checked_body(link, "file.push", all, bytes).await
}

/// Calls `command` with `args` and `bytes` as its checked request body (sent in pieces),
/// and gives the answer's head.
pub async fn call_with_checked_body(
    link: &Link,
    command: &str,
    args: Value,
    bytes: &[u8],
) -> Result<Value, NodeError> {
    let mut call = link.open(command, args, true)?;
    let mut body = CheckedWriter::new(call.take_body().unwrap());
    // Sending may fail once the node refused; the answer says why.
    let sent = async {
        for piece in bytes.chunks(100_000) {
            body.send(Bytes::copy_from_slice(piece)).await?;
        }
        body.finish().await
    };
    let _ = sent.await;
    Ok(call.response().await?.result)
}

/// The sha256 of `bytes`, lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    ferry_fs::hex(&Sha256::digest(bytes))
}

/// `len` bytes that do not compress (a xorshift stream).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}
