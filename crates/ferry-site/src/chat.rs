//! The saved conversation of a workspace (spec members M-CHAT): the member's messages
//! and the agent's words. Delivery notices are stream-only and never saved here.

use crate::db::now_secs;
use crate::{Site, SiteError};

/// Who said a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    User,
    Assistant,
}

impl ChatRole {
    fn as_str(self) -> &'static str {
        match self {
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        }
    }
}

/// One saved message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: ChatRole,
    pub text: String,
    /// The `public/…` paths the member attached (empty for the agent's words).
    pub attachments: Vec<String>,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

/// Projects are stored as their id; the main workspace as the empty string.
fn project_key(project: Option<&str>) -> &str {
    project.unwrap_or("")
}

impl Site {
    /// The conversation of a workspace, oldest first.
    pub fn chat_history(
        &self,
        person: &str,
        project: Option<&str>,
    ) -> Result<Vec<ChatMessage>, SiteError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT role, text, attachments, created FROM chat_messages
             WHERE person = ?1 AND project = ?2 ORDER BY id",
        )?;
        let rows = stmt.query_map([person, project_key(project)], |r| {
            let role: String = r.get(0)?;
            let attachments: String = r.get(2)?;
            Ok(ChatMessage {
                role: if role == "user" {
                    ChatRole::User
                } else {
                    ChatRole::Assistant
                },
                text: r.get(1)?,
                attachments: serde_json::from_str(&attachments).unwrap_or_default(),
                created: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Appends one message to a workspace's conversation.
    pub fn append_chat(
        &self,
        person: &str,
        project: Option<&str>,
        role: ChatRole,
        text: &str,
        attachments: &[String],
    ) -> Result<(), SiteError> {
        let attachments = serde_json::to_string(attachments).unwrap_or_else(|_| "[]".to_owned());
        self.db.conn().execute(
            "INSERT INTO chat_messages (person, project, role, text, attachments, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            rusqlite::params![
                person,
                project_key(project),
                role.as_str(),
                text,
                attachments,
                now_secs()
            ],
        )?;
        Ok(())
    }
}
