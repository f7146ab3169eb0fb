//! The accept loop, against slow and huge clients: HTTP/1 connections served by hyper with
//! a header read timeout (`server.header_timeout`), a header size limit answered 431
//! (`server.max_header_bytes`), and a cap on concurrent connections (`server.max_connections`).
//! `axum::serve` exposes none of these, so this replaces it; the router is the same, behind
//! [`Front`].
//!
//! Shutdown: stop accepting, ask every connection to finish its request and close, wait for them
//! (bounded), return. Owns no application state.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::front::Front;

/// How the server treats connections.
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// A client must send its whole request head within this time, or the connection closes.
    pub header_timeout: Duration,
    /// Largest request head (request line and headers); larger ones are answered 431.
    pub max_header_bytes: usize,
    /// Connections served at once; more wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Longest wait for open connections at shutdown.
    pub drain_timeout: Duration,
}

/// Serves `front` on `listener` until `shutdown` completes, then drains.
pub async fn serve(
    listener: TcpListener,
    front: Front,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .max_buf_size(options.max_header_bytes);
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(options.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // A slot first: past the cap, connections wait in the kernel's backlog, and the ones
        // being served (including slow ones, which the header timeout bounds) are not starved.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let front = front.clone();
            async move {
                Ok::<_, std::convert::Infallible>(front.handle(request.map(Body::new), peer).await)
            }
        });
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(options.drain_timeout, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
    Ok(())
}
