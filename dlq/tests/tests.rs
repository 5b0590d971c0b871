//! The integration suite: one binary that drives the real `dlq` in temporary
//! directories (and the library through its public API), one module per area.
//! The modules live in dlq/tests/tests/ so cargo does not build each as its own
//! test binary.

#[path = "tests/asynchronous.rs"]
mod asynchronous;
#[path = "tests/audit.rs"]
mod audit;
#[cfg(feature = "serve")]
#[path = "tests/browser.rs"]
mod browser;
#[path = "tests/categories.rs"]
mod categories;
#[path = "tests/check.rs"]
mod check;
#[path = "tests/cli.rs"]
mod cli;
#[path = "tests/commands.rs"]
mod commands;
#[path = "tests/common.rs"]
mod common;
#[path = "tests/conventions.rs"]
mod conventions;
#[path = "tests/counters.rs"]
mod counters;
#[path = "tests/disk.rs"]
mod disk;
#[path = "tests/engine.rs"]
mod engine;
#[path = "tests/examples.rs"]
mod examples;
#[path = "tests/families.rs"]
mod families;
#[path = "tests/hostile.rs"]
mod hostile;
#[cfg(feature = "serve")]
#[path = "tests/http.rs"]
mod http;
#[path = "tests/import.rs"]
mod import;
#[path = "tests/library.rs"]
mod library;
#[path = "tests/locks.rs"]
mod locks;
#[path = "tests/metrics.rs"]
mod metrics;
#[path = "tests/oracles.rs"]
mod oracles;
#[cfg(feature = "postgres")]
#[path = "tests/postgres.rs"]
mod postgres;
#[path = "tests/prodigy.rs"]
mod prodigy;
#[path = "tests/properties.rs"]
mod properties;
#[path = "tests/readonly.rs"]
mod readonly;
#[path = "tests/report.rs"]
mod report;
#[path = "tests/retention.rs"]
mod retention;
#[path = "tests/retry.rs"]
mod retry;
#[path = "tests/robustness.rs"]
mod robustness;
#[path = "tests/schema.rs"]
mod schema;
#[cfg(feature = "serve")]
#[path = "tests/serve.rs"]
mod serve;
#[cfg(feature = "serve")]
#[path = "tests/serve_counts.rs"]
mod serve_counts;
#[cfg(feature = "serve")]
#[path = "tests/serve_families.rs"]
mod serve_families;
#[cfg(feature = "serve")]
#[path = "tests/serve_limits.rs"]
mod serve_limits;
#[path = "tests/terminal.rs"]
mod terminal;
#[path = "tests/watch.rs"]
mod watch;
