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

/// The server configuration from `files`: the chain (leaf first) and its key. Errors, each
/// naming the file and the setting (never the key's content): a file cannot be read, holds no
/// PEM certificate / private key, the key file may be read or written by its group or others
/// (it must be mode `0600` or `0400`: only its owner — root or the daemon's user — and root read
/// it), or the key does not belong to the leaf certificate.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, String> {
    let key_meta = std::fs::metadata(&files.key_file)
        .map_err(|e| format!("tacker.tls_key_file {}: {e}", files.key_file.display()))?;
    if key_meta.mode() & 0o077 != 0 {
        return Err(format!(
            "tacker.tls_key_file {} may be read by its group or others (mode {:o}); chmod 600 it",
            files.key_file.display(),
            key_meta.mode() & 0o7777
        ));
    }
    let chain = certs(&files.cert_file)?;
    let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|e| {
        format!(
            "tacker.tls_key_file {}: no PEM private key ({})",
            files.key_file.display(),
            pem_error(&e)
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            format!(
                "tacker.tls_key_file {} does not fit tacker.tls_cert_file {}: {e}",
                files.key_file.display(),
                files.cert_file.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of `path`, at least one.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("tacker.tls_cert_file {}: {}", path.display(), pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!(
            "tacker.tls_cert_file {}: no PEM certificate",
            path.display()
        ));
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
