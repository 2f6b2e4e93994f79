//! `file_delete` and the question it asks the person first: through MCP elicitation
//! when the client offers it, else through the web client's approval prompt; with no
//! way to ask, nothing is deleted (unless `[tools] delete_approval = "auto"`).

use ferry_config::DeleteApproval;

use ferry_codes::Code;
use ferry_exec::ops::Kind;
use ferry_site::{ApprovalOutcome, Site};
use serde_json::json;

use crate::args::{self, PathArg};
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::APPROVAL_WAIT;

/// A question for the person.
#[derive(Clone, Debug)]
pub struct Question {
    /// The tool that asks.
    pub tool: &'static str,
    /// The absolute path the tool acts on, if approved (never shown to the person).
    pub path: String,
    /// What the question is about as the person knows it: the workspace-relative path.
    pub subject: String,
    /// The sentence shown to the person, its hidden characters made visible.
    pub summary: String,
}

/// The person's answer, or why there is none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// The person said yes.
    Approved,
    /// The person said no.
    Denied,
    /// No channel reaches the person.
    NoChannel,
    /// Asking failed; the reason, for the model.
    Failed(String),
}

/// Asks the person. Blocking.
pub trait Approver: Send + Sync {
    /// The person's answer to `question`, or why there is none.
    fn ask(&self, question: &Question) -> Approval;
}

/// The web client's prompt, through the metadata database (works for `ferry mcp` on
/// stdio and for the gateway's `/mcp` alike).
pub struct WebApprover<'a> {
    pub site: &'a Site,
    pub person: &'a str,
}

impl Approver for WebApprover<'_> {
    fn ask(&self, question: &Question) -> Approval {
        let asked = (|| {
            if !self.site.web_channel_open(self.person)? {
                return Ok(Approval::NoChannel);
            }
            let id = self.site.request_approval(
                self.person,
                question.tool,
                &question.subject,
                &question.summary,
            )?;
            Ok(match self.site.wait_for_approval(&id, APPROVAL_WAIT)? {
                ApprovalOutcome::Approved => Approval::Approved,
                _ => Approval::Denied,
            })
        })();
        asked.unwrap_or_else(|e: ferry_site::SiteError| Approval::Failed(e.to_string()))
    }
}

/// Tries each approver in turn while the answer is [`Approval::NoChannel`].
pub struct FirstChannel<'a>(pub Vec<&'a dyn Approver>);

impl Approver for FirstChannel<'_> {
    fn ask(&self, question: &Question) -> Approval {
        for approver in &self.0 {
            match approver.ask(question) {
                Approval::NoChannel => continue,
                answer => return answer,
            }
        }
        Approval::NoChannel
    }
}

/// An answer given before the call (an elicitation answered in an earlier round).
pub struct Answered(pub Approval);

impl Approver for Answered {
    fn ask(&self, _: &Question) -> Approval {
        self.0.clone()
    }
}

/// The question `file_delete` would ask about `path`, after checking it names a file.
pub fn delete_question(tools: &Toolbox, args: &serde_json::Value) -> Result<Question, ToolError> {
    let args: PathArg = args::parse("file_delete", args.clone())?;
    let info = tools.requester().stat(&args.path)?;
    if info.kind == Kind::Dir {
        return Err(ToolError::new(
            Code::IsDirectory,
            format!("{} is a folder; file_delete removes one file", info.path),
        ));
    }
    let subject = tools.paths().relative(&info.path);
    Ok(Question {
        tool: "file_delete",
        summary: format!(
            "The agent asks to delete {} ({} bytes){}.",
            ferry_fs::shown_name(&subject),
            info.size,
            where_it_is(tools.paths(), &subject, &info.path),
        ),
        subject,
        path: info.path,
    })
}

/// Which of the person's folders holds `abs`, said in words: a home-relative path and
/// a site-relative one can be spelled alike (`~/shared/public/x`, `shared/public/x`).
fn where_it_is(paths: &crate::PersonPaths, subject: &str, abs: &str) -> &'static str {
    let abs = std::path::Path::new(abs);
    // Left absolute: outside the site, or climbing out of it with `..` (host mode).
    if subject.starts_with('/') {
        " outside your workspace"
    } else if abs.starts_with(&paths.home) {
        " from your workspace"
    } else if abs.starts_with(&paths.private) {
        " from your private folder"
    } else if abs.starts_with(&paths.shared_public) {
        " from the folder shared with everyone"
    } else if abs.starts_with(paths.data.join(ferry_site::layout::CIRCLES_DIR)) {
        " from a circle's shared folder"
    } else {
        " outside your workspace"
    }
}

pub(crate) fn file_delete(
    tools: &Toolbox,
    args: serde_json::Value,
    approver: &dyn Approver,
) -> Result<ToolOutput, ToolError> {
    let question = delete_question(tools, &args)?;
    if tools.site().config().tools.delete_approval == DeleteApproval::Ask {
        match approver.ask(&question) {
            Approval::Approved => {}
            Approval::Denied => {
                return Err(ToolError::new(
                    Code::Denied,
                    format!(
                        "the person declined deleting {}; nothing was deleted",
                        question.path
                    ),
                ));
            }
            Approval::NoChannel => {
                return Err(ToolError::new(
                    Code::NoApprovalChannel,
                    format!(
                        "deleting needs the person's approval and there is no way to ask them \
                         (the client offers no elicitation and no web client is open); nothing \
                         was deleted. Ask them in your reply instead: {} was kept",
                        question.path
                    ),
                ));
            }
            Approval::Failed(why) => {
                return Err(ToolError::new(
                    Code::ApprovalFailed,
                    format!("asking the person failed ({why}); nothing was deleted"),
                ));
            }
        }
    }
    tools.requester().delete(&question.path)?;
    Ok(ToolOutput::text(format!("Deleted {}", question.path))
        .with_structured(json!({"deleted": question.path})))
}
