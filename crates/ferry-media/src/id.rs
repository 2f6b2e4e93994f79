//! Media ids (spec core C-MEDIA): `<stem>~<12 lowercase base32>.<ext>`.
//!
//! The stem comes from the source's name by C-NAME rules, the extension from the
//! detected type, the random part from the OS. Ids come back from callers
//! (`sourceMediaId`), so the parser is strict: only a value this code could have
//! issued parses, and nothing that looks like a path ever does.

use std::fmt;

use crate::MediaError;

/// Characters the stem is cut to.
pub const STEM_MAX_CHARS: usize = 60;
/// Characters of the random part.
pub const RANDOM_CHARS: usize = 12;
/// The stem when nothing of the source's name is left.
pub const FALLBACK_STEM: &str = "media";
/// Bytes an extension may have (the sniffer's longest is well under).
const EXTENSION_MAX_BYTES: usize = 16;

/// A media id, issued here or parsed strictly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MediaId(String);

impl MediaId {
    /// A fresh id for content named `original_name` whose detected format is saved
    /// under `extension` (without the dot).
    pub fn issue(original_name: &str, extension: &str) -> MediaId {
        let random: String = ferry_fs::random_base32::<8>()
            .chars()
            .take(RANDOM_CHARS)
            .collect();
        MediaId::assemble(&stem_of(original_name), &random, extension)
    }

    fn assemble(stem: &str, random: &str, extension: &str) -> MediaId {
        MediaId(format!("{stem}~{random}.{extension}"))
    }

    /// Parses an id a caller gave back. Anything with `/` or `\`, `..`, a NUL, or any
    /// other shape than the one [`MediaId::issue`] makes is `unknown_media_id`.
    pub fn parse(value: &str) -> Result<MediaId, MediaError> {
        let refuse = || MediaError::UnknownMediaId(value.to_owned());
        if value.contains(['/', '\\', '\0']) || value.contains("..") {
            return Err(refuse());
        }
        let (stem, tail) = value.rsplit_once('~').ok_or_else(refuse)?;
        let (random, extension) = tail.split_once('.').ok_or_else(refuse)?;
        // Issued ids use base32's `a-z2-7`; the shape check takes any lowercase letter or
        // digit, as the spec's own example (`k3j9x2m1q8ab`) does. Whether this store
        // issued the id is the records' answer, not the alphabet's.
        let random_ok = random.len() == RANDOM_CHARS
            && random
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let extension_ok = !extension.is_empty()
            && extension.len() <= EXTENSION_MAX_BYTES
            && extension
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        // The stem must be exactly what `stem_of` would make of itself.
        let stem_ok = !stem.is_empty() && stem_of_stem(stem) == stem;
        if random_ok && extension_ok && stem_ok {
            Ok(MediaId(value.to_owned()))
        } else {
            Err(refuse())
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MediaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The stem C-MEDIA gives a source name: its safe name (C-NAME) without the extension,
/// runs of dots folded (so no id ever holds `..`), cut to [`STEM_MAX_CHARS`], `media`
/// when nothing is left or what is left looks like an N-WRAP marker.
pub fn stem_of(original_name: &str) -> String {
    let Ok(safe) = ferry_fs::safe_name(original_name) else {
        return FALLBACK_STEM.to_owned();
    };
    let without_extension = match safe.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => safe.as_str(),
    };
    stem_of_stem(without_extension)
}

/// Makes an extension-less name into a stem; a stem is a fixed point of this.
fn stem_of_stem(name: &str) -> String {
    let Ok(safe) = ferry_fs::safe_name(name) else {
        return FALLBACK_STEM.to_owned();
    };
    let mut folded = String::with_capacity(safe.len());
    for c in safe.chars() {
        if !(c == '.' && folded.ends_with('.')) {
            folded.push(c);
        }
    }
    let cut: String = folded.chars().take(STEM_MAX_CHARS).collect();
    // Ids are shown to models outside the N-WRAP wrapper, as the gateway's own words.
    if cut.is_empty() || ferry_wrap::holds_marker(&cut) {
        FALLBACK_STEM.to_owned()
    } else {
        cut
    }
}

#[cfg(test)]
mod tests;
