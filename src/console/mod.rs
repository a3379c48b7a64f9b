//! The web console: static files under `/ui/` (`/` redirects there), embedded in the
//! binary at build time from `src/console/assets` (`build.rs`). The pages are plain
//! HTML, CSS and JavaScript modules with no build step; they sign in with an API key
//! (kept in the browser's session storage) and call the REST API like any client, so
//! the console sees exactly what its key may see. The files themselves hold no data
//! and are served without a key.
//!
//! `MNEMOS_CONSOLE_DIR` (development only) serves the files from that directory
//! instead, so a change to the console shows on reload without a rebuild.

use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use mnemos_actors::error::MemoryError;
use sha2::{Digest, Sha256};

use crate::contract::errors::ApiError;

include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

/// The console's entry page.
const INDEX: &str = "index.html";

/// The content security policy of every console file: only this origin's scripts,
/// styles and API; no framing (clickjacking), no inline script.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The console's routes: `/` and `/ui` redirect to `/ui/`, which serves the entry page;
/// `/ui/{path}` serves the other files.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/ui/") }))
        .route("/ui", get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|headers: HeaderMap| async move { serve(INDEX, &headers) }))
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move {
                serve(&path, &headers)
            }),
        )
}

/// Whether `path` is one of the console's (they are served without a key).
pub fn is_console_path(path: &str) -> bool {
    path == "/" || path == "/ui" || path.starts_with("/ui/")
}

/// The bytes of the console file `path`: from `MNEMOS_CONSOLE_DIR` when set, else
/// embedded.
fn contents(path: &str) -> Option<Vec<u8>> {
    if path
        .split('/')
        .any(|part| part.is_empty() || part == ".." || part.starts_with('.'))
    {
        return None;
    }
    if let Some(dir) = std::env::var_os("MNEMOS_CONSOLE_DIR") {
        return std::fs::read(std::path::Path::new(&dir).join(path)).ok();
    }
    ASSETS
        .iter()
        .find(|(name, _)| *name == path)
        .map(|(_, bytes)| bytes.to_vec())
}

/// The content type of a console file, by extension.
fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "json" => "application/json",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

/// One console file with its validators (ETag; the browser revalidates every load so
/// a new binary's console is seen at once) and security headers, or 404.
fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(bytes) = contents(path) else {
        return ApiError(MemoryError {
            field: Some("path".into()),
            ..MemoryError::not_found(format!("the console has no file {path:?}"))
        })
        .into_response();
    };
    let etag = format!("\"{}\"", hex(&Sha256::digest(&bytes)[..12]));
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, content_type(path))], bytes).into_response()
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_page_is_embedded() {
        assert!(ASSETS.iter().any(|(name, _)| *name == INDEX));
    }

    #[test]
    fn paths_out_of_the_console_are_refused() {
        for path in ["../Cargo.toml", "a/../../x", "", ".hidden", "a//b"] {
            assert!(contents(path).is_none(), "{path}");
        }
        assert_eq!(content_type("app.js"), "text/javascript; charset=utf-8");
    }
}
