//! REST handlers of export and import: `GET /v1/export` streams an export as
//! `application/x-ndjson` while it is read; `POST /v1/import` takes an export file
//! (the router's intake lets this one route take `application/x-ndjson`, within
//! `server.max_import_bytes`). Both call `crate::contract::transfer`.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mnemos_actors::error::MemoryError;

use super::handlers::{ApiResult, Shared};
use super::identity::Authenticated;
use super::ApiQuery;
use crate::contract::errors::{ApiError, ErrorBody};
use crate::contract::transfer::{self, ExportParams, ImportParams, ImportReport, MEDIA_TYPE};

/// Export one agent (or, for an admin key, a tenant) as JSONL: a header, every record,
/// a trailer. Streamed as it is read; a failure midway ends the stream without its
/// trailer, which an import reads as a truncated file.
#[utoipa::path(get, tag = "transfer", path = "/v1/export", operation_id = "export_records",
    params(ExportParams),
    responses((status = 200, description = "One JSON object per line: a header, the records, a trailer (`kind` says which; see README, Export and import)",
        content_type = "application/x-ndjson", body = String),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn export(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<ExportParams>,
) -> ApiResult<Response> {
    let scope = transfer::export_scope(
        &caller,
        params.agent_id.as_deref(),
        params.tenant.as_deref(),
        false,
    )?;
    let runtime = state.runtime.clone();
    let plan = transfer::plan_export(
        &runtime,
        &scope,
        params.with_embeddings.unwrap_or(false),
        runtime.store_backend(),
    )
    .await?;
    let (sink, lines) = tokio::sync::mpsc::channel::<Vec<u8>>(64);
    tokio::spawn(async move {
        if let Err(error) = transfer::write_export(&runtime, plan, sink).await {
            tracing::warn!(%error, "export ended before its trailer");
        }
    });
    let stream = futures_util::stream::unfold(lines, |mut lines| async move {
        let line = lines.recv().await?;
        Some((Ok::<_, std::io::Error>(Bytes::from(line)), lines))
    });
    Ok((
        [(header::CONTENT_TYPE, MEDIA_TYPE)],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Import an export file (`Content-Type: application/x-ndjson`): every line is checked
/// first and an invalid one refuses the whole import (400 naming its line and field),
/// unless `skip_invalid`; ids are kept and records already stored are left as they
/// are, so importing a file twice changes nothing the second time.
#[utoipa::path(post, tag = "transfer", path = "/v1/import", operation_id = "import_records",
    params(ImportParams),
    request_body(content = String, content_type = "application/x-ndjson",
        description = "An export file: one JSON object per line"),
    responses((status = 200, body = ImportReport), (status = 400, body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 415, body = ErrorBody)))]
pub async fn import(
    State(state): Shared,
    Authenticated(caller): Authenticated,
    ApiQuery(params): ApiQuery<ImportParams>,
    body: Body,
) -> ApiResult<Json<ImportReport>> {
    // The intake has read the body whole within server.max_import_bytes already.
    let bytes = axum::body::to_bytes(body, usize::MAX).await.map_err(|e| {
        ApiError(MemoryError::invalid(
            "body",
            format!("could not read the body: {e}"),
        ))
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        ApiError(MemoryError::invalid(
            "body",
            format!("the body is not UTF-8: {e}"),
        ))
    })?;
    let report = transfer::import(&state.runtime, &caller, text, &params, &|_, _| {}).await?;
    Ok(Json(report))
}
