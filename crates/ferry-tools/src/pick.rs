//! `file_pick`: the person picks a file on their own computer in the web client; it
//! arrives through a signed, expiring upload link. The model gets only the temporary
//! path in the workspace and its expiry: the person's local path never leaves them.

use ferry_codes::Code;
use ferry_site::PickOutcome;
use serde_json::json;

use crate::args::{self, Prompt};
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::PICK_WAIT;

pub(crate) fn file_pick(tools: &Toolbox, args: serde_json::Value) -> Result<ToolOutput, ToolError> {
    let args: Prompt = args::parse("file_pick", args)?;
    args::check_short_text("file_pick", "prompt", &args.prompt)?;
    let site = tools.site();
    let person = tools.person();
    if !site.web_channel_open(person)? {
        return Err(ToolError::new(
            Code::NoPickChannel,
            "the person has no web client open, so they cannot be asked to pick a file; ask \
             them in your reply to upload it instead",
        ));
    }
    let request = site.request_pick(person, &args.prompt)?;
    match site.wait_for_pick(&request.id, PICK_WAIT)? {
        PickOutcome::Arrived { path, expires } => {
            let expires = ferry_site::rfc3339(expires);
            Ok(ToolOutput::text(format!(
                "The person picked a file. It is at {} until {expires}; copy what you need \
                 before then.",
                path.display()
            ))
            .with_structured(json!({"path": path, "expires": expires})))
        }
        PickOutcome::Cancelled => Err(ToolError::new(
            Code::PickCancelled,
            "the person cancelled the request; no file was picked",
        )),
        PickOutcome::Expired => Err(ToolError::new(
            Code::PickExpired,
            "the person did not pick a file in time; the request expired",
        )),
    }
}
