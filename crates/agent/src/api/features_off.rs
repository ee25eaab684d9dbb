//! The API of features this agent does not run, answering as Cilium 1.16
//! answers with each feature off: BGP's 501, the prefilter's 500, the
//! recorder's refusal, and the empty lists of local redirect policies, pcap
//! recorders, FQDN names and DNS lookups (whose cache is then cleared at
//! once).
//! A client (cilium-dbg, its debuginfo) then reports the feature as off
//! instead of failing on a path it did not expect to be missing.

use crate::api::server::error;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

async fn bgp_disabled() -> Response {
    error(StatusCode::NOT_IMPLEMENTED, "BGP control plane is disabled")
}

async fn prefilter_disabled() -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "prefilter is not enabled in daemon",
    )
}

async fn empty_list() -> Response {
    Json(json!([])).into_response()
}

/// `GET /fqdn/names`: no DNS proxy, so no names polled and no selectors.
async fn fqdn_names() -> Response {
    Json(json!({ "DNSPollNames": null, "FQDNPolicySelectors": [] })).into_response()
}

pub fn routes() -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/v1/bgp/peers", get(bgp_disabled))
        .route("/v1/bgp/routes", get(bgp_disabled))
        .route("/v1/bgp/route-policies", get(bgp_disabled))
        .route(
            "/v1/prefilter",
            get(prefilter_disabled)
                .patch(prefilter_disabled)
                .delete(prefilter_disabled),
        )
        .route("/v1/lrp", get(empty_list))
        .route("/v1/recorder", get(empty_list))
        .route("/v1/recorder/masks", get(empty_list))
        .route("/v1/fqdn/names", get(fqdn_names))
        .route(
            "/v1/fqdn/cache",
            get(nothing_found).delete(fqdn_cache_cleared),
        )
        .route("/v1/fqdn/cache/{id}", get(nothing_found))
        .route(
            "/v1/recorder/{id}",
            get(nothing_found)
                .put(recorder_disabled)
                .delete(nothing_found),
        )
}

/// `PUT /recorder/{id}`: 1.16 with `--enable-recorder` off.
async fn recorder_disabled() -> Response {
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Ignoring recorder request due to --enable-recorder being disabled in agent",
    )
}

/// `DELETE /fqdn/cache`: no DNS proxy, so nothing cached; done.
async fn fqdn_cache_cleared() -> Response {
    StatusCode::OK.into_response()
}

/// No recorder exists and no DNS lookup was seen, so none is found
/// (1.16's 404s here have no body).
async fn nothing_found() -> Response {
    StatusCode::NOT_FOUND.into_response()
}
