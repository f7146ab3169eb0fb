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

/// A config for a store of its own (no server): sled under `dir`, or with
/// `TEST_STORE=postgres` a fresh database of the test PostgreSQL server.
pub fn offline_on_test_store(dir: &Path) -> PathBuf {
    let config = offline(dir);
    if std::env::var("TEST_STORE").as_deref() == Ok("postgres") {
        let url = super::postgres::fresh_database()
            .expect("TEST_STORE=postgres needs PostgreSQL installed");
        let mut text = std::fs::read_to_string(&config).expect("config");
        text.push_str(&format!(
            "backend = \"postgres\"\n[storage.postgres]\nurl = \"{url}\"\n"
        ));
        std::fs::write(&config, text).expect("config");
    }
    config
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
