//! Any bytes, as a tar or a gzip of one, given to the planner: it answers or refuses,
//! never panics, and what it admits breaks no rule of a name.
#![no_main]

use ferry_archive::{PlanOptions, Platform};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the destination, so the platform rules are reached too.
    let Some((&pick, archive)) = data.split_first() else {
        return;
    };
    let platform = match pick % 3 {
        0 => Platform::Linux,
        1 => Platform::Windows,
        _ => Platform::Macos,
    };
    let options = PlanOptions {
        platform,
        ..PlanOptions::default()
    };
    if let Ok(plan) = ferry_archive::plan(archive, &options) {
        assert!(plan.entries.len() as u64 <= plan.descendants);
        for entry in &plan.entries {
            assert!(!entry.path.is_empty() && !entry.path.starts_with('/'));
            assert!(
                !entry
                    .path
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..")
            );
            assert!(!entry.path.contains('\0'));
        }
    }
});
