//! The daemon's HTTP server: `GET /metrics` (the Prometheus endpoint, `[metrics] listen`;
//! OpenMetrics text for clients that ask for it, else the Prometheus text format) from
//! [`router`], and Tacker's notification callback (`notifications.rs`, `[tacker] listen`); one
//! server per address, both routes on one socket when the addresses are the same.
//!
//! With `tacker.tls_cert_file` Tacker's address serves HTTPS only (rustls through
//! `tokio-rustls`, `tls.rs`); `config check` refuses TLS when that address is also
//! `metrics.listen`, so a shared socket is always plain HTTP.
//!
//! Routing and responses are axum's; each connection is served by hyper (HTTP/1.1). The server
//! is its own task on the daemon's runtime and shares nothing with the main loop but the
//! `Arc<Metrics>` it reads, so it can never block the loop. A slow or hostile client cannot hold
//! it either: at most [`MAX_CONNECTIONS`] connections are served at once (further ones wait in
//! the listen backlog until one ends), request headers must arrive within [`HEADER_TIMEOUT`],
//! and a connection lives at most [`CONNECTION_DEADLINE`] (keep-alive off: one request per
//! connection).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::metrics::{Format, Metrics};

/// Connections served at once; more wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 16;
/// Longest wait for a request's headers after the connection opened.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest life of one connection (request read, response written).
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);

/// The routes: `GET /metrics` (and `HEAD`); another method on `/metrics` is 405, any other path
/// 404 (axum's fallback).
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(metrics)
}

/// `GET /metrics`: the registry in OpenMetrics text when the `Accept` header asks for it (as
/// Prometheus does), else in the Prometheus text format 0.0.4 ([`Format::negotiate`]).
async fn scrape(State(metrics): State<Arc<Metrics>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    let body = metrics.encode(format);
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(format.content_type()),
        )],
        body,
    )
        .into_response()
}

/// The running server: its task, stopped with the daemon.
pub struct Server {
    /// Where it listens (the port actually bound).
    pub local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` and serves `router` on its own task; `key` names the setting the address
    /// comes from (`metrics.listen`, `tacker.listen`). Errors: the address cannot be bound (in
    /// use, not local, no permission) — a startup error of the daemon, naming the address and
    /// the key.
    /// With `tls` every connection is a TLS one (handshake within [`HEADER_TIMEOUT`]); a client
    /// speaking plain HTTP fails the handshake and is closed.
    pub async fn start(
        addr: SocketAddr,
        router: Router,
        key: &str,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("{key}: cannot listen on {addr}"))?;
        let local_addr = listener.local_addr().with_context(|| key.to_owned())?;
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        let task = tokio::spawn(accept_loop(listener, router, tls));
        Ok(Self { local_addr, task })
    }

    /// Stops accepting; connections in flight end by their deadline.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// Serves one HTTP/1.1 request on `io` within [`CONNECTION_DEADLINE`].
async fn serve<IO>(io: IO, service: TowerToHyperService<Router>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(false);
    let conn = http.serve_connection(TokioIo::new(io), service);
    match tokio::time::timeout(CONNECTION_DEADLINE, conn).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(error = %e, "HTTP endpoint: connection ended"),
        Err(_) => tracing::debug!("HTTP endpoint: connection closed at its deadline"),
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        // A connection is accepted only when a slot is free: the ones beyond wait in the
        // kernel's listen backlog instead of being dropped (Tacker delivers each notification
        // once, on a thread of its own, so a burst must queue, not be refused).
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(e) => {
                // Out of descriptors and the like: wait a little instead of spinning.
                tracing::warn!(error = %e, "metrics endpoint: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve(stream, service).await,
                Some(acceptor) => {
                    match tokio::time::timeout(HEADER_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve(stream, service).await,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "HTTPS endpoint: TLS handshake failed");
                        }
                        Err(_) => tracing::debug!("HTTPS endpoint: TLS handshake timed out"),
                    }
                }
            }
            drop(slot);
        });
    }
}
