//! The review's screenshot: the configured Chromium, headless, as a subprocess with a fresh
//! profile in a temporary directory, killed (with every process it started) after
//! [`SHOT_TIMEOUT`]. Answers PNG bytes or why not; never decides a verdict.
//!
//! The browser loads nothing the fetch would refuse: every request it makes (the page, its
//! frames, images, scripts, sockets) goes through a [`Proxy`] of this run alone, which
//! resolves each host itself and checks every address with the fetch's rule. The page's host
//! is pinned there to the address the fetch connected to, so a DNS answer that changed since
//! cannot send the browser elsewhere. Chromium resolves nothing itself behind a fixed proxy,
//! and `<-loopback>` takes away its default of going to loopback addresses directly.

use std::net::SocketAddr;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use url::{Host, Url};

use super::fetch::AddressPolicy;
use super::proxy::Proxy;

/// The browser's whole run.
pub const SHOT_TIMEOUT: Duration = Duration::from_secs(15);
/// Larger files are not kept (a 1280×800 PNG is well under this).
const MAX_PNG: u64 = 16 << 20;
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Takes a screenshot of `url` with the Chromium at `browser`; `pin` is the address the page's
/// host must resolve to, and `policy` decides every connection the browser makes.
pub async fn take(
    browser: &str,
    url: &Url,
    pin: Option<SocketAddr>,
    policy: &AddressPolicy,
) -> Result<Vec<u8>, String> {
    let pin = match (pin, url.host()) {
        (Some(addr), Some(Host::Domain(host))) => Some((host.to_string(), addr.ip())),
        _ => None,
    };
    // Lives for this run only; dropped (every connection and tunnel with it) on return.
    let proxy = Proxy::start(policy.clone(), pin)
        .await
        .map_err(|e| format!("cannot start the screenshot's proxy: {e}"))?;
    let dir = temp_dir()?;
    let result = run(browser, url, proxy.addr(), &dir).await;
    // The profile is tens of files: removing it must not hold up an async thread.
    let _ = tokio::fs::remove_dir_all(&dir).await;
    result
}

async fn run(browser: &str, url: &Url, proxy: SocketAddr, dir: &Path) -> Result<Vec<u8>, String> {
    let shot = dir.join("shot.png");
    let profile = dir.join("profile");
    let mut command = tokio::process::Command::new(browser);
    command
        .arg("--headless=new")
        .arg("--disable-gpu")
        .arg("--no-sandbox")
        .arg("--hide-scrollbars")
        .arg("--window-size=1280,800")
        // Its own profile: concurrent runs would otherwise fight over one profile's lock.
        .arg(format!("--user-data-dir={}", profile.display()))
        // Nothing but the page: an appliance sends nothing out by itself.
        .arg("--no-first-run")
        .arg("--no-default-browser-check")
        .arg("--disable-background-networking")
        .arg("--disable-component-update")
        .arg("--disable-sync")
        .arg("--disable-extensions")
        .arg("--mute-audio")
        // Stops loading after 10 s and shoots what there is, before our kill at 15 s.
        .arg("--timeout=10000")
        // Every request through the run's proxy, loopback ones included (Chromium sends
        // those direct unless `<-loopback>` says otherwise); no name resolved by the browser.
        .arg(format!("--proxy-server=http://{proxy}"))
        .arg("--proxy-bypass-list=<-loopback>")
        .arg("--dns-prefetch-disable")
        // WebRTC's UDP would not go through the proxy: none but what a proxy carries.
        .arg("--force-webrtc-ip-handling-policy=disable_non_proxied_udp")
        .arg(format!("--screenshot={}", shot.display()))
        .arg(url.as_str())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        // Its own process group, so that a timeout kills its renderers and helpers too.
        .process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start {browser}: {e}"))?;
    let group = child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32));
    let waited = tokio::time::timeout(SHOT_TIMEOUT, child.wait()).await;
    // Whatever happened, no helper outlives the run (an error here means none was left).
    if let Some(group) = group {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let status = match waited {
        Err(_) => {
            let _ = child.kill().await;
            return Err(format!("timed out after {} s", SHOT_TIMEOUT.as_secs()));
        }
        Ok(Err(e)) => return Err(format!("waiting for {browser}: {e}")),
        Ok(Ok(status)) => status,
    };
    // A browser may exit non-zero after writing the file (a crashed helper at shutdown): the
    // file decides, the status only explains its absence.
    let size = match tokio::fs::metadata(&shot).await {
        Ok(meta) => meta.len(),
        Err(_) => {
            return Err(format!(
                "no screenshot written ({browser} exited with {status})"
            ))
        }
    };
    if size > MAX_PNG {
        return Err(format!("the screenshot is {size} bytes, more than kept"));
    }
    let png = tokio::fs::read(&shot)
        .await
        .map_err(|e| format!("cannot read the screenshot: {e}"))?;
    if !png.starts_with(PNG_SIGNATURE) {
        return Err("the screenshot is not a PNG".into());
    }
    Ok(png)
}

/// A new directory of our own under the system's temporary directory.
fn temp_dir() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    for _ in 0..8 {
        let dir = base.join(format!(
            "vshortlink-shot-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        // `create` fails on an existing path, and 0700 keeps other users out: the directory
        // and the screenshot in it are ours alone.
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create a temporary directory: {e}")),
        }
    }
    Err("cannot create a temporary directory".into())
}
