//! The external-content wrapper (spec nodes.md N-WRAP): text that came from files or
//! nodes, not from ferry, is fenced so a model can tell it from instructions, and every
//! look-alike of a fence's marker inside it is neutralized.
//!
//! A look-alike is judged on the text's *skeleton*, the way a reader sees it rather
//! than the way it is encoded: characters that show nothing (zero-width ones, soft
//! hyphens, joiners, variation selectors, combining marks) and separators (white space,
//! `_`, `-`) are left out; compatibility forms are folded (full-width and mathematical
//! letters, `＜`); letters from other scripts that look Latin (Cyrillic `Е`, Greek `Τ`,
//! Cherokee `Ꭼ`, small capitals) and characters that look like angle brackets (`‹`,
//! `〈`, `ᐸ`, `≪`…) become what they look like; case is ignored. Any stretch whose skeleton
//! spells a marker is replaced whole, from its first character to its last.

mod skeleton;

use skeleton::Skeleton;

/// What replaces a marker look-alike.
pub const SANITIZED: &str = "[[MARKER_SANITIZED]]";

/// Fences `content` with a random id; marker look-alikes inside are neutralized.
pub fn wrap(source: &str, content: &str) -> String {
    // Only the fence's unpredictability depends on this.
    let id = ferry_fs::random_hex::<8>();
    format!(
        "<<<EXTERNAL_CONTENT id=\"{id}\" source=\"{source}\">>>\n{}\n<<<END_EXTERNAL_CONTENT id=\"{id}\">>>",
        sanitize(content)
    )
}

/// Bytes the wrapper adds around content from `source` (the id has a fixed length).
pub fn overhead(source: &str) -> usize {
    wrap(source, "").len()
}

/// The markers as skeletons: three brackets then a marker's name, or a name then three
/// brackets.
const MARKERS: [&str; 4] = [
    "<<<ENDEXTERNALCONTENT",
    "<<<EXTERNALCONTENT",
    "ENDEXTERNALCONTENT>>>",
    "EXTERNALCONTENT>>>",
];

/// Text that holds no marker whatever it says: ASCII without a bracket, where every marker
/// has three (in ASCII only `<` and `>` look like one). Most text is, and skips the
/// skeleton.
fn cannot_hold_marker(text: &str) -> bool {
    text.is_ascii() && !text.bytes().any(|b| b == b'<' || b == b'>')
}

/// Whether `text` holds anything a reader could take for a wrapper's marker.
pub fn holds_marker(text: &str) -> bool {
    if cannot_hold_marker(text) {
        return false;
    }
    let skeleton = Skeleton::of(text);
    (0..skeleton.len()).any(|at| marker_at(&skeleton, at).is_some())
}

/// Replaces every look-alike of a wrapper marker in `content` with [`SANITIZED`].
pub fn sanitize(content: &str) -> String {
    if cannot_hold_marker(content) {
        return content.to_owned();
    }
    let skeleton = Skeleton::of(content);
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut at = 0;
    while at < skeleton.len() {
        match marker_at(&skeleton, at) {
            Some(len) => {
                cuts.push(skeleton.span(at, len));
                at += len;
            }
            None => at += 1,
        }
    }
    if cuts.is_empty() {
        return content.to_owned();
    }
    let mut out = String::with_capacity(content.len());
    let mut from = 0;
    for (start, end) in cuts {
        out.push_str(&content[from..start]);
        out.push_str(SANITIZED);
        from = end;
    }
    out.push_str(&content[from..]);
    out
}

/// The skeleton length of a marker starting at `at`, if one does.
fn marker_at(skeleton: &Skeleton, at: usize) -> Option<usize> {
    MARKERS
        .iter()
        .find(|marker| skeleton.starts_with_at(at, marker.as_bytes()))
        .map(|marker| marker.len())
}

#[cfg(test)]
mod tests;
