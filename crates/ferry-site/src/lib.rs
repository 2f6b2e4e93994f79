//! The ferry site: one data directory holding people, workspaces and metadata.

pub mod config;
pub mod docs;
