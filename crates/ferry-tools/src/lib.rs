//! The agent tools of spec tools.md (T-WS), run as the person through one
//! [`ferry_exec::Requester`] (T-ID), and their MCP binding (T-MCP, [`mcp`]).
//!
//! A tool takes JSON arguments and returns a [`ToolOutput`]: text (and images) for the
//! model, structured content for programs, and `is_error` with a sentence the model can
//! act on when the call failed. Nothing here panics on input, and a failed call never
//! changes a file.

mod approval;
mod args;
mod audit;
mod deliver;
mod dir_list;
mod edit;
mod node;
mod person;
mod pick;
mod read;
mod skills;
mod spec;
mod subagent;
mod terminal;
mod unicode;
mod wrap;

pub mod mcp;
mod worker_mcp;
pub use worker_mcp::serve_worker_stdio;

use std::sync::Arc;

use ferry_codes::Code;
use ferry_exec::{RequestError, Requester};
use ferry_site::Site;
use serde_json::Value;

pub use approval::{Approval, Approver, Question};
pub use deliver::sync_artifacts;
pub use node::{Forward, Nodes, serves_command};
pub use person::{PersonPaths, WorkerProgram, log_sandbox};
pub use spec::ToolSpec;

/// What a tool call returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// The parts shown to the model, in order.
    pub content: Vec<Content>,
    /// The same answer as JSON, for programs that read tool results.
    pub structured: Option<Value>,
    /// Set when the call failed; the text then says why and what to do.
    pub is_error: bool,
}

/// One piece of a tool's answer to the model.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// Plain text for the model to read.
    Text(String),
    /// A picture for the model to look at.
    Image {
        /// Its media type, e.g. `image/png`.
        mime: String,
        /// The encoded image bytes.
        data: Vec<u8>,
    },
}

impl ToolOutput {
    /// An answer of one text part and nothing else.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(text.into())],
            ..ToolOutput::default()
        }
    }

    /// Adds the JSON form of the answer, for programs.
    pub fn with_structured(mut self, value: Value) -> ToolOutput {
        self.structured = Some(value);
        self
    }

    /// A failed call: `is_error` and the sentence of `error`.
    pub fn error(error: &ToolError) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(error.message.clone())],
            structured: Some(
                serde_json::json!({"error": {"code": error.code, "message": error.message}}),
            ),
            is_error: true,
        }
    }

    /// A call refused for now, which may be made again in `after_secs` seconds: an
    /// [`error`](ToolOutput::error) whose structured error also carries `retryAfterSecs`,
    /// so a program need not read the sentence (which says it too).
    pub fn retry_later(error: &ToolError, after_secs: u64) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(error.message.clone())],
            structured: Some(serde_json::json!({"error": {
                "code": error.code,
                "message": error.message,
                "retryAfterSecs": after_secs,
            }})),
            is_error: true,
        }
    }

    /// The text parts, joined (for logs and tests).
    pub fn joined_text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| match c {
                Content::Text(t) => Some(t.as_str()),
                Content::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Why a tool call failed: a stable code and a sentence for the model.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    /// What failed.
    pub code: Code,
    /// A sentence the model can act on.
    pub message: String,
}

impl ToolError {
    /// A failure with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
        }
    }
}

impl From<RequestError> for ToolError {
    fn from(e: RequestError) -> ToolError {
        ToolError {
            code: e.code,
            message: e.message,
        }
    }
}

impl From<ferry_site::SiteError> for ToolError {
    fn from(e: ferry_site::SiteError) -> ToolError {
        match e {
            // A file system error says the same through a tool as through the requester.
            ferry_site::SiteError::Fs(fs) => RequestError::from(fs).into(),
            e => ToolError::new(e.code(), e.to_string()),
        }
    }
}

/// How often a long-running server removes expired saved command output (besides the
/// sweep before each save).
pub const OUTPUT_SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// How paths and deliveries work with these tools; the last part of the instructions.
pub(crate) const TOOLS_NOTE: &str = "Relative paths are relative to the workspace. Deliver \
    finished files with `file_deliver` and repeat the 📎 lines it returns in your reply.\n";

/// The tools of one person: what they may use, and how to act as them.
pub struct Toolbox {
    site: Arc<Site>,
    person: String,
    paths: PersonPaths,
    /// The folders the requester was made for; see [`Toolbox::is_current`].
    trees: Vec<ferry_exec::Tree>,
    requester: Arc<Requester>,
    enabled: Vec<&'static ToolSpec>,
    /// The gateway's node links; none for `ferry mcp`, whose toolbox has no node tools.
    nodes: Option<Nodes>,
    /// The ferry binary, which starts herd workers' supervisors; none in tests that
    /// start no workers.
    program: Option<std::path::PathBuf>,
}

impl Toolbox {
    /// The tools for `person` on `site`, acting as them the way the site's mode says.
    /// `worker` is how to start the person's worker in host mode (the `ferry` binary).
    pub fn open(
        site: Arc<Site>,
        person: &str,
        worker: Option<WorkerProgram>,
    ) -> Result<Toolbox, ToolError> {
        let program = worker.as_ref().map(|w| w.program.clone());
        let (paths, trees, requester) = person::requester_for(&site, person, worker)?;
        let enabled = spec::enabled(&site.config().tools.enabled);
        let mut toolbox = Toolbox {
            person: person.to_owned(),
            site,
            paths,
            trees,
            requester: Arc::new(requester),
            enabled,
            nodes: None,
            program,
        };
        toolbox.enabled.retain(|t| !t.needs_node());
        toolbox.restore_documents();
        // Before any tool runs: a change of several files this person's writer was
        // killed in the middle of is undone, so it landed in none of them.
        toolbox.journal().undo_unfinished(&toolbox.requester);
        Ok(toolbox)
    }

    /// Where this person's changes of several files are noted while they are placed.
    pub fn journal(&self) -> ferry_exec::Journal {
        ferry_exec::Journal::new(
            self.site.path().join(ferry_site::layout::CHANGES_DIR),
            &self.person,
        )
    }

    /// Puts the provisioned documents (`memory/FILE_DELIVERY.md`) back as shipped if a
    /// command changed them. Where the service owns the workspace (local and container
    /// mode) a command can rename or delete what the tools refuse to write; in host mode
    /// root owns them and the person cannot.
    fn restore_documents(&self) {
        if self.site.mode() == ferry_config::SiteMode::Host {
            return;
        }
        if let Err(e) = self.site.provision_person(&self.person) {
            tracing::warn!(
                "restoring the provisioned documents of {}: {e}",
                self.person
            );
        }
    }

    /// Whether the person may still reach exactly the folders this toolbox was opened
    /// with. A circle joined or left since changes them: the requester (and, in host
    /// mode, the worker's greeting and its sandbox) then knows stale folders, and a
    /// toolbox opened again knows the current ones. One query of the site's database.
    pub fn is_current(&self) -> Result<bool, ToolError> {
        let now = person::trees_of(&self.site, &self.paths)?;
        Ok(person::same_trees(&now, &self.trees))
    }

    /// The id of the person these tools act for.
    pub fn person(&self) -> &str {
        &self.person
    }

    /// The person's folders, as absolute paths.
    pub fn paths(&self) -> &PersonPaths {
        &self.paths
    }

    /// The site the person belongs to.
    pub fn site(&self) -> &Site {
        &self.site
    }

    /// How the tools act as the person: every file operation and command goes through it.
    pub fn requester(&self) -> &Requester {
        &self.requester
    }

    /// A claim on the person's quota for one writer. Counted by the service where it owns
    /// the folders; in host mode the service may not read them, so the person's own
    /// worker counts them, whenever a count is due.
    pub fn quota_claim(&self) -> Result<ferry_site::QuotaClaim, ToolError> {
        let site = self.site();
        if site.mode() != ferry_config::SiteMode::Host {
            return Ok(site.quota_claim(self.person())?);
        }
        let roots = site.usage_roots(self.person());
        let data = self.paths().data.clone();
        let requester = self.shared_requester();
        let counter: ferry_site::Counter = Arc::new(move || {
            let roots = roots()
                .map_err(ferry_site::uncountable)?
                .into_iter()
                .map(|rel| data.join(rel).display().to_string())
                .collect();
            requester
                .count_bytes(roots)
                .map_err(|e| ferry_fs::FsError::Relayed {
                    code: e.code,
                    message: e.message,
                })
        });
        Ok(site.quota_claim_counted_by(self.person(), counter)?)
    }

    /// The ferry binary, when the toolbox was given it (herd workers need it).
    pub fn program(&self) -> Option<std::path::PathBuf> {
        self.program.clone()
    }

    /// The requester, shared: for work that outlives one call (an upload's staging).
    pub fn shared_requester(&self) -> Arc<Requester> {
        self.requester.clone()
    }

    /// The same toolbox reaching the gateway's nodes. The node tools are listed only for
    /// a person some `[nodes.<id>] persons` names: for anyone else they could never work.
    pub fn with_nodes(mut self, nodes: Nodes) -> Toolbox {
        let config = self.site.config();
        let reaches_a_node = config
            .nodes
            .policies
            .values()
            .any(|p| p.persons.contains(&self.person));
        self.enabled = spec::enabled(&config.tools.enabled);
        if !reaches_a_node {
            self.enabled.retain(|t| !t.needs_node());
        }
        self.nodes = Some(nodes);
        self
    }

    /// The gateway's node links, if this toolbox reaches them.
    pub(crate) fn nodes(&self) -> Option<&Nodes> {
        self.nodes.as_ref()
    }

    /// The enabled tools, in a stable order.
    pub fn tools(&self) -> &[&'static ToolSpec] {
        &self.enabled
    }

    /// Whether the site lets this person use the tool `name`.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.enabled.iter().any(|t| t.name == name)
    }

    /// Calls one tool. Blocking: run it on a thread that may block. `approver` answers
    /// `file_delete`'s question to the person. A call against a node runs on the current
    /// runtime (from a thread in `block_in_place`); prefer [`Toolbox::call_on_node`].
    pub fn call(&self, name: &str, args: Value, approver: &dyn Approver) -> ToolOutput {
        let spec = match self.admit(name, &args) {
            Ok(spec) => spec,
            Err(e) => return ToolOutput::error(&e),
        };
        if let Some(run) = spec.here(&args) {
            let output =
                run(self, args.clone(), approver).unwrap_or_else(|e| ToolOutput::error(&e));
            audit::record(&self.site, &self.person, name, &args, &output);
            return output;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime.block_on(self.call_on_node(name, args)),
            Err(_) => ToolOutput::error(&ToolError::new(
                Code::NodeOffline,
                "a call against a node needs the gateway's runtime",
            )),
        }
    }

    /// Whether a call of `name` with `args` goes to a node (and so should be made with
    /// [`Toolbox::call_on_node`]).
    pub fn runs_on_node(&self, name: &str, args: &Value) -> bool {
        self.enabled
            .iter()
            .find(|t| t.name == name)
            .is_some_and(|spec| spec.on_node(args).is_some())
    }

    /// Calls a tool against a node, on the runtime. Dropping the future cancels the call:
    /// the node is told to stop, and nothing partial is kept.
    pub async fn call_on_node(&self, name: &str, args: Value) -> ToolOutput {
        // A node linked to another gateway of the site: the call is that gateway's to make
        // (its own checks, its audit record).
        if let Some(node) = args["node"].as_str()
            && self.admit(name, &args).is_ok()
            && let Some((gateway, forward)) = node::held_elsewhere(self, node)
        {
            return forward
                .forward(gateway, self.person.clone(), name.to_owned(), args)
                .await
                .unwrap_or_else(|e| ToolOutput::error(&e));
        }
        self.call_on_node_here(name, args).await
    }

    /// [`Toolbox::call_on_node`] on this gateway's own links only: a call another gateway
    /// forwarded here is never forwarded again.
    pub async fn call_on_node_here(&self, name: &str, args: Value) -> ToolOutput {
        let spec = match self.admit(name, &args) {
            Ok(spec) => spec,
            Err(e) => return ToolOutput::error(&e),
        };
        match spec.on_node(&args) {
            Some(run) => {
                let started = std::time::Instant::now();
                let outcome = run(self, args.clone()).await;
                metrics::histogram!(
                    "ferry_node_call_duration_seconds",
                    "tool" => spec.name,
                    "outcome" => if outcome.is_ok() { "ok" } else { "error" },
                )
                .record(started.elapsed());
                let output = outcome.unwrap_or_else(|e| ToolOutput::error(&e));
                let (site, person, tool) = (self.site.clone(), self.person.clone(), spec.name);
                // The record is a database write: off the runtime's threads.
                let _ = tokio::task::spawn_blocking({
                    let output = output.clone();
                    move || audit::record(&site, &person, tool, &args, &output)
                })
                .await;
                output
            }
            // Callers ask `runs_on_node` first; a blocking body never runs on the runtime.
            None => ToolOutput::error(&ToolError::new(
                Code::InvalidArguments,
                format!("a call of {name} with these arguments does not go to a node"),
            )),
        }
    }

    /// The enabled tool `name`, if `args` are fit to give it.
    fn admit(&self, name: &str, args: &Value) -> Result<&'static ToolSpec, ToolError> {
        let Some(spec) = self.enabled.iter().find(|t| t.name == name) else {
            return Err(ToolError::new(
                Code::UnknownTool,
                format!("there is no tool `{name}` here; tools/list shows the tools you have"),
            ));
        };
        admit_args(spec, args)?;
        Ok(spec)
    }

    /// Removes this person's expired saved command output, as the person.
    pub fn sweep_saved_output(&self) -> Result<(), ToolError> {
        Ok(self.requester.sweep_output()?)
    }

    /// The server instructions (T-MCP): the delivery rules of M-DOCS and where this
    /// person's folders are.
    pub fn instructions(&self) -> String {
        let p = &self.paths;
        format!(
            "{rules}\n## Your folders\n\n- Workspace (home, `~`): {home}\n- Drafts: {tmp}/<task>/\n\
             - Finished output: {artifacts}/<slug>/\n- Shared with everyone: {shared}\n\n{TOOLS_NOTE}",
            rules = ferry_docs::shipped::FILE_DELIVERY_MD,
            home = p.home.display(),
            tmp = p.tmp.display(),
            artifacts = p.artifacts.display(),
            shared = p.shared_public.display(),
        )
    }
}

/// The checks every call's arguments pass before its tool runs: those of [`admit_to`],
/// and a `node` that is a name.
fn admit_args(spec: &ToolSpec, args: &Value) -> Result<(), ToolError> {
    // The node, when there is one, picks where the call runs; anything but a name there
    // (a null a client sent for "none") must not pick for it.
    if args.get("node").is_some_and(|node| !node.is_string()) {
        return Err(ToolError::new(
            Code::InvalidArguments,
            format!(
                "{}: `node` must be a paired node's id or name, as a string; leave it out to \
                 work on this machine; nothing was done",
                spec.name
            ),
        ));
    }
    admit_to(spec.name, &spec.input_schema(), args)
}

/// The checks the arguments of every tool, ours or a worker's, pass before it runs: no
/// text that is not Unicode, and numbers within `schema`'s bounds.
pub(crate) fn admit_to(tool: &str, schema: &Value, args: &Value) -> Result<(), ToolError> {
    if unicode::holds_not_unicode(args) {
        return Err(ToolError::new(
            Code::InvalidUnicode,
            "the arguments hold text that is not valid Unicode (a lone UTF-16 surrogate \
             or bytes that are not UTF-8); nothing was done. Send the text as valid UTF-8",
        ));
    }
    spec::check_bounds(tool, schema, args, "")
}

#[doc(hidden)]
pub mod fuzzing {
    //! For the fuzz targets (`fuzz/`): the parsers of what an MCP client sends.

    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use crate::{ToolError, args};

    pub use crate::unicode::{NOT_UNICODE, clean_line};

    /// The name [`tools`] gives the worker's own `subagent` tool (`ferry herd mcp`).
    pub const WORKER_TOOL: &str = "worker:subagent";

    /// Whether any string in `value`, keys included, holds [`NOT_UNICODE`].
    pub fn holds_not_unicode(value: &Value) -> bool {
        crate::unicode::holds_not_unicode(value)
    }

    /// Every tool an MCP client may call, with the input schema `tools/list` shows: the
    /// controller's tools, then the worker's ([`WORKER_TOOL`]).
    pub fn tools() -> Vec<(&'static str, Value)> {
        let mut tools: Vec<_> = crate::spec::ALL
            .iter()
            .map(|spec| (spec.name, spec.input_schema().into_owned()))
            .collect();
        tools.push((WORKER_TOOL, crate::worker_mcp::input_schema()));
        tools
    }

    /// What a call of `tool` with `args` meets before the tool does anything: the checks
    /// of every call (none for the worker's tool, which has its own server), then the
    /// parse into the tool's typed arguments.
    pub fn admit(tool: &str, args: Value) -> Result<(), ToolError> {
        fn typed<T: DeserializeOwned>(tool: &str, value: Value) -> Result<(), ToolError> {
            args::parse::<T>(tool, value).map(drop)
        }
        if let Some(spec) = crate::spec::ALL.iter().find(|spec| spec.name == tool) {
            crate::admit_args(spec, &args)?;
        }
        match tool {
            "file_read" => typed::<args::FileRead>(tool, args),
            "file_write" => typed::<args::FileWrite>(tool, args),
            "file_edit" => typed::<args::FileEdit>(tool, args),
            "file_preview" | "file_delete" | "image_read" => typed::<args::PathArg>(tool, args),
            "file_deliver" => typed::<args::FileDeliver>(tool, args),
            "terminal_run" => typed::<args::TerminalRun>(tool, args),
            "dir_list" => typed::<args::DirList>(tool, args),
            "file_fetch" => typed::<crate::node::FileFetch>(tool, args),
            "file_push" => typed::<crate::node::FilePush>(tool, args),
            "dir_fetch" => typed::<crate::node::DirFetch>(tool, args),
            "skill_search" => typed::<args::Query>(tool, args),
            "file_pick" => typed::<args::Prompt>(tool, args),
            "subagent" => typed::<crate::subagent::SubagentArgs>(tool, args),
            WORKER_TOOL => typed::<crate::worker_mcp::WorkerArgs>(tool, args),
            _ => Err(ToolError::new(
                ferry_codes::Code::UnknownTool,
                format!("no typed arguments for {tool}"),
            )),
        }
    }

    /// The page token `dir_list` answers after `last` in the folder `binding`.
    pub fn page_token(binding: &str, last: &str) -> String {
        crate::dir_list::encode_token(binding, last)
    }

    /// The raw name a page token given back for the folder `binding` names.
    pub fn decode_page_token(token: &str, binding: &str) -> Result<Vec<u8>, ToolError> {
        crate::dir_list::decode_token(token, binding)
    }

    /// The name a page starts after, from a token given back for the folder `binding`.
    pub fn start_after(token: Option<&str>, binding: &str) -> Result<Option<String>, ToolError> {
        crate::dir_list::start_after(token, binding)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    #[test]
    fn a_toolbox_is_current_until_its_person_joins_or_leaves_a_circle() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Arc::new(Site::open(tmp.path(), ferry_config::Config::default()).unwrap());
        site.add_person("ann").unwrap();
        site.add_person("bob").unwrap();
        let toolbox = Toolbox::open(site.clone(), "ann", None).unwrap();
        assert!(toolbox.is_current().unwrap());
        // Another person's circle changes nothing of ann's.
        site.add_circle("others", &["bob".to_owned()]).unwrap();
        assert!(toolbox.is_current().unwrap());
        site.add_circle("team", &["ann".to_owned()]).unwrap();
        assert!(!toolbox.is_current().unwrap());

        let path = site.path().join("circles/team/note.txt");
        let write = |toolbox: &Toolbox| {
            let args = serde_json::json!({"path": path, "content": "hi\n"});
            toolbox.call("file_write", args, &approval::FirstChannel(vec![]))
        };
        assert!(
            write(&toolbox).is_error,
            "the stale toolbox knows no such folder"
        );
        let reopened = Toolbox::open(site.clone(), "ann", None).unwrap();
        assert!(reopened.is_current().unwrap());
        let written = write(&reopened);
        assert!(!written.is_error, "{}", written.joined_text());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hi\n");
    }

    #[test]
    fn the_server_sweep_removes_only_expired_saved_output() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Arc::new(Site::open(tmp.path(), ferry_config::Config::default()).unwrap());
        site.add_person("ann").unwrap();
        let toolbox = Toolbox::open(site, "ann", None).unwrap();
        let dir = &toolbox.paths().terminal_output;
        std::fs::create_dir_all(dir.join("tmp-left-by-a-dead-run")).unwrap();
        let day_old = SystemTime::now() - Duration::from_secs(25 * 60 * 60);
        for name in ["run-old.log", "run-new.log", "keep-old.txt"] {
            let file = std::fs::File::create(dir.join(name)).unwrap();
            if name.contains("old") {
                file.set_modified(day_old).unwrap();
            }
        }
        std::fs::File::open(dir.join("tmp-left-by-a-dead-run"))
            .unwrap()
            .set_modified(day_old)
            .unwrap();
        toolbox.sweep_saved_output().unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["keep-old.txt", "run-new.log"]);
    }

    #[test]
    fn the_sweep_never_follows_a_link_planted_as_the_output_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let site = Arc::new(Site::open(&tmp.path().join("site"), Default::default()).unwrap());
        site.add_person("ann").unwrap();
        let toolbox = Toolbox::open(site, "ann", None).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("tmp-precious")).unwrap();
        let victim = elsewhere.join("run-precious.log");
        std::fs::write(&victim, "keep me").unwrap();
        let day_old = SystemTime::now() - Duration::from_secs(25 * 60 * 60);
        std::fs::File::open(&victim)
            .unwrap()
            .set_modified(day_old)
            .unwrap();
        let dir = &toolbox.paths().terminal_output;
        let _ = std::fs::remove_dir_all(dir);
        std::os::unix::fs::symlink(&elsewhere, dir).unwrap();
        let swept = toolbox.sweep_saved_output();
        assert!(swept.is_err(), "{swept:?}");
        assert!(victim.exists() && elsewhere.join("tmp-precious").exists());
    }
}
