//! The saved conversation of a workspace (spec members M-CHAT): the member's messages
//! and the agent's words. Delivery notices are stream-only and never saved here.
//!
//! The conversation is read a page at a time, newest first, so that a long one (or one
//! message saved before replies were capped) never has to be held whole: every message
//! read is cut to `agent.max_reply_bytes`, and a page stops at
//! [`CHAT_PAGE_MAX_BYTES`] of text. What the relay sends upstream is read the same way,
//! newest first, and stops at a byte budget ([`Site::chat_context`]).

use ferry_config::limits::{CHAT_PAGE_MAX_BYTES, CHAT_PAGE_MAX_MESSAGES};

use ferry_sql::Engine;

use crate::db::{Db, Exec, now_secs, params};
use crate::{Site, SiteError};

/// Where each workspace's current conversation starts: after message `after` (M-DAILY
/// "New conversation"). Older messages stay in `chat_messages`, archived: neither listed
/// nor sent upstream.
pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS chat_starts (
    person TEXT NOT NULL REFERENCES persons(id),
    project TEXT NOT NULL,
    after INTEGER NOT NULL,
    started INTEGER NOT NULL,
    PRIMARY KEY (person, project)
);
";

/// The condition that keeps a query to the current conversation of `?1`, `?2`.
const CURRENT: &str = "id > COALESCE((SELECT after FROM chat_starts
     WHERE chat_starts.person = ?1 AND chat_starts.project = ?2), 0)";

/// Who said a message.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    /// The member.
    User,
    /// The agent.
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
    /// Grows with every message of the site; pages are cut by it.
    pub id: i64,
    /// Who said it.
    pub role: ChatRole,
    /// What was said, cut to `agent.max_reply_bytes`.
    pub text: String,
    /// The `public/…` paths the member attached (empty for the agent's words).
    pub attachments: Vec<String>,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

/// A run of consecutive messages, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatPage {
    /// The messages, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The id to ask `before` for the next older page; `None` when this page is the oldest.
    pub earlier: Option<i64>,
}

/// The line that ends a reply cut at `max_bytes`.
pub fn reply_cut_note(max_bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    let size = if max_bytes.is_multiple_of(MIB) {
        format!("{} MiB", max_bytes / MIB)
    } else if max_bytes.is_multiple_of(KIB) {
        format!("{} KiB", max_bytes / KIB)
    } else {
        format!("{max_bytes} bytes")
    };
    format!("[reply cut at {size}]")
}

/// Cuts `text` to at most `max_bytes` at a character boundary and ends it with
/// [`reply_cut_note`]; `false` (and `text` untouched) when it already fits.
pub fn cut_reply(text: &mut String, max_bytes: u64) -> bool {
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    end_as_cut(text, max_bytes);
    true
}

/// Ends a reply that was cut at `max_bytes` with [`reply_cut_note`] on a line of its own.
pub fn end_as_cut(text: &mut String, max_bytes: u64) {
    if !text.is_empty() {
        text.push_str("\n\n");
    }
    text.push_str(&reply_cut_note(max_bytes));
}

/// The longest prefix of `bytes` that is whole UTF-8.
fn whole_chars(bytes: &[u8]) -> String {
    let whole = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    whole.to_owned()
}

/// The most bytes a saved reply may have: the cap, and the note of a cut reply.
fn saved_max_bytes(max_bytes: u64) -> u64 {
    max_bytes + 2 + reply_cut_note(max_bytes).len() as u64
}

/// Projects are stored as their id; the main workspace as the empty string.
fn project_key(project: Option<&str>) -> &str {
    project.unwrap_or("")
}

/// The columns every read selects: the text's length, not the text, which [`Row::read`]
/// reads only as far as a saved reply may go, so that a message over the cap (saved
/// before there was one) is never read whole.
const MESSAGE_COLUMNS: &str = "id, role, octet_length(text), attachments, created";

impl Site {
    /// The newest messages of a workspace's conversation whose `cost`s add up to at most
    /// `max_bytes`, oldest first, each cut to `agent.max_reply_bytes`: whole messages
    /// only, and none older than the first that does not fit.
    ///
    /// `cost` is what a message takes where it is sent, at least the length of its text.
    /// A text is read only when its length could still fit, so at most `max_bytes` of
    /// text is read however long the conversation.
    pub fn chat_context(
        &self,
        person: &str,
        project: Option<&str>,
        max_bytes: u64,
        cost: impl Fn(&ChatMessage) -> u64,
    ) -> Result<Vec<ChatMessage>, SiteError> {
        // Read a batch of rows at a time, newest first, so a long conversation is never
        // listed whole when the budget ends after a few messages.
        const BATCH: i64 = 64;
        let max_text = self.config().agent.max_reply_bytes;
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM chat_messages
             WHERE person = ?1 AND project = ?2 AND id < ?3 AND {CURRENT}
             ORDER BY id DESC LIMIT ?4"
        );
        let (mut messages, mut left, mut before) = (Vec::new(), max_bytes, i64::MAX);
        'batches: loop {
            let rows = self.db.rows(
                &sql,
                params![person, project_key(project), before, BATCH],
                Row::new,
            )?;
            let last_batch = (rows.len() as i64) < BATCH;
            for row in rows {
                before = row.id;
                if row.text_max_bytes(max_text) > left {
                    break 'batches;
                }
                let m = row.read(&self.db, max_text)?;
                match left.checked_sub(cost(&m)) {
                    Some(rest) => left = rest,
                    None => break 'batches,
                }
                messages.push(m);
            }
            if last_batch {
                break;
            }
        }
        messages.reverse();
        Ok(messages)
    }

    /// One page of a workspace's conversation: the newest messages older than `before`
    /// (all of them when `None`), at most `limit` of them (clamped to
    /// 1..=[`CHAT_PAGE_MAX_MESSAGES`]) and [`CHAT_PAGE_MAX_BYTES`] of text.
    pub fn chat_page(
        &self,
        person: &str,
        project: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<ChatPage, SiteError> {
        let limit = limit.clamp(1, CHAT_PAGE_MAX_MESSAGES);
        let max_text = self.config().agent.max_reply_bytes;
        // One more than the page, to know whether an older page exists.
        let rows = self.db.rows(
            &format!(
                "SELECT {MESSAGE_COLUMNS} FROM chat_messages
                 WHERE person = ?1 AND project = ?2 AND id < ?3 AND {CURRENT}
                 ORDER BY id DESC LIMIT ?4"
            ),
            params![
                person,
                project_key(project),
                before.unwrap_or(i64::MAX),
                (limit + 1) as i64
            ],
            Row::new,
        )?;
        let (mut messages, mut bytes, mut earlier) = (Vec::new(), 0usize, None);
        for row in rows {
            let m = row.read(&self.db, max_text)?;
            let full = messages.len() == limit
                || (!messages.is_empty() && bytes + m.text.len() > CHAT_PAGE_MAX_BYTES);
            if full {
                earlier = messages.last().map(|m: &ChatMessage| m.id);
                break;
            }
            bytes += m.text.len();
            messages.push(m);
        }
        messages.reverse();
        Ok(ChatPage { messages, earlier })
    }

    /// Starts a new conversation in a workspace: the messages so far are archived (kept,
    /// but no longer listed or sent upstream). Answers the new conversation's mark.
    pub fn new_conversation(&self, person: &str, project: Option<&str>) -> Result<i64, SiteError> {
        self.db.execute(
            "INSERT INTO chat_starts (person, project, after, started)
             VALUES (?1, ?2, (SELECT COALESCE(MAX(id), 0) FROM chat_messages), ?3)
             ON CONFLICT (person, project) DO UPDATE SET after = excluded.after,
                 started = excluded.started",
            params![person, project_key(project), now_secs()],
        )?;
        self.conversation_mark(person, project)
    }

    /// The mark of a workspace's current conversation (0 before the first "New
    /// conversation"): a turn that began under one mark saves its reply only while the
    /// mark still holds.
    pub fn conversation_mark(&self, person: &str, project: Option<&str>) -> Result<i64, SiteError> {
        Ok(self
            .db
            .row(
                "SELECT after FROM chat_starts WHERE person = ?1 AND project = ?2",
                params![person, project_key(project)],
                |r| r.get(0),
            )?
            .unwrap_or(0))
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
        self.db.execute(
            "INSERT INTO chat_messages (person, project, role, text, attachments, created)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
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

/// One row of [`MESSAGE_COLUMNS`], its text not read yet.
struct Row {
    id: i64,
    role: String,
    /// The length of the saved text, in bytes.
    length: u64,
    attachments: String,
    created: i64,
}

impl Row {
    fn new(r: &ferry_sql::Row) -> Result<Row, SiteError> {
        Ok(Row {
            id: r.get(0)?,
            role: r.get(1)?,
            length: u64::try_from(r.get::<i64>(2)?).unwrap_or(0),
            attachments: r.get(3)?,
            created: r.get(4)?,
        })
    }

    /// The most bytes of text [`Row::read`] reads and returns for this row.
    fn text_max_bytes(&self, max_text: u64) -> u64 {
        self.length.min(saved_max_bytes(max_text))
    }

    /// The message with its text; a text longer than a saved reply may be is cut to
    /// `max_text` like a reply, and never read whole.
    fn read(self, db: &Db, max_text: u64) -> Result<ChatMessage, SiteError> {
        let want = self.text_max_bytes(max_text);
        let bytes: Vec<u8> = if want == 0 {
            Vec::new()
        } else {
            // The first bytes only, cut by the database: a long text never crosses whole.
            let sql = match db.engine() {
                Engine::Sqlite => {
                    "SELECT substr(CAST(text AS BLOB), 1, ?2) FROM chat_messages WHERE id = ?1"
                }
                Engine::Postgres => {
                    "SELECT substring(convert_to(text, 'UTF8') FROM 1 FOR CAST(?2 AS INTEGER))
                     FROM chat_messages WHERE id = ?1"
                }
            };
            db.row(sql, params![self.id, want], |r| r.get(0))?
                .unwrap_or_default()
        };
        let mut text = whole_chars(&bytes);
        if self.length > saved_max_bytes(max_text) {
            // What was read is longer than the cap (the read takes the note's room too).
            cut_reply(&mut text, max_text);
        }
        Ok(ChatMessage {
            id: self.id,
            role: if self.role == "user" {
                ChatRole::User
            } else {
                ChatRole::Assistant
            },
            text,
            attachments: serde_json::from_str(&self.attachments).unwrap_or_default(),
            created: self.created,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_names_the_cap_in_the_unit_it_was_set_in() {
        assert_eq!(reply_cut_note(1024 * 1024), "[reply cut at 1 MiB]");
        assert_eq!(reply_cut_note(3 * 1024), "[reply cut at 3 KiB]");
        assert_eq!(reply_cut_note(1000), "[reply cut at 1000 bytes]");
    }

    #[test]
    fn a_reply_is_cut_at_a_character_boundary_at_the_cap_and_not_before() {
        // "é" is two bytes: a cap in its middle keeps the whole characters before it.
        for (text, max, want) in [
            ("abcé", 5, None),
            ("abcé", 6, None),
            ("abcéd", 5, Some("abcé")),
            ("abcé", 4, Some("abc")),
            ("abcé", 3, Some("abc")),
        ] {
            let mut got = text.to_owned();
            let cut = cut_reply(&mut got, max);
            match want {
                None => assert!(!cut && got == text, "{text:?} at {max}: {got:?}"),
                Some(kept) => assert_eq!(
                    got,
                    format!("{kept}\n\n{}", reply_cut_note(max)),
                    "{text:?} at {max}"
                ),
            }
        }
    }

    fn site_with(config: ferry_config::Config) -> (tempfile::TempDir, Site) {
        let tmp = tempfile::tempdir().unwrap();
        let site = Site::open(tmp.path(), crate::testing::metadata(tmp.path(), config)).unwrap();
        site.add_person("me").unwrap();
        (tmp, site)
    }

    fn site() -> (tempfile::TempDir, Site) {
        site_with(ferry_config::Config::default())
    }

    /// The byte length of each message of a page.
    fn sizes(page: &ChatPage) -> Vec<usize> {
        page.messages.iter().map(|m| m.text.len()).collect()
    }

    #[test]
    fn a_page_holds_its_byte_budget_and_not_one_byte_more() {
        let (_tmp, site) = site();
        let quarter = CHAT_PAGE_MAX_BYTES / 4;
        // Four messages, oldest first, of the budget in all, minus one, plus one.
        for (extra, project) in [(-1i64, "under"), (0, "at"), (1, "over")] {
            let project = Some(project);
            let newest = (quarter as i64 + extra) as usize;
            let lengths = [quarter, quarter + 1, quarter - 1, newest];
            for len in lengths {
                let text = "a".repeat(len);
                site.append_chat("me", project, ChatRole::Assistant, &text, &[])
                    .unwrap();
            }
            let page = site.chat_page("me", project, None, 50).unwrap();
            if extra <= 0 {
                assert_eq!(sizes(&page), lengths, "{extra}: all of them fit");
                assert_eq!(page.earlier, None);
                continue;
            }
            // One byte over: the oldest waits for the page before.
            assert_eq!(sizes(&page), lengths[1..], "{extra}");
            let rest = site.chat_page("me", project, page.earlier, 50).unwrap();
            assert_eq!(sizes(&rest), lengths[..1]);
            assert_eq!(rest.earlier, None);
        }
    }

    #[test]
    fn a_page_holds_at_least_one_message_however_long() {
        // Replies allowed past a page's budget.
        let mut config = ferry_config::Config::default();
        config.agent.max_reply_bytes = 2 * CHAT_PAGE_MAX_BYTES as u64;
        let (_tmp, site) = site_with(config);
        let max = 2 * CHAT_PAGE_MAX_BYTES;
        site.append_chat("me", None, ChatRole::User, "first", &[])
            .unwrap();
        site.append_chat("me", None, ChatRole::Assistant, &"b".repeat(max), &[])
            .unwrap();
        let page = site.chat_page("me", None, None, 50).unwrap();
        assert_eq!(sizes(&page), [max]);
        let page = site.chat_page("me", None, page.earlier, 50).unwrap();
        assert_eq!(page.messages[0].text, "first");
        assert_eq!(page.earlier, None);
    }

    /// The text of each message of a context.
    fn texts(messages: &[ChatMessage]) -> Vec<&str> {
        messages.iter().map(|m| m.text.as_str()).collect()
    }

    #[test]
    fn a_context_holds_the_newest_whole_messages_within_its_budget() {
        let (_tmp, site) = site();
        // Costed as their text and ten bytes more, the three newest take 100 bytes.
        let cost = |m: &ChatMessage| m.text.len() as u64 + 10;
        let older = "o".repeat(5);
        let newest = ["a".repeat(20), "b".repeat(30), "c".repeat(20)];
        site.append_chat("me", None, ChatRole::User, &older, &[])
            .unwrap();
        for text in &newest {
            site.append_chat("me", None, ChatRole::Assistant, text, &[])
                .unwrap();
        }
        let context = |max| site.chat_context("me", None, max, cost).unwrap();
        // One byte short of the older one: the three newest, oldest first.
        assert_eq!(texts(&context(114)), newest);
        // Just enough for all four, and more.
        let all = [&older, &newest[0], &newest[1], &newest[2]];
        assert_eq!(texts(&context(115)), all);
        assert_eq!(texts(&context(116)), all);
        // One byte short of the three newest: an older one never stands in for a newer.
        assert_eq!(texts(&context(99)), newest[1..]);
        assert_eq!(texts(&context(100)), newest);
        // A newest message longer than the budget leaves nothing to send.
        assert!(context(29).is_empty());
        assert_eq!(texts(&context(30)), newest[2..]);
        // Another workspace's conversation is not this one's.
        assert!(
            site.chat_context("me", Some("other"), 1000, cost)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn a_context_cuts_an_old_overlong_message_like_a_page_does() {
        let mut config = ferry_config::Config::default();
        config.agent.max_reply_bytes = 1000;
        let (_tmp, site) = site_with(config);
        // Saved before the cap: longer than any reply may be now.
        site.append_chat("me", None, ChatRole::Assistant, &"x".repeat(50_000), &[])
            .unwrap();
        let cut = format!("{}\n\n{}", "x".repeat(1000), reply_cut_note(1000));
        let len = |m: &ChatMessage| m.text.len() as u64;
        let context = site.chat_context("me", None, 10_000, len).unwrap();
        assert_eq!(texts(&context), [cut.as_str()]);
        // Only as much is read as the cut message may take.
        let short = cut.len() as u64 - 1;
        assert!(
            site.chat_context("me", None, short, len)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn whole_chars_drops_a_character_cut_in_half() {
        assert_eq!(whole_chars(&"abé".as_bytes()[..3]), "ab");
        assert_eq!(whole_chars("abé".as_bytes()), "abé");
    }
}
