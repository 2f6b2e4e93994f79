//! How a file is named to a person: workspace-relative paths, never where the site lives
//! on the host, and names whose hidden characters are made visible
//! ([`ferry_fs::shown_name`]).

use std::path::{Component, Path};

use ferry_fs::shown_name;

/// `abs` as the person knows it: relative to their home (`public/attachments/a.pdf`),
/// else relative to the site (`private/people/<p>/artifacts/…`, `shared/public/…`,
/// `circles/<c>/…`). `None` for a path outside the site or one that climbs with `..`.
/// `data` is the site's folder as the path was made from it (canonical).
pub fn person_relative(data: &Path, person: &str, abs: &Path) -> Option<String> {
    let home = data.join(crate::layout::home(person));
    let rest = abs
        .strip_prefix(&home)
        .or_else(|_| abs.strip_prefix(data))
        .ok()?;
    if rest
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    let rel = rest.to_str()?.trim_start_matches("./").to_owned();
    (!rel.is_empty()).then_some(rel)
}

/// The 📎 line that announces a file delivered to `public_path` (`public/attachments/…`):
/// one line, with every hidden character of the name made visible.
pub fn delivery_notice(public_path: &str) -> String {
    let name = public_path.rsplit('/').next().unwrap_or(public_path);
    format!("📎 {} — {}", shown_name(name), shown_name(public_path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_named_from_the_home_or_the_site() {
        let data = Path::new("/srv/site");
        let rel = |p: &str| person_relative(data, "me", Path::new(p));
        assert_eq!(
            rel("/srv/site/home/me/public/attachments/a.pdf").as_deref(),
            Some("public/attachments/a.pdf")
        );
        assert_eq!(
            rel("/srv/site/home/me/./notes.md").as_deref(),
            Some("notes.md")
        );
        assert_eq!(
            rel("/srv/site/private/people/me/artifacts/q3/r.md").as_deref(),
            Some("private/people/me/artifacts/q3/r.md")
        );
        assert_eq!(
            rel("/srv/site/shared/public/x").as_deref(),
            Some("shared/public/x")
        );
        assert_eq!(rel("/srv/site/home/me/../bob/x"), None);
        assert_eq!(rel("/etc/passwd"), None);
        assert_eq!(rel("/srv/site"), None);
        assert_eq!(rel("/srv/site-other/home/me/x"), None);
    }

    #[test]
    fn a_notice_is_one_line_that_shows_what_is_there() {
        assert_eq!(
            delivery_notice("public/attachments/report.pdf"),
            "📎 report.pdf — public/attachments/report.pdf"
        );
        let notice = delivery_notice("public/attachments/a\n📎 b\u{2215}c\u{202E}fdp.exe");
        assert!(
            !notice.contains('\n') && !notice.contains('\u{202E}'),
            "{notice}"
        );
        assert_eq!(
            notice,
            "📎 a⟨U+000A⟩📎 b⟨U+2215⟩c⟨U+202E⟩fdp.exe — \
             public/attachments/a⟨U+000A⟩📎 b⟨U+2215⟩c⟨U+202E⟩fdp.exe"
        );
    }
}
