//! The server's shared state, its routes, and what every request passes
//! through: the access token (URL once, then a cookie; or a bearer header),
//! the CSRF check on changing requests, the security headers, and the one
//! way a failure becomes a 4xx/5xx with a one-line reason. The store runs
//! on tokio's blocking pool ([`blocking`]); no handler holds a connection
//! across an await.

use super::{actions, api, insight, log, metrics, pages};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use dlqlite::{Dlq, ErrorKind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Request bodies larger than this are refused (413): the biggest is a
/// selection of [`dlqlite::store::MAX_NAMED_ITEMS`] named items.
pub const MAX_BODY: usize = 4 << 20;

/// The Content-Security-Policy of every response: the server's own scripts,
/// styles and images only; nothing inline, nothing from elsewhere, no
/// framing, forms post only here.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's stylesheet: the one path served without the token.
pub const STYLESHEET: &str = "/static/dlq.css";

/// What every handler shares.
pub struct App {
    pub dlq: Dlq,
    /// The access token every request must carry.
    pub token: String,
    /// The token changing requests made with the cookie must also carry.
    pub csrf: String,
    /// The cookie's name: per port, so two servers on one host keep theirs.
    pub cookie: String,
    /// No actions (`--read-only`, or a database this process cannot write).
    pub read_only: bool,
    /// `--exec CMD`: what a retry runs; without it retries are off.
    pub exec: Option<actions::Exec>,
    /// Retry runs this server started.
    pub runs: Mutex<Vec<actions::LiveRun>>,
    /// Analyses and arrival charts, computed in the background.
    pub insight: insight::Cache,
    /// Turns for requests that can read a whole search (item listings,
    /// counts, actions): fewer than the store's pooled connections, so slow
    /// searches cannot take every connection and leave the light pages
    /// (live updates, one item, events) waiting for one. A turn goes into
    /// the work on the blocking pool and ends with it: a client that
    /// leaves ends its request, not its search, which still holds a
    /// connection until it is done.
    pub heavy: Arc<tokio::sync::Semaphore>,
    /// How long one request's store work may take (`--request-timeout`)
    /// before it is interrupted inside SQLite.
    pub request_budget: std::time::Duration,
    /// Set when the server stops: store work still running is interrupted.
    pub stopping: Arc<AtomicBool>,
    /// The database path, for the page footer.
    pub db_label: String,
    /// The database file's path and (device, inode) when the server
    /// started: a file removed or replaced since would otherwise go on
    /// being served, and written, from the old copy.
    /// `None` for a database on a server (no file to replace).
    pub db_identity: Option<(std::path::PathBuf, Option<(u64, u64)>)>,
}

impl App {
    /// Why the database file is no longer the one opened, if it is not.
    fn database_moved(&self) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let (path, opened) = self.db_identity.as_ref()?;
        let now = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        (now != *opened).then(|| {
            format!(
                "the database file {} was {} since dlq serve started: restart it",
                self.db_label,
                if now.is_none() { "removed" } else { "replaced" }
            )
        })
    }
}

pub type Shared = Arc<App>;

/// Every route. Pages and `/static` are GET; changes are POST.
pub fn router(app: Shared) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/items", get(pages::items))
        .route("/item", get(pages::item))
        .route("/patterns", get(insight::patterns))
        .route("/events", get(log::events))
        .route("/runs", get(log::runs))
        .route("/action", post(actions::form))
        .route(STYLESHEET, get(pages::css))
        .route("/static/dlq.js", get(pages::js))
        .route("/api/jobs", get(api::jobs))
        .route("/api/items", get(api::items))
        .route("/api/item", get(api::item))
        .route("/api/stats", get(api::stats))
        .route("/api/analyze", get(api::analyze))
        .route("/api/events", get(api::events))
        .route("/api/runs", get(api::runs))
        .route("/api/live", get(api::live))
        .route("/api/actions", post(actions::api))
        .route("/metrics", get(metrics::metrics))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

async fn not_found(request: Request) -> Response {
    let failure = Failure::new(
        StatusCode::NOT_FOUND,
        format!("no page {}", request.uri().path()),
    );
    if is_api(request.uri().path()) {
        ApiError(failure).into_response()
    } else {
        PageError(failure).into_response()
    }
}

fn is_api(path: &str) -> bool {
    path.starts_with("/api/")
}

/// Equal strings, compared in time that does not depend on where they
/// differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The request's cookie `name`, if any.
fn cookie<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// How a request proved it may be served.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proof {
    /// `Authorization: Bearer`: a script's, which a browser never sends
    /// on its own, so no CSRF token is needed.
    Bearer,
    /// The cookie: a browser's, sent with any request to this host.
    Cookie,
}

/// Checks the token (and, for changes made with the cookie, where the
/// request came from), trades a `?token=` for the cookie, and puts the
/// security headers on every response, refusals included.
async fn guard(State(app): State<Shared>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let api = is_api(request.uri().path());
    let get = request.method() == Method::GET || request.method() == Method::HEAD;
    let mut response = ours(check(&app, request, next).await, api, get).await;
    let headers = response.headers_mut();
    // The time spent here, for the benchmark and the browser's dev tools.
    let spent = format!("app;dur={:.1}", started.elapsed().as_secs_f64() * 1000.0);
    if let Ok(value) = HeaderValue::from_str(&spent) {
        headers.insert("server-timing", value);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // The token can be in a URL: never send it to another site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// axum's own refusals (a body over [`MAX_BODY`]: 413; a method a route
/// does not take: 405) come as plain text or nothing: they get the one-line
/// JSON or page every other failure gets.
async fn ours(response: Response, api: bool, get: bool) -> Response {
    let status = response.status();
    let typed = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| !t.starts_with("text/plain"));
    if !status.is_client_error() || typed {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_string();
    let message = match status {
        // Every route takes GET only (reading) or POST only (changing).
        StatusCode::METHOD_NOT_ALLOWED if get => "this address takes POST only".to_string(),
        StatusCode::METHOD_NOT_ALLOWED => "this address takes GET only".to_string(),
        StatusCode::PAYLOAD_TOO_LARGE => format!("request body over {} MiB", MAX_BODY >> 20),
        _ if !text.is_empty() => text,
        _ => status
            .canonical_reason()
            .unwrap_or("bad request")
            .to_string(),
    };
    let failure = Failure::new(status, message);
    if api {
        ApiError(failure).into_response()
    } else {
        PageError(failure).into_response()
    }
}

async fn check(app: &App, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    // The stylesheet holds no data, and the refusal page below needs it
    // before any token is shown: a 401 page without it is unstyled.
    if path == STYLESHEET && (request.method() == Method::GET || request.method() == Method::HEAD) {
        return next.run(request).await;
    }
    let refuse = |status: StatusCode, message: &str| {
        let failure = Failure::new(status, message.to_string());
        let mut response = if is_api(&path) {
            ApiError(failure).into_response()
        } else {
            PageError(failure).into_response()
        };
        // A refused client gets no connection to keep: one that never
        // shows a token cannot hold a slot of --max-connections for long.
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    };
    let params = Params::parse(request.uri().query());
    if let Some(given) = params.get("token") {
        if !same(given, &app.token) {
            return refuse(StatusCode::UNAUTHORIZED, "wrong access token");
        }
        if request.method() != Method::GET {
            return refuse(
                StatusCode::BAD_REQUEST,
                "the token goes in the URL of a GET only",
            );
        }
        // Trade the URL's token for the cookie, and drop it from the
        // address bar (and history) with a redirect to the same page.
        let rest = params.without("token");
        // One leading slash: `//evil.example/x` is another site to a
        // browser, not a path here.
        let local = format!("/{}", path.trim_start_matches(['/', '\\']));
        let location = if rest.is_empty() {
            local
        } else {
            format!("{local}?{rest}")
        };
        let cookie = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            app.cookie, app.token
        );
        return Response::builder()
            .status(StatusCode::SEE_OTHER)
            .header(header::LOCATION, location)
            .header(header::SET_COOKIE, cookie)
            .body(Body::empty())
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme is case-insensitive (RFC 9110).
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        });
    let proof = match (bearer, cookie(&request, &app.cookie)) {
        (Some(token), _) if same(token.trim(), &app.token) => Proof::Bearer,
        (Some(_), _) => return refuse(StatusCode::UNAUTHORIZED, "wrong access token"),
        (None, Some(token)) if same(token, &app.token) => Proof::Cookie,
        _ => {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "an access token is needed: open the URL `dlq serve` printed (with ?token=), \
                 or send Authorization: Bearer TOKEN",
            )
        }
    };
    if request.method() != Method::GET && request.method() != Method::HEAD && proof == Proof::Cookie
    {
        // A browser says where a request came from; a change must come
        // from this server's own pages.
        let site = request
            .headers()
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok());
        if matches!(site, Some(s) if s != "same-origin" && s != "none") {
            return refuse(
                StatusCode::FORBIDDEN,
                "a change must come from the dashboard's own pages",
            );
        }
        // Forms carry the CSRF token in their body (checked by the form
        // handler); scripts in a header.
        if is_api(&path) {
            let given = request
                .headers()
                .get("x-csrf-token")
                .and_then(|v| v.to_str().ok());
            if !given.is_some_and(|g| same(g, &app.csrf)) {
                return refuse(
                    StatusCode::FORBIDDEN,
                    "missing or wrong CSRF token (X-CSRF-Token)",
                );
            }
        }
    }
    if let Some(problem) = app.database_moved() {
        return refuse(StatusCode::INTERNAL_SERVER_ERROR, &problem);
    }
    // hyper's header timeout ends with the head: a body trickled a byte at
    // a time would hold the request (and its connection slot) for ever.
    // The body comes whole within the request's budget, or not at all.
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let (parts, body) = request.into_parts();
        let read = tokio::time::timeout(app.request_budget, axum::body::to_bytes(body, MAX_BODY));
        let bytes = match read.await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(_)) => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "the request body is over {} MiB, or was cut off",
                        MAX_BODY >> 20
                    ),
                )
            }
            Err(_) => {
                return refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive within --request-timeout",
                )
            }
        };
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    }
    next.run(request).await
}

/// A request failed: its status and a one-line reason.
#[derive(Debug)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        // One line, whatever the cause said.
        let message = message.into().replace(['\n', '\r'], " ");
        Failure { status, message }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::FORBIDDEN, message)
    }
}

impl From<dlqlite::Error> for Failure {
    fn from(error: dlqlite::Error) -> Self {
        if let dlqlite::Error::AmbiguousItem { item_id, jobs } = &error {
            // The library's wording names the CLI's --job-id.
            return Failure::bad_request(format!(
                "item {item_id:?} exists in several jobs ({}): give the job (job=)",
                jobs.join(", ")
            ));
        }
        let status = match error.kind() {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Busy | ErrorKind::Interrupted => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::ReadOnly => StatusCode::FORBIDDEN,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Failure::new(status, error.to_string())
    }
}

/// A failure answered as JSON: `{"error": "..."}`.
pub struct ApiError(pub Failure);

impl<E: Into<Failure>> From<E> for ApiError {
    fn from(error: E) -> Self {
        ApiError(error.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.0.message }).to_string();
        (
            self.0.status,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}

/// A failure answered as a page that says what.
pub struct PageError(pub Failure);

impl<E: Into<Failure>> From<E> for PageError {
    fn from(error: E) -> Self {
        PageError(error.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        (self.0.status, pages::error_page(&self.0)).into_response()
    }
}

/// Runs `f` with the store on tokio's blocking pool (SQLite calls block).
pub async fn blocking<T: Send + 'static>(
    app: &Shared,
    f: impl FnOnce(&App) -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    let app = Arc::clone(app);
    // The store work stops inside SQLite when this request is dropped (its
    // client left), when its time is up, or when the server stops.
    let cancel = CancelOnDrop(Arc::new(AtomicBool::new(false)));
    let budget = dlqlite::store::Budget::until(Some(Instant::now() + app.request_budget))
        .cancelled_by(cancel.0.clone())
        .cancelled_by(app.stopping.clone());
    match tokio::task::spawn_blocking(move || {
        let _budget = budget.enter();
        f(&app)
    })
    .await
    {
        Ok(result) => result,
        Err(e) => Err(Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal error: {e}"),
        )),
    }
}

/// Sets its flag when dropped: with the request's future, when the
/// request ends or its client goes away.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The query string's (or a form body's) name=value pairs, in order, a
/// name possibly repeated.
#[derive(Clone, Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(text: Option<&str>) -> Self {
        Params(
            text.map(|t| form_urlencoded::parse(t.as_bytes()).into_owned().collect())
                .unwrap_or_default(),
        )
    }

    /// The first value of `name`; an empty value counts as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    /// Every value of `name`.
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The pairs other than `name`'s, encoded again.
    pub fn without(&self, name: &str) -> String {
        let mut out = form_urlencoded::Serializer::new(String::new());
        for (key, value) in self.0.iter().filter(|(key, _)| key != name) {
            out.append_pair(key, value);
        }
        out.finish()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(Params::parse(parts.uri.query()))
    }
}

/// `?name=a&...` from pairs, leaving out empty values.
pub fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in pairs {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            out.append_pair(key, value);
        }
    }
    let text = out.finish();
    if text.is_empty() {
        text
    } else {
        format!("?{text}")
    }
}
