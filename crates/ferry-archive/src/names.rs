//! What a name of an archive may be: confined, exact, and possible on the destination.
//!
//! Names are never repaired: a name that breaks a rule refuses the archive.

use ferry_fs::{NAME_MAX_BYTES, PATH_MAX_BYTES};
use unicode_normalization::UnicodeNormalization;

use crate::ArchiveError;
use crate::stream::MemberKind;

/// The platform an archive is extracted on, which decides which names can exist there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Platform {
    /// Names are bytes, compared exactly.
    #[default]
    Linux,
    /// Names are compared case-insensitively, and Windows' reserved names and
    /// characters cannot exist.
    Windows,
    /// Names are compared case-insensitively and after NFC normalization.
    Macos,
}

impl Platform {
    /// The platform spelled `text` (`linux`, `windows`, `macos`).
    pub fn parse(text: &str) -> Option<Platform> {
        match text {
            "linux" => Some(Platform::Linux),
            "windows" => Some(Platform::Windows),
            "macos" => Some(Platform::Macos),
            _ => None,
        }
    }

    /// The platform's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Linux => "linux",
            Platform::Windows => "windows",
            Platform::Macos => "macos",
        }
    }

    /// The key two names are equal by on this platform.
    pub(crate) fn collision_key(self, path: &str) -> String {
        match self {
            Platform::Linux => path.to_owned(),
            Platform::Windows => fold_case(path.chars()),
            Platform::Macos => fold_case(path.nfc()),
        }
    }
}

fn fold_case(chars: impl Iterator<Item = char>) -> String {
    chars.flat_map(char::to_lowercase).collect()
}

/// The characters ferry-fs uses to stand for the raw bytes of non-UTF-8 names on disk
/// (U+10FF80–U+10FFFF): a name holding one would be written as another name.
fn is_byte_char(c: char) -> bool {
    (0x10_FF80..=0x10_FFFF).contains(&u32::from(c))
}

/// Turns a member's raw name into the path it is admitted as, or refuses it.
///
/// `.` components are dropped (archives made of `.` start every name with `./`); a
/// folder's one trailing `/` is its spelling. `None` is the destination itself (`.` or
/// `./`), which is not an entry.
pub(crate) fn admit(
    raw: &[u8],
    kind: MemberKind,
    platform: Platform,
) -> Result<Option<String>, ArchiveError> {
    let text = std::str::from_utf8(raw).map_err(|_| ArchiveError::InvalidUnicode {
        path: String::from_utf8_lossy(raw).into_owned(),
    })?;
    let escapes = |why| ArchiveError::PathEscapes {
        path: text.to_owned(),
        why,
    };
    if text.is_empty() {
        return Err(escapes("the name is empty"));
    }
    if text.contains('\0') {
        return Err(escapes("the name holds a NUL byte"));
    }
    if text.starts_with('/') {
        return Err(escapes("the name is absolute"));
    }
    if platform == Platform::Windows && text.contains('\\') {
        return Err(escapes(
            "the name holds a backslash, a separator on Windows",
        ));
    }
    let body = match kind {
        MemberKind::Dir => text.strip_suffix('/').unwrap_or(text),
        MemberKind::File => text,
    };
    let mut components = Vec::new();
    for component in body.split('/') {
        match component {
            "" => return Err(escapes("the name has an empty component")),
            ".." => return Err(escapes("the name has a '..' component")),
            "." => {}
            _ => components.push(component),
        }
    }
    if components.is_empty() {
        return match kind {
            MemberKind::Dir => Ok(None),
            MemberKind::File => Err(escapes("a file is named as the destination itself")),
        };
    }
    let path = components.join("/");
    let refuse = |why: String| ArchiveError::PlatformName {
        path: text.to_owned(),
        platform: platform.as_str(),
        why,
    };
    if path.len() > PATH_MAX_BYTES {
        return Err(refuse(format!("it is longer than {PATH_MAX_BYTES} bytes")));
    }
    for component in &components {
        if component.len() > NAME_MAX_BYTES {
            return Err(refuse(format!(
                "a component is longer than {NAME_MAX_BYTES} bytes"
            )));
        }
        if component.starts_with(ferry_fs::TEMP_PREFIX) {
            return Err(refuse(format!(
                "a component starts with {:?}, which ferry keeps for its temporaries",
                ferry_fs::TEMP_PREFIX
            )));
        }
        if component.chars().any(is_byte_char) {
            return Err(refuse(
                "it holds a character of U+10FF80–U+10FFFF, which ferry keeps for raw bytes".into(),
            ));
        }
        if platform == Platform::Windows {
            windows_component(component).map_err(|why| refuse(why.into()))?;
        }
    }
    Ok(Some(path))
}

/// The device names Windows reserves, with any extension.
const WINDOWS_RESERVED: &[&str] = &[
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
    // Windows takes these as devices too: the zero ports, superscript digits, consoles.
    "com0", "lpt0", "com¹", "com²", "com³", "lpt¹", "lpt²", "lpt³", "conin$", "conout$",
];

fn windows_component(component: &str) -> Result<(), &'static str> {
    if component.ends_with('.') || component.ends_with(' ') {
        return Err("a component ends with a dot or a space");
    }
    if let Some(c) = component
        .chars()
        .find(|c| matches!(c, '<' | '>' | ':' | '"' | '|' | '?' | '*') || c.is_control())
    {
        return Err(if c.is_control() {
            "a component holds a control character"
        } else {
            "a component holds one of < > : \" | ? *"
        });
    }
    let stem = component.split('.').next().unwrap_or(component);
    // Windows also ignores trailing spaces before the extension ("CON .txt").
    let stem = stem.trim_end_matches(' ').to_ascii_lowercase();
    if WINDOWS_RESERVED.contains(&stem.as_str()) {
        return Err("a component is a device name Windows reserves");
    }
    Ok(())
}

/// The parent folders of a path, shortest first: `a/b/c` gives `a`, `a/b`.
pub(crate) fn parents(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(move |(i, _)| &path[..i])
}

#[cfg(test)]
mod tests;
