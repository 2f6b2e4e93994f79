//! `terminal_run`: one command, as the person, behind the guardrail (T-GUARD).

use serde_json::json;

use ferry_codes::Code;

use crate::args::{self, TerminalRun};
use crate::{ToolError, ToolOutput, Toolbox};
use ferry_config::limits::COMMAND_MAX_BYTES;

pub(crate) fn terminal_run(
    tools: &Toolbox,
    args: serde_json::Value,
) -> Result<ToolOutput, ToolError> {
    let args: TerminalRun = args::parse("terminal_run", args)?;
    if args.command.trim().is_empty() {
        return Err(ToolError::new(Code::InvalidArguments, "command is empty"));
    }
    if args.command.len() > COMMAND_MAX_BYTES {
        return Err(ToolError::new(
            Code::TooLarge,
            format!(
                "the command is {} bytes, over {COMMAND_MAX_BYTES}; write a script with \
                 file_write and run that",
                args.command.len()
            ),
        ));
    }
    let output = tools
        .requester()
        .run(args.command, args.cwd, args.timeout_secs)?;
    let mut status = match (output.timed_out, output.exit_code, output.signal) {
        (true, _, _) => "timed out: the command was killed".to_owned(),
        (false, Some(code), _) => format!("exit code {code}"),
        (false, None, Some(signal)) => format!("killed by signal {signal}"),
        (false, None, None) => "ended".to_owned(),
    };
    // Counted by the reaper once everything it killed was gone: nothing is left running.
    match output.leftovers_killed {
        0 => {}
        1 => status.push_str("; 1 process it started was still running and was killed"),
        n => status.push_str(&format!(
            "; {n} processes it started were still running and were killed"
        )),
    }
    let mut text = format!("{status}\n");
    for (name, body, bytes) in [
        ("stdout", &output.stdout, output.stdout_bytes),
        ("stderr", &output.stderr, output.stderr_bytes),
    ] {
        if bytes > 0 {
            text.push_str(&format!("--- {name} ({bytes} bytes) ---\n{body}"));
            if !body.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    if let Some(path) = &output.full_output_path {
        text.push_str(&format!(
            "Output was longer than shown; all of it is in {} (read it with file_read and a \
             line range)\n",
            path.display()
        ));
    }
    if let Some(note) = &output.full_output_note {
        text.push_str(&format!("{note}\n"));
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "exitCode": output.exit_code,
        "signal": output.signal,
        "timedOut": output.timed_out,
        "leftoversKilled": output.leftovers_killed,
        "stdout": output.stdout,
        "stderr": output.stderr,
        "stdoutBytes": output.stdout_bytes,
        "stderrBytes": output.stderr_bytes,
        "truncated": output.truncated,
        "fullOutputPath": output.full_output_path,
        "fullOutputNote": output.full_output_note,
    })))
}
