//! The ferry gateway: the HTTP API.

mod delivery_name;
mod range;
