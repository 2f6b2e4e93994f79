//! The external-content wrapper (spec nodes.md N-WRAP), from its own crate.

pub(crate) use ferry_wrap::{overhead, sanitize, wrap};
