//! The agent tools' file movements in the audit trail (spec scale S-OPS): after a call of
//! a tool that writes, deletes, delivers or moves bytes to or from a node, one record per
//! file it named, with the call's outcome. The token kind is `agent`.

use ferry_site::{AuditAction, AuditEntry, Site};
use serde_json::Value;

use crate::ToolOutput;

/// What a tool's call moved, by its arguments: `(action, path)` for each file, and the
/// node for a node's tools. Tools that move nothing give nothing.
fn movements(tool: &str, args: &Value) -> Vec<(AuditAction, String)> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let path = || text(&args["path"]).into_iter();
    let action = match tool {
        "file_write" => AuditAction::ToolWrite,
        "file_delete" => AuditAction::ToolDelete,
        "file_fetch" => AuditAction::NodeFetch,
        "file_push" => AuditAction::NodePush,
        "dir_fetch" => AuditAction::DirFetch,
        "file_edit" => {
            // Each file once, however many edits it had.
            let mut paths: Vec<String> = Vec::new();
            for edit in args["edits"].as_array().into_iter().flatten() {
                if let Some(p) = text(&edit["path"])
                    && !paths.contains(&p)
                {
                    paths.push(p);
                }
            }
            return paths
                .into_iter()
                .map(|p| (AuditAction::ToolWrite, p))
                .collect();
        }
        // Files handed to a worker with a message (assign, steer, reply): one each, the
        // worker's label where they went.
        "subagent" if matches!(args["action"].as_str(), Some("assign" | "steer" | "reply")) => {
            return args["files"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(text)
                .map(|p| (AuditAction::Handoff, p))
                .collect();
        }
        "file_deliver" => {
            return args["paths"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(text)
                .map(|p| (AuditAction::Delivery, p))
                .collect();
        }
        _ => return Vec::new(),
    };
    path().map(|p| (action, p)).collect()
}

/// Records what the call of `tool` with `args` by `person`'s agent moved, as `output`
/// says it ended.
pub(crate) fn record(site: &Site, person: &str, tool: &str, args: &Value, output: &ToolOutput) {
    let moved = movements(tool, args);
    if moved.is_empty() {
        return;
    }
    let structured = output.structured.as_ref();
    let field = |name: &str| structured.and_then(|s| s.get(name));
    let code = structured
        .and_then(|s| s["error"]["code"].as_str())
        .unwrap_or("error");
    let one_file = moved.len() == 1;
    for (action, path) in moved {
        let mut entry =
            AuditEntry::new(person, "agent", action, &path).project(args["project"].as_str());
        if let Some(node) = args["node"].as_str() {
            entry = entry.node(node);
        }
        if output.is_error {
            entry = entry.failed(code);
        } else if one_file && let Some(size) = field("size").and_then(Value::as_u64) {
            // The bytes passed through ferry when the answer names their digest.
            entry = entry.bytes(size, field("sha256").and_then(Value::as_str));
        }
        if let Some(to) = field("mediaId").and_then(Value::as_str) {
            entry = entry.to(&format!("media:{to}"));
        }
        if action == AuditAction::Handoff
            && let Some(label) = args["label"].as_str().or(args["agent"].as_str())
        {
            entry = entry.to(&format!("worker:{label}"));
        }
        site.audit(&entry);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_moving_tool_names_its_files_once() {
        assert_eq!(
            movements("file_write", &json!({"path": "a.txt", "content": "x"})),
            [(AuditAction::ToolWrite, "a.txt".to_owned())]
        );
        let edits = json!({"edits": [
            {"path": "a.txt", "oldText": "1", "newText": "2"},
            {"path": "b.txt", "oldText": "1", "newText": "2"},
            {"path": "a.txt", "oldText": "3", "newText": "4"},
        ]});
        assert_eq!(movements("file_edit", &edits).len(), 2);
        assert_eq!(
            movements("file_deliver", &json!({"paths": ["x.pdf", "y.pdf"]})).len(),
            2
        );
        assert_eq!(
            movements("file_push", &json!({"node": "n", "path": "/tmp/x"})),
            [(AuditAction::NodePush, "/tmp/x".to_owned())]
        );
        assert_eq!(
            movements(
                "subagent",
                &json!({"action": "assign", "agent": "r", "task": "t", "files": ["a.md", "b.md"]})
            )
            .len(),
            2
        );
        assert!(movements("subagent", &json!({"action": "status"})).is_empty());
        assert!(movements("file_read", &json!({"path": "a.txt"})).is_empty());
        assert!(movements("dir_list", &json!({"path": "."})).is_empty());
        assert!(movements("file_write", &json!({"path": 7})).is_empty());
    }
}
