//! The listener that keeps this instance's caches in step with the others: one connection of
//! its own `LISTEN`s on `vsl_links`, and each notification (a code whose link changed,
//! committed by any instance) reaches the change handler. When the connection is lost,
//! notifications sent meanwhile are lost with it: on reconnecting the handler is told to
//! forget everything.
//!
//! The handler is synchronous and may wait (a domain reload takes a lock and reads the store
//! through this very runtime), so it runs through `block_in_place`: this worker's queue moves
//! to another thread meanwhile, and the driver tasks the handler's own queries need keep
//! running. Called inline, a reload waiting on the lock held by a reload whose query needed
//! this worker stalled both for good (CI, `tests/domains.rs` on PostgreSQL).

use std::time::Duration;

use futures_util::StreamExt;
use tokio_postgres::{AsyncMessage, NoTls};

use super::CHANNEL;
use crate::{ChangeHandler, StoreChange};

/// Wait between reconnection attempts.
const RETRY: Duration = Duration::from_millis(250);

/// Listens until the store's runtime stops.
pub(super) async fn listen(config: tokio_postgres::Config, on_change: ChangeHandler) {
    let mut first = true;
    loop {
        match session(&config, &on_change, first).await {
            Ok(()) => tracing::warn!("postgres notification connection closed; reconnecting"),
            Err(e) => {
                tracing::warn!(error = %e, "postgres notification connection failed; reconnecting")
            }
        }
        first = false;
        tokio::time::sleep(RETRY).await;
    }
}

/// One connection's life: subscribe, then hand on every notification until it ends.
async fn session(
    config: &tokio_postgres::Config,
    on_change: &ChangeHandler,
    first: bool,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    // The connection is driven here; its messages (notifications) go to the channel.
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    if tx.send(Some(n.payload().to_string())).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "postgres notification connection error");
                    break;
                }
            }
        }
        let _ = tx.send(None);
    });
    client.batch_execute(&format!("LISTEN {CHANNEL}")).await?;
    let tell = |change| tokio::task::block_in_place(|| on_change(change));
    if !first {
        // Whatever changed while we were away is unknown.
        tell(StoreChange::All);
    }
    while let Some(Some(payload)) = rx.recv().await {
        if payload == super::accounts::ACCOUNTS_CHANGED {
            tell(StoreChange::Accounts);
        } else if payload == super::domains::DOMAINS_CHANGED {
            tell(StoreChange::Domains);
        } else {
            tell(StoreChange::Code(payload));
        }
    }
    driver.abort();
    drop(client);
    Ok(())
}
