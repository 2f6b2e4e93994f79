//! Confined file access for ferry (spec core C-PATH, C-NAME, C-ATOMIC).
//!
//! Nothing outside this crate opens a path under a workspace: callers hold a [`Dir`]
//! and give it relative paths, which the kernel resolves beneath it.

mod atomic;
mod budget;
mod digest;
mod dir;
mod error;
mod listing;
mod name;
mod path;
mod random;
mod remove;
mod resume;
mod shown;
mod sink;

pub use atomic::{
    AtomicWriter, FileId, Placement, TEMP_PREFIX, check_placeable, create_temporary, keep_previous,
    kept_name, place_temporary, remove_temporary, restore_previous,
};
pub use budget::Budget;
pub use digest::{hex, sha256_hex, sha256_hex_of_reader};
pub use dir::{
    Dir, Entry, EntryKind, Follow, MadeDirs, Metadata, is_temporary, openat2_allowed,
    set_openat2_enabled,
};
pub use error::FsError;
pub use name::{NAME_MAX_BYTES, name_from_bytes, safe_name, typed_name};
pub use path::{PATH_MAX_BYTES, check_relative};
pub use random::{random_base32, random_bytes, random_hex};
pub use resume::{PartFile, PartMark, reopen_temporary};
pub use shown::{is_hidden_or_spoofing, shown_name};
pub use sink::{ByteSink, Written};

#[doc(hidden)]
pub mod fuzzing {
    //! For the fuzz targets (`fuzz/`): parsers of outside input that are not public.

    /// The bytes a name from [`crate::name_from_bytes`] stands for.
    pub fn name_to_bytes(name: &str) -> std::borrow::Cow<'_, [u8]> {
        crate::name::name_to_bytes(name)
    }

    /// Writes `seeds` (a file name and its bytes each) as the seed corpus of the fuzz
    /// target `target`, in `fuzz/corpus/<target>/` of this repository: every crate's
    /// `write_fuzz_seeds` test calls it.
    pub fn write_corpus<N: AsRef<str>>(target: &str, seeds: Vec<(N, Vec<u8>)>) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target);
        std::fs::create_dir_all(&dir).expect("the corpus folder can be made");
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name.as_ref()), bytes).expect("a seed can be written");
        }
    }

    /// A relative path's parent (if any) and last component.
    pub fn split_parent(rel: &str) -> Result<(Option<&str>, &str), crate::FsError> {
        crate::path::split_parent(rel)
    }
}
