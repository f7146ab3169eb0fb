//! Running the `vshortlink` binary's commands (`export`, `import`, `check`, `create`, …) against
//! a config file, with none of the test's own `VSL_*` variables leaking into it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `vshortlink --config <config> <args…>`, its output captured.
pub fn vsl(config: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_vshortlink"));
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("VSL_") {
            command.env_remove(key);
        }
    }
    command
        .arg("--config")
        .arg(config)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("run vshortlink")
}

/// A config for a data directory of its own under `dir` (no server).
pub fn offline(dir: &Path) -> PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nbase_url = \"http://sl.test\"\n[storage]\npath = \"{}\"\n",
            dir.join("data").display()
        ),
    )
    .expect("config");
    config
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
