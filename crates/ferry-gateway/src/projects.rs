//! `GET`/`POST /v1/projects` (spec M-PROJ, and M-DAILY's display names): a project is
//! made from a `name` people type (its id derived from it) or from an `id`, or both.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use ferry_codes::Code;
use ferry_exec::member::MemberAction;
use ferry_site::{Project, rfc3339};
use serde::{Deserialize, Serialize};

use crate::auth::Member;
use crate::extract::JsonBody;
use crate::{ApiError, AppState, blocking};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    /// The id; derived from `name` when absent.
    id: Option<String>,
    /// The name people see, e.g. `Q2 Report`.
    name: Option<String>,
}

#[derive(Serialize)]
pub struct ProjectView {
    id: String,
    name: String,
    created: String,
}

#[derive(Serialize)]
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
