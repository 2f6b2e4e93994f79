//! Path globs over a node's absolute paths, compiled one way for everyone: the gateway's
//! `[nodes.<id>]` rules are checked here when the configuration loads, and the node link's
//! path rules are built by the same function, so a glob the configuration accepts is
//! exactly a glob the rules can use.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Compiles `globs` into one set. Each must be absolute or start with `**/`; `*` and `?`
/// stay within one component; a glob ending in `/**` also matches the folder it names.
/// The error names the glob and why it was refused.
pub fn path_glob_set(globs: &[String]) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for glob in globs {
        if !glob.starts_with('/') && !glob.starts_with("**/") {
            return Err(format!(
                "the glob {glob:?} must be an absolute path (or start with **/)"
            ));
        }
        set.add(compile(glob)?);
        // `/srv/**` admits `/srv` itself.
        if let Some(folder) = glob.strip_suffix("/**")
            && !folder.is_empty()
        {
            set.add(compile(folder)?);
        }
    }
    set.build().map_err(|e| e.to_string())
}

fn compile(glob: &str) -> Result<globset::Glob, String> {
    GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| format!("the glob {glob:?} does not parse: {e}"))
}
