//! `GET`/`POST /v1/projects` (spec M-PROJ).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use ferry_exec::member::MemberAction;
use ferry_site::{Project, rfc3339};
use serde::{Deserialize, Serialize};

use crate::auth::Member;
use crate::extract::JsonBody;
use crate::{ApiError, AppState, blocking};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewProject {
    id: String,
}

#[derive(Serialize)]
pub struct ProjectView {
    id: String,
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
    let (acting, person, id) = (state.clone(), who.person, body.id);
    // The project's folders are made as the person, in every mode.
    let project = blocking(move || {
        acting.site.add_project_with(&person, &id, || {
            acting
                .member_now(&person, Some(&id), MemberAction::Prepare)
                .map(|_| ())
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(project.into())))
}
