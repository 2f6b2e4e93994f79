//! Ids of persons, circles and projects (spec core C-SITE), and the id a project's
//! display name gives (spec members M-DAILY "Names people type").

use crate::SiteError;

use ferry_config::limits::{ID_MAX_BYTES, PROJECT_NAME_MAX_BYTES};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Accepts `[a-z0-9][a-z0-9_-]{0,21}` and nothing else.
pub fn check_id(kind: &'static str, id: &str) -> Result<(), SiteError> {
    let bytes = id.as_bytes();
    let valid = !bytes.is_empty()
        && bytes.len() <= ID_MAX_BYTES
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-');
    if valid {
        Ok(())
    } else {
        Err(SiteError::InvalidId {
            kind,
            id: id.to_owned(),
        })
    }
}

/// A project's display name as it is kept: NFC, without surrounding white space; refused
/// when empty, over [`PROJECT_NAME_MAX_BYTES`], or holding a control character (a name is
/// shown on one line).
pub fn project_name(name: &str) -> Result<String, SiteError> {
    let name: String = name.nfc().collect::<String>().trim().to_owned();
    let problem = if name.is_empty() {
        Some("is empty".to_owned())
    } else if name.len() > PROJECT_NAME_MAX_BYTES {
        Some(format!("is longer than {PROJECT_NAME_MAX_BYTES} bytes"))
    } else if name.chars().any(char::is_control) {
        Some("holds a control character (a line break, a tab, NUL…)".to_owned())
    } else {
        None
    };
    match problem {
        Some(problem) => Err(SiteError::BadProjectName(problem)),
        None => Ok(name),
    }
}

/// The project id a display name gives: compatibility-decomposed (NFKD), accents
/// dropped, lowercased, every run of anything but `a-z` and `0-9` one `-`, no `-` at
/// either end, cut to [`ID_MAX_BYTES`]: `Q2 Report` → `q2-report`, `Café Überblick` →
/// `cafe-uberblick`. `None` when nothing is left (`日本`, `!!!`).
pub fn project_id_from_name(name: &str) -> Option<String> {
    let mut id = String::new();
    let mut gap = false;
    for c in name.nfkd().filter(|c| !is_combining_mark(*c)) {
        for c in c.to_lowercase() {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                if gap && !id.is_empty() {
                    id.push('-');
                }
                gap = false;
                id.push(c);
            } else {
                gap = true;
            }
        }
    }
    let id = fit_id(&id, "");
    (!id.is_empty()).then_some(id)
}

/// The `n`th id to try for a project whose name gives `base`: `base` itself first, then
/// `base-2`, `base-3`…, the base cut so that the whole stays within [`ID_MAX_BYTES`].
pub fn project_id_candidate(base: &str, n: u32) -> String {
    match n {
        0 | 1 => fit_id(base, ""),
        n => fit_id(base, &format!("-{n}")),
    }
}

/// `base` cut so that it and `suffix` fit in [`ID_MAX_BYTES`], without a `-` before the
/// suffix or at the end (the base is ASCII, so any byte is a boundary).
fn fit_id(base: &str, suffix: &str) -> String {
    let room = ID_MAX_BYTES.saturating_sub(suffix.len());
    let cut = base[..base.len().min(room)].trim_end_matches('-');
    format!("{cut}{suffix}")
}

/// Random bytes in an unguessable record id (a trash entry, a share link): 160 bits.
const RECORD_ID_RANDOM_BYTES: usize = 20;
/// Characters in a record id: those bytes in lower-case base32.
const RECORD_ID_CHARS: usize = 32;

/// A fresh unguessable record id.
pub(crate) fn new_record_id() -> String {
    ferry_fs::random_base32::<RECORD_ID_RANDOM_BYTES>()
}

/// Whether `id` is spelled as a record id (checked before it names anything).
pub(crate) fn is_record_id(id: &str) -> bool {
    id.len() == RECORD_ID_CHARS
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_gives_an_id_by_the_table() {
        for (name, id) in [
            ("Q2 Report", Some("q2-report")),
            ("  Q2   Report  ", Some("q2-report")),
            ("Café Überblick", Some("cafe-uberblick")),
            ("relatório (final)", Some("relatorio-final")),
            ("Ｑ２ ｒｅｐｏｒｔ", Some("q2-report")),
            ("ﬁle №5", Some("file-no5")),
            ("--a--b--", Some("a-b")),
            ("a_b.c/d\\e", Some("a-b-c-d-e")),
            ("../../etc/passwd", Some("etc-passwd")),
            ("<script>alert(1)</script>", Some("script-alert-1-script")),
            ("\u{202e}gpj.exe", Some("gpj-exe")),
            ("Straße", Some("stra-e")),
            ("2026", Some("2026")),
            ("日本語", None),
            ("!!!", None),
            ("", None),
            ("\u{301}\u{301}", None),
        ] {
            assert_eq!(project_id_from_name(name).as_deref(), id, "{name:?}");
            if let Some(id) = id {
                assert!(check_id("project", id).is_ok(), "{id}");
            }
        }
    }

    #[test]
    fn a_derived_id_is_cut_to_the_limit_and_never_ends_in_a_dash() {
        let max = ID_MAX_BYTES;
        for (len, want) in [(max - 1, max - 1), (max, max), (max + 1, max)] {
            let id = project_id_from_name(&"a".repeat(len)).unwrap();
            assert_eq!(id.len(), want, "{len}");
        }
        // A cut that falls just after a gap leaves no dash at the end.
        let name = format!("{} b", "a".repeat(max - 1));
        assert_eq!(project_id_from_name(&name).unwrap(), "a".repeat(max - 1));
        for n in [2, 3, 10, 999] {
            let id = project_id_candidate(&"a".repeat(max), n);
            assert_eq!(id.len(), max, "{id}");
            assert!(id.ends_with(&format!("-{n}")), "{id}");
            assert!(check_id("project", &id).is_ok(), "{id}");
        }
        let dashed = format!("{}-bbb", "a".repeat(max - 4));
        assert_eq!(
            project_id_candidate(&dashed, 22),
            format!("{}-22", "a".repeat(max - 4))
        );
        assert_eq!(project_id_candidate("q2-report", 1), "q2-report");
        assert_eq!(project_id_candidate("q2-report", 2), "q2-report-2");
    }

    #[test]
    fn a_display_name_is_held_to_its_rules() {
        assert_eq!(project_name("  Q2 Report ").unwrap(), "Q2 Report");
        assert_eq!(project_name("Cafe\u{301}").unwrap(), "Café");
        for bad in [
            "",
            "   ",
            "a\nb",
            "a\0b",
            "tab\there",
            "x\u{85}y",
            "x\u{1b}[31my",
        ] {
            assert!(project_name(bad).is_err(), "{bad:?}");
        }
        let max = PROJECT_NAME_MAX_BYTES;
        assert!(project_name(&"a".repeat(max - 1)).is_ok());
        assert!(project_name(&"a".repeat(max)).is_ok());
        assert!(project_name(&"a".repeat(max + 1)).is_err());
        // Counted in bytes once normalized: "é" is two.
        assert!(project_name(&"é".repeat(max / 2)).is_ok());
        assert!(project_name(&"é".repeat(max / 2 + 1)).is_err());
    }

    #[test]
    fn accepts_the_grammar_and_nothing_else() {
        for good in ["a", "me", "q2-report", "0_x", &"a".repeat(22)] {
            assert!(check_id("person", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "A",
            "-a",
            "_a",
            "a/b",
            "a.b",
            "../a",
            "é",
            " a",
            &"a".repeat(23),
            "a\0",
        ] {
            assert!(check_id("person", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn length_at_the_edges() {
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES - 1)).is_ok());
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES)).is_ok());
        assert!(check_id("project", &"a".repeat(ID_MAX_BYTES + 1)).is_err());
    }
}
