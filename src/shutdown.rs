//! Signal handling: resolves when SIGTERM or SIGINT arrives, which starts the graceful
//! shutdown (stop accepting, finish in-flight requests, stop jobs, flush, exit 0).

/// Waits for SIGTERM or SIGINT (Ctrl-C).
pub async fn signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received; shutting down"),
        () = term => tracing::info!("SIGTERM received; shutting down"),
    }
}
