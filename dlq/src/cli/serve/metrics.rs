//! `GET /metrics`: the text `dlq metrics` writes (Prometheus 0.0.4, or
//! OpenMetrics 1.0 when the scraper asks for it), so a Prometheus can
//! scrape the dashboard directly (with `authorization: {credentials: TOKEN}`
//! in its scrape config) instead of a textfile collector.

use super::app::{blocking, ApiError, Shared};
use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use dlqlite::metrics::{Format, Options};

pub async fn metrics(State(app): State<Shared>, headers: HeaderMap) -> Result<Response, ApiError> {
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("application/openmetrics-text"));
    let format = if openmetrics {
        Format::OpenMetrics
    } else {
        Format::Prometheus
    };
    let text = blocking(&app, move |app| {
        let options = Options {
            stale_after_secs: super::log::STALE_AFTER_SECS,
            ..Options::default()
        };
        Ok(dlqlite::metrics::render(&app.dlq, &options, format)?)
    })
    .await?;
    Ok(([(header::CONTENT_TYPE, format.content_type())], text).into_response())
}
