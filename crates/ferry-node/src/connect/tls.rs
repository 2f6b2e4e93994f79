//! `wss://`: TLS with rustls, trusting the system's roots or exactly one pinned
//! certificate (`--gateway-cert-sha256`).
//!
//! A pin replaces the chain check, never the handshake's own: the certificate must be the
//! pinned one (SHA-256 of its DER), and the server must still prove it holds that
//! certificate's key by signing the handshake, checked with the provider's algorithms.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use url::Host;

/// The SHA-256 of the one certificate the gateway must present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertPin([u8; 32]);

impl CertPin {
    /// Parses 64 hex digits, in either case, with any colons between them ignored (the
    /// way `openssl x509 -fingerprint -sha256` prints them).
    pub fn parse(text: &str) -> Result<CertPin, String> {
        let digits: String = text
            .chars()
            .filter(|&c| c != ':')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        let refuse = || {
            format!(
                "--gateway-cert-sha256 {text:?} is not a SHA-256: give 64 hex digits (colons \
                 between them are fine)"
            )
        };
        if digits.len() != 64 {
            return Err(refuse());
        }
        let bytes = data_encoding::HEXLOWER
            .decode(digits.as_bytes())
            .map_err(|_| refuse())?;
        bytes.try_into().map(CertPin).map_err(|_| refuse())
    }

    /// The pin as 64 lowercase hex digits.
    pub fn hex(&self) -> String {
        ferry_fs::hex(&self.0)
    }
}

/// The SHA-256 of a certificate's DER, as 64 lowercase hex digits.
pub fn cert_sha256(der: &[u8]) -> String {
    ferry_fs::hex(&Sha256::digest(der))
}

/// What TLS trusts, made once for every dial.
#[derive(Clone, Debug)]
pub(crate) struct Trust {
    provider: Arc<CryptoProvider>,
    anchor: Anchor,
}

#[derive(Clone, Debug)]
enum Anchor {
    Pinned(CertPin),
    /// The system's roots; `None` when the store holds none that parse.
    Roots(Option<Arc<WebPkiServerVerifier>>),
}

impl Trust {
    /// Trust in `pin` alone, or else in the system's roots; the second value says what
    /// could not be loaded from the store, for the log.
    pub(crate) fn new(pin: Option<CertPin>) -> (Trust, Vec<String>) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut notes = Vec::new();
        let anchor = match pin {
            Some(pin) => Anchor::Pinned(pin),
            None => {
                let loaded = rustls_native_certs::load_native_certs();
                notes.extend(
                    loaded
                        .errors
                        .iter()
                        .map(|e| format!("a system certificate could not be read: {e}")),
                );
                let mut roots = RootCertStore::empty();
                roots.add_parsable_certificates(loaded.certs);
                let verifier =
                    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                        .build()
                        .ok();
                if verifier.is_none() {
                    notes.push(
                        "the system's certificate store has no roots: only a pinned gateway \
                         certificate (--gateway-cert-sha256) can be trusted"
                            .into(),
                    );
                }
                Anchor::Roots(verifier)
            }
        };
        (Trust { provider, anchor }, notes)
    }

    /// Runs the TLS handshake over `tcp` to `host`; a refusal says what to do.
    pub(crate) async fn handshake(
        &self,
        tcp: TcpStream,
        host: &Host<String>,
    ) -> Result<TlsStream<TcpStream>, String> {
        let server_name = match host {
            Host::Domain(name) => ServerName::try_from(name.clone())
                .map_err(|e| format!("{name} is not a TLS server name: {e}"))?,
            Host::Ipv4(ip) => ServerName::from(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => ServerName::from(IpAddr::V6(*ip)),
        };
        let seen = Arc::new(Mutex::new(None));
        let verifier = Arc::new(GatewayVerifier {
            anchor: self.anchor.clone(),
            algorithms: self.provider.signature_verification_algorithms,
            seen: seen.clone(),
        });
        let config = ClientConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS cannot be set up: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        let result = TlsConnector::from(Arc::new(config))
            .connect(server_name, tcp)
            .await;
        result.map_err(|e| {
            let seen = seen.lock().unwrap_or_else(|p| p.into_inner()).take();
            self.explain(&e.to_string(), seen)
        })
    }

    fn explain(&self, error: &str, seen: Option<String>) -> String {
        let Some(sha) = seen else {
            return format!("TLS failed: {error}");
        };
        match &self.anchor {
            Anchor::Pinned(pin) if pin.hex() != sha => format!(
                "the gateway's certificate has sha256 {sha}, not the pinned {}",
                pin.hex()
            ),
            Anchor::Pinned(_) => format!("TLS failed with the pinned certificate: {error}"),
            Anchor::Roots(_) => format!(
                "the gateway's certificate is not trusted ({error}); if it is self-signed and \
                 you have checked that its sha256 is {sha}, pin it with \
                 --gateway-cert-sha256 {sha}"
            ),
        }
    }
}

#[derive(Debug)]
struct GatewayVerifier {
    anchor: Anchor,
    algorithms: WebPkiSupportedAlgorithms,
    /// The SHA-256 of the certificate presented, when it was refused.
    seen: Arc<Mutex<Option<String>>>,
}

impl GatewayVerifier {
    fn refused(
        &self,
        sha: String,
        error: rustls::Error,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(sha);
        Err(error)
    }
}

impl ServerCertVerifier for GatewayVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let sha = cert_sha256(end_entity.as_ref());
        match &self.anchor {
            Anchor::Pinned(pin) if pin.hex() == sha => Ok(ServerCertVerified::assertion()),
            Anchor::Pinned(_) => self.refused(
                sha,
                rustls::Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure),
            ),
            Anchor::Roots(None) => self.refused(
                sha,
                rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
            ),
            Anchor::Roots(Some(webpki)) => webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .or_else(|e| self.refused(sha, e)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
