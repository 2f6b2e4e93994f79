//! The terminal WebSocket's text messages: what the page may send (resize, close), read
//! strictly, and what the server tells it (ready, exit, error).

use ferry_codes::Code;
use ferry_node::terminal::check_size;
use serde_json::{Value, json};

/// A text message from the page, as understood.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum FromPage {
    /// `{"type":"resize","cols":N,"rows":N}` within the terminal's bounds.
    Resize {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// A resize outside the bounds: answered, and the terminal kept as it is.
    BadResize(String),
    /// `{"type":"close"}`: end the terminal now.
    Close,
}

/// Reads a text message; `Err` is a breach of the protocol (not JSON, an unknown type,
/// an unknown or missing field), which ends the terminal.
pub(crate) fn parse(text: &str) -> Result<FromPage, String> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("a text message is not JSON: {e}"))?;
    let Some(fields) = value.as_object() else {
        return Err("a text message is a JSON object with a \"type\"".into());
    };
    let only = |allowed: &[&str]| match fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(format!("unknown field {:?}", shown(extra))),
        None => Ok(()),
    };
    match fields.get("type").and_then(Value::as_str) {
        Some("close") => {
            only(&["type"])?;
            Ok(FromPage::Close)
        }
        Some("resize") => {
            only(&["type", "cols", "rows"])?;
            // A resize with a size that is missing or not a count is still a resize: it
            // is answered and ignored like one out of bounds, and the shell stays.
            let number = |key: &str| {
                fields
                    .get(key)
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("a resize has \"{key}\": a whole number"))
            };
            let (cols, rows) = match (number("cols"), number("rows")) {
                (Ok(cols), Ok(rows)) => (cols, rows),
                (Err(why), _) | (_, Err(why)) => return Ok(FromPage::BadResize(why)),
            };
            let fits = |n: u64| u16::try_from(n).ok();
            Ok(match (fits(cols), fits(rows)) {
                (Some(c), Some(r)) if check_size(c, r).is_ok() => {
                    FromPage::Resize { cols: c, rows: r }
                }
                (Some(c), Some(r)) => FromPage::BadResize(check_size(c, r).unwrap_err()),
                _ => FromPage::BadResize(format!(
                    "a terminal is 1 to {max} columns by 1 to {max} rows, not {cols} × {rows}",
                    max = ferry_node::terminal::TERMINAL_SIZE_MAX
                )),
            })
        }
        Some(other) => Err(format!("unknown message type {:?}", shown(other))),
        None => Err("a text message has a \"type\" string".into()),
    }
}

/// Something the page sent, cut short for an answer.
fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

/// `{"type":"ready","session","shell"}`: the first message of every attach.
pub(crate) fn ready(session: &str, shell: &str) -> String {
    json!({"type": "ready", "session": session, "shell": shell}).to_string()
}

/// `{"type":"exit","code":N}`: the shell ended.
pub(crate) fn exit(code: i32) -> String {
    json!({"type": "exit", "code": code}).to_string()
}

/// `{"type":"error","error":{"code","message"}}`.
pub(crate) fn error(code: Code, message: &str) -> String {
    json!({"type": "error", "error": {"code": code, "message": message}}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resizes_and_closes_are_read() {
        assert_eq!(
            parse(r#"{"type":"resize","cols":120,"rows":40}"#),
            Ok(FromPage::Resize {
                cols: 120,
                rows: 40
            })
        );
        assert_eq!(parse(r#"{"type":"close"}"#), Ok(FromPage::Close));
    }

    #[test]
    fn a_resize_out_of_bounds_is_answered_not_fatal() {
        for (cols, rows) in [(0, 0), (100000, 24), (80, 1001), (1001, 1)] {
            let text = format!(r#"{{"type":"resize","cols":{cols},"rows":{rows}}}"#);
            assert!(
                matches!(parse(&text), Ok(FromPage::BadResize(_))),
                "{cols}×{rows}"
            );
        }
        // Sizes that are not counts at all, or missing: a resize all the same.
        for text in [
            r#"{"type":"resize","cols":80}"#,
            r#"{"type":"resize"}"#,
            r#"{"type":"resize","cols":-1,"rows":24}"#,
            r#"{"type":"resize","cols":80.0,"rows":24}"#,
            r#"{"type":"resize","cols":null,"rows":24}"#,
            r#"{"type":"resize","cols":"80","rows":24}"#,
        ] {
            assert!(matches!(parse(text), Ok(FromPage::BadResize(_))), "{text}");
        }
        assert!(matches!(
            parse(r#"{"type":"resize","cols":1000,"rows":1000}"#),
            Ok(FromPage::Resize { .. })
        ));
    }

    #[test]
    fn anything_else_breaks_the_protocol() {
        for text in [
            "hello",
            "[]",
            "{}",
            r#"{"type":"resize","cols":80,"rows":24,"x":1}"#,
            r#"{"type":"close","now":true}"#,
            r#"{"type":"input","data":"ls"}"#,
            r#"{"type":7}"#,
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn server_messages_have_their_shape() {
        let ready: Value = serde_json::from_str(&ready("ABC", "bash")).unwrap();
        assert_eq!(
            ready,
            json!({"type":"ready","session":"ABC","shell":"bash"})
        );
        let error: Value = serde_json::from_str(&error(Code::NodeOffline, "gone")).unwrap();
        assert_eq!(error["error"]["code"], "node_offline");
    }
}
