//! The OpenAPI description of the HTTP API, served at `GET /v1/openapi.json`.
//!
//! Each handler carries its own `#[utoipa::path]`, and its route is registered from that
//! attribute (`utoipa_axum::routes!`), so the router and the description are one list: a
//! route cannot be served without being described, nor described without being served.
//! `tests/openapi.rs` checks the description against the running server, and schemathesis
//! checks the answers against the description.

use axum::Extension;
use axum::http::header;
use axum::response::IntoResponse;
use bytes::Bytes;
use ferry_codes::Code;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, Ref, RefOr, ResponseBuilder, Schema,
    schema,
};
use utoipa::{PartialSchema, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use crate::AppState;
use crate::error::ErrorBody;

/// A router whose routes carry their description.
pub(crate) type ApiRouter = OpenApiRouter<AppState>;

/// The security scheme of member, admin and harness tokens: `Authorization: Bearer <token>`.
pub(crate) const BEARER: &str = "bearer";

/// The description as served, made once with the router.
#[derive(Clone)]
pub(crate) struct Described(Bytes);

impl Described {
    /// `openapi` completed with what no handler says: the API's name, its security scheme,
    /// and the error every operation may answer.
    pub(crate) fn new(mut openapi: OpenApi) -> Described {
        openapi.info = InfoBuilder::new()
            .title("ferry")
            .version(env!("CARGO_PKG_VERSION"))
            .description(Some(
                "The file plane for AI-agent platforms: its HTTP API. Every failure answers \
                 {\"error\":{\"code\",\"message\"}} with the status of its code.",
            ))
            .build();
        let components = openapi
            .components
            .get_or_insert_with(|| ComponentsBuilder::new().build());
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        let mut schemas = vec![(ErrorBody::name().into_owned(), ErrorBody::schema())];
        ErrorBody::schemas(&mut schemas);
        components.schemas.extend(schemas);
        let error = ResponseBuilder::new()
            .description("The request failed; the code says why, and the status is the code's.")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name(ErrorBody::name())))
                    .build(),
            )
            .build();
        for operation in operations_mut(&mut openapi) {
            operation
                .responses
                .responses
                .entry("default".to_owned())
                .or_insert_with(|| RefOr::T(error.clone()));
        }
        let json = serde_json::to_vec(&openapi).unwrap_or_default();
        Described(Bytes::from(json))
    }
}

/// Every operation of `openapi`, whatever its method.
pub(crate) fn operations_mut(
    openapi: &mut OpenApi,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    openapi.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
    })
}

/// The schema of an error's `code`: one of the spellings of [`Code`].
pub(crate) fn code_schema() -> impl Into<RefOr<Schema>> {
    schema::ObjectBuilder::new()
        .schema_type(schema::Type::String)
        .enum_values(Some(Code::ALL.iter().map(|code| code.as_str())))
        .description(Some("What failed, in snake_case; it also says the status."))
}

/// The description's own route.
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(utoipa_axum::routes!(serve))
}

/// This description.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    operation_id = "openapi",
    tag = "meta",
    responses((status = 200, description = "The OpenAPI description of this API.",
               content_type = "application/json", body = Object))
)]
pub(crate) async fn serve(Extension(described): Extension<Described>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], described.0)
}
