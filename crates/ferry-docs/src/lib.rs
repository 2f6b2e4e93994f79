//! What ferry ships to agents and the checks on it: the delivery rules provisioned into
//! every workspace, the M-DOCS check on agent documents (`ferry docs check DIR`), and the
//! skills check (`ferry skills check DIR`, and what the gateway loads).
//!
//! It opens only the folders it is given: where a site keeps its skills, and whether
//! that folder is safe to read, is `ferry-site`'s business.

pub mod lint;
pub mod shipped;
pub mod skills;
