//! The audit trail's side in the gateway (spec scale S-OPS): handlers record each file
//! movement with [`record`] once it has ended, and `GET /v1/audit` shows a person the
//! records of their own files, newest first, a page at a time.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use ferry_codes::Code;
use ferry_site::{AUDIT_PAGE_MAX, AuditEntry, AuditFilter, AuditRecord};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::routes;

use crate::auth::Member;
use crate::extract::QueryParams;
use crate::openapi::ApiRouter;
use crate::{ApiError, AppState, blocking};

/// This module's routes, for [`crate::router`].
pub(crate) fn routes() -> ApiRouter {
    ApiRouter::new().routes(routes!(list))
}

/// Records a movement; never fails the request (the site logs a record it cannot write).
pub(crate) async fn record(state: &AppState, entry: AuditEntry) {
    let site = state.site.clone();
    let _ = blocking(move || {
        site.audit(&entry);
        Ok::<_, ApiError>(())
    })
    .await;
}

/// The movement as it ended: `ok`, or the code of the error it failed with. (Made before
/// the record's await, so no answer is held across it.)
pub(crate) fn ended<T>(entry: AuditEntry, result: &Result<T, ApiError>) -> AuditEntry {
    match result {
        Ok(_) => entry,
        Err(e) => entry.failed(e.code.as_str()),
    }
}

/// How many records a page holds unless `limit` says otherwise.
const PAGE_DEFAULT: usize = 100;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Records at or after this instant: RFC 3339 UTC or Unix seconds.
    #[param(example = "2026-12-06T00:00:00Z")]
    since: Option<String>,
    /// The `earlier` of the page read before.
    #[param(minimum = 1)]
    before: Option<i64>,
    /// How many records the page holds at most; 100 when absent.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

/// One page of the person's audit records, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct AuditPage {
    records: Vec<AuditRecord>,
    /// The `before` of the next older page; `null` when there is none.
    #[schema(required = true)]
    earlier: Option<i64>,
}

/// The movements of the caller's own files, newest first, a page at a time.
#[utoipa::path(
    get,
    path = "/v1/audit",
    operation_id = "listAudit",
    tag = "audit",
    security(("bearer" = [])),
    params(AuditQuery),
    responses((status = 200, description = "A page of the records of the person's own files.",
               body = AuditPage))
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Member(who): Member,
    QueryParams(q): QueryParams<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=AUDIT_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            Code::BadLimit,
            format!("limit must be between 1 and {AUDIT_PAGE_MAX}"),
        ));
    }
    if q.before.is_some_and(|id| id < 1) {
        return Err(ApiError::new(
            Code::BadCursor,
            "before must be the `earlier` of a page read before",
        ));
    }
    let since = match q.since.as_deref() {
        None => None,
        Some(text) => Some(ferry_site::parse_instant(text).ok_or_else(|| {
            ApiError::new(
                Code::BadQuery,
                "since is an instant: 2026-12-06T00:00:00Z (UTC) or Unix seconds",
            )
        })?),
    };
    let filter = AuditFilter {
        person: Some(who.person.clone()),
        since,
        before: q.before,
        // One more, to know whether an older page exists.
        limit: limit + 1,
    };
    let site = state.site.clone();
    let mut records = blocking(move || site.audit_records(&filter)).await?;
    let earlier = (records.len() > limit).then(|| {
        records.truncate(limit);
        records.last().map(|r| r.id)
    });
    Ok(Json(AuditPage {
        records,
        earlier: earlier.flatten(),
    }))
}

/// Removes records past `[audit] retention_days` at start and every hour, for the life
/// of the gateway.
pub(crate) async fn sweep(state: AppState) {
    let mut ticks = tokio::time::interval(Duration::from_secs(3600));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = state.closing.cancelled() => return,
        }
        let site = state.site.clone();
        match blocking(move || site.sweep_audit(std::time::SystemTime::now())).await {
            Ok(0) => {}
            Ok(n) => tracing::info!("the audit trail let {n} records past their retention go"),
            Err(e) => tracing::warn!("sweeping the audit trail: {}", e.message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::openapi::path::ParameterIn;

    #[test]
    fn the_described_limit_is_the_enforced_one() {
        let params = AuditQuery::into_params(|| Some(ParameterIn::Query));
        let limit = params.iter().find(|p| p.name == "limit").unwrap();
        let limit = serde_json::to_value(limit).unwrap();
        assert_eq!(limit["schema"]["maximum"], AUDIT_PAGE_MAX);
        let said = format!("{PAGE_DEFAULT} when absent");
        assert!(limit["description"].as_str().unwrap().contains(&said));
    }
}
