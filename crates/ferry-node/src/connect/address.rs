//! The gateway's address: its URL as the operator gave it, and the rule that plain `ws://`
//! goes only to a loopback or private address (spec N-LINK), checked on every address
//! the name resolves to, and again on every dial.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use url::{Host, Url};

/// Where the link's endpoint is under the gateway's base URL.
pub const CONNECT_PATH: &str = "/v1/nodes/connect";

/// A gateway base URL that passed every check, with the endpoint appended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayUrl {
    given: String,
    connect: String,
    host: Host<String>,
    port: u16,
    tls: bool,
}

impl GatewayUrl {
    /// Parses `ws://HOST[:PORT][/BASE]` or `wss://…`. Other schemes, user-info, a query, a
    /// fragment, spaces or control characters are refused with the reason; so is `ws://`
    /// to an address literal that is neither loopback nor private.
    pub fn parse(text: &str) -> Result<GatewayUrl, String> {
        let refuse = |why: &str| Err(format!("the gateway URL {text:?} {why}"));
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return refuse("has a space or a control character");
        }
        let lower = text.to_ascii_lowercase();
        let tls = if lower.starts_with("wss://") {
            true
        } else if lower.starts_with("ws://") {
            false
        } else {
            return refuse("must start with ws:// or wss://");
        };
        let url = match Url::parse(text) {
            Ok(url) => url,
            Err(e) => return refuse(&format!("does not parse: {e}")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("has a user name or password; the node proves itself with its key");
        }
        if url.query().is_some() {
            return refuse("has a query (?…); give the gateway's base URL only");
        }
        if url.fragment().is_some() {
            return refuse("has a fragment (#…); give the gateway's base URL only");
        }
        let Some(host) = url.host().map(|h| h.to_owned()) else {
            return refuse("has no host");
        };
        let Some(port) = url.port_or_known_default() else {
            return refuse("has no port");
        };
        if !tls && let Some(ip) = host_ip(&host) {
            check_plain(ip).map_err(|e| format!("the gateway URL {text:?}: {e}"))?;
        }
        let base = url.as_str().trim_end_matches('/');
        // `Url` always has a path; a base of `ws://h:1` serializes as `ws://h:1/`.
        let connect = format!("{base}{CONNECT_PATH}");
        Ok(GatewayUrl {
            given: text.to_owned(),
            connect,
            host,
            port,
            tls,
        })
    }

    /// The endpoint's URL, which the node dials.
    pub fn connect_url(&self) -> &str {
        &self.connect
    }

    /// Whether this is `wss://`.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The host as the TLS server name sees it: a DNS name, or an address literal.
    pub fn host(&self) -> &Host<String> {
        &self.host
    }

    /// The port (the scheme's default when none was given).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The addresses to dial: the literal, or every address the name resolves to. For
    /// `ws://` each must be loopback or private, or the whole list is refused: a name
    /// with one public address among private ones could be sent there.
    pub async fn resolve(&self) -> Result<Vec<SocketAddr>, Resolve> {
        let addresses: Vec<SocketAddr> = match host_ip(&self.host) {
            Some(ip) => vec![SocketAddr::new(ip, self.port)],
            None => {
                let Host::Domain(name) = &self.host else {
                    unreachable!("host_ip handles every address literal")
                };
                tokio::net::lookup_host((name.as_str(), self.port))
                    .await
                    .map_err(|e| Resolve::Failed(format!("cannot resolve {name}: {e}")))?
                    .collect()
            }
        };
        if addresses.is_empty() {
            return Err(Resolve::Failed(format!(
                "{} resolves to no address",
                self.host
            )));
        }
        if !self.tls {
            for address in &addresses {
                check_plain(address.ip()).map_err(Resolve::Refused)?;
            }
        }
        Ok(addresses)
    }
}

impl fmt::Display for GatewayUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.given)
    }
}

/// Why the gateway's addresses cannot be dialled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolve {
    /// The name did not resolve (now): worth another try.
    Failed(String),
    /// A `ws://` address is public: the settings must change.
    Refused(String),
}

fn host_ip(host: &Host<String>) -> Option<IpAddr> {
    match host {
        Host::Ipv4(ip) => Some(IpAddr::V4(*ip)),
        Host::Ipv6(ip) => Some(IpAddr::V6(*ip)),
        Host::Domain(_) => None,
    }
}

fn check_plain(ip: IpAddr) -> Result<(), String> {
    if is_private(ip) {
        return Ok(());
    }
    Err(format!(
        "ws:// would send the link unencrypted to {ip}, which is neither loopback nor a \
         private address; use wss:// (spec N-LINK)"
    ))
}

/// Whether `ip` is loopback or private, where plain `ws://` is allowed: 127/8, 10/8,
/// 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), ::1, fc00::/7 and fe80::/10;
/// an IPv4 address written as IPv6 (`::ffff:a.b.c.d`) counts as itself.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_private_v4(v4),
            None => is_private_v6(v6),
        },
    }
}

fn is_private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, _, _] = ip.octets();
    a == 127
        || a == 10
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 100 && (64..128).contains(&b))
}

fn is_private_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip == Ipv6Addr::LOCALHOST || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
}
