//! Signal handling: [`Signals`] resolves when SIGTERM or SIGINT arrives, which starts the
//! graceful shutdown (stop accepting, finish in-flight requests, stop jobs, flush, exit 0).
//!
//! The handlers are installed when [`Signals::install`] is called, at the very start of the
//! server, not when the wait is first polled: a SIGTERM that arrives while the store opens or
//! right after the start-up line must still be a graceful stop, never the default action
//! (killed by the signal).

/// Installed SIGTERM and SIGINT handlers.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (needs the tokio runtime).
    pub fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Self {
                term: signal(SignalKind::terminate())?,
                interrupt: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    /// Waits for SIGTERM or SIGINT (Ctrl-C).
    pub async fn recv(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => tracing::info!("SIGINT received; shutting down"),
            _ = self.term.recv() => tracing::info!("SIGTERM received; shutting down"),
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("SIGINT received; shutting down");
        }
    }
}
