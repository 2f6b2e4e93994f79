//! Axum's JSON and query extractors, answering in this API's error shape.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use ferry_codes::Code;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// A JSON request body.
pub struct JsonBody<T>(pub T);

/// A JSON request body that may be left out: a request with no body (no
/// `Content-Length`, or zero) gets `T::default()`; any other is held to [`JsonBody`]'s rules.
pub struct OptionalJsonBody<T>(pub T);

/// Query parameters.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        // Read as a value first: serde's derived structs also take an array of their
        // fields in order (`[null]` for `{"project":null}`), which no body of this API is.
        match axum::Json::<serde_json::Value>::from_request(req, state).await {
            Ok(axum::Json(value)) if !value.is_object() => Err(ApiError::new(
                Code::BadJson,
                "the JSON body must be an object",
            )),
            Ok(axum::Json(value)) => serde_json::from_value(value).map(JsonBody).map_err(|e| {
                ApiError::new(
                    Code::BadJson,
                    format!("Failed to deserialize the JSON body into the target type: {e}"),
                )
            }),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::new(
                Code::BadContentType,
                "send the body as JSON with 'Content-Type: application/json'",
            )),
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::new(Code::TooLarge, "the JSON body is too large"))
            }
            Err(rejection) => Err(ApiError::new(Code::BadJson, rejection.body_text())),
        }
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Default> FromRequest<S> for OptionalJsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let chunked = req
            .headers()
            .contains_key(axum::http::header::TRANSFER_ENCODING);
        if declared.unwrap_or(0) == 0 && !chunked {
            return Ok(OptionalJsonBody(T::default()));
        }
        JsonBody::from_request(req, state)
            .await
            .map(|JsonBody(value)| OptionalJsonBody(value))
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| QueryParams(value))
            .map_err(|rejection: QueryRejection| {
                ApiError::new(Code::BadQuery, rejection.body_text())
            })
    }
}
