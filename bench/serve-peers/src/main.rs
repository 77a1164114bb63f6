//! The peers of `statepipe bench serve`: the item service of `statepipe
//! serve` (POST /item, GET /item, GET /item/{id}, DELETE /item/{id},
//! /health), written as axum's and actix-web's documentation show, over a
//! `Mutex<HashMap>` and with the same durability: every write goes to a
//! journal thread that appends the same records (length, crc32c, kind, lsn,
//! body), group-commits (one write and one fsync for whatever queued while
//! the last fsync ran) and only then applies the writes and answers them.
//!
//! ```text
//! serve-peer axum  --listen ADDR --data DIR [--worker-threads N] [--decode typed|value]
//! serve-peer actix --listen ADDR --data DIR [--workers N] [--decode typed|value]
//! ```
//!
//! `--decode typed` (the default) takes POST bodies through the framework's
//! typed `Json<NewItem>` extractor, as axum's and actix-web's documentation
//! show, and journals the decoded item re-encoded; `--decode value` reads
//! the body's bytes, parses them into a `serde_json::Value`, checks the
//! fields by hand (naming the bad field, as `statepipe serve` does) and
//! journals the bytes as received.
//!
//! Prints `listening on ADDR` on stdout once it accepts. Starts on an empty
//! journal (a benchmark peer: it does not replay).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// An item as stored, and as a typed extractor decodes a POST body.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Item {
    name: String,
    price: f64,
}

/// The journal's copy of a typed item: the item encoded again.
fn encoded(item: &Item) -> Vec<u8> {
    serde_json::to_vec(item).expect("an item encodes")
}

#[derive(Serialize)]
struct ItemOut<'a> {
    id: u64,
    name: &'a str,
    price: f64,
}

#[derive(Serialize)]
struct Page<'a> {
    items: Vec<ItemOut<'a>>,
    next_after: Option<u64>,
}

#[derive(Deserialize, Default)]
struct ListQuery {
    after: Option<u64>,
    limit: Option<usize>,
}

/// A write on its way to the journal thread.
enum Op {
    Create(Vec<u8>, Item),
    Delete(u64),
}

/// The answer to a write: the new id, or whether the delete found its item.
type Done = tokio::sync::oneshot::Sender<u64>;

struct State {
    items: Mutex<HashMap<u64, Item>>,
    /// The id the next item gets (set under the `items` lock).
    next_id: AtomicU64,
    journal: mpsc::Sender<(Op, Done)>,
}

type Shared = Arc<State>;

/// Decodes a POST body through a `serde_json::Value`, checking each field
/// by hand: `(item, error naming the field)`.
fn decode(body: &[u8]) -> Result<Item, (u16, String)> {
    let bad = |field: &str, what: &str| {
        (
            400,
            serde_json::json!({"error": format!("field `{field}` {what}"), "field": field})
                .to_string(),
        )
    };
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        (
            400,
            serde_json::json!({"error": format!("invalid JSON: {e}")}).to_string(),
        )
    })?;
    let serde_json::Value::Object(map) = v else {
        return Err((
            400,
            r#"{"error":"the body must be a JSON object"}"#.to_string(),
        ));
    };
    let name = match map.get("name") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Err(bad("name", "must be a string")),
        None => return Err(bad("name", "is missing")),
    };
    let price = match map.get("price") {
        Some(serde_json::Value::Number(n)) => n.as_f64().filter(|p| p.is_finite()),
        Some(_) => return Err(bad("price", "must be a number")),
        None => return Err(bad("price", "is missing")),
    };
    let Some(price) = price else {
        return Err(bad("price", "must be a finite number"));
    };
    Ok(Item { name, price })
}

fn record(lsn: u64, op: &Op, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    match op {
        Op::Create(body, _) => {
            out.push(1);
            out.extend_from_slice(&lsn.to_le_bytes());
            out.extend_from_slice(body);
        }
        Op::Delete(id) => {
            out.push(2);
            out.extend_from_slice(&lsn.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let len = (out.len() - start - 8) as u32;
    let crc = crc32c::crc32c(&out[start + 8..]);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The journal thread: waits for a write, takes every other one queued,
/// writes and fsyncs them at once, then applies and answers them.
fn journal_thread(mut file: File, rx: mpsc::Receiver<(Op, Done)>, state: Shared) {
    let mut lsn = 0u64;
    let mut next_id = 1u64;
    let mut buf = Vec::new();
    let mut batch = Vec::new();
    while let Ok(first) = rx.recv() {
        batch.push(first);
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 4096 {
                break;
            }
        }
        buf.clear();
        for (op, _) in &batch {
            lsn += 1;
            record(lsn, op, &mut buf);
        }
        if let Err(e) = file.write_all(&buf).and_then(|()| file.sync_data()) {
            eprintln!("journal write failed: {e}; answering the batch 503");
            batch.clear(); // dropping the senders: the handlers answer 503
            continue;
        }
        let mut items = state.items.lock().unwrap();
        for (op, done) in batch.drain(..) {
            let answer = match op {
                Op::Create(_, item) => {
                    let id = next_id;
                    next_id += 1;
                    items.insert(id, item);
                    state.next_id.store(next_id, Ordering::Relaxed);
                    id
                }
                Op::Delete(id) => u64::from(items.remove(&id).is_some()),
            };
            let _ = done.send(answer);
        }
    }
    let _ = file.sync_all();
}

async fn submit(state: &Shared, op: Op) -> Option<u64> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    state.journal.send((op, tx)).ok()?;
    rx.await.ok()
}

fn get_one(state: &Shared, id: u64) -> Option<String> {
    let items = state.items.lock().unwrap();
    items.get(&id).map(|i| {
        serde_json::to_string(&ItemOut {
            id,
            name: &i.name,
            price: i.price,
        })
        .unwrap()
    })
}

fn list(state: &Shared, q: &ListQuery) -> Result<String, String> {
    let after = q.after.unwrap_or(0);
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(r#"{"error":"must be 1 to 1000","field":"limit"}"#.into());
    }
    let items = state.items.lock().unwrap();
    // Ids are given in increasing order: a page is found by probing the ids
    // after `after` (a HashMap has no order), up to the largest id held.
    let max = state.next_id.load(Ordering::Relaxed).saturating_sub(1);
    let mut page = Vec::new();
    let mut id = after;
    while page.len() < limit && id < max {
        id += 1;
        if let Some(i) = items.get(&id) {
            page.push(ItemOut {
                id,
                name: &i.name,
                price: i.price,
            });
        }
    }
    let next_after = (page.len() == limit)
        .then(|| page.last().map(|i| i.id))
        .flatten();
    Ok(serde_json::to_string(&Page {
        items: page,
        next_after,
    })
    .unwrap())
}

fn error(msg: &str) -> String {
    serde_json::json!({ "error": msg }).to_string()
}

mod axum_peer {
    use super::*;
    use axum::body::Bytes;
    use axum::extract::{Path, Query, State as AxState};
    use axum::http::{header, StatusCode};
    use axum::response::{IntoResponse, Response};
    use axum::routing::get;
    use axum::{Json, Router};

    fn json(status: StatusCode, body: String) -> Response {
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }

    async fn create(AxState(state): AxState<Shared>, body: Bytes) -> Response {
        let item = match decode(&body) {
            Ok(item) => item,
            Err((_, e)) => return json(StatusCode::BAD_REQUEST, e),
        };
        created(submit(&state, Op::Create(body.to_vec(), item)).await)
    }

    async fn create_typed(AxState(state): AxState<Shared>, Json(item): Json<Item>) -> Response {
        created(submit(&state, Op::Create(encoded(&item), item)).await)
    }

    fn created(id: Option<u64>) -> Response {
        match id {
            Some(id) => json(StatusCode::CREATED, format!("{{\"id\":{id}}}")),
            None => json(
                StatusCode::SERVICE_UNAVAILABLE,
                error("the journal is unavailable"),
            ),
        }
    }

    async fn read(AxState(state): AxState<Shared>, Path(id): Path<u64>) -> Response {
        match get_one(&state, id) {
            Some(body) => json(StatusCode::OK, body),
            None => json(StatusCode::NOT_FOUND, error("no such item")),
        }
    }

    async fn delete(AxState(state): AxState<Shared>, Path(id): Path<u64>) -> Response {
        match submit(&state, Op::Delete(id)).await {
            Some(1) => StatusCode::NO_CONTENT.into_response(),
            Some(_) => json(StatusCode::NOT_FOUND, error("no such item")),
            None => json(
                StatusCode::SERVICE_UNAVAILABLE,
                error("the journal is unavailable"),
            ),
        }
    }

    async fn page(AxState(state): AxState<Shared>, Query(q): Query<ListQuery>) -> Response {
        match list(&state, &q) {
            Ok(body) => json(StatusCode::OK, body),
            Err(e) => json(StatusCode::BAD_REQUEST, e),
        }
    }

    async fn health() -> Response {
        json(StatusCode::OK, r#"{"status":"ok"}"#.into())
    }

    pub fn run(listen: SocketAddr, state: Shared, worker_threads: Option<usize>, typed: bool) {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if let Some(n) = worker_threads {
            builder.worker_threads(n);
        }
        let rt = builder.enable_all().build().expect("a tokio runtime");
        rt.block_on(async move {
            let post = if typed {
                axum::routing::post(create_typed)
            } else {
                axum::routing::post(create)
            };
            let app = Router::new()
                .route("/item", get(page).merge(post))
                .route("/item/{id}", get(read).delete(delete))
                .route("/health", get(health))
                .with_state(state);
            let listener = tokio::net::TcpListener::bind(listen).await.expect("bind");
            println!("listening on {}", listener.local_addr().unwrap());
            axum::serve(listener, app).await.expect("serve");
        });
    }
}

mod actix_peer {
    use super::*;
    use actix_web::http::StatusCode;
    use actix_web::{web, App, HttpResponse, HttpServer};

    fn json(status: StatusCode, body: String) -> HttpResponse {
        HttpResponse::build(status)
            .content_type("application/json")
            .body(body)
    }

    async fn create(state: web::Data<State>, body: web::Bytes) -> HttpResponse {
        let item = match decode(&body) {
            Ok(item) => item,
            Err((_, e)) => return json(StatusCode::BAD_REQUEST, e),
        };
        created(submit(&state.into_inner(), Op::Create(body.to_vec(), item)).await)
    }

    async fn create_typed(state: web::Data<State>, item: web::Json<Item>) -> HttpResponse {
        let item = item.into_inner();
        created(submit(&state.into_inner(), Op::Create(encoded(&item), item)).await)
    }

    fn created(id: Option<u64>) -> HttpResponse {
        match id {
            Some(id) => json(StatusCode::CREATED, format!("{{\"id\":{id}}}")),
            None => json(
                StatusCode::SERVICE_UNAVAILABLE,
                error("the journal is unavailable"),
            ),
        }
    }

    async fn read(state: web::Data<State>, id: web::Path<u64>) -> HttpResponse {
        match get_one(&state.into_inner(), id.into_inner()) {
            Some(body) => json(StatusCode::OK, body),
            None => json(StatusCode::NOT_FOUND, error("no such item")),
        }
    }

    async fn delete(state: web::Data<State>, id: web::Path<u64>) -> HttpResponse {
        match submit(&state.into_inner(), Op::Delete(id.into_inner())).await {
            Some(1) => HttpResponse::NoContent().finish(),
            Some(_) => json(StatusCode::NOT_FOUND, error("no such item")),
            None => json(
                StatusCode::SERVICE_UNAVAILABLE,
                error("the journal is unavailable"),
            ),
        }
    }

    async fn page(state: web::Data<State>, q: web::Query<ListQuery>) -> HttpResponse {
        match list(&state.into_inner(), &q) {
            Ok(body) => json(StatusCode::OK, body),
            Err(e) => json(StatusCode::BAD_REQUEST, e),
        }
    }

    async fn health() -> HttpResponse {
        json(StatusCode::OK, r#"{"status":"ok"}"#.into())
    }

    pub fn run(listen: SocketAddr, state: Shared, workers: usize, typed: bool) {
        let data = web::Data::from(state);
        actix_web::rt::System::new().block_on(async move {
            let server = HttpServer::new(move || {
                let post = if typed {
                    web::post().to(create_typed)
                } else {
                    web::post().to(create)
                };
                App::new()
                    .app_data(data.clone())
                    .app_data(web::PayloadConfig::new(1 << 20))
                    .app_data(web::JsonConfig::default().limit(1 << 20))
                    .route("/item", web::get().to(page))
                    .route("/item", post)
                    .route("/item/{id}", web::get().to(read))
                    .route("/item/{id}", web::delete().to(delete))
                    .route("/health", web::get().to(health))
            })
            .workers(workers)
            .max_connections(100_000)
            .backlog(4096)
            .bind(listen)
            .expect("bind");
            println!("listening on {}", server.addrs()[0]);
            server.run().await.expect("serve");
        });
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: serve-peer axum|actix --listen ADDR --data DIR [--worker-threads N] [--workers N] \
         [--decode typed|value]";
    let Some(kind) = args.first().cloned() else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let mut listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let mut data: Option<PathBuf> = None;
    let mut threads: Option<usize> = None;
    let mut typed = true;
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next().cloned().unwrap_or_else(|| {
                eprintln!("{a} needs a value; {usage}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--listen" => listen = value().parse().expect("--listen ADDR"),
            "--data" => data = Some(value().into()),
            "--worker-threads" | "--workers" => threads = Some(value().parse().expect("N")),
            "--decode" => {
                typed = match value().as_str() {
                    "typed" => true,
                    "value" => false,
                    other => {
                        eprintln!("--decode {other}: typed or value; {usage}");
                        std::process::exit(2);
                    }
                }
            }
            other => {
                eprintln!("unknown argument {other}; {usage}");
                std::process::exit(2);
            }
        }
    }
    let Some(data) = data else {
        eprintln!("--data DIR is required; {usage}");
        std::process::exit(2);
    };
    std::fs::create_dir_all(&data).expect("creating the data directory");
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(data.join("journal.log"))
        .expect("opening the journal");
    let (tx, rx) = mpsc::channel();
    let state = Arc::new(State {
        items: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        journal: tx,
    });
    let journal_state = Arc::clone(&state);
    std::thread::Builder::new()
        .name("journal".into())
        .spawn(move || journal_thread(file, rx, journal_state))
        .expect("spawning the journal thread");
    match kind.as_str() {
        "axum" => axum_peer::run(listen, state, threads, typed),
        "actix" => actix_peer::run(listen, state, threads.unwrap_or(1), typed),
        other => {
            eprintln!("unknown peer {other}; {usage}");
            std::process::exit(2);
        }
    }
}
