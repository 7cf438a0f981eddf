//! TLS of Tacker's notification endpoint (`tacker.tls_cert_file`, `tacker.tls_key_file`):
//! rustls (TLS 1.2 and 1.3, the `ring` provider) through `tokio-rustls`, HTTP/1.1 only (ALPN
//! `http/1.1`, RFC 7301). Loaded once at start and by `config check`.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::tacker::TlsFiles;

/// Why the TLS files were refused ([`server_config`]); each message names the setting and the
/// file, never the key's content.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// `tacker.tls_key_file` cannot be read (its metadata).
    #[error("tacker.tls_key_file {}: {source}", path.display())]
    KeyUnreadable {
        /// The key file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `tacker.tls_key_file` may be read or written by its group or others.
    #[error("tacker.tls_key_file {} may be read by its group or others (mode {mode:o}); chmod 600 it", path.display())]
    KeyMode {
        /// The key file.
        path: std::path::PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// `tacker.tls_key_file` holds no PEM private key.
    #[error("tacker.tls_key_file {}: no PEM private key ({reason})", path.display())]
    NoKey {
        /// The key file.
        path: std::path::PathBuf,
        /// What the PEM reader found (never the content).
        reason: String,
    },
    /// `tacker.tls_cert_file` cannot be read or holds no PEM certificate.
    #[error("tacker.tls_cert_file {}: {reason}", path.display())]
    Certs {
        /// The certificate file.
        path: std::path::PathBuf,
        /// What the PEM reader found (never the content).
        reason: String,
    },
    /// rustls refused the protocol versions of its provider.
    #[error("TLS: {0}")]
    Provider(rustls::Error),
    /// The key does not belong to the leaf certificate.
    #[error("tacker.tls_key_file {} does not fit tacker.tls_cert_file {}: {source}", key.display(), cert.display())]
    Mismatch {
        /// The key file.
        key: std::path::PathBuf,
        /// The certificate file.
        cert: std::path::PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
}

impl TlsError {
    /// The setting to blame: `tacker.tls_cert_file` for the certificates, else
    /// `tacker.tls_key_file`.
    pub fn setting(&self) -> &'static str {
        match self {
            TlsError::Certs { .. } => "tacker.tls_cert_file",
            _ => "tacker.tls_key_file",
        }
    }
}

/// The server configuration from `files`: the chain (leaf first) and its key. Errors, each
/// naming the file and the setting (never the key's content): a file cannot be read, holds no
/// PEM certificate / private key, the key file may be read or written by its group or others
/// (it must be mode `0600` or `0400`: only its owner — root or the daemon's user — and root read
/// it), or the key does not belong to the leaf certificate: [`TlsError`].
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let key_meta =
        std::fs::metadata(&files.key_file).map_err(|source| TlsError::KeyUnreadable {
            path: files.key_file.clone(),
            source,
        })?;
    if key_meta.mode() & 0o077 != 0 {
        return Err(TlsError::KeyMode {
            path: files.key_file.clone(),
            mode: key_meta.mode() & 0o7777,
        });
    }
    let chain = certs(&files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|e| TlsError::NoKey {
        path: files.key_file.clone(),
        reason: pem_error(&e),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Provider)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|source| TlsError::Mismatch {
            key: files.key_file.clone(),
            cert: files.cert_file.clone(),
            source,
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of `path`, at least one.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| TlsError::Certs {
            path: path.to_path_buf(),
            reason: pem_error(&e),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certs {
            path: path.to_path_buf(),
            reason: "no PEM certificate".into(),
        });
    }
    Ok(certs)
}

/// A PEM error without the file's content.
fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(io) => io.to_string(),
        Error::NoItemsFound => "none found".into(),
        _ => "not valid PEM".into(),
    }
}
