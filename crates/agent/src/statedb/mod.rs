//! The StateDB HTTP API of Cilium 1.16 (`/statedb/query`, `/statedb/dump`),
//! as its `cilium-dbg statedb <table>` and `cilium-dbg status` read it.
//!
//! We keep no StateDB: each query reads the agent's real state (health of
//! its parts, devices, routes, node addresses, the sysctls it set) into
//! the rows of 1.16's tables, in 1.16's JSON. Tables of features we do not
//! run are there and empty, as in 1.16 with the feature off. A row keeps
//! its revision until its content changes, so `--watch`, which asks for
//! rows above the last revision it saw, prints only what changed.

mod health;
mod tables;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use tables::Sources;

/// The revision index every table has, keyed by 8 big-endian bytes.
const REVISION_INDEX: &str = "__revision__";

/// One object of a table: its primary key (rows are in its order) and
/// its JSON as Cilium marshals the Go struct.
pub(crate) struct Row {
    pub key: Vec<u8>,
    pub obj: serde_json::Value,
}

/// The API's state: where rows come from, and their revisions.
pub struct StateDb {
    sources: Sources,
    revisions: Mutex<Revisions>,
}

#[derive(Default)]
struct Revisions {
    next: u64,
    /// (table, primary key) → (the object's JSON, its revision)
    seen: HashMap<(&'static str, Vec<u8>), (String, u64)>,
}

impl Revisions {
    fn revision(&mut self, table: &'static str, row: &Row) -> u64 {
        let text = row.obj.to_string();
        match self.seen.get(&(table, row.key.clone())) {
            Some((old, rev)) if *old == text => *rev,
            _ => {
                self.next += 1;
                let rev = self.next;
                self.seen.insert((table, row.key.clone()), (text, rev));
                rev
            }
        }
    }
}

impl StateDb {
    pub fn new(sources: Sources) -> Self {
        Self {
            sources,
            revisions: Mutex::default(),
        }
    }

    /// A table's rows in primary key order with their revisions; None for
    /// a table 1.16 does not have.
    async fn table(&self, name: &str) -> Option<(&'static str, Vec<(u64, Row)>)> {
        let (name, mut rows) = self.sources.rows(name).await?;
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        let mut revisions = self.revisions.lock().unwrap_or_else(|e| e.into_inner());
        let rows = rows
            .into_iter()
            .map(|row| (revisions.revision(name, &row), row))
            .collect();
        Some((name, rows))
    }
}

/// statedb's QueryRequest.
#[derive(Deserialize)]
struct QueryRequest {
    /// base64 of the index key
    key: String,
    table: String,
    index: String,
    #[serde(default)]
    lowerbound: bool,
}

/// statedb's QueryResponse, one JSON document per object.
#[derive(Serialize)]
struct QueryResponse<'a> {
    rev: u64,
    obj: &'a serde_json::Value,
    #[serde(skip_serializing_if = "str::is_empty")]
    err: &'a str,
}

fn query_error(status: StatusCode, err: &str) -> Response {
    let body = serde_json::to_string(&QueryResponse {
        rev: 0,
        obj: &serde_json::Value::Null,
        err,
    })
    .unwrap_or_default();
    (status, body + "\n").into_response()
}

/// Which rows a query selects: on the revision index, those at or above the
/// key's revision in revision order; on the primary index, those at or
/// above the key (lower bound) or equal to it (get), in key order. Our
/// tables have no secondary index that 1.16's clients query.
fn select(
    rows: Vec<(u64, Row)>,
    index: &str,
    key: &[u8],
    lowerbound: bool,
) -> Result<Vec<(u64, Row)>, String> {
    if index == REVISION_INDEX {
        let from = <[u8; 8]>::try_from(key)
            .map(u64::from_be_bytes)
            .map_err(|_| format!("revision key of {} bytes, want 8", key.len()))?;
        let mut rows: Vec<_> = rows
            .into_iter()
            .filter(|(rev, _)| {
                if lowerbound {
                    *rev >= from
                } else {
                    *rev == from
                }
            })
            .collect();
        rows.sort_by_key(|(rev, _)| *rev);
        return Ok(rows);
    }
    Ok(rows
        .into_iter()
        .filter(|(_, row)| {
            if lowerbound {
                row.key.as_slice() >= key
            } else {
                row.key == key
            }
        })
        .collect())
}

/// `GET /statedb/query` with a QueryRequest body: the selected objects as a
/// stream of QueryResponse documents.
async fn query(State(db): State<Arc<StateDb>>, body: Bytes) -> Response {
    let req: QueryRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return query_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let key = match base64::engine::general_purpose::STANDARD.decode(&req.key) {
        Ok(k) => k,
        Err(e) => return query_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let Some((_, rows)) = db.table(&req.table).await else {
        return query_error(
            StatusCode::NOT_FOUND,
            &format!("Table {:?} not found", req.table),
        );
    };
    let index_known = req.index == REVISION_INDEX
        || tables::primary_index(&req.table) == Some(req.index.as_str());
    if !index_known {
        return query_error(
            StatusCode::BAD_REQUEST,
            &format!("index {:?} not found from table {:?}", req.index, req.table),
        );
    }
    let rows = match select(rows, &req.index, &key, req.lowerbound) {
        Ok(r) => r,
        Err(e) => return query_error(StatusCode::BAD_REQUEST, &e),
    };
    let mut out = String::new();
    for (rev, row) in &rows {
        let doc = QueryResponse {
            rev: *rev,
            obj: &row.obj,
            err: "",
        };
        out.push_str(&serde_json::to_string(&doc).unwrap_or_default());
        out.push('\n');
    }
    ([(header::CONTENT_TYPE, "application/json")], out).into_response()
}

/// The tables as statedb's WriteJSON writes them: `{"<table>": [obj, ...]}`.
async fn dump_tables(db: &StateDb, names: &[&str]) -> Response {
    let mut out = String::from("{\n");
    let mut first = true;
    for name in names {
        let Some((name, rows)) = db.table(name).await else {
            continue;
        };
        if !first {
            out.push_str(",\n");
        }
        first = false;
        out.push_str(&format!("  \"{name}\": [\n"));
        let objs: Vec<String> = rows
            .iter()
            .map(|(_, row)| format!("    {}", row.obj))
            .collect();
        out.push_str(&objs.join(",\n"));
        if !objs.is_empty() {
            out.push('\n');
        }
        out.push_str("  ]");
    }
    out.push_str("\n}\n");
    ([(header::CONTENT_TYPE, "application/json")], out).into_response()
}

async fn dump(State(db): State<Arc<StateDb>>) -> Response {
    dump_tables(&db, tables::NAMES).await
}

async fn dump_table(State(db): State<Arc<StateDb>>, Path(table): Path<String>) -> Response {
    dump_tables(&db, &[table.as_str()]).await
}

/// `/statedb/...`, where 1.16 mounts it beside the REST API, and the same
/// under `/v1`, where a client that puts the API's base path first asks.
pub fn routes(db: Arc<StateDb>) -> axum::Router {
    use axum::routing::get;
    let mut router = axum::Router::new();
    for base in ["/statedb", "/v1/statedb"] {
        router = router
            .route(&format!("{base}/query"), get(query))
            .route(&format!("{base}/dump"), get(dump))
            .route(&format!("{base}/dump/{{table}}"), get(dump_table));
    }
    router.with_state(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(keys: &[(&str, u64)]) -> Vec<(u64, Row)> {
        keys.iter()
            .map(|(k, rev)| {
                (
                    *rev,
                    Row {
                        key: k.as_bytes().to_vec(),
                        obj: serde_json::json!(k),
                    },
                )
            })
            .collect()
    }

    fn keys(rows: &[(u64, Row)]) -> Vec<String> {
        rows.iter()
            .map(|(_, r)| String::from_utf8(r.key.clone()).unwrap())
            .collect()
    }

    #[test]
    fn revision_lower_bound_keeps_what_changed_since_in_revision_order() {
        let all = rows(&[("a", 5), ("b", 2), ("c", 9)]);
        let got = select(all, REVISION_INDEX, &3u64.to_be_bytes(), true).unwrap();
        assert_eq!(keys(&got), ["a", "c"]);
        let all = rows(&[("a", 5)]);
        assert!(select(all, REVISION_INDEX, b"short", true).is_err());
    }

    #[test]
    fn primary_lower_bound_and_get() {
        let got = select(
            rows(&[("agent.a", 1), ("agent.b", 2), ("x", 3)]),
            "id",
            b"agent",
            true,
        )
        .unwrap();
        assert_eq!(keys(&got), ["agent.a", "agent.b", "x"]);
        let got = select(
            rows(&[("agent.a", 1), ("agent.b", 2)]),
            "id",
            b"agent.b",
            false,
        )
        .unwrap();
        assert_eq!(keys(&got), ["agent.b"]);
    }

    #[test]
    fn a_row_keeps_its_revision_until_it_changes() {
        let mut revs = Revisions::default();
        let row = |v: &str| Row {
            key: b"k".to_vec(),
            obj: serde_json::json!(v),
        };
        let first = revs.revision("t", &row("one"));
        assert_eq!(revs.revision("t", &row("one")), first);
        let changed = revs.revision("t", &row("two"));
        assert!(changed > first);
    }
}
