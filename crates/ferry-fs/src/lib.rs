//! Confined file access for ferry (spec core C-PATH, C-NAME, C-ATOMIC).
