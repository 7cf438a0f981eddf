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
//! `Arc<Metrics>` it reads and the database connection a scrape reads the state gauges from
//! (`Db::with`, off the main loop), so it can never block the loop. A slow or hostile client cannot hold
//! it either. Every connection is accepted at once and costs one task until it ends (and about
//! 16 KiB of hyper's read and write buffers; before its TLS handshake, rustls's state instead),
//! so slow clients do not make a valid request wait for a turn:
//!
//! - at most [`MAX_CONNECTIONS`] connections at once (fewer when `RLIMIT_NOFILE` allows fewer,
//!   see [`connection_limit`]); beyond that further ones wait in the listen backlog
//!   ([`LISTEN_BACKLOG`]);
//! - at most [`MAX_PER_SOURCE`] of them from one source address (an IPv6 source counts by its
//!   /64); a connection beyond is closed at once, and logged at a bounded rate
//!   ([`crate::ratelog`]);
//! - the TLS handshake must end within [`HANDSHAKE_TIMEOUT`] and the request's headers arrive
//!   within [`HEADER_TIMEOUT`] (hyper's `header_read_timeout`), and a connection lives at most
//!   [`CONNECTION_DEADLINE`] (keep-alive off: one request per connection).
//!
//! Each limit is a library's: hyper's `header_read_timeout` with its timer and keep-alive off,
//! tokio's timeouts, tokio's semaphore for the connection limit, rustls for TLS. Only the accept
//! loop that applies them, and the per-source count, are ours, because no library we looked at
//! (versions in `Cargo.lock`) keeps the properties `tests/tacker/tacker_slow_clients.rs` checks:
//!
//! - hyper 1.12 and hyper-util 0.1.21 serve one accepted connection (`http1::Builder`, used below;
//!   hyper-util's `auto::Builder`, `server::graceful`); neither accepts connections or limits them.
//! - axum 0.8.9's `serve` builds hyper-util's `auto::Builder` per connection without a timer and
//!   offers no way to configure it: hyper's header timeout never applies, keep-alive stays on and
//!   nothing bounds a connection's life, so clients that send their headers slowly hold their
//!   connections for ever. Its `Listener` (and `ListenerExt::tap_io`) could admit per source and
//!   under the global limit at accept, but a TLS handshake would then run inside `accept`, one
//!   at a time (one slow handshake stops every accept).
//! - axum-server 0.9.2 sets the header timeout (`http_builder().http1()`), a first-request
//!   timeout and rustls's handshake timeout, but accepts every connection before anything may
//!   refuse or hold it: a global limit in its `Accept` would hold each accepted descriptor instead
//!   of leaving further connections in the kernel's listen backlog (where a burst of Tacker's
//!   notifications, each sent once, waits here), and it has no per-source limit.
//! - tower 0.5.3's `ConcurrencyLimitLayer`, `LoadShedLayer` and `TimeoutLayer` (and tower-http
//!   0.6's `TimeoutLayer`) act on requests, once hyper has read a request's headers: they cannot
//!   bound the connections (descriptors, tasks) of clients that never send them, which is what
//!   these limits are for; with one request per connection they would add nothing else.
//! - No maintained crate limits concurrent connections per source address on tokio
//!   (`governor`/`tower_governor` limit request rates per key, after the headers).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
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
use crate::store::Db;

/// Most connections served at once by one server (further ones wait in the listen backlog);
/// lowered to what `RLIMIT_NOFILE` leaves ([`connection_limit`]).
pub const MAX_CONNECTIONS: usize = 4096;
/// Most connections at once from one source address (IPv4 address, or IPv6 /64); a further
/// one is closed at once. Above the 100 concurrent senders Tacker's bursts need.
pub const MAX_PER_SOURCE: usize = 256;
/// Longest TLS handshake, from the accept.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a request's headers (after the TLS handshake, with TLS).
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest life of one connection (request read, response written).
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(15);

/// The routes: `GET /metrics` (and `HEAD`); another method on `/metrics` is 405, any other path
/// 404 (axum's fallback). `db`: the database the state gauges are read from at each scrape.
pub fn router(metrics: Arc<Metrics>, db: Db) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state((metrics, db))
}

/// `GET /metrics`: the state gauges read from the database now (a few indexed counts, on the
/// shared connection: `Db::with` leaves the async workers free), then the registry in
/// OpenMetrics text when the `Accept` header asks for it (as Prometheus does), else in the
/// Prometheus text format 0.0.4 ([`Format::negotiate`]). A failed read is logged and the
/// gauges keep their last values.
async fn scrape(State((metrics, db)): State<(Arc<Metrics>, Db)>, headers: HeaderMap) -> Response {
    let now = vnfkeeper_core::model::Timestamp(chrono::Utc::now());
    match db.with(|s| s.reader().state_gauges(now)) {
        Ok(g) => metrics.set_state(&g),
        Err(e) => {
            tracing::error!(error = %e, "metrics: cannot read the state gauges");
        }
    }
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
    /// Writes the counts of rate-limited refusals ([`crate::ratelog::flush`]) every second.
    flusher: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` and serves `router` on its own task; `key` names the setting the address
    /// comes from (`metrics.listen`, `tacker.listen`). Errors: the address cannot be bound (in
    /// use, not local, no permission) — a startup error of the daemon, naming the address and
    /// the key.
    /// With `tls` every connection is a TLS one (handshake within [`HANDSHAKE_TIMEOUT`]); a client
    /// speaking plain HTTP fails the handshake and is closed.
    pub async fn start(
        addr: SocketAddr,
        router: Router,
        key: &str,
        tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> anyhow::Result<Self> {
        let listener = listen(addr).with_context(|| format!("{key}: cannot listen on {addr}"))?;
        let local_addr = listener.local_addr().with_context(|| key.to_owned())?;
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        let limit = connection_limit();
        let task = tokio::spawn(accept_loop(listener, router, tls, limit));
        let flusher = tokio::spawn(async {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                crate::ratelog::flush();
            }
        });
        Ok(Self {
            local_addr,
            task,
            flusher,
        })
    }

    /// Stops accepting; connections in flight end by their deadline.
    pub fn stop(self) {
        self.task.abort();
        self.flusher.abort();
    }
}

/// Listen backlog asked for: connections the kernel completes and queues while the accept loop
/// is busy or every connection slot is taken. The kernel caps it at `net.core.somaxconn` (4,096
/// by default since Linux 5.4). tokio's `TcpListener::bind` asks for 1,024: a burst of 1,000 slow
/// clients could fill that, and a valid client's SYN dropped there is sent again only after 1 s.
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket on `addr` with `SO_REUSEADDR` (as `TcpListener::bind` sets it) and a
/// backlog of [`LISTEN_BACKLOG`].
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
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

/// Descriptors kept for everything but connections (database, spool, SSH sessions, logs).
const RESERVED_FDS: u64 = 512;

/// The connection limit of one server: [`MAX_CONNECTIONS`], or fewer when the process's
/// `RLIMIT_NOFILE` (first raised to its hard limit, as far as allowed) leaves fewer than that
/// beyond [`RESERVED_FDS`]; at least 16.
pub fn connection_limit() -> usize {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let lim = getrlimit(Resource::Nofile);
    let mut soft = lim.current.unwrap_or(u64::MAX);
    if let Some(hard) = lim.maximum
        && soft < hard
    {
        let raised = Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            soft = hard;
        }
    }
    let room = usize::try_from(soft.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
    room.clamp(16, MAX_CONNECTIONS)
}

/// The key a source address counts under: an IPv4 address (also written IPv4-mapped), or the
/// /64 of an IPv6 one (what one host or subscriber usually gets).
fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

/// Open connections per source key (an entry exists only while its count is above 0).
#[derive(Default)]
struct Sources {
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One admitted connection of a source; its count goes down when dropped.
struct SourceSlot {
    sources: Arc<Sources>,
    key: IpAddr,
}

impl Sources {
    /// Admits one more connection from `ip`, unless its source already has `max` open.
    fn admit(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<SourceSlot> {
        let key = source_key(ip);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(SourceSlot {
            sources: self.clone(),
            key,
        })
    }
}

impl Drop for SourceSlot {
    fn drop(&mut self) {
        let mut open = self.sources.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    router: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    limit: usize,
) {
    let slots = Arc::new(Semaphore::new(limit));
    let sources = Arc::new(Sources::default());
    loop {
        // A connection is accepted only when a slot is free: the ones beyond wait in the
        // kernel's listen backlog instead of being dropped (Tacker delivers each notification
        // once, on a thread of its own, so a burst must queue, not be refused). The limit is
        // high: slow clients hold slots, and a valid request must not wait behind them.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, source) = match listener.accept().await {
            Ok((stream, peer)) => match sources.admit(peer.ip(), MAX_PER_SOURCE) {
                Some(source) => (stream, source),
                None => {
                    // Closed at once (dropped); its slot is free again.
                    crate::ratelog::refused(crate::ratelog::Refusal::SourceLimit);
                    continue;
                }
            },
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
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve(stream, service).await,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "HTTPS endpoint: TLS handshake failed");
                        }
                        Err(_) => tracing::debug!("HTTPS endpoint: TLS handshake timed out"),
                    }
                }
            }
            drop((slot, source));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_counted_per_address_and_ipv6_per_64() {
        let sources = Arc::new(Sources::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let held: Vec<_> = (0..3).map(|_| sources.admit(a, 3).unwrap()).collect();
        assert!(sources.admit(a, 3).is_none());
        // Another address, and the same one written IPv4-mapped counts as the same.
        assert!(sources.admit("192.0.2.2".parse().unwrap(), 3).is_some());
        assert!(
            sources
                .admit("::ffff:192.0.2.1".parse().unwrap(), 3)
                .is_none()
        );
        drop(held);
        assert!(sources.admit(a, 3).is_some());
        assert!(
            sources.open.lock().unwrap().is_empty(),
            "counts of 0 are removed"
        );
        // One IPv6 /64 is one source; another /64 is another.
        let v6: Vec<_> = ["2001:db8:0:1::1", "2001:db8:0:1:ffff::2"]
            .iter()
            .map(|s| sources.admit(s.parse().unwrap(), 2).unwrap())
            .collect();
        assert!(
            sources
                .admit("2001:db8:0:1::3".parse().unwrap(), 2)
                .is_none()
        );
        assert!(
            sources
                .admit("2001:db8:0:2::1".parse().unwrap(), 2)
                .is_some()
        );
        drop(v6);
    }

    /// `ss -ltn` shows a listening socket's backlog as its Send-Q.
    #[tokio::test]
    async fn the_listen_backlog_is_the_one_asked_for() {
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let port = listener.local_addr().unwrap().port();
        let out = std::process::Command::new("ss")
            .args(["-Hltn", &format!("sport = :{port}")])
            .output()
            .expect("ss (iproute2)");
        let line = String::from_utf8(out.stdout).unwrap();
        let send_q: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
        let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(send_q, LISTEN_BACKLOG.min(somaxconn), "{line}");
    }

    #[test]
    fn the_connection_limit_is_within_its_bounds() {
        let n = connection_limit();
        assert!((16..=MAX_CONNECTIONS).contains(&n), "{n}");
    }
}
