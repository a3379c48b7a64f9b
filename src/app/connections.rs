//! Serving the router on a listener: the accept loop, which holds at most
//! `server.max_connections` connections (past it clients wait in the listen backlog),
//! and each connection's watchdog, which closes it when the client is slow or gone:
//!
//! - a new connection must deliver a request's headers within `server.header_timeout_ms`
//!   of the accept (partial headers, a trickle or nothing at all are cut there);
//! - a kept-alive connection with no request in flight is closed after
//!   `server.idle_timeout_ms`, and once the next request's first byte arrives its headers
//!   must be in within `server.header_timeout_ms`;
//! - while a request is in flight the watchdog does nothing: its body is bounded by
//!   `server.body_timeout_ms` in the router's intake (`crate::http::guard`), and its
//!   response, an SSE stream of the proxy or of `/mcp` included, is never cut.
//!
//! hyper's own `header_read_timeout` is not used: its timer also runs while a
//! kept-alive connection waits for the next request, so idle connections would get the
//! header timeout instead of the idle one.
//!
//! Shutdown: when the signal completes the listener is dropped, every connection is asked
//! to finish (hyper's graceful shutdown: in-flight requests complete, idle connections
//! close), and [`serve`] returns once all of them have.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// What a connection lives under (`[server]`).
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// `server.header_timeout_ms`: time to deliver a request's headers.
    pub header_timeout: Duration,
    /// `server.idle_timeout_ms`: time a kept-alive connection may wait for its next request.
    pub idle_timeout: Duration,
    /// `server.max_connections`: connections served at once.
    pub max_connections: usize,
}

/// Serve `router` on `listener` until `shutdown` completes; then stop accepting, let
/// every connection finish its requests, and return when all have closed.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) {
    let places = Arc::new(Semaphore::new(limits.max_connections));
    let stop = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        // A place first, then the accept: at the limit, new clients wait in the backlog.
        let place = tokio::select! {
            () = &mut shutdown => break,
            place = places.clone().acquire_owned() => match place {
                Ok(place) => place,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                let _ = stream.set_nodelay(true);
                tokio::spawn(serve_connection(
                    stream,
                    router.clone(),
                    limits,
                    stop.clone(),
                    place,
                ));
            }
            // The client gave up between connect and accept: nothing to do.
            Err(error) if is_connection_error(&error) => {}
            Err(error) => {
                // Out of file descriptors, most likely: wait for connections to close.
                tracing::error!(%error, "accepting a connection failed; retrying in 1 s");
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
    drop(listener);
    stop.cancel();
    // Each connection holds a place until it has closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = places.acquire_many(all).await;
}

/// Accept errors that concern one client only.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Serve one connection with its watchdog; `_place` is released when it closes.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    _place: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new(Instant::now()));
    let io = TokioIo::new(Watched {
        stream,
        activity: activity.clone(),
    });
    let requests = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = requests.request_started();
        let router = router.clone();
        async move {
            let response = match router.oneshot(request.map(Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| {
                Body::new(Tracked {
                    body,
                    _in_flight: in_flight,
                })
            }))
        }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    let mut stopping = false;
    loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%error, "connection ended with an error");
                }
                return;
            }
            () = activity.changed.notified() => {}
            () = sleep_until(deadline) => {
                if activity.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    // No request is in flight: closing loses nothing.
                    tracing::debug!("closing a connection that was idle or slow past its timeout");
                    return;
                }
            }
            () = stop.cancelled(), if !stopping => {
                connection.as_mut().graceful_shutdown();
                stopping = true;
            }
        }
    }
}

/// Sleep until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Where a connection is in its life, as its watchdog sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No request in flight since `since` (the accept, or the end of the last response).
    Waiting {
        /// When the wait began.
        since: Instant,
        /// When the first byte of the next request arrived, if one has.
        first_byte: Option<Instant>,
        /// True until the connection's first request: its headers are due from the accept.
        fresh: bool,
    },
    /// This many requests in flight (more than one on HTTP/2).
    Busy(usize),
}

impl Phase {
    /// When the connection is due to be closed, if it is.
    fn deadline(self, limits: &ConnectionLimits) -> Option<Instant> {
        match self {
            Phase::Busy(_) => None,
            Phase::Waiting { since, fresh, .. } if fresh => Some(since + limits.header_timeout),
            Phase::Waiting {
                first_byte: Some(first),
                ..
            } => Some(first + limits.header_timeout),
            Phase::Waiting { since, .. } => Some(since + limits.idle_timeout),
        }
    }

    /// A request's headers arrived.
    fn started(self) -> Phase {
        match self {
            Phase::Waiting { .. } => Phase::Busy(1),
            Phase::Busy(n) => Phase::Busy(n + 1),
        }
    }

    /// A response ended (or was abandoned) at `now`.
    fn finished(self, now: Instant) -> Phase {
        match self {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Waiting {
                since: now,
                first_byte: None,
                fresh: false,
            },
        }
    }

    /// Bytes arrived at `now`.
    fn read(self, now: Instant) -> Phase {
        match self {
            Phase::Waiting {
                since,
                first_byte: None,
                fresh,
            } => Phase::Waiting {
                since,
                first_byte: Some(now),
                fresh,
            },
            other => other,
        }
    }
}

/// A connection's [`Phase`], shared by its reads, its requests and its watchdog.
struct Activity {
    /// The phase now.
    phase: Mutex<Phase>,
    /// Wakes the watchdog when the phase changes (its deadline may have moved).
    changed: Notify,
}

impl Activity {
    /// A connection accepted at `accepted`.
    fn new(accepted: Instant) -> Self {
        Self {
            phase: Mutex::new(Phase::Waiting {
                since: accepted,
                first_byte: None,
                fresh: true,
            }),
            changed: Notify::new(),
        }
    }

    /// Apply `change` to the phase, waking the watchdog if it moved.
    fn update(&self, change: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().unwrap_or_else(PoisonError::into_inner);
        let next = change(*phase);
        if next != *phase {
            *phase = next;
            self.changed.notify_one();
        }
    }

    /// The watchdog's deadline now.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<Instant> {
        self.phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .deadline(limits)
    }

    /// A request began; the connection is busy until the returned guard drops.
    fn request_started(self: &Arc<Self>) -> InFlight {
        self.update(Phase::started);
        InFlight(self.clone())
    }
}

/// One request in flight: dropped when its response body has been sent (or abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.update(|phase| phase.finished(now));
    }
}

/// A response body that keeps its request counted as in flight until it is dropped.
struct Tracked {
    /// The router's response body.
    body: Body,
    /// Released with the body.
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The TCP stream, telling the watchdog when bytes arrive.
struct Watched {
    /// The client's connection.
    stream: TcpStream,
    /// Its watchdog's view.
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = Instant::now();
            self.activity.update(|phase| phase.read(now));
        }
        poll
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ConnectionLimits = ConnectionLimits {
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        max_connections: 1,
    };

    #[test]
    fn the_deadline_follows_the_connection_through_its_life() {
        let accepted = Instant::now();
        let fresh = Phase::Waiting {
            since: accepted,
            first_byte: None,
            fresh: true,
        };
        // A new connection owes its headers from the accept, bytes or not.
        assert_eq!(
            fresh.deadline(&LIMITS),
            Some(accepted + LIMITS.header_timeout)
        );
        let later = accepted + Duration::from_secs(3);
        assert_eq!(
            fresh.read(later).deadline(&LIMITS),
            Some(accepted + LIMITS.header_timeout)
        );
        // In flight: no deadline; two requests (HTTP/2) need both to finish.
        let busy = fresh.started().started();
        assert_eq!(busy.deadline(&LIMITS), None);
        let done = accepted + Duration::from_secs(5);
        assert_eq!(busy.finished(done).deadline(&LIMITS), None);
        let idle = busy.finished(done).finished(done);
        // Idle: the idle timeout; the next request's first byte starts the header timeout.
        assert_eq!(idle.deadline(&LIMITS), Some(done + LIMITS.idle_timeout));
        let byte = done + Duration::from_secs(50);
        let reading = idle.read(byte);
        assert_eq!(
            reading.deadline(&LIMITS),
            Some(byte + LIMITS.header_timeout)
        );
        // Later bytes do not move it.
        assert_eq!(reading.read(byte + Duration::from_secs(5)), reading);
        assert_eq!(reading.started(), Phase::Busy(1));
    }
}
