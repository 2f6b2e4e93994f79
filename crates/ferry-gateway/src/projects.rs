//! `GET`/`POST /v1/projects` (spec M-PROJ, and M-DAILY's display names): a project is
//! made from a `name` people type (its id derived from it) or from an `id`, or both.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use ferry_codes::Code;
use ferry_exec::member::MemberAction;
use ferry_site::{Project, rfc3339};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::JsonBody;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(list, create))
}

/// A project to make: a `name`, an `id`, or both.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    /// The id; derived from `name` when absent.
    id: Option<String>,
    /// The name people see, e.g. `Q2 Report`.
    name: Option<String>,
}

/// A project of the person.
#[derive(Serialize, ToSchema)]
pub struct ProjectView {
    /// The id, as paths and `project=` name it.
    #[schema(example = "q2-report")]
    id: String,
    /// The name people see.
    name: String,
    /// When it was made (RFC 3339, UTC).
    #[schema(format = DateTime)]
    created: String,
}

/// The person's projects.
#[derive(Serialize, ToSchema)]
pub struct ProjectList {
    projects: Vec<ProjectView>,
}

impl From<Project> for ProjectView {
    fn from(p: Project) -> ProjectView {
        let created =
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(p.created.max(0) as u64);
        ProjectView {
            id: p.id,
            name: p.name,
            created: rfc3339(created),
        }
    }
}

/// The person's projects.
#[utoipa::path(
    get,
    path = "/v1/projects",
    operation_id = "listProjects",
    tag = "projects",
    security(("bearer" = [])),
    responses((status = 200, description = "The person's projects.", body = ProjectList))
)]
pub async fn list(
    State(state): State<AppState>,
    Member(who): Member,
) -> Result<Json<ProjectList>, ApiError> {
    let site = state.site.clone();
    let projects = blocking(move || site.projects(&who.person)).await?;
    Ok(Json(ProjectList {
        projects: projects.into_iter().map(ProjectView::from).collect(),
    }))
}

/// Makes a project, and its folders as the person.
#[utoipa::path(
    post,
    path = "/v1/projects",
    operation_id = "createProject",
    tag = "projects",
    security(("bearer" = [])),
    request_body = NewProject,
    responses((status = 201, description = "The project made.", body = ProjectView))
)]
pub async fn create(
    State(state): State<AppState>,
    Member(who): Member,
    JsonBody(body): JsonBody<NewProject>,
) -> Result<(StatusCode, Json<ProjectView>), ApiError> {
    let acting = state.clone();
    let person = who.person;
    // The project's folders are made as the person, in every mode.
    let project = blocking(move || {
        let make_folders = |id: &str| {
            acting
                .member_now(&person, Some(id), MemberAction::Prepare)
                .map(|_| ())
        };
        match (body.name, body.id) {
            (Some(name), id) => {
                acting
                    .site
                    .add_named_project_with(&person, &name, id.as_deref(), make_folders)
            }
            (None, Some(id)) => acting.site.add_project_with(&person, &id, make_folders),
            (None, None) => Err(ApiError::new(
                Code::InvalidRequest,
                "send the project's name, as {\"name\":\"Q2 Report\"}",
            )),
        }
    })
    .await?;
    Ok((StatusCode::CREATED, Json(project.into())))
}
