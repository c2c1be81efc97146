//! How the PVE server's certificate is trusted. PVE ships a self-signed certificate, so the
//! useful modes are a CA file and a SHA-256 fingerprint pin; an unknown certificate is
//! refused unless the operator explicitly asks for `Insecure`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

use crate::PveError;

/// Trust settings for the server certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// The platform's trust store.
    System,
    /// Trust only certificates signed by this PEM CA bundle.
    CaPem(Vec<u8>),
    /// Trust exactly the certificate with this SHA-256 fingerprint (`AB:CD:…`).
    Fingerprint(String),
    /// Trust any certificate (tests and emergencies; warned about by the CLI).
    Insecure,
}

/// Accepts the server certificate whose SHA-256 matches the pin (or any, when `pin` is
/// `None`), and still checks the handshake signatures with that certificate's key.
#[derive(Debug)]
struct PinnedVerifier {
    pin: Option<Vec<u8>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pin {
            None => Ok(ServerCertVerified::assertion()),
            Some(pin) if Sha256::digest(end_entity.as_ref()).as_slice() == pin.as_slice() => {
                Ok(ServerCertVerified::assertion())
            }
            Some(_) => Err(rustls::Error::General(format!(
                "the server certificate's SHA-256 fingerprint is {}, not the pinned one",
                fingerprint(end_entity.as_ref())
            ))),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `AB:CD:…` of a DER certificate.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A reqwest builder with `mode`'s trust and proxops's TLS settings (rustls with ring): for
/// the host's other HTTPS clients (an OCI registry), so that every connection proxops makes
/// trusts the same way.
pub fn https_builder(mode: &TlsMode) -> Result<reqwest::ClientBuilder, PveError> {
    configure(reqwest::Client::builder(), mode)
}

/// Apply the trust mode to a reqwest builder.
pub(crate) fn configure(
    builder: reqwest::ClientBuilder,
    mode: &TlsMode,
) -> Result<reqwest::ClientBuilder, PveError> {
    let provider = provider();
    let base = || {
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| PveError::Tls(e.to_string()))
    };
    let config = match mode {
        TlsMode::System => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            base()?.with_root_certificates(roots).with_no_client_auth()
        }
        TlsMode::CaPem(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            let mut reader = std::io::Cursor::new(pem);
            for cert in rustls_pemfile::certs(&mut reader) {
                let cert = cert.map_err(|e| PveError::Tls(format!("CA file: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| PveError::Tls(format!("CA file: {e}")))?;
            }
            if roots.is_empty() {
                return Err(PveError::Tls("the CA file holds no PEM certificate".into()));
            }
            base()?.with_root_certificates(roots).with_no_client_auth()
        }
        TlsMode::Fingerprint(fp) => {
            let hex: String = fp.chars().filter(|c| *c != ':').collect();
            let pin = hex::decode(&hex)
                .ok()
                .filter(|p| p.len() == 32)
                .ok_or_else(|| {
                    PveError::Tls(format!(
                        "`{fp}` is not a SHA-256 fingerprint (32 hex bytes)"
                    ))
                })?;
            base()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                    pin: Some(pin),
                    provider: provider.clone(),
                }))
                .with_no_client_auth()
        }
        TlsMode::Insecure => base()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                pin: None,
                provider: provider.clone(),
            }))
            .with_no_client_auth(),
    };
    Ok(builder.use_preconfigured_tls(config))
}
