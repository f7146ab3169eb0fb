//! The listener that keeps this instance's caches in step with the others: one connection of
//! its own `LISTEN`s on `vsl_links`, and each notification (a code whose link changed,
//! committed by any instance) reaches the change handler. When the connection is lost,
//! notifications sent meanwhile are lost with it: on reconnecting the handler is told to
//! forget everything.

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
    if !first {
        // Whatever changed while we were away is unknown.
        on_change(StoreChange::All);
    }
    while let Some(Some(payload)) = rx.recv().await {
        if payload == super::accounts::ACCOUNTS_CHANGED {
            on_change(StoreChange::Accounts);
        } else if payload == super::domains::DOMAINS_CHANGED {
            on_change(StoreChange::Domains);
        } else {
            on_change(StoreChange::Code(payload));
        }
    }
    driver.abort();
    drop(client);
    Ok(())
}
