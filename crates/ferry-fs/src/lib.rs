//! Confined file access for ferry (spec core C-PATH, C-NAME, C-ATOMIC).

mod name;

pub use name::{NAME_MAX_BYTES, safe_name};
