//! How a PostgreSQL connection is made: plain TCP, or TLS that verifies the server.
//!
//! The address is a `postgres://` URL. `sslmode=require` (and libpq's `verify-ca` and
//! `verify-full`) asks for TLS, and ferry then always verifies the server's certificate
//! and name, against the system's roots or the CA of `sslrootcert=FILE`: a metadata
//! connection carries every token hash and file record of the site, so an encryption a
//! man in the middle could answer is not offered. `sslmode=prefer` (the driver's
//! default) and `disable` connect in plain TCP, for a server on loopback or a socket.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use postgres::Client;
use tokio_postgres::{Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::Error;

/// A parsed address and the means to connect to it.
#[derive(Clone)]
pub(crate) struct Connector {
    config: Config,
    tls: Option<MakeRustlsConnect>,
}

impl Connector {
    /// `url`, with `password` (when given) winning over one in it.
    pub(crate) fn new(url: &str, password: Option<&str>) -> Result<Connector, Error> {
        let (url, wanted) = split_tls_options(url)?;
        let mut config = Config::from_str(&url).map_err(|e| {
            Error::Config(format!("[metadata] url is not a PostgreSQL address: {e}"))
        })?;
        if let Some(password) = password {
            config.password(password);
        }
        let tls = match wanted {
            Tls::Plain => None,
            Tls::Verified { ca_file } => {
                // Required, never preferred: a server that declines TLS is refused.
                config.ssl_mode(tokio_postgres::config::SslMode::Require);
                Some(connector(ca_file)?)
            }
        };
        Ok(Connector { config, tls })
    }

    /// The driver's settings, to change before connecting.
    pub(crate) fn config_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// A new connection, driven by a runtime of its own.
    pub(crate) fn connect(&self) -> Result<Client, Error> {
        let config = postgres::Config::from(self.config.clone());
        match &self.tls {
            Some(tls) => config.connect(tls.clone()),
            None => config.connect(NoTls),
        }
        .map_err(refused)
    }

    /// A new connection driven by a task of the caller's runtime, which ends with it.
    pub(crate) async fn connect_async(&self) -> Result<tokio_postgres::Client, Error> {
        /// Drives a connection until it closes; why it failed is the next statement's error.
        async fn drive<C: std::future::Future<Output = Result<(), postgres::Error>>>(c: C) {
            if let Err(e) = c.await {
                tracing::debug!("a metadata connection closed: {e}");
            }
        }
        match &self.tls {
            Some(tls) => {
                let (client, connection) =
                    self.config.connect(tls.clone()).await.map_err(refused)?;
                tokio::spawn(drive(connection));
                Ok(client)
            }
            None => {
                let (client, connection) = self.config.connect(NoTls).await.map_err(refused)?;
                tokio::spawn(drive(connection));
                Ok(client)
            }
        }
    }
}

/// A connection the server did not make. Closed to new connections for now (a database
/// not taking them, every connection slot taken) is unreachable, as a server that is
/// down is ([`Error::is_unreachable`]); a wrong password or a missing database stays
/// what the server said, the configuration's fault.
fn refused(e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    match e.code() {
        Some(code)
            if *code == SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE
                || *code == SqlState::TOO_MANY_CONNECTIONS =>
        {
            Error::Unreachable(crate::postgres_message(&e))
        }
        _ => Error::Postgres(e),
    }
}

/// What the address asks for.
#[derive(Debug, PartialEq, Eq)]
enum Tls {
    Plain,
    Verified { ca_file: Option<PathBuf> },
}

/// The URL without the options the driver does not know (`sslrootcert`, and `sslmode`
/// values beyond its three), and what they ask for.
fn split_tls_options(url: &str) -> Result<(String, Tls), Error> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Tls::Plain));
    };
    let mut kept = Vec::new();
    let (mut mode, mut ca_file) = (None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "sslmode" => mode = Some(value.to_owned()),
            "sslrootcert" => ca_file = Some(PathBuf::from(percent_decoded(value)?)),
            _ => kept.push(pair),
        }
    }
    let verified = match mode.as_deref() {
        None | Some("disable" | "prefer") => false,
        Some("require" | "verify-ca" | "verify-full") => true,
        Some(other) => {
            return Err(Error::Config(format!(
                "[metadata] url: sslmode={other} is not one of disable, prefer, require, \
                 verify-ca, verify-full"
            )));
        }
    };
    if !verified && ca_file.is_some() {
        return Err(Error::Config(
            "[metadata] url: sslrootcert is for a TLS connection; add sslmode=require".into(),
        ));
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let tls = if verified {
        Tls::Verified { ca_file }
    } else {
        Tls::Plain
    };
    Ok((url, tls))
}

/// `%XX` escapes of a URL's query value decoded (a path may hold spaces).
fn percent_decoded(value: &str) -> Result<String, Error> {
    let bad = || Error::Config("[metadata] url: sslrootcert is not a valid path".into());
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// A TLS connector that trusts `ca_file`'s certificates, or the system's roots.
fn connector(ca_file: Option<PathBuf>) -> Result<MakeRustlsConnect, Error> {
    let mut roots = rustls::RootCertStore::empty();
    match &ca_file {
        Some(path) => {
            use rustls::pki_types::pem::PemObject;
            let certs = rustls::pki_types::CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    Error::Config(format!(
                        "[metadata] url: sslrootcert {}: {e}",
                        path.display()
                    ))
                })?;
            if certs.is_empty() {
                return Err(Error::Config(format!(
                    "[metadata] url: sslrootcert {} holds no certificate",
                    path.display()
                )));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    Error::Config(format!(
                        "[metadata] url: sslrootcert {}: {e}",
                        path.display()
                    ))
                })?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                // A system certificate rustls cannot use is one fewer root, no more.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS for PostgreSQL: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_options_are_read_and_taken_out() {
        assert_eq!(
            split_tls_options("postgres://u@h/d").unwrap(),
            ("postgres://u@h/d".into(), Tls::Plain)
        );
        assert_eq!(
            split_tls_options("postgres://u@h/d?sslmode=prefer&connect_timeout=3").unwrap(),
            ("postgres://u@h/d?connect_timeout=3".into(), Tls::Plain)
        );
        for mode in ["require", "verify-ca", "verify-full"] {
            assert_eq!(
                split_tls_options(&format!("postgres://u@h/d?sslmode={mode}")).unwrap(),
                ("postgres://u@h/d".into(), Tls::Verified { ca_file: None })
            );
        }
        assert_eq!(
            split_tls_options("postgres://u@h/d?sslrootcert=/etc/a%20b.pem&sslmode=require")
                .unwrap(),
            (
                "postgres://u@h/d".into(),
                Tls::Verified {
                    ca_file: Some("/etc/a b.pem".into())
                }
            )
        );
        for bad in [
            "postgres://u@h/d?sslmode=allow",
            "postgres://u@h/d?sslrootcert=/ca.pem",
            "postgres://u@h/d?sslmode=require&sslrootcert=%zz",
        ] {
            assert!(split_tls_options(bad).is_err(), "{bad}");
        }
    }
}
